"""Formula-only queries keep structure search's strengths whatever setting was tuned for questions.

A question-tuned setting (Eq. 3.18 with a small λ_m and BM25 over the whole query) lets a formula-only query's
own math tokens outweigh its structure: a query with renamed variables then loses its source document. The
structure mode ranks formula-only queries by structure similarity alone unless a setting fitted on formula
queries says otherwise; this pins it on real collection formulas, with and without SymPy rewriting."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from mathscout.evaluation.formula_queries import subexpression
from mathscout.index.layout import IndexDir
from mathscout.retrievers import open_retriever
from mathscout.structure import scoring
from mathscout.structure.parser import parse_latex
from mathscout.structure.paths import leaf_count, path_prefixes
from mathscout.types import Query

QUESTION_TUNED = {"lambda_m": 0.1, "max_formulas": 0, "text": "full", "tuned_on": "train topics (test)"}
_LETTER = re.compile(r"(?<![\\A-Za-z])([a-z])(?![A-Za-z])")


def rename_variables(latex: str) -> str | None:
    """The formula with its single-letter variables renamed consistently (a → r, b → s, …), None if it has
    fewer than two."""
    letters = sorted(set(_LETTER.findall(latex)))
    if len(letters) < 2:
        return None
    unused = [c for c in "rstuvwpqmnghk" if c not in letters]
    mapping = dict(zip(letters, unused))
    return _LETTER.sub(lambda m: mapping.get(m.group(1), m.group(1)), latex)


@pytest.fixture(scope="module")
def renamed_queries(small_index) -> list[tuple[str, str]]:
    """(renamed formula, source document) for real formulas that structure search alone finds from their
    renamed form: the source document first, strictly ahead of the next one (Approach Zero's invariance)."""
    index = IndexDir(small_index)
    structure = open_retriever(index, "structure", formula_text="words")
    picked: list[tuple[str, str]] = []
    seen: set[str] = set()
    for _, formula in index.store.iter_formulas():
        latex = formula.latex.strip()
        tree = parse_latex(latex).tree
        if latex in seen or tree is None or not 8 <= leaf_count(tree) <= 30 or not (renamed := rename_variables(latex)):
            continue
        seen.add(latex)
        hits = structure.search(f"${renamed}$", k=2)
        if hits and hits[0].doc_id == formula.doc_id and (len(hits) == 1 or hits[1].score < hits[0].score):
            picked.append((renamed, formula.doc_id))
        if len(picked) == 8:
            break
    assert len(picked) == 8
    return picked


@pytest.fixture(scope="module")
def tuned_index(small_index, tmp_path_factory):
    """The small index with a question-tuned structure.json (the setting `mathscout train structure` stored
    on the full collection)."""
    copy = shutil.copytree(small_index, tmp_path_factory.mktemp("tuned") / "index")
    (copy / "structure.json").write_text(json.dumps(QUESTION_TUNED), encoding="utf-8")
    return copy


# a setting per kind as `mathscout train structure` stores it: the formula-only one adds BM25 over the math tokens
# (λ_m = 0.5), which changes the scale of formula-only scores (the rewrite fusion must not depend on it)
PER_KIND = {
    **QUESTION_TUNED,
    "kinds": {
        "mixed": {"lambda_m": 0.1, "text": "full", "max_formulas": 0, "tuned_on": "train topics (mixed questions)"},
        "text": {"lambda_m": 0.2, "text": "words", "max_formulas": 0, "tuned_on": "train topics (text questions)"},
        "formula": {
            "lambda_m": 0.5,
            "text": "full",
            "max_formulas": 0,
            "tuned_on": "formula queries (fitting half)",
            "queries": 400,
            "measure": "nDCG@10",
            "score": 0.8,
            "before": 0.7,
        },
    },
}


@pytest.fixture(scope="module")
def per_kind_index(small_index, tmp_path_factory):
    """The small index with one stored setting per query kind."""
    copy = shutil.copytree(small_index, tmp_path_factory.mktemp("per-kind") / "index")
    (copy / "structure.json").write_text(json.dumps(PER_KIND), encoding="utf-8")
    return copy


@pytest.mark.parametrize("mode", ["structure", "structure-rewrite"])
@pytest.mark.parametrize("setting", ["untuned", "question-tuned", "per-kind"])
def test_a_renamed_variable_query_finds_its_source_first(
    renamed_queries, small_index, tuned_index, per_kind_index, mode, setting
):
    index = {"untuned": small_index, "question-tuned": tuned_index, "per-kind": per_kind_index}[setting]
    retriever = open_retriever(index, mode)
    for renamed, source in renamed_queries:
        hits = retriever.search(f"${renamed}$", k=5)
        assert hits and hits[0].doc_id == source, (renamed, source, [h.doc_id for h in hits])


def test_each_kind_of_query_is_scored_by_its_own_stored_setting(per_kind_index):
    retriever = open_retriever(per_kind_index, "structure")
    kinds = {
        "$a^2+b^2=c^2$": (0.5, "full"),
        "Why is $a^2+b^2=c^2$?": (0.1, "full"),
        "how to prove $a^2+b^2=c^2$ for a right triangle": (0.1, "full"),
        "what is a normal subgroup": (0.2, "words"),
    }
    for text, expected in kinds.items():
        setting = retriever.setting_for(Query(id="q", text=text))
        assert (setting.lambda_m, setting.text) == expected, text
    hits = retriever.search("$a^2+b^2=c^2$", k=5)
    assert hits and all("bm25" in h.components for h in hits)  # the formula setting's BM25 part is used
    assert open_retriever(per_kind_index, "structure", formula_text="words").search("$a^2+b^2=c^2$", k=5)[
        0
    ].components.keys() == {"structure", "tier"}


@pytest.mark.parametrize("setting", ["untuned", "question-tuned", "per-kind"])
def test_rewriting_never_down_weights_the_written_form(
    renamed_queries, small_index, tuned_index, per_kind_index, setting
):
    """Each fused hit scores at least what the formula as written gives it (normalised per form), and a document the
    written form matches is passed only by documents holding more of the query: the written form itself at least
    as well, or an equivalent form verbatim where the written form's match is its structure with other symbols."""
    index = {"untuned": small_index, "question-tuned": tuned_index, "per-kind": per_kind_index}[setting]
    rewrite = open_retriever(index, "structure-rewrite")
    rewritten = 0
    for query in ["$(a+b)^2$", "$x^2 - y^2$", "$1 + \\frac{1}{x}$"] + [f"${r}$" for r, _ in renamed_queries]:
        ranking = rewrite.rank(Query(id="q", text=query), 10)
        hits, variants = ranking.hits, ranking.variants
        rewritten += len(variants) > 1
        assert all(h.score >= h.components["structure"] for h in hits), query
        written = {h.doc_id: h.components["tier"] for h in rewrite.structure.rank(Query(id="q", text=query), 10).hits}
        for i, hit in enumerate(hits):
            tier = written.get(hit.doc_id)
            if tier is None or hit.components["tier"] > tier:  # not found by the written form, or better by a form
                continue
            for above in hits[:i]:
                assert above.components["tier"] > tier or written.get(above.doc_id) == tier, (query, hit, above)
    assert rewritten >= 3


def test_the_question_setting_still_ranks_questions(tuned_index):
    retriever = open_retriever(tuned_index, "structure")
    # formula-only queries keep the thesis λ_m = 2.5 with BM25 for partial matches only (the index has a bm25 part)
    assert (retriever.text_part, retriever.lambda_m) == ("full", 0.1) and retriever.formula_text == "parts"
    assert retriever.setting_for(Query(id="q", text="$a^2+b^2=c^2$")).text == "parts"
    hits = retriever.search("how to prove $a^2+b^2=c^2$ for a right triangle", k=5)
    assert hits and all("bm25" in h.components for h in hits)


def test_a_formula_setting_can_be_stored_and_is_checked(tuned_index, tmp_path):
    copy = shutil.copytree(tuned_index, tmp_path / "index")
    settings = {**QUESTION_TUNED, "formula": {"text": "full", "lambda_m": 2.5, "tuned_on": "formula queries"}}
    (copy / "structure.json").write_text(json.dumps(settings), encoding="utf-8")
    retriever = open_retriever(copy, "structure")
    assert (retriever.formula_text, retriever.formula_lambda_m) == ("full", 2.5)
    (copy / "structure.json").write_text(json.dumps({**QUESTION_TUNED, "formula": {"text": "nope"}}), encoding="utf-8")
    with pytest.raises(Exception, match="unusable"):
        open_retriever(copy, "structure")


def test_the_old_behaviour_loses_renamed_queries(renamed_queries, tuned_index):
    """What the issue saw: with the question setting applied to formula-only queries, some renamed queries
    lose their source document (kept as a check that the queries above are a real test)."""
    old = open_retriever(tuned_index, "structure", formula_text="full", formula_lambda_m=0.1)
    lost = [source for renamed, source in renamed_queries if old.search(f"${renamed}$", k=5)[0].doc_id != source]
    assert lost


def _holds_verbatim(structure, query_latex: str, doc_ordinal: int) -> bool:
    """A formula of the document holds the whole query with identical symbols, by the reference implementation of
    Eq. 3.16 (`scoring.formula_similarity`: the widest common subtree is the whole query and S_sym = 1)."""
    query = path_prefixes(parse_latex(query_latex).tree)
    whole = max(
        scoring.node_upper_bound({t: len(ps) for t, ps in by_t.items()}, structure.paths.path_idf)
        for by_t in scoring.group_by_root(query).values()
    )
    first, end = structure._formula_first[doc_ordinal], structure._formula_first[doc_ordinal + 1]
    for ordinal in range(first, end):
        tree = parse_latex(structure.store.formula_at(ordinal).latex).tree
        if tree is None:
            continue
        match = scoring.formula_similarity(
            query, path_prefixes(tree, wildcard_paths=True), leaf_count(tree), idf=structure.paths.path_idf
        )
        if match is not None and match.width >= whole * (1 - 1e-9) and match.symbol >= 1 - 1e-9:
            return True
    return False


@pytest.fixture(scope="module")
def subexpression_queries(small_index) -> list[tuple[str, str]]:
    """(sub-expression, source document) for real formulas whose sub-expression, ranked by Eq. 3.16 alone (the
    thesis' order), puts another document first: one holding it shorter or with other symbols (Eq. 3.15's length
    penalty charges the longer source formula that holds it verbatim)."""
    index = IndexDir(small_index)
    structure = open_retriever(index, "structure")
    ordinals = structure.doc_ordinals()
    picked: list[tuple[str, str]] = []
    seen: set[str] = set()
    for _, formula in index.store.iter_formulas():
        latex = formula.latex.strip()
        if latex in seen or len(latex) > 200 or (sub := subexpression(latex)) is None or sub.strip() in seen:
            continue
        seen.update((latex, sub.strip()))
        by_score = structure._formula_documents(structure.searcher.prepare(sub.strip()), 10)
        if (
            by_score
            and by_score[0].doc != ordinals[formula.doc_id]
            and _holds_verbatim(structure, sub.strip(), ordinals[formula.doc_id])
        ):
            picked.append((sub.strip(), formula.doc_id))
        if len(picked) == 6:
            break
    assert len(picked) == 6
    return picked


@pytest.mark.parametrize("mode", ["structure", "structure-rewrite"])
@pytest.mark.parametrize("setting", ["untuned", "per-kind"])
def test_a_sub_expression_query_ranks_the_formulas_holding_it_first(
    subexpression_queries, small_index, per_kind_index, mode, setting
):
    """The source document of a sub-expression is passed only by documents that also hold the sub-expression as
    written (the largest common subtree is the whole query, every symbol equal), never by a shorter formula with
    other symbols or a rewritten form's match; the source is found in the top 10 of most."""
    index = {"untuned": small_index, "per-kind": per_kind_index}[setting]
    retriever = open_retriever(index, mode)
    structure = retriever if mode == "structure" else retriever.structure
    ordinals = structure.doc_ordinals()
    found = 0
    for sub, source in subexpression_queries:
        ranked = [h.doc_id for h in retriever.search(f"${sub}$", k=10)]
        ahead = ranked[: ranked.index(source)] if source in ranked else ranked
        assert all(_holds_verbatim(structure, sub, ordinals[d]) for d in ahead), (sub, source, ranked)
        found += source in ranked
    assert found >= len(subexpression_queries) - 1
