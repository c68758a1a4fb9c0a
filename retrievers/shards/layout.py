"""The shards manifest of a sharded index directory.

    <index>/
      manifest.json   the index's manifest (store + the components every shard holds, marked "sharded")
      store.sqlite    every document (snippets, get_document, features read it at the coordinator)
      shards.json     ShardSet: each shard's folder, its documents' global ordinal range, the global statistics
      shards/shard-000/ … one full index per shard (its own store and components, plus `global/`)

A shard path is relative to the index folder, or absolute (storage every Ray node sees).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mathscout.errors import MathScoutError
from mathscout.index.layout import write_json_atomic

SHARDS_FILE = "shards.json"


@dataclass(frozen=True)
class ShardInfo:
    """One shard: its folder and the global ordinals [first_document, first_document + documents) it holds."""

    path: str
    first_document: int
    documents: int
    first_formula: int
    formulas: int


@dataclass
class ShardSet:
    shards: list[ShardInfo]
    components: list[str]
    statistics: dict = field(default_factory=dict)  # the global statistics written into every shard (stats.py)
    build: dict = field(default_factory=dict)  # how it was built: seconds per step, Ray address

    def folder(self, index: Path, shard: int) -> Path:
        path = Path(self.shards[shard].path)
        return path if path.is_absolute() else Path(index) / path

    def write(self, index: Path) -> None:
        write_json_atomic(Path(index) / SHARDS_FILE, asdict(self))

    @classmethod
    def read(cls, index: Path) -> ShardSet:
        path = Path(index) / SHARDS_FILE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return cls([ShardInfo(**s) for s in data["shards"]], list(data["components"]),
                       dict(data.get("statistics", {})), dict(data.get("build", {})))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise MathScoutError(f"the shards manifest {path} is unreadable ({exc}); rebuild the index with "
                                 f"'mathscout index --input PATH --index {index} --shards N'") from None


def is_sharded(index: Path | str) -> bool:
    """Whether the index folder is a sharded index (it has a shards manifest)."""
    return (Path(index) / SHARDS_FILE).is_file()
