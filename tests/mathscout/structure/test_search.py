"""Structure search over a real path index: rank safety of the pruning strategies and agreement with the
reference scoring, on ARQMath Task 2 query formulas over the formulas of the first documents of the collection."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from mathscout.errors import IndexMissingError, QueryError
from mathscout.evaluation.topics import load_topics
from mathscout.structure import scoring
from mathscout.structure.index import PathIndex, build_path_index
from mathscout.structure.parser import parse_latex
from mathscout.structure.paths import leaf_count, path_prefixes
from mathscout.structure.search import StructureSearcher
from tests.support.corpora import first_records, formula_triples

N_DOCS = 2000  # formulas of the first N_DOCS documents of docs.jsonl (~25k formulas)
PRUNED = ("maxref", "gbp-num", "gbp-len")


@pytest.fixture(scope="session")
def collection_formulas(shared_data) -> list[tuple[int, int, str]]:
    """(formula ordinal, document ordinal, LaTeX) of the first N_DOCS documents."""
    return formula_triples(first_records(shared_data, N_DOCS))


@pytest.fixture(scope="session")
def path_index(collection_formulas, tmp_path_factory) -> PathIndex:
    folder = tmp_path_factory.mktemp("path-index")
    report = build_path_index(collection_formulas, len(collection_formulas), folder, progress=False)
    assert report.indexed > 0.6 * report.formulas
    assert report.skipped["a single symbol (no operator)"] > 0
    return PathIndex.open(folder)


@pytest.fixture(scope="session")
def searcher(path_index) -> StructureSearcher:
    return StructureSearcher(path_index)


@pytest.fixture(scope="session")
def task2_formulas(shared_data) -> list[str]:
    files = [shared_data / "arqmath" / f"topics.arqmath-{year}-task2-origin.xml" for year in (2020, 2021, 2022)]
    return [topic.formula for path in files for topic in load_topics(path)]


def ranking(hits):
    return [(h.formula, h.score) for h in hits]


@pytest.mark.parametrize("per_document", [False, True], ids=["formulas", "documents"])
def test_pruned_top_k_equals_exhaustive_top_k(searcher, task2_formulas, per_document):
    assert len(task2_formulas) == 285
    compared = 0
    for latex in task2_formulas:
        query = searcher.prepare(latex)
        exhaustive = ranking(searcher.search(query, k=100, strategy="exhaustive", per_document=per_document))
        for strategy in PRUNED:
            assert ranking(searcher.search(query, k=100, strategy=strategy, per_document=per_document)) == exhaustive, (
                strategy,
                latex,
            )
        compared += bool(exhaustive)
    assert compared > 250  # nearly every query finds something to rank


def test_small_k_is_rank_safe_too(searcher, task2_formulas):
    for latex in task2_formulas[::5]:
        query = searcher.prepare(latex)
        exhaustive = ranking(searcher.search(query, k=3, strategy="exhaustive"))
        assert ranking(searcher.search(query, k=3, strategy="gbp-len")) == exhaustive


def test_kernel_scores_equal_the_reference_formulas(searcher, path_index, collection_formulas, task2_formulas):
    for latex in task2_formulas[:40]:
        query = searcher.prepare(latex)
        for hit in searcher.search(query, k=5, strategy="gbp-len"):
            tree = parse_latex(collection_formulas[hit.formula][2]).tree
            reference = scoring.formula_similarity(
                query.prefixes,
                path_prefixes(tree),
                leaf_count(tree),
                idf=path_index.path_idf,
                symbol_key=query.symbol_key,
            )
            assert reference.score == pytest.approx(hit.score, rel=1e-9)
            assert (reference.query_node, reference.doc_node) == (hit.query_node, hit.doc_node)


def test_an_indexed_formula_finds_itself_first(searcher, collection_formulas):
    latex = r"\sum_{k=0}^{n}\binom{n}{k}x^{k}=(1+x)^{n}"
    hits = searcher.search(latex, k=10)
    itself = [h for h in hits if collection_formulas[h.formula][2] == latex]
    assert itself and itself[0].score == hits[0].score  # ties: (x+1)^n = Σ… is the same tree up to commutation
    assert all(a.score >= b.score for a, b in itertools.pairwise(hits))


def test_documents_are_ranked_by_their_best_formula(searcher, collection_formulas):
    query = searcher.prepare(r"e^{i\pi}+1=0")
    formulas = searcher.search(query, k=1000, strategy="exhaustive")
    documents = searcher.search(query, k=20, per_document=True)
    best = {}
    for hit in formulas:
        best.setdefault(hit.doc, hit.score)
    expected = sorted(best.items(), key=lambda item: -item[1])[:20]
    assert [(h.doc, h.score) for h in documents] == expected
    assert len({h.doc for h in documents}) == len(documents)


def test_scoring_given_formulas_matches_search(searcher):
    query = searcher.prepare(r"\int_0^1 f(x)\,dx")
    hits = searcher.search(query, k=20, strategy="exhaustive")
    rescored = {h.formula: h.score for h in searcher.score_formulas(query, np.array([h.formula for h in hits]))}
    assert rescored == {h.formula: h.score for h in hits}


def test_initial_threshold_trades_recall_for_speed(searcher, task2_formulas):
    query = searcher.prepare(task2_formulas[0])
    safe = ranking(searcher.search(query, k=100, strategy="exhaustive"))
    unsafe = ranking(searcher.search(query, k=100, strategy="gbp-len", initial_threshold_factor=0.5))
    threshold = scoring.initial_threshold(0.5, query.width, scoring.ETA_ARQMATH)
    assert unsafe and all(score > threshold for _, score in unsafe)
    assert unsafe == [hit for hit in safe if hit[1] > threshold][: len(unsafe)]


def test_unweighted_paths_count_matched_leaves(path_index):
    plain = StructureSearcher(path_index, path_weights=False, eta=0.0)
    hits = plain.search("x^2+y^2=z^2", k=5)
    assert hits[0].score == pytest.approx(6.0)  # Eq. 3.4: all six operands matched, perfect symbol match, no penalty


def test_bad_queries_give_clear_errors(searcher, tmp_path):
    with pytest.raises(QueryError):
        searcher.search(r"\quad", k=10)
    with pytest.raises(QueryError):
        searcher.search("x+1", k=10, strategy="fastest")
    assert searcher.search("x", k=10) == []  # a lone symbol has no path to match
    with pytest.raises(IndexMissingError):
        PathIndex.open(tmp_path)


def test_structure_mode_ranks_documents_by_their_best_formula(small_index):
    from mathscout.retrievers import open_retriever

    retriever = open_retriever(small_index, "structure")
    hits = retriever.search("$x^2+y^2=z^2$", k=5)
    assert hits and [h.rank for h in hits] == list(range(1, len(hits) + 1))
    best = hits[0].formulas[0]
    assert best.highlight and all(0 <= a < b <= len(best.latex) for a, b in best.highlight)
    mixed = retriever.search("Pythagorean triples $x^2+y^2=z^2$", k=5)
    assert mixed and set(mixed[0].components) == {"structure", "bm25"}
    assert mixed[0].score == pytest.approx(
        2.5 * mixed[0].components["structure"] + mixed[0].components["bm25"]
    )  # Eq. 3.18
    words_only = retriever.search("words without any formula", k=5)  # Eq. 3.18 with no math: BM25 over the words
    assert all(set(h.components) == {"structure", "bm25"} and h.components["structure"] == 0 for h in words_only)
    with pytest.raises(QueryError):
        retriever.search("$&$", k=5)


@pytest.fixture(scope="session")
def wildcard_formulas(shared_data) -> list[str]:
    lines = (
        (shared_data / "ntcir12" / "topics.ntcir12-math-browsing-wildcards.txt")
        .read_text(encoding="utf-8")
        .splitlines()
    )
    return [line.split("\t", 1)[1] for line in lines if "\t" in line]


def test_wildcard_queries_are_rank_safe_and_match_the_reference(
    searcher, path_index, collection_formulas, wildcard_formulas
):
    assert len(wildcard_formulas) == 20
    matched = 0
    for latex in wildcard_formulas:
        query = searcher.prepare(latex)
        exhaustive = ranking(searcher.search(query, k=50, strategy="exhaustive"))
        assert ranking(searcher.search(query, k=50, strategy="gbp-len")) == exhaustive, latex
        matched += bool(exhaustive)
        for hit in searcher.search(query, k=3, strategy="gbp-len"):
            tree = parse_latex(collection_formulas[hit.formula][2]).tree
            reference = scoring.formula_similarity(
                query.prefixes,
                path_prefixes(tree, wildcard_paths=True),
                leaf_count(tree),
                idf=path_index.path_idf,
                symbol_key=query.symbol_key,
            )
            assert reference.score == pytest.approx(hit.score, rel=1e-9), latex
    assert matched >= 18


def test_a_wildcard_matches_a_whole_subexpression(tmp_path):
    formulas = [r"(x+1)^2+y^2", r"x^2+y^3", r"a+b", r"\sqrt{x}^2+\frac{1}{n}^2"]
    build_path_index([(i, i, f) for i, f in enumerate(formulas)], len(formulas), tmp_path, progress=False)
    plain = StructureSearcher(PathIndex.open(tmp_path), path_weights=False, eta=0.0)
    hits = plain.search(r"\qvar{a}^2+\qvar{b}^2", k=4)
    # both squares match whatever their bases are: four paths (two wildcards, two exponents), perfect symbols
    assert sorted(h.formula for h in hits if h.score == pytest.approx(4.0)) == [0, 3]
    assert hits[0].formula in (0, 3) and all(h.formula != 2 for h in hits[:2])
    match = scoring.formula_similarity(
        plain.prepare(r"\qvar{a}^2+\qvar{b}^2").prefixes,
        path_prefixes(parse_latex(formulas[0]).tree, wildcard_paths=True),
        3,
    )
    assert {0, 1, 2, 3} <= match.doc_leaves  # the wildcard covers all of x + 1: every operand is highlighted


def test_a_wildcard_query_on_an_index_without_wildcard_paths_says_rebuild(tmp_path):
    build_path_index([(0, 0, "x^2+1")], 1, tmp_path, progress=False)
    meta = json.loads((tmp_path / "meta.json").read_text())
    meta.pop("wildcard_paths")
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(QueryError, match="rebuild"):
        StructureSearcher(PathIndex.open(tmp_path)).search(r"\qvar{a}^2+1", k=5)
