"""Retrievers composed like values (PyTerrier's pipeline algebra, see ../shared/STYLE.md):

    0.3 * structure + 0.7 * dense      weighted linear fusion (Zhong 2023 thesis Eq. 5.20; `mathscout.retrievers.fusion`)
    first >> reranker                  the first stage's top hits reordered (`mathscout.retrievers.rerank.Reranked`)
    FormulaRewrite() >> structure      structure search over the query and its SymPy-equivalent forms
    retriever % 100                    a rank cut-off

The operators live on `BaseRetriever`; this module holds the pieces they build.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mathscout.errors import MathScoutError
from mathscout.limits import K
from mathscout.types import Hit, Query
from mathscout.retrievers.base import BaseRetriever, Retriever, prepare_query


class Cutoff(BaseRetriever):
    """`retriever % k`: at most the first `k` hits, whatever is asked for."""

    def __init__(self, retriever: Retriever, k: int):
        self.retriever, self.k = retriever, K.check(k)
        self.name = retriever.name
        self.store = getattr(retriever, "store", None)

    def _search(self, query: Query, k: int) -> list[Hit]:
        return self.retriever.search(query, min(k, self.k))

    def batch_search(self, queries: list[Query], k: int = 1000) -> dict[str, list[Hit]]:
        return self.retriever.batch_search([prepare_query(q) for q in queries], min(k, self.k))

    def __repr__(self) -> str:
        return f"{self.retriever!r} % {self.k}"


@dataclass(frozen=True)
class FormulaRewrite:
    """A query stage: each formula and its SymPy-equivalent forms (`mathscout.rewrite`), fused by the structure
    retriever it feeds (`FormulaRewrite() >> structure` is the `structure-rewrite` mode). Options as
    `StructureRewriteRetriever`'s."""

    fusion: str = "max"
    max_forms: int = 8
    seconds: float = 2.0
    rewriter: Callable | None = None  # (latex, max_forms=, seconds=) → RewriteResult; default `equivalent_forms`
    search_form: Callable | None = None  # (variant query, depth) → RankResult; default the structure retriever's rank

    def __rshift__(self, structure) -> BaseRetriever:
        from mathscout.retrievers.rewrite import StructureRewriteRetriever
        from mathscout.retrievers.shards.retriever import ShardedStructure
        from mathscout.retrievers.structure import StructureRetriever

        # one index's structure retriever, or a sharded index's (its forms fan out to the shards like any query)
        if not isinstance(structure, (StructureRetriever, ShardedStructure)):
            raise MathScoutError(f"a formula rewrite feeds structure search, not {structure!r}")
        return StructureRewriteRetriever(structure.index, fusion=self.fusion, max_forms=self.max_forms,
                                         seconds=self.seconds, structure=structure, rewriter=self.rewriter,
                                         search_form=self.search_form)


def then(first, second) -> BaseRetriever:
    """`first >> second`: a reranker after a retriever, or a structure retriever after a FormulaRewrite."""
    if hasattr(second, "rerank"):
        from mathscout.retrievers.rerank import Reranked

        return Reranked(first, second, getattr(second, "depth", None) or _rerank_depth())
    raise MathScoutError(f"cannot compose {first!r} >> {second!r}: the right side must be a reranker")


def _rerank_depth() -> int:
    from mathscout.retrievers.rerank import DEFAULT_DEPTH

    return DEFAULT_DEPTH


@dataclass(frozen=True)
class QueryMap:
    """A query stage: `QueryMap(fn) >> retriever` searches `retriever` with `fn(query)` (PyTerrier's
    `pt.apply.query`), e.g. a question's formulas alone for the structure side of a fusion."""

    fn: Callable[[Query], Query]

    def __rshift__(self, retriever: Retriever) -> BaseRetriever:
        return Mapped(retriever, self.fn)


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
