"""The assistant the CLI, the Python API and the chat page use: the LLM agent when an endpoint is configured,
else (or when it fails) the deterministic offline planner. Contract: `mathscout/events.py`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

from mathscout.agent.config import LLMConfig
from mathscout.agent.llm import LLMAgent, LLMUnavailable
from mathscout.agent.offline import OfflinePlanner
from mathscout.agent.planned import offered_modes, open_mode
from mathscout.errors import MathScoutError
from mathscout.events import AgentEvent, Answer, EventQueue
from mathscout.index.layout import IndexDir
from mathscout.limits import AGENT_K, K
from mathscout.limits import RERANK_DEPTH as RERANK_DEPTH_LIMIT
from mathscout.options import AUTO, MODE, RERANK, RERANK_DEPTH, USE_LLM
from mathscout.options import K as K_OPTION
from mathscout.question import read_question
from mathscout.render import explain_hits
from mathscout.retrievers.registry import AUTO_RERANK, rerank_kind
from mathscout.retrievers.scores import describe_hits
from mathscout.tools.searching import SearchRequest, SearchResult, resolve_rerank, run_search
from mathscout.tools.session import ToolSession
from mathscout.tools.toolbox import ToolBox


def _open_index(index: IndexDir | Path | str | None) -> IndexDir:
    if isinstance(index, IndexDir):
        return index
    if index is None:
        from mathscout.config import default_index_path
        from mathscout.retrievers.indexing import ensure_demo_index

        return IndexDir(ensure_demo_index(default_index_path()))
    return IndexDir(index)


class Assistant:
    """Answers questions over one index. `use_llm`: None = the LLM when configured, False = never (not even when
    a question asks for it), True = the LLM (a notice when none is configured). `stream(use_llm=…)` chooses per
    question within that. Safe to share between threads (each question has its own session)."""

    def __init__(
        self,
        index_path: IndexDir | Path | str | None = None,
        *,
        use_llm: bool | None = None,
        config: LLMConfig | None = None,
    ):
        self.index = _open_index(index_path)
        self.toolbox = ToolBox(self.index)
        self.config = config or LLMConfig.from_env()
        self.use_llm = use_llm
        self.planner = OfflinePlanner(self.toolbox)

    @property
    def llm_status(self) -> tuple[bool, str]:
        """(usable, why): whether questions go to the LLM agent, in words."""
        if self.use_llm is False:
            return False, "LLM switched off: the offline planner writes the answers"
        if not self.config.configured:
            return False, (
                "no LLM configured (set OPENAI_API_KEY, or OPENAI_BASE_URL for a local server): "
                "the offline planner writes the answers"
            )
        return True, f"LLM agent: {self.config.describe()}"

    def modes(self) -> list[str]:
        """ "auto" (the planner chooses), then every search mode this index supports."""
        return offered_modes(self.toolbox)

    def _wants_llm(self, use_llm: bool | None) -> tuple[bool, str | None]:
        """(use the LLM?, a notice when the LLM was asked for but cannot be used)."""
        if self.use_llm is False:  # switched off for this assistant (e.g. `serve --no-llm`): never
            return False, "LLM switched off for this assistant: offline planner used" if use_llm else None
        wanted = self.use_llm if use_llm is None else use_llm
        if wanted is False:
            return False, None
        if not self.config.configured:
            return False, (
                "LLM unavailable (no endpoint configured: set OPENAI_API_KEY or OPENAI_BASE_URL): offline planner used"
            ) if wanted else None
        return True, None

    def search(
        self,
        query: str,
        mode: str = MODE.default,
        k: int = K_OPTION.default,
        rerank: str | bool | None = RERANK.default,
        rerank_depth: int = RERANK_DEPTH.default,
    ) -> SearchResult:
        """Ranked hits with titles, snippets, matched formulas and what each score means, and what the search said
        (`.notices`, `.record`, `.to_dict()`): the one search service (`mathscout.tools.searching.run_search`), as
        the command line and the HTTP API run it. The first stage is `open_mode`'s: "auto" runs the offline
        planner's searches (rewrites, structure and text search, fusion), any other mode is that retriever alone.
        `rerank` (auto or a reranker of mathscout.retrievers.registry.RERANKERS) reorders the first stage's top
        `rerank_depth` hits. A bad option is a MathScoutError."""
        return self.run_search(SearchRequest.parse(query, mode, k, rerank, rerank_depth))

    def run_search(self, request: SearchRequest, *, llm: bool | None = None) -> SearchResult:
        """A checked request through the one search service; `llm`: whether an LLM may rerank an `auto` search
        (None: when this assistant's LLM is usable, `llm_status`; a server passes its allowance's word)."""
        allowed = self.llm_status[0] if llm is None else llm and self.llm_status[0]
        return run_search(request, self.toolbox, open_mode, llm=allowed)

    def stream(
        self,
        question: str,
        *,
        mode: str = MODE.default,
        k: int = K_OPTION.default,
        rerank: bool | str | None = RERANK.default,
        rerank_depth: int = RERANK_DEPTH.default,
        use_llm: bool | None = USE_LLM.default,
    ) -> Iterator[AgentEvent]:
        """The work on one question as events; the last one is the "answer" (with the options it used). Never
        raises for bad input: a bad option is a notice and its default is used. `rerank`: False/None (no), True or
        "auto" (the one rule of `mathscout.tools.searching.resolve_rerank`: the LLM's listwise reranker when the LLM
        answers, else the index's cross-encoder when it has one, else local embeddings), or a reranker of
        mathscout.retrievers.registry.RERANKERS; `rerank_depth`: how many first-stage hits it reorders."""
        notices: list[str] = []
        try:
            kind = rerank_kind(rerank)
        except MathScoutError as exc:
            notices.append(f"{exc}: no reranking.")
            kind = None
        try:
            rerank_depth = RERANK_DEPTH_LIMIT.check(rerank_depth)
        except MathScoutError as exc:
            notices.append(f"{exc}: {RERANK_DEPTH.default} used.")
            rerank_depth = RERANK_DEPTH.default
        try:
            k, capped = AGENT_K.cap(K.check(k))
            if capped:
                notices.append(capped)
        except MathScoutError as exc:
            notices.append(f"{exc}: {K_OPTION.default} hits shown.")
            k = K_OPTION.default
        used: dict[str, str | None] = {"rerank": None}
        for event in self._stream(question, mode, k, kind, rerank_depth, use_llm, notices, used):
            if event.kind == "answer" and event.answer is not None:
                self._finish(event.answer, k, used["rerank"], rerank_depth)
            yield event

    def _finish(self, answer: Answer, k: int, rerank: str | None, rerank_depth: int) -> None:
        """The answer's options as used (checked once, by `stream`), and its hits' titles and score explanations."""
        answer.k, answer.rerank, answer.rerank_depth = k, rerank, rerank_depth
        answer.index = self.index.path.name
        explain_hits(answer.hits, self.index.store, answer.question)
        describe_hits(answer.hits)

    def _stream(
        self,
        question: str,
        mode: str,
        k: int,
        kind: str | None,
        rerank_depth: int,
        use_llm: bool | None,
        notices: list[str],
        used: dict[str, str | None],
    ) -> Iterator[AgentEvent]:
        started = time.perf_counter()
        rerank = kind is not None
        mode = (mode or MODE.default).strip()
        if mode not in self.modes():
            notices.append(
                f"The search mode '{mode}' is not available on this index "
                f"(modes: {', '.join(self.modes())}): {AUTO} used."
            )
            mode = AUTO  # offered on every index
        read = read_question(question)
        notices += read.notices
        for notice in notices:
            yield AgentEvent("notice", text=notice)
        if read.problem:
            yield AgentEvent("notice", text=read.problem)
            yield AgentEvent(
                "answer",
                answer=Answer(
                    question=read.text,
                    text=read.problem,
                    notices=notices + [read.problem],
                    planner="none",
                    mode=mode,
                    k=k,
                    seconds=time.perf_counter() - started,
                ),
            )
            return
        llm, refusal = self._wants_llm(use_llm)
        if refusal:
            notices.append(refusal)
            yield AgentEvent("notice", text=refusal)
        events: EventQueue = EventQueue()
        if llm:  # the listwise LLM reranker on the same endpoint (Zhong 2023 thesis ch. 6 prompt, prompts/rerank_listwise.md)
            endpoint = dict(
                model=self.config.model,
                base_url=self.config.base_url,
                api_key=self.config.key,
                timeout=self.config.timeout,
            )
            chosen = resolve_rerank(kind or AUTO_RERANK, self.toolbox, llm=True)
            used["rerank"] = chosen if rerank else None
            session = ToolSession(
                self.toolbox,
                emit=events.put,
                rerank_kind=chosen,
                rerank_depth=rerank_depth,
                rerank_options=endpoint if chosen == "llm" else {},
                notices=list(notices),
            )
            try:
                yield from LLMAgent(self.config).stream(
                    read, session, events, mode=mode, k=k, rerank=rerank, started=started
                )
                return
            except LLMUnavailable as exc:
                notice = f"LLM unavailable ({exc.reason}): offline planner used"
                notices.append(notice)
                events = EventQueue()  # the LLM's tool events not yet shown are dropped
                yield AgentEvent("notice", text=notice)
        chosen = resolve_rerank(kind or AUTO_RERANK, self.toolbox, llm=False)
        used["rerank"] = chosen if rerank else None
        session = ToolSession(
            self.toolbox, emit=events.put, rerank_kind=chosen, rerank_depth=rerank_depth, notices=list(notices)
        )
        yield from self.planner.stream(read, session, events, mode=mode, k=k, rerank=rerank, started=started)

    def ask(self, question: str, **options) -> Answer:
        """The final answer (see `stream` for the options)."""
        answer = None
        for event in self.stream(question, **options):
            if event.kind == "answer":
                answer = event.answer
        if answer is None:  # pragma: no cover - stream always ends with an answer
            raise MathScoutError("the assistant stopped without an answer")
        return answer
