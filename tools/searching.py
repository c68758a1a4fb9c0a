"""One search as the command line and the HTTP API run it: validated options in, a JSON-ready result out.

`mathscout search --json` prints `run_search(…).to_dict()` (a `mathscout.schema.SearchRecord`); `GET /api/search`
answers with the same record, so the two never disagree on names, limits or notices.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from mathscout.corpus.math_spans import formulas_and_words
from mathscout.errors import QueryError
from mathscout.latex.bare import delimit_bare_math
from mathscout.limits import QUERY, RERANK_DEPTH, K, rerank_kind
from mathscout.notices import collecting
from mathscout.options import MODE, RERANK
from mathscout.options import RERANK_DEPTH as RERANK_DEPTH_OPTION
from mathscout.options import K as K_OPTION
from mathscout.render import explain_hits
from mathscout.retrievers.base import EMPTY_QUERY, Retriever
from mathscout.retrievers.scores import describe_hits
from mathscout.schema import SearchRecord, hit_record
from mathscout.types import Hit


@dataclass(frozen=True)
class SearchRequest:
    """A search: words and LaTeX, a mode of the index (or "auto"), k hits, an optional reranker."""

    query: str
    mode: str = MODE.default
    k: int = K_OPTION.default
    rerank: str | None = RERANK.default
    rerank_depth: int = RERANK_DEPTH_OPTION.default

    def checked(self) -> SearchRequest:
        """The request with every option checked (mathscout.limits), else MathScoutError with one line."""
        return SearchRequest.parse(self.query, self.mode, self.k, self.rerank, self.rerank_depth)

    @classmethod
    def parse(
        cls,
        query: str,
        mode: str = MODE.default,
        k: object = K_OPTION.default,
        rerank: object = RERANK.default,
        rerank_depth: object = RERANK_DEPTH_OPTION.default,
    ) -> SearchRequest:
        """A checked request from values as given (the HTTP API's numbers are text), else MathScoutError with one line."""
        if not isinstance(query, str) or not query.strip():
            raise QueryError(EMPTY_QUERY)
        mode = (mode or MODE.default).strip()
        return cls(query, mode, K.check(k), rerank_kind(rerank), RERANK_DEPTH.check(rerank_depth))


# (toolbox, mode) → the mode's first stage: the entry layer hands down `mathscout.agent.planned.open_mode`, which
# opens "auto" too; without it, the registry's modes only (opened once by the toolbox)
ModeOpener = Callable[[Any, str], Retriever]


def run_search(request: SearchRequest, toolbox, open_mode: ModeOpener | None = None) -> SearchRecord:
    """Run a checked request over a `mathscout.tools.toolbox.ToolBox` (its retrievers and rerankers, opened once each);
    `open_mode(toolbox, mode)` gives the first stage. With `request.rerank`, its top `rerank_depth` hits are
    reordered."""
    started = time.perf_counter()
    text, cut = QUERY.cut(request.query)  # the query limit, before anything scans the text
    read = delimit_bare_math(text)
    query = replace(request, query=read.text)
    first = open_mode(toolbox, request.mode) if open_mode else toolbox.retriever(request.mode)
    notices = toolbox.open_notices(request.mode)
    with collecting() as said:
        if request.rerank:
            from mathscout.retrievers.rerank import Reranked

            reranker = toolbox.reranker(request.rerank)
            hits = Reranked(first, reranker, request.rerank_depth).search(query.query, k=request.k)
            if getattr(reranker, "last_notice", None):
                notices.append(reranker.last_notice)
        else:
            hits = first.search(query.query, request.k)
    notices += [n.removeprefix("notice: ") for n in said if n.removeprefix("notice: ") not in notices]
    if read.formulas:
        notices.insert(0, "read as math (typed without $…$): " + ", ".join(f"`{f}`" for f in read.formulas))
    if cut:
        notices.insert(0, cut)
    missing = list(getattr(hits, "missing_shards", []))  # retrievers/shards/retriever.py: partial results
    notices += partial_results(hits)
    explain_hits(hits, toolbox.index.store, query.query)
    return SearchRecord(
        query=request.query,
        mode=request.mode,
        k=request.k,
        rerank=request.rerank,
        rerank_depth=request.rerank_depth,
        index=toolbox.index.path.name,
        formulas=formulas_and_words(query.query).formulas,
        hits=[hit_record(h) for h in describe_hits(hits)],
        notices=notices,
        missing_shards=missing,
        seconds=round(time.perf_counter() - started, 3),
    )


def partial_results(hits: list[Hit]) -> list[str]:
    """The notice of hits a sharded index gave without some of its shards (`ShardedHits.missing_shards`), if any."""
    missing = list(getattr(hits, "missing_shards", []))
    return [f"partial results: {'; '.join(missing)} did not answer"] if missing else []
