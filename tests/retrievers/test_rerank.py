"""Rerankers: the local embedding reranker moves real relevant answers up; the LLM listwise reranker, over a
real HTTP server speaking the OpenAI protocol, follows the model's order and survives malformed replies,
server errors and time-outs by keeping the first-stage order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mathscout.retrievers.rerank import (
    EmbeddingReranker,
    LLMListwiseReranker,
    OpenAIEmbeddingReranker,
    Reranked,
    listwise_prompt,
    open_reranker,
    parse_listwise_reply,
)
from mathscout.types import Hit, Query
from tests.support.fake_openai import FakeOpenAI, Fault, Slow, Text

TOPICS = 12
DISTRACTORS = 9


@pytest.fixture(scope="module")
def dev_cases(shared_data):
    """(topic text, relevant answer text, 9 distractor answer texts) for the first dev topics with a grade-3 answer."""
    topics = {}
    with open(shared_data / "collection" / "topics.dev.jsonl", encoding="utf-8") as f:
        for line in f:
            t = json.loads(line)
            topics[t["id"]] = f"{t['title']}\n{t['body']}"
    best = {}
    with open(shared_data / "collection" / "qrels.dev.txt", encoding="utf-8") as f:
        for line in f:
            qid, _, doc, grade = line.split()
            if int(grade) == 3 and qid not in best:
                best[qid] = doc
            if len(best) == TOPICS:
                break
    wanted = set(best.values())
    texts, distractors = {}, []
    with open(shared_data / "collection" / "docs.jsonl", encoding="utf-8") as f:
        for n, line in enumerate(f):
            d = json.loads(line)
            if d["id"] in wanted:
                texts[d["id"]] = d["text"]
            elif n % 300 == 0 and len(distractors) < TOPICS * DISTRACTORS:
                distractors.append((d["id"], d["text"]))
    cases = []
    for i, (qid, doc) in enumerate(best.items()):
        others = distractors[i * DISTRACTORS : (i + 1) * DISTRACTORS]
        cases.append((topics[qid], doc, texts[doc], others))
    return cases


def first_stage(relevant_id, relevant_text, others) -> list[Hit]:
    """The relevant answer placed last, as a weak first stage might."""
    hits = [
        Hit(doc_id=d, score=10.0 - i, snippet=t[:1500], components={"bm25": 10.0 - i})
        for i, (d, t) in enumerate(others)
    ]
    return hits + [Hit(doc_id=relevant_id, score=0.5, snippet=relevant_text[:1500], components={"bm25": 0.5})]


@pytest.mark.model
def test_embedding_reranker_moves_relevant_answers_up(dev_cases):
    reranker = EmbeddingReranker()
    positions = []
    for question, doc, text, others in dev_cases:
        reranked = reranker.rerank(question, first_stage(doc, text, others))
        assert [h.rank for h in reranked] == list(range(1, 11))
        assert all("rerank" in h.components and "bm25" in h.components for h in reranked)
        assert [h.score for h in reranked] == sorted((h.score for h in reranked), reverse=True)
        positions.append([h.doc_id for h in reranked].index(doc) + 1)
    # from position 10 of 10: a relevant answer beats most random answers on cosine similarity
    assert sum(positions) / len(positions) <= 3.0, positions
    assert sum(p == 1 for p in positions) >= len(positions) // 2, positions


@pytest.mark.model
def test_reranked_is_a_retriever_that_reorders_only_the_top_depth():
    class Fixed:
        name = "fixed"
        store = None

        def search(self, query, k=10):
            texts = ["the derivative of sine is cosine"] * 3 + [
                "a prime number has exactly two divisors",
                "integration by parts",
            ]
            return [
                Hit(doc_id=f"d{i}", score=5.0 - i, snippet=t, components={"fixed": 5.0 - i})
                for i, t in enumerate(texts)
            ][:k]

        def batch_search(self, queries, k=1000):
            return {q.id: self.search(q, k) for q in queries}

    pipeline = Reranked(Fixed(), EmbeddingReranker(), depth=4)
    hits = pipeline.search("what is a prime number", k=5)
    assert hits[0].doc_id == "d3" and hits[-1].doc_id == "d4"  # d4 is below the depth: stays last
    assert [h.rank for h in hits] == [1, 2, 3, 4, 5]
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert pipeline.batch_search([Query(id="q1", text="what is a prime number")], k=5)["q1"][0].doc_id == "d3"


# ------------------------------------------------------------------ parsing model replies


def test_reply_parsing_repairs_malformed_lists():
    assert parse_listwise_reply("PASSAGE3, PASSAGE1, PASSAGE2]", 3) == [2, 0, 1]
    assert parse_listwise_reply(
        "Sure! Here is the order:\n[PASSAGE2, PASSAGE2, PASSAGE9, PASSAGE1]\nPASSAGE3 is off-topic.", 4
    ) == [1, 0, 2, 3]
    assert parse_listwise_reply("[3, 1]", 3) == [2, 0, 1]
    assert parse_listwise_reply("I cannot help with that.", 3) == [0, 1, 2]
    assert parse_listwise_reply("", 2) == [0, 1]


def test_prompt_is_the_thesis_template_with_the_passages():
    prompt = listwise_prompt('sum of {x} "squares"', ["first passage", "second\n passage"])
    assert prompt.startswith("Sort the list PASSAGES by how good each text answers the QUESTION")
    assert "QUESTION = \"sum of {x} 'squares'\"" in prompt
    assert 'PASSAGE2 = "second passage"' in prompt
    assert prompt.rstrip().endswith("SORTED_PASSAGES = [")


# ------------------------------------------------------------------ the LLM reranker over real HTTP


def hits5() -> list[Hit]:
    return [
        Hit(doc_id=f"doc{i}", score=10.0 - i, snippet=f"passage number {i}", components={"structure": 10.0 - i})
        for i in range(1, 6)
    ]


def llm(server, **options) -> LLMListwiseReranker:
    return LLMListwiseReranker(model="fake-gpt", base_url=server.base_url, api_key="test", **options)


@pytest.mark.parametrize(
    "reply, expected",
    [
        ("PASSAGE4, PASSAGE2, PASSAGE1, PASSAGE5, PASSAGE3]", ["doc4", "doc2", "doc1", "doc5", "doc3"]),
        (
            "The best is clearly this one. [PASSAGE5, PASSAGE5, PASSAGE42, PASSAGE3]",
            ["doc5", "doc3", "doc1", "doc2", "doc4"],
        ),
        ("None of these passages answer the question.", ["doc1", "doc2", "doc3", "doc4", "doc5"]),
        ("", ["doc1", "doc2", "doc3", "doc4", "doc5"]),
    ],
)
def test_llm_reranker_follows_the_model_and_repairs_its_reply(reply, expected):
    with FakeOpenAI(lambda request: Text(reply)) as server:
        reranker = llm(server)
        reranked = reranker.rerank("what is $x^2$?", hits5())
        request = server.requests[-1]
    assert [h.doc_id for h in reranked] == expected
    assert request.model == "fake-gpt" and 'PASSAGE3 = "passage number 3"' in request.last_user
    assert all(h.components["structure"] and "rerank" in h.components for h in reranked)
    if expected == ["doc1", "doc2", "doc3", "doc4", "doc5"]:
        assert reranker.last_notice  # the user is told the order was not changed by the model


def test_llm_reranker_keeps_the_first_stage_order_on_a_server_error():
    with FakeOpenAI([Fault(500, "model overloaded")]) as server:
        reranker = llm(server)
        reranked = reranker.rerank("question", hits5(), k=3)
    assert [h.doc_id for h in reranked] == ["doc1", "doc2", "doc3"]
    assert "first-stage order kept" in reranker.last_notice and "500" in reranker.last_notice


def test_llm_reranker_gives_up_at_its_timeout():
    with FakeOpenAI([Slow(5.0, Text("PASSAGE5, PASSAGE4]"))]) as server:
        reranker = llm(server, timeout=0.5)
        reranked = reranker.rerank("question", hits5())
    assert [h.doc_id for h in reranked] == ["doc1", "doc2", "doc3", "doc4", "doc5"]
    assert "first-stage order kept" in reranker.last_notice


def test_openai_embedding_reranker_over_the_embeddings_endpoint():
    hits = [
        Hit(doc_id="a", score=2.0, snippet="bananas and apples"),
        Hit(doc_id="b", score=1.0, snippet="prime numbers have two divisors"),
    ]
    with FakeOpenAI([]) as server:
        reranker = OpenAIEmbeddingReranker(model="fake-embed", base_url=server.base_url, api_key="test")
        reranked = reranker.rerank("prime numbers divisors", hits)
        assert server.embedding_requests  # it really called /v1/embeddings
    assert [h.doc_id for h in reranked] == ["b", "a"]


def _no_llm_settings(monkeypatch, tmp_path) -> Path:
    """No LLM in the environment, and the config file a test writes (none yet)."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "MATHSCOUT_RERANK_MODEL", "MATHSCOUT_LLM_MODEL"):
        monkeypatch.delenv(name, raising=False)
    config = tmp_path / "config.toml"
    monkeypatch.setenv("MATHSCOUT_CONFIG", str(config))
    return config


def test_open_reranker_chooses_by_configuration(monkeypatch, tmp_path):
    _no_llm_settings(monkeypatch, tmp_path)
    assert open_reranker("auto").name == "embedding"
    with pytest.raises(Exception, match="unknown reranker"):
        open_reranker("magic")
    with pytest.raises(Exception, match="OPENAI_API_KEY"):
        open_reranker("llm")


def test_a_key_in_the_config_file_turns_on_the_llm_reranker(monkeypatch, tmp_path):
    """One reader (issue 44): the reranker reads the key, the endpoint and the model through mathscout.settings, as
    the agent does, so [llm] in config.toml turns on `--rerank llm` and `auto` as it turns on the agent."""
    config = _no_llm_settings(monkeypatch, tmp_path)
    with FakeOpenAI(lambda request: Text("[PASSAGE3, PASSAGE1, PASSAGE2]")) as server:
        config.write_text(
            f'[llm]\napi_key = "sk-from-config"\nbase_url = "{server.base_url}"\nrerank_model = "fake-from-config"\n',
            encoding="utf-8",
        )
        for kind in ("llm", "auto"):
            reranker = open_reranker(kind)
            assert reranker.name == "llm-listwise" and reranker.client.api_key == "sk-from-config"
            reranked = reranker.rerank("question", hits5()[:3])
            assert [h.doc_id for h in reranked] == ["doc3", "doc1", "doc2"]
        assert [r.model for r in server.requests] == ["fake-from-config"] * 2


@pytest.mark.model
def test_batch_run_reranks_a_stored_first_stage_within_the_depth(small_index, shared_data, dev_topic_ids, tmp_path):
    from mathscout.evaluation.runner import run_topics
    from mathscout.evaluation.runs import read_run
    from mathscout.index.layout import IndexDir

    topics = tmp_path / "topics.jsonl"
    with open(shared_data / "collection" / "topics.dev.jsonl", encoding="utf-8") as f:
        lines = [line for line in f if json.loads(line)["id"] in set(dev_topic_ids[:3])]
    topics.write_text("".join(lines))
    index = IndexDir(small_index)
    first, second = tmp_path / "bm25.trec", tmp_path / "bm25.emb.trec"
    run_topics(index, topics, "bm25", 20, first)
    run_topics(index, topics, "bm25", 20, second, rerank="embedding", rerank_depth=5, first_stage=first)
    before, after = read_run(first).topics, read_run(second).topics
    assert set(before) == set(after)
    for qid in before:
        ids_before, ids_after = [e.doc_id for e in before[qid]], [e.doc_id for e in after[qid]]
        assert set(ids_after[:5]) == set(ids_before[:5]) and ids_after[5:] == ids_before[5:]
        assert [e.score for e in after[qid]] == sorted((e.score for e in after[qid]), reverse=True)
    assert any([e.doc_id for e in before[q]][:5] != [e.doc_id for e in after[q]][:5] for q in before)
