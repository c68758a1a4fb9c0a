"""The deterministic offline planner: what the assistant does without an LLM.

For a question it (1) classifies it (formula-only, text-only, mixed), (2) rewrites each formula into
equivalent forms (SymPy, Zhong 2023 thesis ch. 6 future work: "transform an unfamiliar form of a math formula into a
more commonly recognized identity … for structure search"), (3) structure-searches each form and fuses the
forms as the `structure-rewrite` mode does, (4) searches the words with the index's best text retriever, (5) fuses
math and text linearly, (6) optionally reranks, and (7) writes an extractive answer citing `[doc-id]`s. The search
is built from the composition operators (`FormulaRewrite() >> structure`, `w * math + (1 - w) * text`,
`>> reranker`; `mathscout.retrievers.compose`) whose stages are tool calls of a `ToolSession`
(`mathscout.tools.traced`), so the trace is the same kind as the LLM agent's. What is done is decided once, as a
`Plan` (`mathscout.agent.plan`): the "plan" event describes that object and `run` runs it; the tools' events reach
the stream through a queue as they happen.
"""

from __future__ import annotations

import contextvars
import functools
import re
import threading
import time
from collections.abc import Generator, Iterator
from dataclasses import replace
from typing import cast

from mathscout.agent.compose import DenseSentences, LexicalSentences, SentenceScorer, check_citations, extractive_answer
from mathscout.agent.plan import Plan, TextSearch
from mathscout.clients import CLIENT
from mathscout.dense.cross import CROSS_DEPTH
from mathscout.errors import QueryError
from mathscout.events import AgentEvent, Answer, EventQueue, drain
from mathscout.options import MODE
from mathscout.question import Question
from mathscout.render import explain_hits
from mathscout.retrievers.base import BaseRetriever
from mathscout.retrievers.compose import FormulaRewrite, QueryMap
from mathscout.retrievers.fusion import FusedRetriever, Stage
from mathscout.retrievers.rewrite import StructureSearch
from mathscout.rewrite.compute import compute
from mathscout.tools.session import ToolSession
from mathscout.tools.toolbox import ToolBox, ToolOutput
from mathscout.tools.traced import TracedReranker, TracedSearch, no_rewriter, traced_form_search, traced_rewriter
from mathscout.types import Hit, Query, renumbered

_TOKEN = re.compile(r"\S+\s*|\s+")

Events = Generator[AgentEvent, None, "list[Hit]"]


def _depth(k: int) -> int:
    """Hits fetched per search before fusing (more than k, within the tools' bound)."""
    return min(50, max(2 * k, 20))


class OfflinePlanner:
    """Plans and runs the searches for one question without an LLM; `stream` yields AgentEvents. `summary_model`
    scores the summary's sentences: "auto" (the strongest model the index has), "dense", "lexical" or "none"."""

    name = "offline"

    def __init__(self, toolbox: ToolBox, summary_model: str = "auto"):
        self.toolbox = toolbox
        self.summary_model = summary_model

    def _call(
        self, session: ToolSession, events: EventQueue, tool: str, **arguments
    ) -> Generator[AgentEvent, None, ToolOutput | None]:
        call = session.start(tool, arguments)
        yield from drain(events)
        output = session.finish(call)
        yield from drain(events)
        return output

    def _formula_search(self, session: ToolSession, question: Question, plan: Plan) -> BaseRetriever | None:
        """Structure search of the question's formulas and their equivalent forms, fused as `structure-rewrite` fuses
        them (`FormulaRewrite() >> structure`); each rewrite and each form's search is a tool call. None when the
        structure component cannot be opened (a failed `structure_search` call says why)."""
        try:
            # the structure mode: one index's StructureRetriever or a sharded index's ShardedStructure
            structure = cast(StructureSearch, self.toolbox.retriever("structure"))
        except Exception as exc:  # noqa: BLE001 — a broken component must not end the answer
            error = exc  # the call's work raises it (`exc` is unbound after the except clause)
            session.run(
                "structure_search",
                {"formula": question.formulas[0] if question.formulas else ""},
                lambda: _raise(error),
            )
            return None
        formulas = QueryMap(lambda _: _formula_query(question, plan.formula_words))
        rewriter = traced_rewriter(session) if plan.rewrite else no_rewriter
        return formulas >> (
            FormulaRewrite(rewriter=rewriter, search_form=traced_form_search(session, structure)) >> structure
        )

    def _text_search(
        self, session: ToolSession, events: EventQueue, question: Question, step: TextSearch
    ) -> Generator[AgentEvent, None, TracedSearch]:
        """The step's retriever as the traced `search` (or `hybrid_search`) tool; type expansion is called first."""
        if step.expand_types:  # shown in the trace
            yield from self._call(session, events, "type_expansion", text=question.text)
        mode, box = step.mode, self.toolbox
        if mode == "hybrid":
            return TracedSearch(
                session,
                mode,
                "hybrid_search",
                lambda q, k: {"query": q.text, "k": k},
                lambda q, k: box.hybrid_search(q.text, k),
            )
        return TracedSearch(
            session,
            mode,
            "search",
            lambda q, k: {"query": q.text, "mode": mode, "k": k},
            lambda q, k: box.search(q.text, mode, k),
        )

    def _run(
        self, search: BaseRetriever | None, question: Question, session: ToolSession, events: EventQueue, depth: int
    ) -> Events:
        """The hits of a composed search; it runs in a worker thread so that each of its tool calls' events is
        yielded as it is queued (a tool's start before its result), not all at its end."""
        if search is None:
            return []
        found: list[list[Hit]] = []
        failed: list[BaseException] = []
        client = CLIENT.get()

        def work() -> None:
            CLIENT.set(client)  # the question's client goes with its search (the SymPy workers' turns)
            try:
                found.append(search.search(Query(id="question", text=question.text), depth))
            except BaseException as exc:  # noqa: BLE001 — handed to the caller's thread below
                failed.append(exc)
            finally:
                events.put(_FINISHED)

        # in a copy of this thread's context: what the search says reaches the caller's notice collectors
        context = contextvars.copy_context()
        threading.Thread(target=context.run, args=(work,), name="mathscout-search", daemon=True).start()
        while (event := events.get()) is not _FINISHED:
            yield event
        error = failed[0] if failed else None
        if isinstance(error, QueryError):
            session.notices.append(str(error))
            return []
        if error is not None:
            raise error
        return found[0]

    def run(self, plan: Plan, question: Question, session: ToolSession, events: EventQueue, k: int = 10) -> Events:
        """The plan's searches; returns the final top-k hits (the tools' events yielded as they run)."""
        session.notices.extend(plan.notices)
        if plan.cross:  # the plan's own reranking: the index's cross-encoder over the top CROSS_DEPTH
            session.rerank_kind, session.rerank_options, session.rerank_depth = "cross", {}, CROSS_DEPTH
        reranker = TracedReranker(session, session.rerank_depth) if plan.reranker or plan.cross else None
        # every hit the reranker was asked to reorder is fetched (--rerank-depth 100 reranks 100, not the usual 50)
        depth = max(_depth(k), session.rerank_depth) if reranker else _depth(k)
        math = self._formula_search(session, question, plan) if plan.formulas else None
        text = (yield from self._text_search(session, events, question, plan.text)) if plan.text else None
        search = (
            FusedRetriever(
                [Stage(math, plan.math_weight), Stage(text, 1.0 - plan.math_weight)], "linear", depth, parallel=False
            )
            if math and text
            else (math or text)
        )
        hits = yield from self._run(search, question, session, events, depth)
        if not hits and plan.fallback:  # e.g. no formula matched a formula-only question
            text = yield from self._text_search(session, events, question, plan.fallback)
            hits = yield from self._run(text, question, session, events, depth)
        hits = hits[: max(k, session.rerank_depth) if reranker else k]
        if reranker is not None and hits:
            hits = yield from self._run(_Fixed(hits) >> reranker, question, session, events, len(hits))
        return renumbered([replace(h) for h in hits[:k]])

    def stream(
        self,
        question: Question,
        session: ToolSession,
        events: EventQueue,
        *,
        mode: str = MODE.default,
        k: int = 10,
        rerank: bool = False,
        started: float | None = None,
    ) -> Iterator[AgentEvent]:
        """Plan, search, and stream an extractive answer; the last event is the "answer"."""
        started = time.perf_counter() if started is None else started
        announced = len(session.notices)  # notices from before the plan were already streamed
        plan = Plan.make(self.toolbox, question, mode, rerank)
        yield AgentEvent("plan", text=plan.describe())
        computation = None
        if plan.compute:  # an order to compute: SymPy in the limited worker, shown first
            computation = compute(question.formulas[0], plan.compute)
        hits = yield from self.run(plan, question, session, events, k)
        documents = explain_hits(hits, self.toolbox.index.store, question.text)
        text = extractive_answer(
            question,
            hits,
            documents,
            session.rewrites,
            session.expansions,
            computation,
            sentence_scorer(self.toolbox, self.summary_model) if hits else None,
            session.notices,
        )
        for notice in session.notices[announced:]:
            yield AgentEvent("notice", text=notice)
        for piece in _TOKEN.findall(text):
            yield AgentEvent("token", text=piece)
        answer = Answer(
            question=question.text,
            text=text,
            hits=hits,
            citations=check_citations(text, [h.doc_id for h in hits])[1],
            trace=list(session.trace),
            rewrites=list(session.rewrites),
            expansions=list(session.expansions),
            notices=list(session.notices),
            planner=self.name,
            mode=mode,
            seconds=time.perf_counter() - started,
        )
        yield AgentEvent("answer", text="", answer=answer)


SUMMARY_MODELS = ("auto", "dense", "lexical", "none")


def sentence_scorer(toolbox: ToolBox, model: str = "auto") -> SentenceScorer | None:
    """What scores the summary's sentences against the question: "auto" takes the index's dense encoder when it has
    dense vectors (the model its vectors were made with), else BM25 and structure similarity over its own statistics;
    "dense" takes the index's encoder or, without dense vectors, the default one (mathscout.dense, ONNX int8)."""
    if model not in SUMMARY_MODELS:
        raise QueryError(f"unknown summary model '{model}' (available: {', '.join(SUMMARY_MODELS)})")
    if model == "none":
        return None
    components = toolbox.index.components
    dense = _opened(toolbox, "dense") if model in ("auto", "dense") and "dense" in components else None
    encoder = _encoder_of(dense) if dense is not None else None
    if encoder is not None:
        return DenseSentences(encoder)
    if model == "dense":
        return DenseSentences(_default_encoder())
    bm25 = _opened(toolbox, "bm25") if "bm25" in components else None
    structure = _opened(toolbox, "structure") if "structure" in components else None
    return LexicalSentences(
        bm25 if hasattr(bm25, "query_weights") else None, structure if hasattr(structure, "highlight_idf") else None
    )


@functools.cache
def _default_encoder():
    from mathscout.dense.encoder import Encoder

    return Encoder()


def _encoder_of(dense):
    """The query encoder of an opened dense retriever (single or sharded), or None when it cannot be loaded."""
    try:
        return getattr(dense, "encoder", None)
    except Exception:  # noqa: BLE001 — e.g. the model folder is gone: the summary does without it
        return None


def _opened(toolbox: ToolBox, mode: str):
    """The toolbox's retriever of `mode`, or None when it cannot be opened (its search says why)."""
    try:
        return toolbox.retriever(mode)
    except Exception:  # noqa: BLE001 — the summary does without it
        return None


def _formula_query(question: Question, words: str) -> Query:
    """What structure search is given: the question's chosen formulas (one alone as the topic formula), with `words`
    when no text retriever searches them."""
    if len(question.formulas) == 1 and not words:
        return Query(id="question", text="", formula=question.formulas[0])
    return Query(id="question", text=" ".join([words, *(f"${f}$" for f in question.formulas)]).strip())


class _Fixed(BaseRetriever):
    """Hits already found, as the first stage of `>> reranker`."""

    name = "planned"

    def __init__(self, hits: list[Hit]):
        self.hits = hits

    def _search(self, query: Query, k: int) -> list[Hit]:
        return self.hits[:k]


def _raise(exc: Exception) -> ToolOutput:
    raise exc


_FINISHED = AgentEvent("notice", text="the search finished")  # queued by `_run`'s worker after its last event
