"""The package's source files as the tests that read code see them: mathscout/ and the top-level folders the build
maps into it (the layer test, the citation test)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.paths import PACKAGE


def _package_roots() -> dict[Path, str]:
    """Folder → package name: mathscout/ itself and the top-level folders the build maps into it (pyproject's
    [tool.setuptools.package-dir]: agent/ is mathscout.agent, …)."""
    import tomllib

    pyproject = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))
    mapped = pyproject["tool"]["setuptools"]["package-dir"]
    return {PACKAGE: "mathscout", **{PACKAGE.parent / folder: name for name, folder in mapped.items()}}


ROOTS = _package_roots()


def module_name(path: Path) -> str:
    root = next(r for r in ROOTS if path.is_relative_to(r))
    parts = [ROOTS[root], *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_modules() -> list[tuple[str, Path]]:
    """Every module of the package: mathscout/ and the folders mapped into it (agent/, retrievers/, …)."""
    found = []
    for root in ROOTS:
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d not in ("__pycache__", "data")]
            found += [(module_name(Path(folder) / f), Path(folder) / f) for f in files if f.endswith(".py")]
    return sorted(found)
