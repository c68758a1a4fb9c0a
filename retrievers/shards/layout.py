"""The shards manifest of a sharded index directory.

    <index>/
      manifest.json   the index's manifest (store + the components every shard holds, marked "sharded")
      store.sqlite    every document (snippets, get_document, features read it at the coordinator)
      shards.json     ShardSet: each shard's folder, its documents' global ordinal range, the global statistics
      shards/shard-000/ … one full index per shard (its own store and components, plus `global/`)

A shard path is relative to the index folder, or absolute (storage every Ray node sees).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from mathscout.index.components import available_components
from mathscout.index.layout import MANIFEST, Manifest, is_index, write_json_atomic
from mathscout.index.stored import StoredFile

SHARDS_FILE = "shards.json"
_RANGE = ("first_document", "documents", "first_formula", "formulas")  # ShardInfo's numbers, in its order


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
        """The shards manifest of `index`, checked whole before any shard is asked (`check`)."""
        index = Path(index)
        file = StoredFile(
            index / SHARDS_FILE,
            "the shards manifest",
            f"rebuild the index with 'mathscout index --input PATH --index {index} --shards N'",
        )
        data = file.load()
        listed = [file.mapping(s, "a shard") for s in file.items(data.get("shards"), "shards")]
        shards = [
            ShardInfo(
                file.text(s.get("path"), f"shard {n}'s folder"),
                *(file.whole(s.get(key), f"shard {n}'s {key}") for key in _RANGE),
            )
            for n, s in enumerate(listed, start=1)
        ]
        components = [
            file.name(c, "a component", available_components())
            for c in file.items(data.get("components"), "components")
        ]
        found = cls(
            shards,
            components,
            file.mapping(data.get("statistics", {}), "statistics"),
            file.mapping(data.get("build", {}), "build"),
        )
        found.check(index, file)
        return found

    def check(self, index: Path, file: StoredFile) -> None:
        """In order, the shards hold each of the store's documents and formulas once, in their own index folders."""
        store = Manifest.read(index / MANIFEST)
        file.require(self.shards, "it lists no shard")
        documents = formulas = 0
        for n, shard in enumerate(self.shards):
            file.require(
                (shard.first_document, shard.first_formula) == (documents, formulas) and shard.documents,
                f"shard {n + 1} starts at document {shard.first_document:,}, formula {shard.first_formula:,} "
                f"with {shard.documents:,} documents; the shards before it end at {documents:,}, {formulas:,}",
            )
            folder = self.folder(index, n)
            own = Manifest.read(folder / MANIFEST) if is_index(folder) else None
            file.require(
                own and (own.documents, own.formulas) == (shard.documents, shard.formulas),
                f"shard {n + 1}'s folder {folder} is missing or holds other documents",
            )
            documents, formulas = documents + shard.documents, formulas + shard.formulas
        file.require(
            (documents, formulas) == (store.documents, store.formulas),
            f"the shards hold {documents:,} documents and {formulas:,} formulas, the store "
            f"{store.documents:,} and {store.formulas:,}",
        )
        unbuilt = [c for c in self.components if c not in store.components]
        file.require(not unbuilt, f"the index has no {', '.join(unbuilt)} component")


def is_sharded(index: Path | str) -> bool:
    """Whether the index folder is a sharded index (it has a shards manifest)."""
    return (Path(index) / SHARDS_FILE).is_file()
