"""Heterogeneous math + text search (thesis Alg. 5, Eq. 3.18) on the small real index: Lucene-exact BM25 text
lists, rank safety of Alg. 5 against exhaustive Eq. 3.18 on real dev questions, and the structure mode's
mixed queries."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mathscout.errors import QueryError
from mathscout.evaluation.topics import load_topics
from mathscout.index.layout import IndexDir
from mathscout.retrievers.base import prepare_query
from mathscout.structure import scoring
from mathscout.structure.hetero import TEXT, KeywordList, exhaustive_scores, heterogeneous_search, math_keyword
from mathscout.structure.text_lists import TextLists, decode_length, encode_length
from mathscout.types import Query

N_TOPICS = 12


@pytest.fixture(scope="module")
def retrievers(small_index):
    from mathscout.retrievers import open_retriever

    return open_retriever(small_index, "structure", exact=True), open_retriever(small_index, "bm25")


@pytest.fixture(scope="module")
def dev_topics(shared_data, dev_topic_ids):
    topics = load_topics(shared_data / "collection" / "topics.dev.jsonl")
    wanted = set(dev_topic_ids)
    return [t for t in topics if t.id in wanted][:N_TOPICS]


def test_lucene_length_encoding():
    assert [encode_length(n) for n in (0, 1, 23, 24, 25, 1000)] == [0, 1, 23, 24, 25, encode_length(1000)]
    assert decode_length(encode_length(1000)) <= 1000 < decode_length(encode_length(1000) + 1)


def test_text_lists_score_exactly_like_lucene_bm25(retrievers, dev_topics, small_index):
    structure, bm25 = retrievers
    text = structure.text
    assert isinstance(text, TextLists) and text.doc_count == IndexDir(small_index).store.count()
    ordinals = {d: n for n, d in enumerate(IndexDir(small_index).store.doc_ids())}
    for topic in dev_topics:
        total = np.zeros(text.doc_count)
        for term, boost in bm25.query_weights(topic).items():
            docs, scores = text.term_scores(term, boost)
            total[docs] += scores
        hits = bm25.rank(topic, 20).hits
        for hit in hits:
            assert total[ordinals[hit.doc_id]] == pytest.approx(hit.score, rel=1e-5)
        assert [ordinals[h.doc_id] for h in hits[:5]] == list(np.lexsort((np.arange(len(total)), -total))[:5])


def _keywords(structure, topic):
    from mathscout.retrievers.structure import split_query

    formulas, words = split_query(prepare_query(topic))
    keywords = []
    for term, boost in structure._text_weights(words).items():
        docs, scores = structure.text.term_scores(term, boost)
        if len(docs):
            keywords.append(KeywordList(TEXT, docs, scores))
    keywords += [math_keyword(structure.searcher, q) for q in structure.prepare_all(formulas)]
    return keywords


@pytest.mark.parametrize("k", [5, 50])
def test_algorithm_5_top_k_equals_exhaustive_eq_3_18(retrievers, dev_topics, k):
    structure, _ = retrievers
    n_docs = structure.text.doc_count
    checked = 0
    for topic in dev_topics:
        keywords = _keywords(structure, topic)
        if not any(kw.query is not None for kw in keywords):
            continue
        checked += 1
        docs, scores = heterogeneous_search(structure.searcher, keywords, k, 2.5, structure._formula_first)
        reference = exhaustive_scores(structure.searcher, keywords, 2.5, n_docs)
        order = np.lexsort((np.arange(n_docs), -reference))
        order = order[reference[order] > 0][:k]
        assert docs.tolist() == order.tolist(), topic.id  # same ids, same order
        np.testing.assert_allclose(scores, reference[order], rtol=1e-12)
    assert checked >= 8


def test_structure_mode_exact_mixed_query_is_eq_3_18(retrievers):
    structure, _ = retrievers
    hits = structure.search("Pythagorean triples $x^2+y^2=z^2$", k=5)
    assert hits and set(hits[0].components) == {"structure", "bm25"}
    for hit in hits:
        assert hit.score == pytest.approx(2.5 * hit.components["structure"] + hit.components["bm25"])
    assert hits[0].formulas and hits[0].formulas[0].highlight  # the matched subexpression is highlighted


def test_words_only_query_is_bm25_over_the_words(retrievers):
    structure, bm25 = retrievers
    ours = structure.search("prime numbers infinitely many", k=5)
    theirs = bm25.rank(Query(id="q", text="prime numbers infinitely many"), 5).hits
    assert [h.doc_id for h in ours] == [h.doc_id for h in theirs]
    assert [h.score for h in ours] == pytest.approx([h.score for h in theirs], rel=1e-5)
    with pytest.raises(QueryError):
        structure.search("$&$", k=5)


def test_equation_4_15_relaxed_upper_bound():
    """u(w*) = w* · [(1 − η) + η / log(1 + w*)]: for w* = 3, η = 0.3: 3 · (0.7 + 0.3 / ln 4)."""
    assert scoring.score_upper_bound(3.0, 0.3, 3.0) == pytest.approx(3 * (0.7 + 0.3 / math.log(4)))
    # no formula of ≥ w* leaves can score above it (S_sym ≤ 1, P decreasing in L_D)
    for leaves in (3, 4, 10, 100):
        assert scoring.overall_score(3.0, 1.0, scoring.length_penalty(leaves, 0.3)) <= scoring.score_upper_bound(
            3.0, 0.3, 3.0
        )
