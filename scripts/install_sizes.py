"""What each install extra costs on disk: the core alone, and each extra's additional size over the core.

    .venv/bin/python scripts/install_sizes.py [--markdown] [--json FILE] [--top 8] [--from-metadata]

Method (docs/install.md):
1. The package set of `pip install .` and of `pip install '.[EXTRA]'` for every extra in pyproject.toml, from
   `pip install --dry-run --ignore-installed --report` (pip's own resolver; nothing is installed). The resolver is
   held to the versions installed in this environment (a constraints file of its distributions), so it picks the
   builds that are measured here (torch's CPU build, not PyPI's default CUDA one with its nvidia-* packages).
   With --from-metadata (or when pip fails) the set is derived from the installed distributions' own
   Requires-Dist instead, recursively, markers evaluated for this interpreter.
2. The size of a distribution: the files its RECORD lists in this environment (site-packages, its scripts in
   bin/), summed as they are on disk now (bytes; byte-compiled files pip wrote at install time included).
   MathScout itself (an editable install here) is not counted.
3. Core = the sum over the core's set; an extra's cost = the sum over (its set − the core's set).

Run it with the environment's own interpreter, where every extra is installed (`bash scripts/setup.sh` installs
`.[all,peers,test]`); a package of a set that is not installed here is listed as unmeasured.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
MB = 1_000_000
HEAVY_REQUIREMENTS = ("pyserini",)  # core requirements whose own weight is reported apart (the core without each)


def installed() -> dict[str, metadata.Distribution]:
    """Canonical name → distribution, for this interpreter's environment."""
    found: dict[str, metadata.Distribution] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found.setdefault(canonicalize_name(name), dist)
    return found


def distribution_bytes(dist: metadata.Distribution) -> int:
    """Bytes on disk of the files the distribution's RECORD lists (each file once)."""
    seen, total = set(), 0
    for entry in dist.files or ():
        path = Path(os.path.normpath(dist.locate_file(entry)))
        if path in seen:
            continue
        seen.add(path)
        with contextlib.suppress(OSError):  # listed but not present (removed by hand, or a file of another layout)
            total += path.stat().st_size
    return total


def extras_of_project() -> list[str]:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return list(pyproject["project"].get("optional-dependencies", {}))


def project_name() -> str:
    return canonicalize_name(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["name"])


def constraints(dists: dict[str, metadata.Distribution], skip: str) -> str:
    """A pip constraints file holding every installed distribution (but the project) to its installed version."""
    return (
        "\n".join(f"{dist.metadata['Name']}=={dist.version}" for name, dist in sorted(dists.items()) if name != skip)
        + "\n"
    )


def set_from_pip(extra: str | None, pins: Path) -> set[str]:
    """The canonical names pip would install for the project (with `extra`), resolved against the pins."""
    target = f"{ROOT}[{extra}]" if extra else str(ROOT)
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "report.json"
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--dry-run",
                "--ignore-installed",
                "--quiet",
                "--disable-pip-version-check",
                "-c",
                str(pins),
                "--report",
                str(report),
                target,
            ],
            check=False,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            lines = [line for line in done.stderr.splitlines() if "is ignored" not in line]
            raise RuntimeError("pip's dry run failed: " + " | ".join(lines[-3:]))
        data = json.loads(report.read_text(encoding="utf-8"))
    return {canonicalize_name(item["metadata"]["name"]) for item in data["install"]}


def set_from_metadata(
    extra: str | None, dists: dict[str, metadata.Distribution], project: str, without: frozenset[str] = frozenset()
) -> set[str]:
    """The same set derived from the installed distributions' Requires-Dist, recursively; `without`: requirements
    left out wherever they appear (what the set would be without them)."""
    base_env = {k: str(v) for k, v in default_environment().items()}
    found: set[str] = {project}
    todo: list[tuple[str, frozenset[str]]] = [(project, frozenset({extra} if extra else ()))]
    done: set[tuple[str, frozenset[str]]] = set()
    while todo:
        name, extras = todo.pop()
        if (name, extras) in done or name not in dists:
            continue
        done.add((name, extras))
        for line in dists[name].requires or ():
            requirement = Requirement(line)
            wanted = any(
                requirement.marker is None or requirement.marker.evaluate({**base_env, "extra": e})
                for e in (extras or {""})
            )
            if not wanted:
                continue
            dep = canonicalize_name(requirement.name)
            if dep in without:
                continue
            found.add(dep)
            todo.append((dep, frozenset(requirement.extras)))
    return found


def measure(from_metadata: bool) -> dict:
    dists = installed()
    project = project_name()
    sizes = {name: distribution_bytes(dist) for name, dist in dists.items() if name != project}
    extras = extras_of_project()
    method = "metadata" if from_metadata else "pip"
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as handle:
        handle.write(constraints(dists, project))
        pins = Path(handle.name)
    keys = [None, *extras]
    try:
        if method == "pip":
            try:
                sets = {extra or "core": set_from_pip(extra, pins) for extra in keys}
            except (RuntimeError, OSError, ValueError) as exc:
                print(f"{exc}: deriving the sets from the installed metadata instead", file=sys.stderr)
                method = "metadata"
        if method == "metadata":
            sets = {extra or "core": set_from_metadata(extra, dists, project) for extra in keys}
    finally:
        pins.unlink()
    core = sets["core"] - {project}

    def summary(names: set[str]) -> dict:
        names = names - {project}
        measured = {n: sizes[n] for n in names if n in sizes}
        return {
            "packages": len(names),
            "bytes": sum(measured.values()),
            "unmeasured": sorted(names - set(sizes)),
            "largest": sorted(measured.items(), key=lambda item: -item[1]),
        }

    result = {
        "method": method,
        "python": sys.version.split()[0],
        "environment": sys.prefix,
        "environment_bytes": sum(sizes.values()),
        "core": summary(core),
        "extras": {},
    }
    # the core's weight that comes with one requirement alone: the core's set without it (from the metadata)
    result["core_without"] = {
        name: summary(set_from_metadata(None, dists, project, frozenset({name})))
        for name in HEAVY_REQUIREMENTS
        if name in core
    }
    for extra in extras:
        added = sets[extra] - core
        result["extras"][extra] = {**summary(added), "with_core": summary(sets[extra])["bytes"]}
    return result


def megabytes(count: int) -> str:
    return f"{count / MB:,.0f}"


def markdown(result: dict, top: int) -> str:
    def names(largest: list, n: int) -> str:
        return ", ".join(f"{name} {megabytes(size)}" for name, size in largest[:n]) or "–"

    core = result["core"]
    lines = [
        "| install | packages | MB on disk | largest packages (MB) |",
        "|---|---|---|---|",
        f"| core `pip install .` | {core['packages']} | {megabytes(core['bytes'])} | {names(core['largest'], top)} |",
    ]
    for extra, row in result["extras"].items():
        lines.append(
            f"| `[{extra}]` adds | {row['packages']} | +{megabytes(row['bytes'])} "
            f"(with the core {megabytes(row['with_core'])}) | {names(row['largest'], top)} |"
        )
    unmeasured = sorted({n for row in [core, *result["extras"].values()] for n in row["unmeasured"]})
    for name, row in result.get("core_without", {}).items():
        lines.append(
            f"| core without {name} (not an install option today) | {row['packages']} | "
            f"{megabytes(row['bytes'])} | {names(row['largest'], top)} |"
        )
    lines.append("")
    lines.append(
        f"Python {result['python']}, sets resolved by {result['method']}; every installed distribution "
        f"together: {megabytes(result['environment_bytes'])} MB."
        + (f" Not installed here, so not measured: {', '.join(unmeasured)}." if unmeasured else "")
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table (default: a text summary)")
    parser.add_argument("--json", type=Path, help="also write every figure, per package, to this file")
    parser.add_argument("--top", type=int, default=6, help="largest packages named per row")
    parser.add_argument(
        "--from-metadata",
        action="store_true",
        help="derive the package sets from the installed Requires-Dist instead of pip's resolver",
    )
    args = parser.parse_args(argv)
    result = measure(args.from_metadata)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    if args.markdown:
        print(markdown(result, args.top))
        return 0
    core = result["core"]
    print(f"core: {core['packages']} packages, {megabytes(core['bytes'])} MB")
    for extra, row in result["extras"].items():
        print(
            f"[{extra}]: +{row['packages']} packages, +{megabytes(row['bytes'])} MB "
            f"(with the core {megabytes(row['with_core'])} MB)"
        )
    for name, row in result.get("core_without", {}).items():
        print(f"core without {name}: {row['packages']} packages, {megabytes(row['bytes'])} MB")
    print(f"(sets by {result['method']}; {re.sub(r'/+$', '', result['environment'])})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
