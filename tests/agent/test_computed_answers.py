"""Answers that compute: the offline planner has SymPy evaluate, simplify, solve, differentiate or integrate the
question's formula in the limited worker, and states the result before the cited passages (issue 20)."""

from __future__ import annotations

import re

import pytest

from mathscout.agent.assistant import Assistant
from mathscout.agent.compose import SUMMARY_HITS, find_citations
from mathscout.question import read_question
from mathscout.rewrite.compute import compute


@pytest.fixture(scope="module")
def assistant(tiny_index):
    return Assistant(tiny_index, use_llm=False)


@pytest.mark.parametrize(
    "question, operation",
    [
        ("What is $\\int_0^1 x^2 dx$", "evaluate"),
        ("simplify $\\frac{x^2-1}{x-1}$", "simplify"),
        ("solve $x^2-5x+6=0$", "solve"),
        ("derivative of $\\sin x^2$", "differentiate"),
        ("Integrate $x e^x$ dx.", "integrate"),
        ("Evaluate $\\sum_{n=1}^\\infty \\frac{1}{n^2}$.", "evaluate"),
        # questions, not orders: nothing is computed
        ("why is the integral of $x^2$ equal to 1/3", None),
        ("Why is $\\int_0^1 x^2 dx = \\frac13$?", None),
        ("How do I simplify $\\frac{t+1}{t}$?", None),
        ("What is the meaning of $\\nabla f$?", None),
        ("what is $a^2+b^2=c^2$", None),
        ("simplify $x+1$ and $x-1$", None),
    ],
)
def test_only_orders_to_compute_are_computed(question, operation):
    assert read_question(question).compute == operation


@pytest.mark.parametrize(
    "question, result",
    [
        ("What is $\\int_0^1 x^2 dx$", "\\int_0^1 x^2 dx = \\frac{1}{3}"),
        ("simplify $\\frac{x^2-1}{x-1}$", "\\frac{x^2-1}{x-1} = x + 1"),
        ("solve $x^2-5x+6=0$", "x \\in \\left\\{2, 3\\right\\}"),
        ("derivative of $\\sin x^2$", "= 2 x \\cos{\\left(x^{2} \\right)}"),
    ],
)
def test_the_answer_states_the_computed_result_first_then_cited_passages(assistant, question, result):
    answer = assistant.ask(question, k=5)
    first, summary, *rest = answer.text.split("\n\n")
    assert first.startswith("**Computed by SymPy:** $") and result in first
    assert summary.startswith("**In short:**")  # a short summary from the best hits, cited
    cited = {i for _, _, ids in find_citations(summary) for i in ids}
    assert cited and cited <= {h.doc_id for h in answer.hits[:SUMMARY_HITS]}  # sentences of the top hits
    assert any(f"[{answer.hits[0].doc_id}]" in part for part in rest)  # then the passages


def test_a_question_that_is_not_an_order_opens_with_the_summary(assistant):
    answer = assistant.ask("why is the integral of $x^2$ from 0 to 1 equal to 1/3", k=5)
    assert "Computed by SymPy" not in answer.text and "Not computed" not in answer.text
    assert answer.text.startswith("**In short:** ") and re.search(r"\[[^\]]+\]", answer.text.split("\n\n")[0])


def test_a_failed_computation_says_so_in_one_line_and_the_answer_goes_on(assistant):
    answer = assistant.ask("What is $\\lim_{x \\to 0} \\frac{\\sin x}{x}$", k=5)
    first, *rest = answer.text.split("\n\n")
    assert first.startswith("**Not computed** (evaluate): SymPy cannot read it") and "\n" not in first
    assert rest[0].startswith("**In short:**") and answer.hits


def test_a_computation_that_runs_too_long_is_stopped_by_the_worker_limit():
    slow = compute("x^{50}+3x^{17}-x+1=0", "solve", seconds=0.5)
    assert slow.statement is None and slow.error == "time limit of 0.5 s reached"
    quick = compute("\\frac{x^2-1}{x-1}", "simplify")  # a fresh worker took over
    assert quick.statement == "\\frac{x^2-1}{x-1} = x + 1"


def test_user_text_is_never_evaluated_as_python():
    hostile = compute("__import__('os').system('true')", "evaluate")
    assert hostile.statement is None and hostile.error


def test_each_hit_of_the_answer_says_what_its_score_is(assistant):

    record = assistant.ask("simplify $\\frac{x^2-1}{x-1}$", k=3).to_dict()
    explained = [hit["score_explained"] for hit in record["hits"]]
    # a formula alone: documents ranked by match tier first (mathscout.structure.search.match_tier)
    top = record["hits"][0]  # the formula's forms fused as structure-rewrite fuses them: its score is tier-ranked
    assert (
        explained[0].startswith(f"tier {top['components']['tier']:.0f}, score {top['score']:.3g} (")
        and "= ranked by match tier" in explained[0]
    )
    assert f"structure {top['components']['structure']:.3g}" in explained[0]
    assert len(explained) == 3 and all("structure" in e for e in explained)
    assert record["text"].startswith("**Computed by SymPy:** $\\frac{x^2-1}{x-1} = x + 1$")


def test_search_scores_say_what_they_are(tiny_index):
    from mathscout.retrievers import open_retriever
    from mathscout.retrievers.scores import explain_score

    bm25 = open_retriever(tiny_index, "bm25").search("integral of $x^2$", k=1)[0]
    assert explain_score(bm25) == f"bm25 {bm25.score:.3g} = Okapi BM25, words + math tokens"
    structure = open_retriever(tiny_index, "structure").search("$\\int_0^1 x^2 dx$", k=1)[0]
    explained = explain_score(structure)
    assert explained.startswith(f"tier {dict(structure.components)['tier']:.0f}, score {structure.score:.3g} (")
    assert explained.endswith(
        "= ranked by match tier, then score (tier 2: holds the formula as written, 1: its whole structure, 0: a part)"
    )


def test_a_formula_asking_for_a_giant_number_is_refused_before_sympy_evaluates_it():
    giant = compute("2^{2^{2^{100}}}", "evaluate")
    assert giant.statement is None and giant.error == "a numeric power too large to evaluate"


def _demo_document(doc_id: str) -> dict:
    """A record of the embedded demo corpus (its area file is named in its id: demo:<area>-NNN)."""
    import json

    from mathscout.config import DEMO_CORPUS

    area = doc_id.removeprefix("demo:").rsplit("-", 1)[0]
    lines = (DEMO_CORPUS / f"{area}.jsonl").read_text(encoding="utf-8").splitlines()
    return next(r for r in map(json.loads, lines) if r["id"] == doc_id)


def test_the_summary_never_cuts_a_formula_open():
    """A period inside `\\[ a^2+b^2=c^2. \\]` ends no sentence, and the length cut keeps a formula whole or drops it:
    the summary's formulas all render (before, it read `hence \\\\&#91; a^2+b^2=c^2.`)."""
    from mathscout.agent.compose import summary_line
    from mathscout.types import Hit

    class HoldsTheFormula:  # a scorer that prefers the sentence holding the question's formula
        name = "formula"

        def signals(self, question, sentences):
            return [{"formulas": float("a^2+b^2=c^2" in s)} for s in sentences]

    record = _demo_document("demo:geometry-001")  # the demo corpus's Pythagorean proof, display math in \[ … \]
    snippet = record["text"].replace("\\[ a^2+b^2=c^2. \\]", "**\\[ a^2+b^2=c^2. \\]**")  # marked as a search marks it
    summary = summary_line(
        [Hit(record["id"], 1.0, 1, snippet=snippet)], {}, read_question("why is $a^2+b^2=c^2$?"), HoldsTheFormula()
    )
    assert "&#91;" not in summary and "\\\\" not in summary
    assert "\\[ a^2+b^2=c^2. \\]" in summary
    long = (
        "Hence " + "x " * 100 + "and \\[ a^2+b^2=c^2 \\] Conversely it holds."
    )  # 220 characters end inside the formula
    cut = summary_line([Hit("d", 1.0, 1, snippet=long)], {})
    assert "\\[" not in cut and cut.endswith("and … [d]")  # the formula dropped whole, not cut open
