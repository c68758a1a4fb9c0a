"""The deterministic offline planner: what the assistant does without an LLM.

For a question it (1) classifies it (formula-only, text-only, mixed), (2) rewrites each formula into
equivalent forms (SymPy, Zhong 2023 thesis ch. 6 future work: "transform an unfamiliar form of a math formula into a
more commonly recognized identity … for structure search"), (3) structure-searches each form and fuses the
forms as the `structure-rewrite` mode does, (4) searches the words with the index's best text retriever, (5) fuses
math and text linearly, (6) optionally reranks, and (7) writes an extractive answer citing `[doc-id]`s. The search
is built from the composition operators (`FormulaRewrite() >> structure`, `w * math + (1 - w) * text`,
`>> reranker`; `mathscout.retrievers.compose`) whose stages are tool calls of a `ToolSession`
(`mathscout.tools.traced`), so the trace is the same kind as the LLM agent's.
"""

from __future__ import annotations

import functools
import re
import threading
import time
from collections.abc import Generator, Iterator
from dataclasses import replace

from mathscout.agent.compose import DenseSentences, LexicalSentences, SentenceScorer, check_citations, extractive_answer
from mathscout.events import AgentEvent, Answer
from mathscout.errors import QueryError
from mathscout.question import Question
from mathscout.render import explain_hits
from mathscout.rewrite.compute import compute
from mathscout.types import Hit, Query, renumbered
from mathscout.retrievers.base import BaseRetriever
from mathscout.retrievers.compose import FormulaRewrite, QueryMap
from mathscout.retrievers.fusion import FusedRetriever, Stage
from mathscout.tools.session import ToolSession
from mathscout.tools.toolbox import ToolBox, ToolOutput
from mathscout.tools.traced import TracedReranker, TracedSearch, no_rewriter, traced_form_search, traced_rewriter

# the math run's weight in the final math/text fusion (Zhong 2023 thesis Eq. 5.20) for a BM25 text run, tuned on train topics
# (200 mixed train topics of the full collection, seeded sample; nDCG@10 of `auto`): 0.588 at 0.1, 0.596 at 0.2,
# 0.600 at 0.3, 0.596 at 0.4. Hybrid (MABOWDOR) and the learned ranker (`ranked`) fuse structure search's scores
# themselves: no separate math run.
MATH_WEIGHTS = {"bm25": 0.3, "hybrid": 0.0, "ranked": 0.0}
DEFAULT_MATH_WEIGHT = 0.3
FORMS_FUSED = "fused by match tier and form weight (Zhong 2023 thesis Eq. 3.14)"  # retrievers/rewrite.py
EVENT_POLL_SECONDS = 0.05  # how often a running search's tool events are passed on
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

    # --- the plan -------------------------------------------------------------------------------------------

    def _auto_plan(self, question: Question, available: set[str]) -> tuple[str | None, float, bool]:
        """(text retriever, math weight, structure-search the formulas?) for mode "auto"; a text retriever
        that fuses structure search itself (hybrid) gets no separate math run for mixed questions."""
        text_mode = self.toolbox.text_mode()
        weight = MATH_WEIGHTS.get(text_mode or "", DEFAULT_MATH_WEIGHT)
        structure = "structure_search" in available and bool(question.formulas) and (
            question.kind == "formula" or weight > 0 or text_mode is None)
        return text_mode, weight, structure

    def describe(self, question: Question, mode: str, rerank: bool) -> str:
        """One line saying what will be done (the "plan" event)."""
        available = set(self.toolbox.available())
        kind = {"formula": "formula-only", "text": "text-only", "mixed": "words and formulas"}[question.kind]
        steps = []
        if mode == "auto":
            text_mode, weight, structure = self._auto_plan(question, available)
            if structure:
                rewrite = "rewrite_formula" in available
                steps.append(("rewrite each formula into equivalent forms (SymPy), " if rewrite else "")
                             + "structure search" + (f" each form, {FORMS_FUSED}" if rewrite else ""))
            if question.kind != "formula" and "type_expansion" in available:
                steps.append("detect mathematical types and their related types")
            if (question.kind != "formula" or not structure) and text_mode:
                steps.append(f"{text_mode} search over the words")
            if structure and question.kind == "mixed" and text_mode:
                steps.append(f"fuse math {weight:g} + text {1 - weight:g}")
        elif mode in ("structure", "structure-rewrite"):
            steps.append(f"rewrite each formula, structure search each form, {FORMS_FUSED}")
        else:
            steps.append(f"{mode} search")
        if rerank:
            steps.append("rerank the top hits" if "rerank" in available else "no reranker installed: keep the order")
        if question.compute:
            steps.insert(0, f"{question.compute} the formula with SymPy (limited worker)")
        steps.append("quote the best passages with their ids")
        return f"{kind} question: " + "; ".join(steps)

    # --- running it ---------------------------------------------------------------------------------------

    def _call(self, session: ToolSession, pending: list[AgentEvent], tool: str, **arguments) -> Generator[AgentEvent, None, ToolOutput | None]:
        call = session.start(tool, arguments)
        yield from _drain(pending)
        output = session.finish(call)
        yield from _drain(pending)
        return output

    def _formula_search(self, session: ToolSession, question: Question, words: str) -> BaseRetriever | None:
        """Structure search of the question's formulas and their equivalent forms, fused as `structure-rewrite` fuses
        them (`FormulaRewrite() >> structure`); each rewrite and each form's search is a tool call. None when the
        structure component cannot be opened (a failed `structure_search` call says why)."""
        try:
            structure = self.toolbox.retriever("structure")
        except Exception as exc:  # noqa: BLE001 — a broken component must not end the answer
            session.run("structure_search", {"formula": question.formulas[0] if question.formulas else ""},
                        lambda: _raise(exc))
            return None
        formulas = QueryMap(lambda _: _formula_query(question, words))
        rewriter = traced_rewriter(session) if "rewrite_formula" in self.toolbox.available() else no_rewriter
        return formulas >> (FormulaRewrite(rewriter=rewriter, search_form=traced_form_search(session, structure)) >> structure)

    def _text_search(self, session: ToolSession, pending: list[AgentEvent], question: Question, mode: str) -> Events:
        """The words' retriever as the traced `search` (or `hybrid_search`) tool; type expansion is called first."""
        if mode in ("auto", "types") and "type_expansion" in self.toolbox.available():  # shown in the trace
            yield from self._call(session, pending, "type_expansion", text=question.text)
        mode = self.toolbox.text_mode() if mode == "auto" else mode
        box = self.toolbox
        if mode == "hybrid":
            return TracedSearch(session, mode, "hybrid_search", lambda q, k: {"query": q.text, "k": k},
                                lambda q, k: box.hybrid_search(q.text, k))
        return TracedSearch(session, mode, "search", lambda q, k: {"query": q.text, "mode": mode, "k": k},
                            lambda q, k: box.search(q.text, mode, k))

    def _run(self, search: BaseRetriever | None, question: Question, session: ToolSession, pending: list[AgentEvent],
             depth: int) -> Events:
        """The hits of a composed search; it runs in a worker thread so that each of its tool calls' events is
        yielded while the search goes on (a tool's start before its result), not all at its end."""
        if search is None:
            return []
        outcome: dict[str, object] = {}

        def work() -> None:
            try:
                outcome["hits"] = search.search(Query(id="question", text=question.text), depth)
            except BaseException as exc:  # handed to the caller's thread below
                outcome["error"] = exc

        worker = threading.Thread(target=work, name="mathscout-search", daemon=True)
        worker.start()
        while worker.is_alive():
            worker.join(EVENT_POLL_SECONDS)
            yield from _drain(pending)
        yield from _drain(pending)
        error = outcome.get("error")
        if isinstance(error, QueryError):
            session.notices.append(str(error))
            return []
        if error is not None:
            raise error
        return outcome["hits"]

    def retrieve(self, question: Question, session: ToolSession, pending: list[AgentEvent], *, mode: str = "auto",
                 k: int = 10, rerank: bool = False) -> Events:
        """The searches of the plan; returns the final top-k hits (events yielded as the tools run)."""
        available = set(self.toolbox.available())
        depth = _depth(k)
        reranker = TracedReranker(session, session.rerank_depth) if rerank and "rerank" in available else None
        if rerank and reranker is None:
            session.notices.append("Reranking was asked for but no reranker is installed: first-stage order kept.")
        if mode == "auto":
            text_mode, weight, structure = self._auto_plan(question, available)
            problem = self.toolbox.ranker_problem()
            if problem:  # an unusable ranker is passed over, and the user told why
                session.notices.append(f"The index's learned ranker is not used, {text_mode or 'structure search'} "
                                       f"searches instead: {problem}")
            math = self._formula_search(session, question, question.words if question.kind == "mixed" and text_mode is None
                                        else "") if structure else None
            wants_text = text_mode and question.kind != "formula"
            text = (yield from self._text_search(session, pending, question, "auto")) if wants_text else None
            search = FusedRetriever([Stage(math, weight), Stage(text, 1.0 - weight)], "linear", depth,
                                    parallel=False) if math and text else (math or text)
            hits = yield from self._run(search, question, session, pending, depth)
            if not hits and text_mode and question.kind == "formula":  # no structure search, or nothing matched
                text = yield from self._text_search(session, pending, question, text_mode)
                hits = yield from self._run(text, question, session, pending, depth)
        elif mode in ("structure", "structure-rewrite"):
            if not question.formulas:
                session.notices.append("Structure search needs a formula: write it between $…$, e.g. $x^2+y^2=z^2$.")
                hits = []
            else:
                search = self._formula_search(session, question, question.words)
                hits = yield from self._run(search, question, session, pending, depth)
        else:
            text = yield from self._text_search(session, pending, question, mode)
            hits = yield from self._run(text, question, session, pending, depth)
        hits = hits[: max(k, session.rerank_depth) if reranker else k]
        if reranker is not None and hits:
            hits = yield from self._run(_Fixed(hits) >> reranker, question, session, pending, len(hits))
        return renumbered([replace(h) for h in hits[:k]])

    def stream(self, question: Question, session: ToolSession, pending: list[AgentEvent], *, mode: str = "auto",
               k: int = 10, rerank: bool = False, started: float | None = None) -> Iterator[AgentEvent]:
        """Plan, search, and stream an extractive answer; the last event is the "answer"."""
        started = time.perf_counter() if started is None else started
        announced = len(session.notices)  # notices from before the plan were already streamed
        yield AgentEvent("plan", text=self.describe(question, mode, rerank))
        computation = None
        if question.compute:  # an order to compute: SymPy in the limited worker, shown first
            computation = compute(question.formulas[0], question.compute)
        hits = yield from self.retrieve(question, session, pending, mode=mode, k=k, rerank=rerank)
        documents = explain_hits(hits, self.toolbox.index.store, question.text)
        text = extractive_answer(question, hits, documents, session.rewrites, session.expansions, computation,
                                 sentence_scorer(self.toolbox, self.summary_model) if hits else None, session.notices)
        for notice in session.notices[announced:]:
            yield AgentEvent("notice", text=notice)
        for piece in _TOKEN.findall(text):
            yield AgentEvent("token", text=piece)
        answer = Answer(question=question.text, text=text, hits=hits,
                        citations=check_citations(text, [h.doc_id for h in hits])[1], trace=list(session.trace),
                        rewrites=list(session.rewrites), expansions=list(session.expansions),
                        notices=list(session.notices), planner=self.name, mode=mode,
                        seconds=time.perf_counter() - started)
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
    return LexicalSentences(bm25 if hasattr(bm25, "query_weights") else None,
                            structure if hasattr(structure, "highlight_idf") else None)


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


def _drain(pending: list[AgentEvent]) -> Iterator[AgentEvent]:
    while pending:
        yield pending.pop(0)

