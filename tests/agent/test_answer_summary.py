"""The offline answer's opening summary picks the sentence of the top hits that answers the question, scored against
the question (formulas included) by the strongest model the index has, and the answer echoes the question with its
formulas (issue 35). On the demo index (bm25 + structure: the lexical scorer) and on demo documents with dense vectors
(the real all-MiniLM-L6-v2 encoder)."""

from __future__ import annotations

import pytest

from mathscout.agent.assistant import Assistant
from mathscout.agent.compose import (
    DenseSentences,
    LexicalSentences,
    find_citations,
    summary_candidates,
    summary_line,
)
from mathscout.agent.offline import sentence_scorer
from mathscout.config import DEMO_CORPUS
from mathscout.question import read_question

PYTHAGORAS = "How do I find all integer solutions of $x^2+y^2=z^2$?"
PARAMETRISATION_DOC = "demo:number-theory-010"  # "All integer solutions of x^2 + y^2 = z^2": x = m^2 - n^2, y = 2mn, …
FERMAT_DOC = "demo:number-theory-020"  # Fermat's Last Theorem: "Contrast n = 2, where x^2+y^2=z^2 has infinitely many solutions."


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    from mathscout.retrievers.indexing import ensure_demo_index

    return Assistant(ensure_demo_index(tmp_path_factory.mktemp("demo") / "index"), use_llm=False)


@pytest.fixture(scope="module")
def demo_dense(tmp_path_factory):
    """bm25, structure and dense vectors over the demo's number theory and geometry documents. Its own build: the
    summaries asserted are the demo documents' sentences, with dense vectors (the tiny index has none)."""
    from mathscout.retrievers.indexing import build_index

    path = tmp_path_factory.mktemp("demo-dense") / "index"
    build_index(
        [DEMO_CORPUS / "number-theory.jsonl", DEMO_CORPUS / "geometry.jsonl"], path, ["bm25", "structure", "dense"]
    )
    return Assistant(path, use_llm=False)


def _summary(answer) -> tuple[str, list[str]]:
    """The "In short" paragraph's first sentence and the documents it cites, in order."""
    summary = next(p for p in answer.text.split("\n\n") if p.startswith("**In short:**"))
    cited = [ids[0] for _, _, ids in find_citations(summary)]
    return summary.removeprefix("**In short:** ").split(f" [{cited[0]}]")[0], cited


def _states_the_parametrisation(sentence: str) -> bool:
    plain = sentence.replace(" ", "")
    return all(part in plain for part in ("m^2-n^2", "2mn", "m^2+n^2"))


def test_the_pythagorean_summary_leads_with_the_parametrisation_not_the_fermat_aside(demo):
    answer = demo.ask(PYTHAGORAS, k=10)
    assert [h.doc_id for h in answer.hits[:2]] == [FERMAT_DOC, PARAMETRISATION_DOC]  # the search ranks Fermat first…
    first, cited = _summary(answer)
    assert cited[0] == PARAMETRISATION_DOC and _states_the_parametrisation(first)  # …the summary reads on and answers
    assert not first.startswith("Contrast") and FERMAT_DOC in cited[1:]  # the aside may follow, second


def test_the_answer_echoes_the_question_with_its_formula(demo):
    text = demo.ask(PYTHAGORAS, k=5).text
    assert "Documents matching “How do I find all integer solutions of $x^2+y^2=z^2$?”" in text
    assert "solutions of?" not in text


def test_a_long_echo_is_cut_outside_its_formulas(demo):
    words = (
        "Given a right triangle whose legs and hypotenuse are all positive whole numbers, and given that the three "
        "lengths satisfy the known relation "
    )
    formula = "$\\frac{a^2+b^2}{c^2} = 1$"
    assert len(words) < 160 < len(words) + len(formula)  # the echo's 160 characters end inside the formula
    question = words + formula + ", how do I list them?"
    lead = next(p for p in demo.ask(question, k=3).text.split("\n\n") if p.startswith("Documents matching"))
    echoed = lead.split("“", 1)[1].split("”", 1)[0]
    assert echoed.endswith(" …") and "\\frac{a^2+b^2}" not in echoed and echoed.count("$") % 2 == 0


@pytest.mark.model
@pytest.mark.slow
def test_the_scorer_is_the_strongest_model_the_index_has(demo, demo_dense):
    lexical = sentence_scorer(demo.toolbox)
    assert isinstance(lexical, LexicalSentences) and lexical.bm25 is not None and lexical.structure is not None
    dense = sentence_scorer(demo_dense.toolbox)
    assert isinstance(dense, DenseSentences)
    assert dense.encoder is demo_dense.toolbox.retriever("dense").encoder  # the index's own encoder, not another
    assert sentence_scorer(demo.toolbox, "none") is None


@pytest.mark.model
@pytest.mark.slow
def test_with_dense_vectors_the_summary_also_leads_with_the_parametrisation(demo_dense):
    answer = demo_dense.ask(PYTHAGORAS, k=10)
    first, cited = _summary(answer)
    assert cited[0] == PARAMETRISATION_DOC and _states_the_parametrisation(first)


def test_sentences_are_scored_with_their_formulas(demo):
    """The lexical scorer reads the formulas: the sentence that holds the question's equation scores 1 on formulas,
    one with only other formulas less, one without a formula 0; the question itself scores 1 on both (the scale)."""
    question = read_question(PYTHAGORAS)
    rows = sentence_scorer(demo.toolbox).signals(
        question,
        [
            "Contrast $n = 2$, where $x^2+y^2=z^2$ has infinitely many solutions.",
            "Primitive triples are exactly $$x = m^2 - n^2,\\quad y = 2mn,\\quad z = m^2 + n^2.$$",
            "All other solutions are multiples of these.",
        ],
    )
    assert rows[0]["formulas"] == pytest.approx(1.0) and 0 < rows[1]["formulas"] < 1 and rows[2]["formulas"] == 0
    assert all(0 < row["words"] < 1 for row in rows) and rows[0]["words"] > rows[2]["words"]  # "solutions", its formula
    assert sentence_scorer(demo.toolbox).signals(question, [PYTHAGORAS]) == [{"words": 1.0, "formulas": 1.0}]


def test_a_failing_scorer_leaves_the_hits_order_and_says_why(demo):
    class Broken:
        name = "broken"

        def signals(self, question, sentences):
            raise RuntimeError("model file damaged")

    answer = demo.ask(PYTHAGORAS, k=10)
    documents = demo.toolbox.index.store.get_many(h.doc_id for h in answer.hits)
    notices: list[str] = []
    line = summary_line(answer.hits, documents, read_question(PYTHAGORAS), Broken(), notices)
    cited = [ids[0] for _, _, ids in find_citations(line)]
    assert cited == [h.doc_id for h in answer.hits[:2]]  # the best hits' first sentences
    assert notices == [
        "The summary's broken sentence scores failed (model file damaged): the best hits' first sentences are quoted."
    ]


def test_candidates_are_the_whole_sentences_of_the_top_hits(demo):
    answer = demo.ask(PYTHAGORAS, k=10)
    documents = demo.toolbox.index.store.get_many(h.doc_id for h in answer.hits)
    candidates = summary_candidates(answer.hits, documents, depth=3)
    assert {c.rank for c in candidates} == {1, 2, 3}
    parametrisation = [c.sentence for c in candidates if c.doc_id == PARAMETRISATION_DOC]
    assert parametrisation[0].startswith("Primitive Pythagorean triples") and "$$x = m^2 - n^2" in parametrisation[0]
    assert all(c.sentence.count("$") % 2 == 0 for c in candidates)  # no formula cut open
