"""Math-aware BM25 over the small index: relevant answers found, clear errors, huge queries survive."""

import itertools
import json

import pytest

from mathscout.errors import IndexMissingError, MathScoutError, QueryError
from mathscout.index import IndexDir
from mathscout.index.builder import build_index
from mathscout.index.components import ComponentSpec, register_component
from mathscout.retrievers import open_retriever
from mathscout.retrievers.bm25 import MAX_QUERY_TERMS, BM25Retriever
from mathscout.types import Query

KNOWN_TOPIC = "mse:math.stackexchange.com:67198"  # "Does ∫ sin x / x dx have an improper Riemann integral?"


class _Nothing:
    name = "nothing"

    def build(self, store, target, options):
        return {}


@pytest.fixture(scope="module")
def retriever(small_index) -> BM25Retriever:
    return open_retriever(small_index, "bm25")


@pytest.fixture(scope="module")
def dev(shared_data, dev_topic_ids):
    topics, relevant = {}, {}
    with open(shared_data / "collection" / "topics.dev.jsonl", encoding="utf-8") as f:
        for line in f:
            topic = json.loads(line)
            if topic["id"] in dev_topic_ids:
                topics[topic["id"]] = Query(id=topic["id"], text=topic["title"] + "\n" + topic["body"])
    with open(shared_data / "collection" / "qrels.dev.txt", encoding="utf-8") as f:
        for line in f:
            qid, _, doc_id, _ = line.split()
            relevant.setdefault(qid, set()).add(doc_id)
    return topics, relevant


def test_known_relevant_answer_is_in_the_top_ten(retriever, dev):
    topics, relevant = dev
    hits = retriever.search(topics[KNOWN_TOPIC], k=10)
    assert relevant[KNOWN_TOPIC] & {h.doc_id for h in hits}


def test_most_dev_topics_find_a_relevant_answer(retriever, dev):
    topics, relevant = dev
    runs = retriever.batch_search(list(topics.values()), k=10)
    found = sum(bool(relevant[q] & {h.doc_id for h in hits}) for q, hits in runs.items())
    assert found >= 0.65 * len(topics), f"only {found} of {len(topics)} topics have a relevant answer in the top 10"


def test_hits_are_ranked_by_descending_score(retriever):
    hits = retriever.search("prove that $\\sum 1/n^2$ converges", k=20)
    assert len(hits) == 20
    assert [h.rank for h in hits] == list(range(1, 21))
    assert all(a.score >= b.score for a, b in itertools.pairwise(hits))
    assert all(h.components["bm25"] == h.score for h in hits)


def test_hits_carry_snippets_and_the_formulas_that_matched(retriever):
    hits = retriever.search("why is $\\int_0^\\infty \\frac{\\sin x}{x} dx$ convergent", k=5)
    assert all(h.snippet for h in hits)
    assert any("**" in h.snippet for h in hits)
    matched = [f for h in hits for f in h.formulas]
    assert matched and any("sin" in f.latex for f in matched)
    for formula in matched:
        assert 0 < formula.score <= 1
        assert all(0 <= s < e <= len(formula.latex) for s, e in formula.highlight)


def test_empty_query_is_a_clear_error(retriever):
    with pytest.raises(QueryError, match="empty"):
        retriever.search("   ")
    with pytest.raises(QueryError, match="no searchable words"):
        retriever.search("the of and")


def test_a_100_kb_query_with_thousands_of_distinct_terms_works(retriever):
    huge = " ".join(f"w{n} $x_{{{n}}}$" for n in range(9000))
    assert len(huge) > 100_000
    assert retriever.search(huge, k=5)  # truncated by prepare_query, still far above the clause limit
    weights = retriever.query_weights(Query(id="q", text=huge))
    assert len(weights) == MAX_QUERY_TERMS
    assert retriever.rank(Query(id="q", text=huge), k=5).hits


def test_bm25_parameters_are_explicit_and_checked(small_index):
    retriever = BM25Retriever(IndexDir(small_index))
    assert (retriever.k1, retriever.b) == (1.2, 0.75)
    before = retriever.search("Riemann integral", k=3)
    retriever.set_bm25(0.9, 0.4)
    after = retriever.search("Riemann integral", k=3)
    assert [h.score for h in before] != [h.score for h in after]
    with pytest.raises(MathScoutError, match="invalid BM25"):
        retriever.set_bm25(1.2, 1.5)


def test_missing_index_names_the_build_command(tmp_path):
    with pytest.raises(IndexMissingError, match="mathscout index"):
        open_retriever(tmp_path / "nowhere", "bm25")


def test_index_without_bm25_names_the_command_that_adds_it(tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"id": "d1", "text": "Euler: $e^{i\\pi}+1=0$."}) + "\n", encoding="utf-8")
    register_component(ComponentSpec("nothing", _Nothing, "builds nothing (tests)", default=False))
    build_index([corpus], tmp_path / "idx", components=["nothing"])
    with pytest.raises(IndexMissingError, match="--components bm25"):
        open_retriever(tmp_path / "idx", "bm25")


def test_component_stats_are_in_the_manifest(small_index):
    index = IndexDir(small_index)
    stats = index.manifest.components["bm25"]
    assert stats["docs"] == index.manifest.documents
    assert stats["bytes"] > 0 and stats["seconds"] >= 0


def test_threads_opening_and_searching_at_once_get_the_sequential_answers(small_index, dev):
    """The assistant runs tool calls in parallel threads; pyjnius is not thread-safe, so the JVM calls are serialised
    (before, two threads opening or searching Lucene at once could crash the whole process)."""
    from concurrent.futures import ThreadPoolExecutor

    questions = [query.text for query in list(dev[0].values())[:12]]
    expected = [[(h.doc_id, h.score) for h in open_retriever(small_index, "bm25").search(q, k=20)] for q in questions]

    def open_and_search(question_number: int):
        retriever = open_retriever(small_index, "bm25")
        return [(h.doc_id, h.score) for h in retriever.search(questions[question_number], k=20)]

    with ThreadPoolExecutor(max_workers=8) as pool:
        for _ in range(3):
            assert list(pool.map(open_and_search, range(len(questions)))) == expected
