"""Type-aware query expansion (Stathopoulos & Teufel 2016 §4.3.1, models Types2X and TypesExp).

Types2X: the types found in the query are up-weighted ×2. TypesExp: in addition, each query type adds
its n = 5 nearest types in the type embedding space (cosine), and the fresh types join the query with
the same ×2 weight. A query without detectable types is not expanded (`ExpandedQuery.is_noop`).

`type_expansion(text, index)` is the agent's `type_expansion` tool: the detected types, each with its
related types and their cosine similarities, as `mathscout.events.Expansion` records.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from mathscout import events
from mathscout.errors import IndexMissingError, QueryError
from mathscout.index.layout import IndexDir
from mathscout.types_expansion.detect import type_token
from mathscout.types_expansion.embeddings import OLD_VECTORS, VECTORS, TypeEmbeddings

TYPE_BOOST = 2.0  # Stathopoulos & Teufel 2016 §4.3.1 (Types2X, TypesExp): types up-weighted ×2
NEIGHBOURS = 5  # Stathopoulos & Teufel 2016 §4.3.1 (TypesExp): n = 5 fresh related types per query type
NO_TYPES = "no mathematical types detected in the query: searched without type expansion"
NO_TYPES_TOOL = "no mathematical types detected: type expansion is a no-op"


@dataclass(frozen=True)
class ExpandedQuery:
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
            return NO_TYPES
        text = f"query types: {', '.join(self.types)}"
        if self.expansions:
            text += f"; added: {', '.join(self.added)}"
        return text


def query_types(text: str, model: TypeEmbeddings) -> Counter[str]:
    """The types mentioned in `text` and how often, in order of first mention."""
    return Counter(model.detector.types_of(text))


def expand_query(text: str, model: TypeEmbeddings, n: int = NEIGHBOURS) -> ExpandedQuery:
    """TypesExp expansion of `text` (Stathopoulos & Teufel 2016 §4.3.1): its types and, for each, its `n` nearest fresh types by cosine."""
    counts = query_types(text, model)
    types = list(counts)
    expansions = [
        (term, neighbour, round(similarity, 4))
        for term in types
        for neighbour, similarity in model.neighbours(term, n, exclude=types)
    ]
    return ExpandedQuery(types=types, expansions=expansions, counts=dict(counts))


def load_type_model(index: IndexDir | Path | str) -> TypeEmbeddings:
    """The type embeddings of an index; a MathScoutError naming the build command when missing."""
    index = index if isinstance(index, IndexDir) else IndexDir(index)
    folder = index.component_path("types")
    if not (folder / VECTORS).is_file():
        if (folder / OLD_VECTORS).is_file():
            return TypeEmbeddings.load(folder)  # one line: the old format, and the command that rebuilds it
        raise IndexMissingError(
            f"the index {index.path} has no type embeddings: build them with "
            f"'mathscout index --index {index.path} --components types'"
        )
    return _load(str(folder.resolve()), (folder / VECTORS).stat().st_mtime_ns)


@lru_cache(maxsize=4)
def _load(folder: str, _version: int) -> TypeEmbeddings:
    return TypeEmbeddings.load(Path(folder))


@dataclass
class TypeExpansionResult:
    """The `type_expansion` tool's answer: one `mathscout.events.Expansion` per detected type (in order of first
    mention, with its related types and cosines), and one line for people. Iterates like that list; empty,
    with `is_noop` set and `summary` saying so, when the text has no detectable types."""

    expansions: list[events.Expansion]
    summary: str

    @property
    def is_noop(self) -> bool:
        return not self.expansions

    def __iter__(self) -> Iterator[events.Expansion]:
        return iter(self.expansions)

    def __len__(self) -> int:
        return len(self.expansions)

    def __getitem__(self, position: int) -> events.Expansion:
        return self.expansions[position]


def type_expansion(text: str, index: IndexDir | Path | str, n: int = NEIGHBOURS) -> TypeExpansionResult:
    """The types of `text` and, for each, its `n` nearest types in the index's type embeddings (TypesExp, Stathopoulos & Teufel 2016 §4.3.1).
    A QueryError for empty text; an IndexMissingError naming the build command when the index has no types."""
    if not text or not text.strip():
        raise QueryError("type expansion needs some text: the query is empty")
    model = load_type_model(index)
    expanded = expand_query(text, model, n)
    related: dict[str, list[tuple[str, float]]] = {t: [] for t in expanded.types}
    for term, neighbour, similarity in expanded.expansions:
        related[term].append((neighbour, similarity))
    summary = expanded.summary() if expanded.types else NO_TYPES_TOOL
    unknown = [t for t in expanded.types if t not in model]
    if expanded.types and unknown and n > 0:
        summary += f"; no embedding (too rare in the index) for: {', '.join(unknown)}"
    return TypeExpansionResult([events.Expansion(type=t, related=r) for t, r in related.items()], summary)
