"""Type-aware query expansion (Stathopoulos & Teufel §4.3.1).

Types2X: the types found in the query are up-weighted ×2. TypesExp: in addition, each query type adds
its n = 5 nearest types in the type embedding space (cosine), and the fresh types join the query with
the same ×2 weight. A query without detectable types is not expanded (`Expansion.is_noop`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from mathscout.errors import IndexMissingError
from mathscout.index.layout import IndexDir
from mathscout.types_expansion.detect import type_token
from mathscout.types_expansion.embeddings import VECTORS, TypeEmbeddings

TYPE_BOOST = 2.0  # §4.3.1: Types2X / TypesExp up-weight types ×2
NEIGHBOURS = 5  # §4.3.1: n = 5 fresh types per query type


@dataclass(frozen=True)
class Expansion:
    """What type-aware expansion did to a query: its types (in order of first mention) and the
    (query type, added type, cosine similarity) triples."""

    types: list[str]
    expansions: list[tuple[str, str, float]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)  # mentions of each query type

    @property
    def is_noop(self) -> bool:
        return not self.types

    @property
    def added(self) -> list[str]:
        """The fresh types, each once, in order."""
        return list(dict.fromkeys(neighbour for _, neighbour, _ in self.expansions))

    def type_weights(self, boost: float = TYPE_BOOST) -> dict[str, float]:
        """Type-index query: each query type `boost` × its mentions, each fresh type `boost`."""
        weights = {type_token(t): boost * self.counts.get(t, 1) for t in self.types}
        for neighbour in self.added:
            weights.setdefault(type_token(neighbour), boost)
        return weights

    def summary(self) -> str:
        """One line for people: what was detected and added."""
        if self.is_noop:
            return "no mathematical types detected in the query: searched without type expansion"
        text = f"query types: {', '.join(self.types)}"
        if self.expansions:
            text += f"; added: {', '.join(self.added)}"
        return text


def query_types(text: str, model: TypeEmbeddings) -> Counter[str]:
    """The types mentioned in `text` and how often, in order of first mention."""
    return Counter(model.detector.types_of(text))


def expand_query(text: str, model: TypeEmbeddings, n: int = NEIGHBOURS) -> Expansion:
    """TypesExp expansion of `text`: its types and, for each, its `n` nearest fresh types."""
    counts = query_types(text, model)
    types = list(counts)
    expansions = [
        (term, neighbour, round(similarity, 4))
        for term in types
        for neighbour, similarity in model.neighbours(term, n, exclude=types)
    ]
    return Expansion(types=types, expansions=expansions, counts=dict(counts))


def load_type_model(index: IndexDir | Path | str) -> TypeEmbeddings:
    """The type embeddings of an index; a MathScoutError naming the build command when missing."""
    index = index if isinstance(index, IndexDir) else IndexDir(index)
    folder = index.component_path("types")
    if not (folder / VECTORS).is_file():
        raise IndexMissingError(
            f"the index {index.path} has no type embeddings: build them with "
            f"'mathscout index --index {index.path} --components types'"
        )
    return _load(str(folder.resolve()), (folder / VECTORS).stat().st_mtime_ns)


@lru_cache(maxsize=4)
def _load(folder: str, _version: int) -> TypeEmbeddings:
    return TypeEmbeddings.load(Path(folder))
