"""The composition operators (PyTerrier's pipeline algebra, see ../shared/STYLE.md) and the stages they build.

Every stage (`base.Composable`) has the operators; what they build depends on what the stages can do (the
protocols of `mathscout.retrievers.base`: a retriever, a reranker or a query stage), never on their classes:

    0.3 * structure + 0.7 * dense      weighted linear fusion (Zhong 2023 thesis Eq. 5.20; `mathscout.retrievers.fusion`)
    first >> reranker                  the first stage's top hits reordered (`mathscout.retrievers.rerank.Reranked`)
    bm25 >> structure                  a retriever on the right reorders the hits by its own scores (`ScoredBy`)
    reranker >> reranker               one reranker after the other (`RerankChain`)
    QueryMap(fn) >> retriever          the retriever searches `fn(query)` (also before a reranker or a query stage)
    FormulaRewrite() >> structure      structure search over the query and its SymPy-equivalent forms (`retrievers.rewrite`)
    retriever % 100                    a rank cut-off
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from mathscout.errors import MathScoutError, QueryError
from mathscout.limits import K
from mathscout.notices import warning
from mathscout.retrievers.base import BaseRetriever, Composable, QueryStage, Reranker, Retriever, prepare_query
from mathscout.retrievers.fusion import DEPTH, Stage
from mathscout.retrievers.rerank import DEFAULT_DEPTH, Reranked
from mathscout.types import Hit, Query, renumbered

STAGES = (Retriever, Reranker, QueryStage)


def then(first, second):
    """`first >> second`:

    query stage >> query stage      one query stage (the first changes the query, then the second)
    query stage >> other stage      that stage given the changed queries (`stage.feed`)
    other stage >> query stage      `Pending`: `(a >> q) >> b` is `a >> (q >> b)`; alone it is `a`
    retriever >> reranker           `Reranked`: the retriever's top `depth` hits reordered (the reranker's `depth`)
    reranker >> reranker            `RerankChain`
    … >> retriever                  the retriever as a reranker (`ScoredBy`)
    """
    if isinstance(first, Pending):
        return then(first.stage, then(first.query_stage, second))
    if not isinstance(first, STAGES) or not isinstance(second, STAGES):
        raise MathScoutError(
            f"cannot compose {first!r} >> {second!r}: each side must be a retriever, a reranker or a query stage"
        )
    if isinstance(first, QueryStage):
        return QueryChain(first, second) if isinstance(second, QueryStage) else first.feed(second)
    if isinstance(second, QueryStage):
        return Pending(first, second)
    reranker = second if isinstance(second, Reranker) else ScoredBy(second)
    if isinstance(first, Reranker):
        return RerankChain(first, reranker)
    return Reranked(first, reranker, getattr(reranker, "depth", None) or DEFAULT_DEPTH)


def weighted(stage, weight: float) -> Stage:
    """`0.3 * retriever`: the retriever with its weight in a fusion."""
    return Stage(stage, float(weight))


def fused(first, second):
    """`a + b`: the weighted linear fusion of two rankings (either may be weighted or a fusion already)."""
    return Stage(first) + second


def cutoff(stage, k: int) -> Cutoff:
    """`retriever % k`."""
    return Cutoff(stage, k)


class Cutoff(BaseRetriever):
    """`retriever % k`: at most the first `k` hits, whatever is asked for."""

    def __init__(self, retriever: Retriever, k: int):
        if not isinstance(retriever, Retriever):
            raise MathScoutError(f"a cut-off cuts a ranking: {retriever!r} is no retriever")
        self.retriever, self.k = retriever, K.check(k)
        self.name = retriever.name
        self.store = getattr(retriever, "store", None)

    def _search(self, query: Query, k: int) -> list[Hit]:
        return self.retriever.search(query, min(k, self.k))

    def batch_search(self, queries: list[Query], k: int = 1000) -> dict[str, list[Hit]]:
        return self.retriever.batch_search([prepare_query(q) for q in queries], min(k, self.k))

    def __repr__(self) -> str:
        return f"{self.retriever!r} % {self.k}"


class ScoredBy(Composable):
    """A retriever as a reranker (`first >> retriever`): the hits it also finds in its own top `depth`, by its score
    (ties keep their order), then the others in their order, scored below them. A query it cannot search (e.g. no
    formula for structure search) keeps the first-stage order, with a notice."""

    def __init__(self, retriever: Retriever, depth: int = DEPTH):
        self.retriever, self.reads = retriever, depth  # `reads`: its own hits that score the first stage's
        self.name = retriever.name

    def rerank(self, query: str | Query, hits: list[Hit], k: int | None = None) -> list[Hit]:
        query = prepare_query(query)
        try:
            own = {
                h.doc_id: h.score for h in self.retriever.batch_search([query], max(self.reads, len(hits)))[query.id]
            }
        except QueryError as exc:
            warning(f"{self.name}: {exc}; first-stage order kept")
            own = {}
        found = sorted((h for h in hits if h.doc_id in own), key=lambda h: -own[h.doc_id])
        others = [h for h in hits if h.doc_id not in own]
        reranked = [replace(h, components=dict(h.components)) for h in found + others]
        for hit in reranked[: len(found)]:
            hit.score = hit.components["rerank"] = own[hit.doc_id]
        floor = min((own[h.doc_id] for h in found), default=0.0)
        for n, hit in enumerate(reranked[len(found) :], start=1):
            hit.score = floor - n
        renumbered(reranked)
        return reranked[:k] if k is not None else reranked

    def __repr__(self) -> str:
        return f"ScoredBy({self.retriever!r})"


class RerankChain(Composable):
    """`reranker >> reranker`: the second reorders what the first gave. `depth` (the hits `>>` hands it) is the first's;
    `Reranked` lends its first stage's store to the parts (`rerank.lend_store`)."""

    def __init__(self, first: Reranker, second: Reranker):
        self.parts = (first, second)
        self.name = f"{first.name}>>{second.name}"
        self.depth = getattr(first, "depth", None)

    def rerank(self, query: str | Query, hits: list[Hit], k: int | None = None) -> list[Hit]:
        first, second = self.parts
        return second.rerank(query, first.rerank(query, hits), k)

    def __repr__(self) -> str:
        return " >> ".join(repr(part) for part in self.parts)


class Pending(Composable):
    """`stage >> query_stage`: the query stage waits for what follows, `(stage >> q) >> b` being `stage >> (q >> b)`;
    alone it is `stage` (a query stage changes no hits), whose attributes it answers with."""

    def __init__(self, stage: Any, query_stage: QueryStage):
        self.stage, self.query_stage = stage, query_stage

    def __getattr__(self, name: str):
        if name in ("stage", "query_stage") or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.stage, name)

    def __repr__(self) -> str:
        return f"{self.stage!r} >> {self.query_stage!r}"


@dataclass(frozen=True)
class QueryChain(Composable):
    """`query stage >> query stage`: the first changes the query, then the second."""

    first: QueryStage
    second: QueryStage

    def feed(self, stage):
        return self.first.feed(self.second.feed(stage))


@dataclass(frozen=True)
class QueryMap(Composable):
    """A query stage: `QueryMap(fn) >> retriever` searches `retriever` with `fn(query)` (PyTerrier's
    `pt.apply.query`), e.g. a question's formulas alone for the structure side of a fusion; before a reranker, the
    reranker reads `fn(query)`."""

    fn: Callable[[Query], Query]

    def feed(self, stage):
        return MappedReranker(stage, self.fn) if isinstance(stage, Reranker) else Mapped(stage, self.fn)


class Mapped(BaseRetriever):
    """`QueryMap(fn) >> retriever`."""

    def __init__(self, retriever: Retriever, fn: Callable[[Query], Query]):
        self.retriever, self.fn = retriever, fn
        self.name = retriever.name
        self.store = getattr(retriever, "store", None)

    def _search(self, query: Query, k: int) -> list[Hit]:
        return self.retriever.search(self.fn(query), k)

    def __repr__(self) -> str:
        return f"QueryMap >> {self.retriever!r}"


class MappedReranker(Composable):
    """`QueryMap(fn) >> reranker`."""

    def __init__(self, reranker: Reranker, fn: Callable[[Query], Query]):
        self.parts, self.fn = (reranker,), fn
        self.name = reranker.name
        self.depth = getattr(reranker, "depth", None)

    def rerank(self, query: str | Query, hits: list[Hit], k: int | None = None) -> list[Hit]:
        return self.parts[0].rerank(self.fn(prepare_query(query)), hits, k)


def __getattr__(name: str):
    if name == "FormulaRewrite":  # it lives with the mode it builds
        from mathscout.retrievers.rewrite import FormulaRewrite

        return FormulaRewrite
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
