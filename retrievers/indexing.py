"""Building index directories with every retriever's component: the core builder (`mathscout.index.builder`:
atomic builds, locks, integrity records) over the components the retriever registry offers, and the demo index."""

from __future__ import annotations

import json
from pathlib import Path

from mathscout.config import DEMO_CORPUS, default_index_path, home
from mathscout.index.builder import add_components, build_index
from mathscout.index.layout import MANIFEST
from mathscout.retrievers import registry  # noqa: F401  (importing it offers every retriever's component)

__all__ = ["add_components", "build_index", "ensure_demo_index"]


def ensure_demo_index(path: Path | None = None) -> Path:
    """Build the demo index from the embedded corpus if it is not there yet (and bring an older demo index's
    structure component up to date: wildcard paths); return its path."""
    path = Path(path or default_index_path())
    if not (path / MANIFEST).is_file():
        build_index([DEMO_CORPUS], path)
    elif path == home() / "indexes" / "demo" and (path / "structure" / "meta.json").is_file():
        try:
            stale = not json.loads((path / "structure" / "meta.json").read_text(encoding="utf-8")).get("wildcard_paths")
        except (OSError, ValueError):
            stale = True
        if stale:  # only the demo index is rebuilt unasked: it is ours, and small
            add_components(path, ["structure"])
    return path
