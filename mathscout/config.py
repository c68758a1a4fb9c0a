"""Where MathScout keeps its files, and the embedded demo corpus."""

from __future__ import annotations

import os
from pathlib import Path

DEMO_CORPUS = Path(__file__).parent / "data" / "demo"  # a folder of JSONL files, one per area
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"  # the shared data beside a checkout
SHARED_COLLECTION = SHARED_DATA / "collection"  # docs.jsonl, topics.{train,dev}.jsonl, qrels.{train,dev}.txt


def home() -> Path:
    """MATHSCOUT_HOME, or ~/.cache/mathscout."""
    return Path(os.environ.get("MATHSCOUT_HOME") or Path.home() / ".cache" / "mathscout")


def default_index_path() -> Path:
    """MATHSCOUT_INDEX, or the demo index under home()."""
    return Path(os.environ.get("MATHSCOUT_INDEX") or home() / "indexes" / "demo")


def ensure_demo_index(path: Path | None = None) -> Path:
    """Build the demo index from the embedded corpus if it is not there yet (and bring an older demo index's
    structure component up to date: wildcard paths); return its path."""
    import json

    from mathscout.index.builder import add_components, build_index
    from mathscout.index.layout import MANIFEST

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
