"""The stage protocols (retriever, reranker, query stage), the composition operators every stage shares, and the
base of the search modes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from mathscout.errors import EMPTY_QUERY, QueryError
from mathscout.latex.bare import delimit_bare_math
from mathscout.limits import K
from mathscout.notices import notice
from mathscout.types import Hit, Query

MAX_QUERY_CHARS = 10_000


def prepare_query(query: str | Query) -> Query:
    """Validate a query: empty → QueryError; longer than MAX_QUERY_CHARS → truncated with a notice; formulas typed
    without `$` wrapped in `$…$` (`mathscout.latex.bare`), so every mode reads them as math."""
    q = query if isinstance(query, Query) else Query(id="q", text=query)
    text = q.text or ""
    if not text.strip() and not (q.formula or "").strip():
        raise QueryError(EMPTY_QUERY)
    if len(text) > MAX_QUERY_CHARS:
        notice(f"notice: query of {len(text):,} characters truncated to the first {MAX_QUERY_CHARS:,}")
        text = text[:MAX_QUERY_CHARS]
    text = delimit_bare_math(text).text
    return q if text == q.text else Query(id=q.id, text=text, formula=q.formula)


@dataclass
class RankResult:
    """What every retriever's `rank(query, k)` returns: the hits, best first, and what explains them where the
    retriever keeps it (structure search: each document's best formula hit, by store ordinal; structure-rewrite:
    each document's fused parts and the query variants it searched)."""

    hits: list[Hit]
    formulas: dict[int, Any] = field(default_factory=dict)
    fused: dict[str, Any] = field(default_factory=dict)
    variants: list[Any] = field(default_factory=list)


@runtime_checkable
class Retriever(Protocol):
    """Query → ranked hits. `name` identifies the retriever in fused results and run tags."""

    name: str

    def search(self, query: str | Query, k: int = 10) -> list[Hit]:
        """The top-k hits, best first, ranks from 1."""
        ...

    def batch_search(self, queries: list[Query], k: int = 1000) -> dict[str, list[Hit]]:
        """Hits for many queries, keyed by query id."""
        ...


@runtime_checkable
class Reranker(Protocol):
    """Hits → hits: a second opinion on a first stage's hits (`first >> reranker`)."""

    name: str

    def rerank(self, query: str | Query, hits: list[Hit], k: int | None = None) -> list[Hit]:
        """`hits` reordered, best first (the top `k` when given); each gains `components["rerank"]`."""
        ...


@runtime_checkable
class QueryStage(Protocol):
    """Query → query: a stage that changes the query of the stage it feeds (`QueryMap(fn) >> retriever`)."""

    def feed(self, stage: Any) -> Any:
        """`stage` (a retriever or a reranker) given this stage's queries."""
        ...


class Composable:
    """PyTerrier's operators, written once for every stage (a retriever, a reranker, a query stage). What each
    builds is decided in `mathscout.retrievers.compose` by what the stages can do (the protocols above), never by
    their classes: `a >> b` (a pipeline), `0.3 * a + 0.7 * b` (weighted linear fusion, Zhong 2023 thesis Eq. 5.20),
    `a % 100` (a rank cut-off)."""

    def __rshift__(self, other):
        return _operators().then(self, other)

    def __rrshift__(self, other):
        return _operators().then(other, self)

    def __mul__(self, weight: float):
        return _operators().weighted(self, weight)

    __rmul__ = __mul__

    def __add__(self, other):
        return _operators().fused(self, other)

    def __radd__(self, other):
        return _operators().fused(other, self)

    def __mod__(self, k: int):
        return _operators().cutoff(self, k)


def _operators():
    """`mathscout.retrievers.compose`, imported on first use (it builds on this module)."""
    from mathscout.retrievers import compose

    return compose


class BaseRetriever(Composable):
    """Shared behaviour of retrievers: query validation, a simple batch loop, and the composition operators."""

    name = "base"

    def search(self, query: str | Query, k: int = 10) -> list[Hit]:
        return self._search(prepare_query(query), K.check(k))

    def _search(self, query: Query, k: int) -> list[Hit]:
        raise NotImplementedError

    def batch_search(self, queries: list[Query], k: int = 1000) -> dict[str, list[Hit]]:
        return {q.id: self.search(q, k) for q in queries}
