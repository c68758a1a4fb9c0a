"""The settings object (mathscout.settings): every MATHSCOUT_ variable the package names is one of its fields and a
row of docs/settings.md; the config file is read, the environment wins over it, and a bad value is one line naming
the variable or the key. Runs without ../shared."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from mathscout.errors import MathScoutError
from mathscout.settings import settings, variables
from tests.support.paths import REPO

NAME = re.compile(r"MATHSCOUT_[A-Z0-9_]*[A-Z0-9]")
DEFINITIONS = REPO / "mathscout" / "settings.py"  # where the names are made (group prefixes)


def named_in_source() -> dict[str, Path]:
    """Every MATHSCOUT_ name in the package's files (mathscout/ and the folders pyproject maps into it) → a file
    naming it."""
    mapped = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["package-dir"]
    found = {}
    for root in [REPO / "mathscout", *(REPO / folder for folder in mapped.values())]:
        for path in root.rglob("*.py"):
            if path != DEFINITIONS:
                found.update(dict.fromkeys(NAME.findall(path.read_text(encoding="utf-8")), path))
    return found


def documented() -> dict[str, str]:
    """docs/settings.md's table: variable (or config key) → its row."""
    rows = {}
    for line in (REPO / "docs" / "settings.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip().strip("`") for c in line.strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 5:
            rows[cells[0] if cells[0] != "—" else cells[1]] = line
    return rows


def test_every_variable_the_package_names_is_a_setting():
    fields = {v.env for v in variables()}
    stray = {name: str(path.relative_to(REPO)) for name, path in named_in_source().items() if name not in fields}
    assert not stray, f"MATHSCOUT_ names that are no field of mathscout.settings.Settings: {stray}"


def test_every_setting_is_a_row_of_the_docs():
    rows = documented()
    for variable in variables():
        row = rows.get(variable.env or variable.key)
        assert row, f"{variable.env or variable.key} has no row in docs/settings.md"
        assert f"`{variable.key}`" in row if variable.key else "| — |" in row
        assert variable.meaning in row, f"docs/settings.md's row of {variable.env} says another meaning"
    assert len({v.env for v in variables() if v.env}) >= 50


def test_the_config_file_is_read_and_the_environment_wins(tmp_path, monkeypatch):
    config = tmp_path / "config.toml"
    config.write_text(
        "[build]\nsegment_mb = 12.5\nworkers = 3\n\n[dense_ft]\nhnsw_m = 8\n\n[output]\ndebug = true\n"
        '[llm]\nmodel = "local-model"\n',
        encoding="utf-8",
    )
    monkeypatch.setenv("MATHSCOUT_CONFIG", str(config))
    for name in (
        "MATHSCOUT_SEGMENT_MB",
        "MATHSCOUT_BUILD_WORKERS",
        "MATHSCOUT_DENSE_FT_HNSW_M",
        "MATHSCOUT_DEBUG",
        "MATHSCOUT_LLM_MODEL",
    ):
        monkeypatch.delenv(name, raising=False)
    read = settings()
    assert (read.segment_mb, read.build_workers, read.dense_ft.hnsw_m, read.debug) == (12.5, 3, 8, True)
    assert read.llm_model == "local-model" and read.dense.hnsw_m is None and read.config_file == config
    monkeypatch.setenv("MATHSCOUT_SEGMENT_MB", "3")
    monkeypatch.setenv("MATHSCOUT_DEBUG", "0")
    monkeypatch.setenv("MATHSCOUT_BUILD_WORKERS", "")  # empty: unset, the file's
    read = settings()
    assert (read.segment_mb, read.debug, read.build_workers) == (3.0, False, 3)


def test_the_config_file_is_found_in_the_home_folder(tmp_path):
    (tmp_path / "config.toml").write_text("[serve]\nport = 8123\n", encoding="utf-8")
    read = settings({"MATHSCOUT_HOME": str(tmp_path)})
    assert read.port == 8123 and read.home_folder == tmp_path
    assert settings({"MATHSCOUT_HOME": str(tmp_path / "elsewhere")}).port is None


@pytest.mark.parametrize(
    "environment, named",
    [
        ({"MATHSCOUT_FAISS_THREADS": "many"}, "MATHSCOUT_FAISS_THREADS is 'many', not a whole number ≥ 1"),
        ({"MATHSCOUT_PORT": "99999"}, "MATHSCOUT_PORT is '99999', not a whole number from 1 to 65535"),
        ({"MATHSCOUT_SHARD_TIMEOUT": "nan"}, "MATHSCOUT_SHARD_TIMEOUT is 'nan', not a number"),
        ({"MATHSCOUT_DENSE_FT_NPROBE": "0"}, "MATHSCOUT_DENSE_FT_NPROBE is '0'"),
    ],
)
def test_a_bad_variable_is_one_line_naming_it(environment, named):
    with pytest.raises(MathScoutError) as error:
        settings(environment)
    assert named in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize(
    "text, named",
    [
        ('[build]\nfaiss_threads = "many"\n', "[build] faiss_threads in"),
        ("[build]\nworkers = 1.5\n", "[build] workers in"),
        ("[build]\nworkerz = 2\n", "unknown settings (build.workerz)"),
        ("port = 1\n", "'port' outside a [section]"),
        ("[build\n", "is unreadable"),
    ],
)
def test_a_bad_config_file_is_one_line_naming_the_key(tmp_path, text, named):
    config = tmp_path / "config.toml"
    config.write_text(text, encoding="utf-8")
    with pytest.raises(MathScoutError) as error:
        settings({"MATHSCOUT_CONFIG": str(config)})
    assert named in str(error.value) and str(config) in str(error.value)


def test_settings_are_read_when_asked(monkeypatch):
    """Read at call time: a variable set after import counts (as tests and parent processes set them)."""
    from mathscout.config import default_index_path, home
    from mathscout.structure.parallel import default_workers

    monkeypatch.setenv("MATHSCOUT_HOME", "/tmp/somewhere")
    monkeypatch.delenv("MATHSCOUT_INDEX", raising=False)
    assert home() == Path("/tmp/somewhere") and default_index_path() == Path("/tmp/somewhere/indexes/demo")
    monkeypatch.setenv("MATHSCOUT_BUILD_WORKERS", "3")
    assert default_workers() == 3 and default_workers(5) == 5  # `mathscout index --workers 5` is a parameter
