"""Which index directories the page offers: the ones named with `--index` (the first is the default), or, when
none is named, the demo index and every index under MATHSCOUT_HOME/indexes. Only these can be opened from the
browser or the API (never a path sent by a client)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from mathscout.config import default_index_path, home
from mathscout.errors import MathScoutError
from mathscout.index.layout import MANIFEST, IndexDir
from mathscout.retrievers.indexing import ensure_demo_index


@dataclass(frozen=True)
class IndexChoice:
    """One selectable index: `key` is what the dropdown sends back, `label` what a person reads."""

    key: str
    label: str
    path: Path


def index_label(name: str, index: IndexDir) -> str:
    """'NAME — 1,234 documents (bm25, structure)'."""
    components = [c for c in index.components if c != "store"]
    return f"{name} — {index.manifest.documents:,} documents ({', '.join(components) or 'documents only'})"


def discover_indexes(named: Iterable[Path | str] = (), build_demo: bool = True) -> list[IndexChoice]:
    """The indexes `serve` offers, the default first: the ones named with `--index`, in order, when any is named
    (a named index that cannot be opened is an error); else the default index (MATHSCOUT_INDEX or the demo, built
    if missing) and every index under MATHSCOUT_HOME/indexes (unreadable ones left out). Keys are the directory
    names (made unique)."""
    named_paths = [Path(p) for p in named]
    candidates: list[Path]
    if named_paths:
        candidates = named_paths
    else:
        default = ensure_demo_index(default_index_path()) if build_demo else default_index_path()
        candidates = [Path(default)]
        indexes_home = home() / "indexes"
        if indexes_home.is_dir():
            candidates += sorted(p for p in indexes_home.iterdir() if (p / MANIFEST).is_file())
    choices: list[IndexChoice] = []
    seen_paths: set[Path] = set()
    for path in candidates:
        resolved = path.resolve()
        if resolved in seen_paths:
            continue
        try:
            index = IndexDir(path)
        except MathScoutError:
            if path in named_paths:
                raise
            continue
        seen_paths.add(resolved)
        key = path.name or str(path)
        if any(c.key == key for c in choices):
            key = str(path)
        choices.append(IndexChoice(key, index_label(key, index), path))
    if not choices:
        raise MathScoutError("no index to serve: build one with 'mathscout index --input PATH --index DIR'")
    return choices
