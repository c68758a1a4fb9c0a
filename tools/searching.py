"""The one search service. Every entry point's search runs here: the command line (`mathscout search`), the HTTP API
(`GET /api/search`), the Python API (`MathScout.search`, `Assistant.search`) and the page's search. Each checks its
options once, at its own boundary (`SearchRequest.parse`, the one check), and hands the checked request to
`run_search`, which reads the query (`mathscout.question.read_query`, the one reader), resolves `rerank="auto"`
(`resolve_rerank`, the one rule), searches and returns a `SearchResult`: the hits (a list of `Hit`) and their
`mathscout.schema.SearchRecord` (hits, notices, partial results), so no two entry points disagree on names, limits,
notices or what an option means.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from mathscout.errors import QueryError
from mathscout.limits import RERANK_DEPTH, K
from mathscout.notices import collecting
from mathscout.options import AUTO, MODE, RERANK
from mathscout.options import RERANK_DEPTH as RERANK_DEPTH_OPTION
from mathscout.options import K as K_OPTION
from mathscout.question import read_query
from mathscout.render import explain_hits
from mathscout.retrievers.base import Retriever
from mathscout.retrievers.registry import AUTO_RERANK, rerank_kind, unknown_mode
from mathscout.retrievers.scores import describe_hits
from mathscout.schema import SearchRecord, hit_record
from mathscout.types import Hit


def check_options(
    *, k: object = K_OPTION.default, rerank: object = RERANK.default, rerank_depth: object = RERANK_DEPTH_OPTION.default
) -> tuple[int, str | None, int]:
    """(k, reranker kind, rerank depth) checked as every entry point checks them at its boundary (ranges:
    `mathscout.limits`; rerankers: `mathscout.retrievers.registry`), else a MathScoutError with one line."""
    return K.check(k), rerank_kind(rerank), RERANK_DEPTH.check(rerank_depth)


@dataclass(frozen=True)
class SearchRequest:
    """A search: words and LaTeX, a mode of the index (or "auto"), k hits, an optional reranker. Built checked by
    `parse` (or `checked()`); `run_search` takes it as it is."""

    query: str
    mode: str = MODE.default
    k: int = K_OPTION.default
    rerank: str | None = RERANK.default
    rerank_depth: int = RERANK_DEPTH_OPTION.default

    def checked(self) -> SearchRequest:
        """The request with every option checked, else MathScoutError with one line."""
        return SearchRequest.parse(self.query, self.mode, self.k, self.rerank, self.rerank_depth)

    @classmethod
    def parse(
        cls,
        query: object,
        mode: object = MODE.default,
        k: object = K_OPTION.default,
        rerank: object = RERANK.default,
        rerank_depth: object = RERANK_DEPTH_OPTION.default,
    ) -> SearchRequest:
        """A checked request from values as given (the HTTP API's numbers are text), else MathScoutError with one
        line. The query must be text (its emptiness is the reader's to say)."""
        if not isinstance(query, str):
            hint = ": decode it first, e.g. query.decode('utf-8')" if isinstance(query, (bytes, bytearray)) else ""
            raise QueryError(f"the query must be text (str), not {type(query).__name__}{hint}")
        k, kind, depth = check_options(k=k, rerank=rerank, rerank_depth=rerank_depth)
        return cls(query, (str(mode or "") or MODE.default).strip(), k, kind, depth)


class SearchResult(list[Hit]):
    """A search's hits (a list of `Hit`, ranked, with titles, snippets and score explanations) and its `record`
    (`mathscout.schema.SearchRecord`: the request as understood, the hits as records, the notices, the shards that did
    not answer). `to_dict()` is the JSON every entry point hands out."""

    def __init__(self, hits: Iterable[Hit], record: SearchRecord):
        super().__init__(hits)
        self.record = record

    @property
    def hits(self) -> list[Hit]:
        return list(self)

    @property
    def notices(self) -> list[str]:
        return self.record.notices

    @property
    def missing_shards(self) -> list[str]:
        return self.record.missing_shards

    def to_dict(self) -> dict[str, Any]:
        return self.record.to_dict()

    def __getattr__(self, name: str) -> Any:
        """The record's other fields (`query`, `mode`, `k`, `rerank`, `formulas`, `seconds`, …) as the result's."""
        if name == "record":  # not set yet (a copy being built): no recursion through the record
            raise AttributeError(name)
        return getattr(self.record, name)


# (toolbox, mode) → the mode's first stage: the entry layer hands down `mathscout.agent.planned.open_mode`, which
# opens "auto" too; without it, the registry's modes only (opened once by the toolbox)
ModeOpener = Callable[[Any, str], Retriever]


def resolve_rerank(kind: str, toolbox, llm: bool) -> str:
    """The reranker a search runs for `kind`: `auto` is the one rule of `mathscout.retrievers.rerank.auto_reranker`
    (the LLM's listwise reranker when `llm`: an LLM is configured and this caller may use it, else the index's
    trained cross-encoder when it has one, else local embeddings); any other kind is itself."""
    if kind != AUTO_RERANK:
        return kind
    return "llm" if llm else toolbox.local_reranker()


def search_modes(toolbox, open_mode: ModeOpener | None) -> list[str]:
    """The modes a search over `toolbox` may name: "auto" when the entry point handed down the mode resolver, then
    the index's registry modes."""
    return ([AUTO] if open_mode is not None else []) + toolbox.modes()


def run_search(
    request: SearchRequest, toolbox, open_mode: ModeOpener | None = None, *, llm: bool = False
) -> SearchResult:
    """Run a checked request over a `mathscout.tools.toolbox.ToolBox` (its retrievers and rerankers, opened once each);
    `open_mode(toolbox, mode)` gives the first stage. With `request.rerank` (resolved by `resolve_rerank`; `llm`: an
    LLM may rerank an `auto` search), its top `rerank_depth` hits are reordered."""
    started = time.perf_counter()
    query = read_query(request.query)  # the query limit first, before anything scans the text
    mode = request.mode
    if not (open_mode is not None and mode == AUTO) and not toolbox.mode_usable(mode):
        raise QueryError(
            toolbox.mode_problem(mode) or unknown_mode(mode, search_modes(toolbox, open_mode), " for this index")
        )
    kind = resolve_rerank(request.rerank, toolbox, llm) if request.rerank else None
    first = open_mode(toolbox, mode) if open_mode else toolbox.retriever(mode)
    notices = list(query.notices) + toolbox.open_notices(mode)
    with collecting() as said:
        if kind:
            from mathscout.retrievers.rerank import Reranked

            reranker = toolbox.reranker(kind)
            hits = Reranked(first, reranker, request.rerank_depth).search(query.searched, k=request.k)
            if getattr(reranker, "last_notice", None):
                notices.append(reranker.last_notice)
        else:
            hits = first.search(query.searched, request.k)
    notices += [n.removeprefix("notice: ") for n in said if n.removeprefix("notice: ") not in notices]
    missing = list(getattr(hits, "missing_shards", []))  # retrievers/shards/retriever.py: partial results
    notices += partial_results(hits)
    explain_hits(hits, toolbox.index.store, query.searched)
    described = describe_hits(hits)
    record = SearchRecord(
        query=request.query,
        mode=mode,
        k=request.k,
        rerank=kind,
        rerank_depth=request.rerank_depth,
        index=toolbox.index.path.name,
        formulas=list(query.formulas),
        hits=[hit_record(h) for h in described],
        notices=notices,
        missing_shards=missing,
        seconds=round(time.perf_counter() - started, 3),
    )
    return SearchResult(described, record)


def partial_results(hits: list[Hit]) -> list[str]:
    """The notice of hits a sharded index gave without some of its shards (`ShardedHits.missing_shards`), if any."""
    missing = list(getattr(hits, "missing_shards", []))
    return [f"partial results: {'; '.join(missing)} did not answer"] if missing else []
