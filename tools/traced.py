"""The planner's searches as composed retrievers whose stages are traced tool calls of a `ToolSession`.

`TracedSearch` (a retriever searched through the `search`/`hybrid_search` tool), `traced_form_search` (each form of
`FormulaRewrite() >> structure` searched through `structure_search`), `traced_rewriter` (the forms come from the
`rewrite_formula` tool) and `TracedReranker` (`>> reranker` through the `rerank` tool): the composition operators
(`mathscout.retrievers.compose`) build the search, the session keeps the trace, the budget and the evidence.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mathscout.retrievers.base import BaseRetriever, Composable, RankResult
from mathscout.retrievers.rewrite import StructureSearch
from mathscout.retrievers.structure import split_query
from mathscout.rewrite import EquivalentForm, RewriteResult
from mathscout.tools.searching import partial_results
from mathscout.tools.session import ToolSession
from mathscout.tools.toolbox import ToolOutput, hit_ids_summary
from mathscout.types import Hit, Query

Arguments = Callable[[Query, int], dict[str, Any]]


class TracedSearch(BaseRetriever):
    """A search tool as a retriever named `name`: each search is a `tool` call in the session, with
    `arguments(query, k)`, done by `work(query, k)` (the toolbox's search); a failed call finds nothing."""

    def __init__(
        self, session: ToolSession, name: str, tool: str, arguments: Arguments, work: Callable[[Query, int], ToolOutput]
    ):
        self.session, self.name, self.tool, self.arguments, self.work = session, name, tool, arguments, work
        self.store = session.toolbox.index.store

    def _search(self, query: Query, k: int) -> list[Hit]:
        output = self.session.run(self.tool, self.arguments(query, k), lambda: self.work(query, k))
        return output.hits if output is not None else []


def structure_search_arguments(query: Query, k: int) -> dict[str, Any]:
    """The `structure_search` call a formula query makes: its first formula, k, and its words when it has some."""
    formulas, words = split_query(query)
    arguments: dict[str, Any] = {"formula": formulas[0] if formulas else "", "k": k}
    return arguments | ({"words": words} if words else {})


def traced_form_search(session: ToolSession, structure: StructureSearch) -> Callable[[Query, int], RankResult]:
    """Each form `FormulaRewrite() >> structure` searches, as a `structure_search` call (a failed one finds nothing);
    `structure` is one index's structure retriever or a sharded index's, whose partial results are noticed."""

    def search(query: Query, depth: int) -> RankResult:
        arguments = structure_search_arguments(query, depth)
        found: list[RankResult] = []

        def work() -> ToolOutput:
            found.append(structure.rank(query, depth))
            hits = found[0].hits
            return ToolOutput(
                hit_ids_summary(hits),
                {"hits": [{"id": h.doc_id, "score": h.score} for h in hits]},
                hits=hits,
                notices=partial_results(hits),
            )

        session.run("structure_search", arguments, work)
        return found[0] if found else RankResult([])

    return search


def traced_rewriter(session: ToolSession) -> Callable[..., RewriteResult]:
    """Equivalent forms from the `rewrite_formula` tool (at most `max_forms` of them), for `FormulaRewrite`."""

    def rewrite(latex: str, max_forms: int = 8, seconds: float = 2.0) -> RewriteResult:
        _, output = session.call("rewrite_formula", latex=latex)
        if output is None:
            return RewriteResult(latex)
        forms = [EquivalentForm(r.rewritten, r.rule) for r in output.rewrites[:max_forms]]
        return RewriteResult(latex, forms, output.notices[0] if output.notices else None)

    return rewrite


def no_rewriter(latex: str, max_forms: int = 8, seconds: float = 2.0) -> RewriteResult:
    """No equivalent forms (rewriting is not installed)."""
    return RewriteResult(latex)


class TracedReranker(Composable):
    """`>> reranker` through the session's `rerank` tool; when the call fails the first-stage order stays."""

    def __init__(self, session: ToolSession, depth: int):
        self.session, self.depth = session, depth  # `depth`: the first-stage hits `>>` hands to it
        self.name = "rerank"
        self.store = session.toolbox.index.store

    def rerank(self, query: Query, hits: list[Hit], k: int | None = None) -> list[Hit]:
        box = self.session.toolbox
        output = self.session.run(
            "rerank",
            {"query": query.text, "hit_ids": [h.doc_id for h in hits]},
            lambda: box.rerank(query.text, hits, self.session.rerank_kind, **self.session.rerank_options),
        )
        return output.hits if output is not None else hits
