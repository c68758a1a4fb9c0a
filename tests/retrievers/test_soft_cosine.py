"""The soft vector space model (`scm`): word2vec term similarities over BM25 vectors, on the small real index."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from mathscout.cli import main as cli
from mathscout.errors import IndexMissingError, MathScoutError, QueryError
from mathscout.evaluation.measures import evaluate_run
from mathscout.evaluation.runs import write_run
from mathscout.evaluation.topics import load_topics
from mathscout.index.layout import IndexDir
from mathscout.retrievers import open_retriever
from mathscout.retrievers.indexing import add_components
from mathscout.retrievers.soft_cosine import DOCUMENTS, SoftSpace

pytestmark = pytest.mark.slow  # the scm component: word2vec trained over the small index (about 2 minutes, once)


@pytest.fixture(scope="session")
def scm_index(small_index, tmp_path_factory):
    """A copy of the small index with the scm component (word2vec trained on its 3,000+ documents)."""
    path = shutil.copytree(small_index, tmp_path_factory.mktemp("scm") / "index")
    add_components(path, ["scm"])
    return path


@pytest.fixture(scope="session")
def space(scm_index) -> SoftSpace:
    return SoftSpace.load(scm_index / "scm")


def test_similarity_matrix_is_symmetric_and_diagonally_dominant(space):
    matrix = space.similarity
    assert abs(matrix - matrix.T).max() < 1e-6
    assert np.allclose(matrix.diagonal(), 1.0)
    off_diagonal = abs(matrix).sum(axis=1).A1 - 1.0
    assert (off_diagonal < 1.0).all() and matrix.nnz > 2 * matrix.shape[0]  # dominant, yet terms have neighbours
    assert (np.diff(matrix.indptr) <= 100 + 1).all()  # at most 100 neighbours per term


def test_alpha_zero_is_the_bm25_vector_space(space):
    """α = 0: a document's score is the sum of its BM25 weights of the query's terms."""
    terms = [space.term_ids[t] for t in ("integr", "m_x", "m_frac") if t in space.term_ids]
    assert len(terms) == 3
    expected = np.asarray(space.documents[:, terms].sum(axis=1)).ravel()
    assert np.allclose(space.scores(terms, alpha=0.0), expected, rtol=1e-4, atol=1e-5)


def test_a_term_matches_documents_through_its_similar_terms(space):
    """A document without the query's term scores 0 under BM25 (α = 0) and > 0 with the soft matrix when it
    holds a term similar to it."""
    matrix = space.similarity.tocoo()
    pairs = sorted((v, int(r), int(c)) for v, r, c in zip(matrix.data, matrix.row, matrix.col) if r != c)
    holdings = (space.documents > 0).tocsc()
    for _, term, neighbour in reversed(pairs):  # the most similar pair whose terms are not always together
        only_neighbour = np.setdiff1d(holdings[:, neighbour].indices, holdings[:, term].indices)
        if len(only_neighbour):
            break
    assert len(only_neighbour) > 0
    assert (space.scores([term], alpha=0.0)[only_neighbour] == 0).all()
    assert (space.scores([term], alpha=0.6)[only_neighbour] > 0).all()


def test_scm_mode_ranks_dev_topics_and_shows_snippets(scm_index, small_index, dev_topic_ids, shared_data, tmp_path):
    retriever = open_retriever(scm_index, "scm")
    hits = retriever.search("prove that $\\sqrt{2}$ is irrational", k=5)
    assert [h.rank for h in hits] == [1, 2, 3, 4, 5] and hits[0].score >= hits[-1].score > 0
    assert all(h.snippet for h in hits) and any("sqrt{2}" in f.latex for h in hits for f in h.formulas)

    wanted = set(dev_topic_ids)
    topics = [t for t in load_topics(shared_data / "collection" / "topics.dev.jsonl") if t.id in wanted]
    qrels = tmp_path / "qrels.txt"
    qrels.write_text(
        "".join(
            line + "\n"
            for line in (shared_data / "collection" / "qrels.dev.txt").read_text(encoding="utf-8").splitlines()
            if line.split()[0] in wanted
        )
    )
    scores = {}
    for mode in ("scm", "bm25"):
        run = tmp_path / f"{mode}.trec"
        write_run(open_retriever(scm_index, mode).batch_search(topics, k=100), run, tag=mode)
        scores[mode] = evaluate_run(run, qrels).summary["nDCG@10"]
    assert scores["scm"] > 0.3 and scores["bm25"] > 0.3  # both find the judged answers among 3,000+ documents


def test_bad_input_is_a_clear_error(scm_index, tmp_path, capsys):
    retriever = open_retriever(scm_index, "scm")
    with pytest.raises(QueryError, match="empty"):
        retriever.search("   ")
    with pytest.raises(QueryError, match="occurs in two documents"):
        retriever.search("qwzxv plorbt")
    with pytest.raises(MathScoutError, match="alpha must be between 0 and 1"):
        open_retriever(scm_index, "scm", alpha=1.5)

    broken = shutil.copytree(scm_index, tmp_path / "broken")
    (broken / "scm" / DOCUMENTS).write_bytes(b"not a matrix")
    with pytest.raises(MathScoutError, match=r"damaged .*--components scm"):
        open_retriever(IndexDir(broken), "scm")
    assert cli(["search", "--index", str(broken), "--mode", "scm", "integral"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "damaged" in err
    manifest = json.loads((broken / "manifest.json").read_text(encoding="utf-8"))
    del manifest["components"]["scm"]["files"]  # an index built before checksums: the reader's own check holds
    (broken / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(IndexMissingError, match=r"unreadable .*--components scm"):
        open_retriever(IndexDir(broken), "scm")


def test_scm_records_its_token_vocabulary_and_an_old_component_answers_in_vocabulary_1(scm_index, tmp_path):
    """New builds analyse in the current token vocabulary (`\\sup` is `m_supremum`, `^` stays `m_sup`) and record it;
    a component whose manifest records none (built before the field) analyses queries in vocabulary 1, as it was built."""
    from mathscout.latex.aliases import LEGACY_VOCABULARY, VOCABULARY
    from mathscout.types import Query

    query = Query(id="q", text=r"the least upper bound $\sup_{x} f(x)$ of $x^2$")
    index = IndexDir(scm_index)
    assert index.manifest.components["scm"]["vocabulary"] == VOCABULARY
    retriever = open_retriever(index, "scm")
    assert retriever.vocabulary == VOCABULARY and "m_supremum" in retriever.space.term_ids
    assert {"m_supremum", "m_sup"} <= set(retriever.known_terms(query))

    old = shutil.copytree(scm_index, tmp_path / "old")
    manifest = json.loads((old / "manifest.json").read_text(encoding="utf-8"))
    del manifest["components"]["scm"]["vocabulary"]
    (old / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    legacy = open_retriever(IndexDir(old), "scm")
    assert legacy.vocabulary == LEGACY_VOCABULARY
    known = set(legacy.known_terms(query))
    assert "m_sup" in known and "m_supremum" not in known  # `\sup` read as vocabulary 1 reads it
    hits = legacy.search(query, k=10)
    assert hits and hits[0].score > 0
