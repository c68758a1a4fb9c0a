"""What the offline planner does for one question, decided once: `Plan.make` builds it, `Plan.describe` says it (the
"plan" event) and `OfflinePlanner.run` runs that same object."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mathscout.dense.cross import CROSS_DEPTH
from mathscout.options import AUTO
from mathscout.question import Question, QuestionKind
from mathscout.tools.toolbox import ToolBox

# the math run's weight in the final math/text fusion (Zhong 2023 thesis Eq. 5.20) for a BM25 text run, tuned on train topics
# (200 mixed train topics of the full collection, seeded sample; nDCG@10 of `auto`): 0.588 at 0.1, 0.596 at 0.2,
# 0.600 at 0.3, 0.596 at 0.4. Hybrid (MABOWDOR) and the learned ranker (`ranked`) fuse structure search's scores
# themselves: no separate math run.
MATH_WEIGHTS = {"bm25": 0.3, "hybrid": 0.0, "ranked": 0.0}
DEFAULT_MATH_WEIGHT = 0.3
FORMS_FUSED = "fused by match tier and form weight (Zhong 2023 thesis Eq. 3.14)"  # retrievers/rewrite.py
NO_RERANKER = "Reranking was asked for but no reranker is installed: first-stage order kept."
NO_FORMULA = "Structure search needs a formula: write it between $…$, e.g. $x^2+y^2=z^2$."
KINDS = {"formula": "formula-only", "text": "text-only", "mixed": "words and formulas"}


@dataclass(frozen=True)
class TextSearch:
    """A search of the question by one retriever (`hybrid` runs as the hybrid_search tool, any other as search)."""

    mode: str
    expand_types: bool = False  # the type_expansion tool is called first (shown in the trace)

    def steps(self, words: bool) -> list[str]:
        search = f"{self.mode} search" + (" over the words" if words else "")
        return ["detect mathematical types and their related types", search] if self.expand_types else [search]


@dataclass(frozen=True)
class Plan:
    """The steps for one question in the order they run; a search left out is None/False."""

    mode: str  # the search mode asked for
    kind: QuestionKind
    compute: str | None = None  # an order on the first formula, run with SymPy before the searches
    formulas: bool = False  # structure-search the question's formulas …
    rewrite: bool = False  # … and their equivalent forms (SymPy), fused by match tier
    formula_words: str = ""  # the words structure search is given with the formulas
    text: TextSearch | None = None  # the text search, fused with the formulas' when both run
    math_weight: float = DEFAULT_MATH_WEIGHT  # the formulas' weight in that fusion
    fallback: TextSearch | None = None  # run when the searches above find nothing
    rerank: bool = False  # reranking was asked for …
    reranker: bool = False  # … and a reranker is installed
    cross: bool = False  # `auto`, no reranker asked: the cross-encoder reranks the top CROSS_DEPTH (measured to help)
    notices: tuple[str, ...] = ()  # said when the plan starts to run

    @classmethod
    def make(cls, toolbox: ToolBox, question: Question, mode: str, rerank: bool = False) -> Plan:
        """The plan for `question` in `mode` over what `toolbox`'s index offers."""
        available = set(toolbox.available())
        types = "type_expansion" in available
        reranker = rerank and "rerank" in available
        common: dict[str, Any] = dict(
            mode=mode,
            kind=question.kind,
            compute=question.compute,
            rerank=rerank,
            reranker=reranker,
            notices=(NO_RERANKER,) if rerank and not reranker else (),
        )
        if mode == AUTO:
            return cls._auto(toolbox, question, available, **common)
        if mode in ("structure", "structure-rewrite"):
            if not question.formulas:
                return cls(**{**common, "notices": (*common["notices"], NO_FORMULA)})
            return cls(**common, formulas=True, rewrite="rewrite_formula" in available, formula_words=question.words)
        return cls(**common, text=TextSearch(mode, mode == "types" and types))

    @classmethod
    def _auto(cls, toolbox: ToolBox, question: Question, available: set[str], **common) -> Plan:
        """`auto`: the formulas by structure search (with their rewrites) and the words by the index's best text
        retriever, fused; a text retriever that fuses structure search itself (hybrid, ranked) gets no separate math
        run for mixed questions. A formula-only question falls back to the text retriever when no formula matches."""
        text_mode = toolbox.text_mode()
        if text_mode is None and question.kind == "text" and toolbox.mode_usable("structure"):
            text_mode = "structure"  # an index without Lucene's bm25 (a core install): structure search's text lists
        weight = MATH_WEIGHTS.get(text_mode or "", DEFAULT_MATH_WEIGHT)
        formulas = (
            "structure_search" in available
            and bool(question.formulas)
            and (question.kind == "formula" or weight > 0 or text_mode is None)
        )
        problem = toolbox.ranker_problem()
        if problem:  # an unusable ranker is passed over, and the user told why
            common["notices"] += (
                f"The index's learned ranker is not used, {text_mode or 'structure search'} "
                f"searches instead: {problem}",
            )
        words = question.kind != "formula"
        types = "type_expansion" in available
        # the trained cross-encoder reads the question with each of the top hits where its training measured a gain over
        # the text search (issue 34: bm25 dev nDCG@10 +5.4 %, p = 0.009; over the learned ranker it loses 0.718 → 0.627,
        # and training measures only the stages it mined from), unless a reranker was asked for
        cross = not common["rerank"] and "rerank" in available and toolbox.cross_encoder_helps(text_mode or "structure")
        return cls(
            **common,
            cross=cross,
            formulas=formulas,
            rewrite="rewrite_formula" in available,
            formula_words=question.words if question.kind == "mixed" and text_mode is None else "",
            text=TextSearch(text_mode, types) if text_mode and words else None,
            math_weight=weight,
            fallback=TextSearch(text_mode, text_mode == "types" and types) if text_mode and not words else None,
        )

    def describe(self) -> str:
        """One line saying what will be done."""
        steps = [f"{self.compute} the formula with SymPy (limited worker)"] if self.compute else []
        if self.formulas:
            steps.append(
                ("rewrite each formula into equivalent forms (SymPy), " if self.rewrite else "")
                + "structure search"
                + (f" each form, {FORMS_FUSED}" if self.rewrite else "")
            )
        words = self.mode == AUTO
        if self.text:
            steps += self.text.steps(words)
        if self.formulas and self.text:
            steps.append(f"fuse math {self.math_weight:g} + text {1 - self.math_weight:g}")
        if self.fallback:
            steps += [
                ("if no formula matches, " if self.formulas else "") + step for step in self.fallback.steps(words)
            ]
        if self.rerank:
            steps.append("rerank the top hits" if self.reranker else "no reranker installed: keep the order")
        if self.cross:
            steps.append(f"rerank the top {CROSS_DEPTH} with the index's cross-encoder")
        steps.append("quote the best passages with their ids")
        return f"{KINDS[self.kind]} question: " + "; ".join(steps)
