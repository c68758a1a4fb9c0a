"""The deterministic offline planner: what the assistant does without an LLM.

For a question it (1) classifies it (formula-only, text-only, mixed), (2) rewrites each formula into
equivalent forms (SymPy, thesis ch. 6 future work: "transform an unfamiliar form of a math formula into a
more commonly recognized identity … for structure search"), (3) structure-searches each form and fuses the
forms by max, (4) searches the words with the index's best text retriever, (5) fuses math and text
linearly, (6) optionally reranks, and (7) writes an extractive answer citing `[doc-id]`s. Every step goes
through a `ToolSession`, so the trace is the same as the LLM agent's.
"""

from __future__ import annotations

import re
import time
from collections.abc import Generator, Iterator
from dataclasses import replace

from mathscout.agent.compose import extractive_answer
from mathscout.events import AgentEvent, Answer
from mathscout.question import Question
from mathscout.render import explain_hits
from mathscout.rewrite.compute import compute
from mathscout.types import Hit
from mathscout.retrievers.fusion import fuse
from mathscout.tools.session import ToolSession
from mathscout.tools.toolbox import ToolBox, ToolOutput

REWRITE_WEIGHT = 0.9  # an equivalent form's hits count slightly less than the formula as asked
# the math run's weight in the final math/text fusion (Eq. 5.20), per text retriever, tuned on dev topics 101-200 of
# the full collection (nDCG@10). BM25 text: 0.443 text only, 0.479 at 0.3, 0.490 at 0.4, 0.467 at 0.5, 0.437 at 0.6.
# Hybrid text (MABOWDOR, which fuses structure search itself): 0.598 at 0, 0.593 at 0.1, 0.595 at 0.2, 0.563 at 0.4.
# The learned ranker (`ranked`) sees structure search's scores among its features, as hybrid does: no separate math run.
MATH_WEIGHTS = {"bm25": 0.4, "hybrid": 0.0, "ranked": 0.0}
DEFAULT_MATH_WEIGHT = 0.4
FORMS_PER_FORMULA = 3  # equivalent forms searched per formula (each is one structure search)
RERANK_DEPTH = 20  # hits handed to the reranker
_TOKEN = re.compile(r"\S+\s*|\s+")

Events = Generator[AgentEvent, None, "list[Hit]"]


def _depth(k: int) -> int:
    """Hits fetched per search before fusing (more than k, within the tools' bound)."""
    return min(50, max(2 * k, 20))


def max_fusion(runs: list[tuple[list[Hit], float]]) -> list[Hit]:
    """Fuse runs of the same formula's forms: a document's score is its best weighted, top-normalised score."""
    best: dict[str, Hit] = {}
    for hits, weight in runs:
        top = max((h.score for h in hits), default=0.0)
        if top <= 0:
            continue
        for hit in hits:
            score = weight * hit.score / top
            kept = best.get(hit.doc_id)
            if kept is None or score > kept.score:
                best[hit.doc_id] = replace(hit, score=score, formulas=hit.formulas or (kept.formulas if kept else []),
                                           snippet=hit.snippet or (kept.snippet if kept else ""))
    return _ranked(best.values())


def sum_fusion(runs: list[list[Hit]]) -> list[Hit]:
    """Several formulas of one question: documents add up their per-formula scores (as Eq. 3.18 sums formulas)."""
    total: dict[str, Hit] = {}
    for hits in runs:
        for hit in hits:
            kept = total.get(hit.doc_id)
            total[hit.doc_id] = replace(hit) if kept is None else replace(
                kept, score=kept.score + hit.score, formulas=kept.formulas + hit.formulas[:1])
    return _ranked(total.values())


def linear_fusion(math: list[Hit], text: list[Hit], k: int, math_weight: float = DEFAULT_MATH_WEIGHT) -> list[Hit]:
    """Math and text rankings fused by min-max-normalised weighted sum (thesis Eq. 5.20)."""
    by_doc = {h.doc_id: h for h in text} | {h.doc_id: h for h in math}  # math hits keep their matched formulas
    fused = fuse([{h.doc_id: h.score for h in math}, {h.doc_id: h.score for h in text}],
                 [math_weight, 1.0 - math_weight], "linear", k=k)
    text_ids = {h.doc_id: h for h in text}
    hits = []
    for doc_id, score in fused:
        hit = replace(by_doc[doc_id], score=score)
        if not hit.snippet and doc_id in text_ids:
            hit.snippet = text_ids[doc_id].snippet
        hits.append(hit)
    return _ranked(hits)


def _ranked(hits) -> list[Hit]:
    ordered = sorted(hits, key=lambda h: (-h.score, h.doc_id))
    for rank, hit in enumerate(ordered, start=1):
        hit.rank = rank
    return ordered


class OfflinePlanner:
    """Plans and runs the searches for one question without an LLM; `stream` yields AgentEvents."""

    name = "offline"

    def __init__(self, toolbox: ToolBox):
        self.toolbox = toolbox

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
                             + "structure search" + (" each form, fused by max" if rewrite else ""))
            if question.kind != "formula" and "type_expansion" in available:
                steps.append("detect mathematical types and their related types")
            if (question.kind != "formula" or not structure) and text_mode:
                steps.append(f"{text_mode} search over the words")
            if structure and question.kind == "mixed" and text_mode:
                steps.append(f"fuse math {weight:g} + text {1 - weight:g}")
        elif mode in ("structure", "structure-rewrite"):
            steps.append("rewrite each formula, structure search each form, fused by max")
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

    def _formula_hits(self, question: Question, session: ToolSession, pending: list[AgentEvent], k: int,
                      words: str) -> Events:
        """Structure search of each formula and its equivalent forms, max-fused per formula, summed over formulas."""
        rewrite = "rewrite_formula" in self.toolbox.available()
        per_formula = []
        for latex in question.formulas:
            forms = [(latex, 1.0)]
            if rewrite:
                output = yield from self._call(session, pending, "rewrite_formula", latex=latex)
                if output is not None:
                    forms += [(r.rewritten, REWRITE_WEIGHT) for r in output.rewrites[:FORMS_PER_FORMULA]]
            runs = []
            for form, weight in forms:
                arguments = {"formula": form, "k": _depth(k)}
                if words:
                    arguments["words"] = words
                output = yield from self._call(session, pending, "structure_search", **arguments)
                if output is not None:
                    runs.append((output.hits, weight))
            per_formula.append(max_fusion(runs))
        return sum_fusion(per_formula) if len(per_formula) > 1 else (per_formula[0] if per_formula else [])

    def _text_hits(self, query: str, session: ToolSession, pending: list[AgentEvent], k: int, mode: str) -> Events:
        if mode in ("auto", "types") and "type_expansion" in self.toolbox.available():  # shown in the trace
            yield from self._call(session, pending, "type_expansion", text=query)
        mode = self.toolbox.text_mode() if mode == "auto" else mode
        if mode == "hybrid":
            output = yield from self._call(session, pending, "hybrid_search", query=query, k=_depth(k))
        else:
            output = yield from self._call(session, pending, "search", query=query, mode=mode, k=_depth(k))
        return output.hits if output is not None else []

    def retrieve(self, question: Question, session: ToolSession, pending: list[AgentEvent], *, mode: str = "auto",
                 k: int = 10, rerank: bool = False) -> Events:
        """The searches of the plan; returns the final top-k hits (events yielded as the tools run)."""
        available = set(self.toolbox.available())
        math: list[Hit] = []
        text: list[Hit] = []
        if mode == "auto":
            text_mode, weight, structure = self._auto_plan(question, available)
            if structure:
                words = question.words if question.kind == "mixed" and text_mode is None else ""
                math = yield from self._formula_hits(question, session, pending, k, words)
            if text_mode and (question.kind != "formula" or not math):
                text = yield from self._text_hits(question.text, session, pending, k,
                                                  "auto" if question.kind != "formula" else text_mode)
            hits = linear_fusion(math, text, _depth(k), weight) if math and text else (math or text)
        elif mode in ("structure", "structure-rewrite"):
            if not question.formulas:
                session.notices.append("Structure search needs a formula: write it between $…$, e.g. $x^2+y^2=z^2$.")
                hits = []
            else:
                hits = yield from self._formula_hits(question, session, pending, k, question.words)
        else:
            hits = yield from self._text_hits(question.text, session, pending, k, mode)
        hits = hits[: max(k, RERANK_DEPTH if rerank else k)]
        if rerank and hits:
            if "rerank" in available:
                top = hits[:RERANK_DEPTH]
                output = yield from self._call(session, pending, "rerank", query=question.text,
                                               hit_ids=[h.doc_id for h in top])
                if output is not None:
                    hits = output.hits + hits[len(top):]
            else:
                session.notices.append("Reranking was asked for but no reranker is installed: first-stage order kept.")
        hits = [replace(h) for h in hits[:k]]
        for rank, hit in enumerate(hits, start=1):
            hit.rank = rank
        return hits

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
        for notice in session.notices[announced:]:
            yield AgentEvent("notice", text=notice)
        text = extractive_answer(question, hits, documents, session.rewrites, session.expansions, computation)
        for piece in _TOKEN.findall(text):
            yield AgentEvent("token", text=piece)
        answer = Answer(question=question.text, text=text, hits=hits,
                        citations=[h.doc_id for h in hits[:7] if f"[{h.doc_id}]" in text], trace=list(session.trace),
                        rewrites=list(session.rewrites), expansions=list(session.expansions),
                        notices=list(session.notices), planner=self.name, mode=mode,
                        seconds=time.perf_counter() - started)
        yield AgentEvent("answer", text="", answer=answer)


def _drain(pending: list[AgentEvent]) -> Iterator[AgentEvent]:
    while pending:
        yield pending.pop(0)

