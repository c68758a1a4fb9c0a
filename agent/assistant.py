"""The assistant the CLI, the Python API and the chat page use: the LLM agent when an endpoint is configured,
else (or when it fails) the deterministic offline planner. Contract: `mathscout/events.py`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

from mathscout.agent.config import LLMConfig
from mathscout.events import AgentEvent, Answer
from mathscout.agent.llm import LLMAgent, LLMUnavailable
from mathscout.agent.offline import OfflinePlanner
from mathscout.question import read_question
from mathscout.errors import MathScoutError, QueryError
from mathscout.index.layout import IndexDir
from mathscout.limits import AGENT_K, K, rerank_kind
from mathscout.types import Hit
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

    def __init__(self, index_path: IndexDir | Path | str | None = None, *, use_llm: bool | None = None,
                 config: LLMConfig | None = None):
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
            return False, ("no LLM configured (set OPENAI_API_KEY, or OPENAI_BASE_URL for a local server): "
                           "the offline planner writes the answers")
        return True, f"LLM agent: {self.config.describe()}"

    def modes(self) -> list[str]:
        """"auto" (the planner chooses), then every search mode this index supports."""
        return ["auto", *self.toolbox.modes()]

    def _wants_llm(self, use_llm: bool | None) -> tuple[bool, str | None]:
        """(use the LLM?, a notice when the LLM was asked for but cannot be used)."""
        if self.use_llm is False:  # switched off for this assistant (e.g. `serve --no-llm`): never
            return False, "LLM switched off for this assistant: offline planner used" if use_llm else None
        wanted = self.use_llm if use_llm is None else use_llm
        if wanted is False:
            return False, None
        if not self.config.configured:
            return False, ("LLM unavailable (no endpoint configured: set OPENAI_API_KEY or OPENAI_BASE_URL): "
                           "offline planner used") if wanted else None
        return True, None

    def search(self, query: str, mode: str = "auto", k: int = 10) -> list[Hit]:
        """Ranked hits with snippets and matched formulas. "auto" runs the offline planner's searches (rewrites,
        structure and text search, fusion); any other mode is that retriever alone."""
        if mode not in self.modes():
            raise QueryError(f"unknown search mode '{mode}' for this index (modes: {', '.join(self.modes())})")
        question = read_question(query, max_chars=10_000)
        if question.problem:
            raise QueryError(question.problem)
        k = K.check(k)
        if mode != "auto" or k > AGENT_K.high:
            return self.toolbox.retriever("hybrid" if mode == "auto" else mode).search(question.text, k=k)
        pending: list[AgentEvent] = []
        generator = self.planner.retrieve(question, ToolSession(self.toolbox), pending, k=k)
        while True:
            try:
                next(generator)
            except StopIteration as stop:
                return stop.value

    def stream(self, question: str, *, mode: str = "auto", k: int = 10, rerank: bool | str | None = False,
               use_llm: bool | None = None) -> Iterator[AgentEvent]:
        """The work on one question as events; the last one is the "answer". Never raises for bad input.
        `rerank`: False/None (no), True or "auto" (the LLM's listwise reranker when the LLM answers, else local
        embeddings), or a reranker of mathscout.limits.RERANKERS."""
        started = time.perf_counter()
        notices: list[str] = []
        try:
            kind = rerank_kind(rerank)
        except MathScoutError as exc:
            notices.append(f"{exc}: no reranking.")
            kind = None
        rerank = kind is not None
        try:
            k, capped = AGENT_K.cap(k)
            if capped:
                notices.append(capped)
        except MathScoutError:
            notices.append(f"k = {k!r} is not a whole number: 10 hits shown.")
            k = 10
        mode = (mode or "auto").strip()
        if mode not in self.modes():
            notices.append(f"The search mode '{mode}' is not available on this index "
                           f"(modes: {', '.join(self.modes())}): auto used.")
            mode = "auto"
        read = read_question(question)
        notices += read.notices
        for notice in notices:
            yield AgentEvent("notice", text=notice)
        if read.problem:
            yield AgentEvent("notice", text=read.problem)
            yield AgentEvent("answer", answer=Answer(question=read.text, text=read.problem, notices=notices + [read.problem],
                                                     planner="none", mode=mode, seconds=time.perf_counter() - started))
            return
        llm, refusal = self._wants_llm(use_llm)
        if refusal:
            notices.append(refusal)
            yield AgentEvent("notice", text=refusal)
        pending: list[AgentEvent] = []
        if llm:  # the listwise LLM reranker on the same endpoint (Zhong 2023 thesis ch. 6 prompt, prompts/rerank_listwise.md)
            endpoint = dict(model=self.config.model, base_url=self.config.base_url, api_key=self.config.key,
                            timeout=self.config.timeout)
            chosen = "llm" if kind in (None, "auto") else kind
            session = ToolSession(self.toolbox, emit=pending.append, rerank_kind=chosen,
                                  rerank_options=endpoint if chosen == "llm" else {}, notices=list(notices))
            try:
                yield from LLMAgent(self.config).stream(read, session, pending, mode=mode, k=k, rerank=rerank,
                                                        started=started)
                return
            except LLMUnavailable as exc:
                notice = f"LLM unavailable ({exc.reason}): offline planner used"
                notices.append(notice)
                pending.clear()
                yield AgentEvent("notice", text=notice)
        chosen = "embedding" if kind in (None, "auto") else kind
        session = ToolSession(self.toolbox, emit=pending.append, rerank_kind=chosen, notices=list(notices))
        yield from self.planner.stream(read, session, pending, mode=mode, k=k, rerank=rerank, started=started)

    def ask(self, question: str, **options) -> Answer:
        """The final answer (see `stream` for the options)."""
        answer = None
        for event in self.stream(question, **options):
            if event.kind == "answer":
                answer = event.answer
        if answer is None:  # pragma: no cover - stream always ends with an answer
            raise MathScoutError("the assistant stopped without an answer")
        return answer
