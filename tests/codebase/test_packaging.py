"""The sdist and the wheel hold real folders (no links in the repository: pyproject's package-dir maps agent/, … to
mathscout.*), and the wheel built from the sdist installs and answers outside the checkout."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.support.paths import REPO

pytestmark = pytest.mark.slow

MAPPED = ("agent", "benchmarks", "evaluation", "prompts", "retrievers", "tools", "ui")


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """An sdist built by setuptools' PEP 517 hook (what `python -m build --sdist` calls) and a wheel built from it."""
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from setuptools import build_meta as b; b.build_sdist(sys.argv[1])",
            str(out),
        ],
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    (sdist,) = out.glob("mathscout-*.tar.gz")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out), str(sdist)],
        check=True,
        capture_output=True,
    )
    return out


def test_the_links_are_gone():
    assert not [p for p in REPO.rglob("*") if p.is_symlink() and ".venv" not in p.parts and ".git" not in p.parts]


def test_sdist_and_wheel_hold_real_folders(dist):
    (sdist,) = dist.glob("mathscout-*.tar.gz")
    with tarfile.open(sdist) as tar:
        members = {m.name.split("/", 1)[1]: m for m in tar.getmembers() if "/" in m.name}
    assert not [name for name, m in members.items() if m.issym() or m.islnk()]
    assert {f"{folder}/__init__.py" for folder in MAPPED if folder != "prompts"} <= set(members)
    (wheel,) = dist.glob("mathscout-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder in MAPPED:
        assert any(n.startswith(f"mathscout/{folder}/") for n in names), folder
    assert "mathscout/agent/planned.py" in names and any(
        n.startswith("mathscout/prompts/") and n.endswith(".md") for n in names
    )
    assert {n.split("/")[0] for n in names if not n.startswith("mathscout-")} == {"mathscout"}


def test_the_wheel_installs_and_answers_outside_the_checkout(dist, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    # the project's dependencies from the test environment (its site folder read as a plain path: its .pth files,
    # among them the editable install's finder, are not run), the project itself from the wheel
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    (wheel,) = dist.glob("mathscout-*.whl")
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True)
    env = {**os.environ, "MATHSCOUT_HOME": str(tmp_path / "home"), "PYTHONPATH": ""}
    where = subprocess.run(
        [
            python,
            "-c",
            "import mathscout.agent.planned as m, mathscout.prompts as p; print(m.__file__); print(p.__path__[0])",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert all(Path(w).is_relative_to(site) for w in where), where
    search = subprocess.run(
        [
            venv / "bin" / "mathscout",
            "search",
            "--local",
            "-q",
            "--mode",
            "structure",
            "--k",
            "3",
            "--json",
            "x^2+y^2=z^2",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert search.returncode == 0, search.stderr[-2000:]
    assert '"doc_id": "demo:number-theory-010"' in search.stdout or "demo:number-theory-010" in search.stdout
