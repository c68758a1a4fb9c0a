"""A running server follows its index (issue 32, item 6): after `mathscout index` rebuilds the folder it serves,
hits, documents and answers all come from the new build; nothing is answered from the replaced one."""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path

import pytest

from tests.support.harness import Server, assert_http_error, run_measured

DOCS = 120  # documents of each build: two disjoint slices of the shared collection


def _slice(shared_data: Path, out: Path, start: int) -> set[str]:
    ids = set()
    with open(shared_data / "collection" / "docs.jsonl", encoding="utf-8") as f, open(out, "w", encoding="utf-8") as w:
        for n, line in enumerate(f):
            if start <= n < start + DOCS:
                w.write(line)
                ids.add(json.loads(line)["id"])
            elif n >= start + DOCS:
                break
    return ids


@pytest.fixture(scope="module")
def built(shared_data, tmp_path_factory):
    """(first build's folder, its ids, the second corpus, its ids). Its own builds: the test rebuilds over a second,
    disjoint corpus and checks that no hit comes from the first."""
    work = tmp_path_factory.mktemp("follow")
    first_ids = _slice(shared_data, work / "first.jsonl", 0)
    second_ids = _slice(shared_data, work / "second.jsonl", 5000)
    index = work / "idx"
    outcome = run_measured(
        ["index", "--input", str(work / "first.jsonl"), "--index", str(index), "--components", "bm25,structure"], work
    )
    assert outcome.returncode == 0, outcome.stderr[-2000:]
    return index, first_ids, work / "second.jsonl", second_ids


@pytest.fixture()
def two_builds(built, tmp_path):
    """As `built`, with a copy of the first build of this test's own to rebuild."""
    import shutil

    index, *rest = built
    shutil.copytree(index, tmp_path / "idx")
    return (tmp_path / "idx", *rest)


def _search(server: Server, query: str, mode: str, index: str) -> list[str]:
    query = urllib.parse.urlencode({"q": query, "mode": mode, "k": 10, "index": index})
    status, _, body = server.request("GET", "/api/search?" + query)
    assert status == 200, body[:500]
    return [hit["doc_id"] for hit in json.loads(body)["hits"]]


@pytest.mark.slow
def test_a_rebuilt_index_is_served_at_once(two_builds, tmp_path):
    index, first_ids, second_corpus, second_ids = two_builds
    with Server(tmp_path / "home", "--index", str(index)) as server:
        key = index.name
        before = {mode: _search(server, "$x^2$ prime number integral", mode, key) for mode in ("bm25", "structure")}
        assert all(ids and set(ids) <= first_ids for ids in before.values()), before
        _, _, body = server.request("GET", "/api/health")
        generation = {i["key"]: i for i in json.loads(body)["indexes"]}[key]["generation"]

        rebuilt = run_measured(["index", "--input", str(second_corpus), "--index", str(index)], tmp_path)
        assert rebuilt.returncode == 0, rebuilt.stderr[-2000:]

        _, _, body = server.request("GET", "/api/health")
        entry = {i["key"]: i for i in json.loads(body)["indexes"]}[key]
        assert entry["generation"] != generation and f"{DOCS:,} documents" in entry["label"]
        for mode in ("bm25", "structure"):
            after = _search(server, "$x^2$ prime number integral", mode, key)
            assert after and set(after) <= second_ids, (mode, after)
        hit = after[0]
        status, _, body = server.request("GET", f"/api/documents/{urllib.parse.quote(hit)}?index={key}")
        assert status == 200 and json.loads(body)["doc_id"] == hit
        old = sorted(first_ids)[0]
        assert_http_error(*server.request("GET", f"/api/documents/{urllib.parse.quote(old)}?index={key}")[::2], 404)
        status, _, body = server.request(
            "POST", "/api/ask", {"question": "How do I show $x^2 \\geq 0$?", "index": key, "use_llm": False}
        )
        answer = json.loads(body)
        assert status == 200, body[:500]
        assert answer["citations"] and set(answer["citations"]) <= second_ids, (
            answer["text"][:1000],
            answer["notices"],
        )
        assert {h["doc_id"] for h in answer["hits"]} <= second_ids
        assert server.alive() and "Traceback" not in server.log_text()


def test_the_python_api_follows_a_rebuild(two_builds, tmp_path):
    from mathscout import MathScout
    from mathscout.retrievers.indexing import build_index

    index, first_ids, second_corpus, second_ids = two_builds
    copy = index
    scout = MathScout(copy, use_llm=False)
    assert {h.doc_id for h in scout.search("prime number", mode="bm25", k=5)} <= (first_ids | second_ids)
    build_index([second_corpus], copy)
    hits = scout.search("prime number", mode="bm25", k=5)
    assert hits and {h.doc_id for h in hits} <= second_ids
    answer = scout.ask("Why is $a^2+b^2=c^2$?", mode="structure", k=3)
    assert {h.doc_id for h in answer.hits} <= second_ids


def test_a_removed_index_is_a_clear_error_not_a_stale_answer(two_builds, tmp_path):
    import shutil

    from mathscout import MathScout
    from mathscout.errors import MathScoutError

    index = two_builds[0]
    scout = MathScout(index, use_llm=False)
    assert scout.search("prime number", mode="bm25", k=3)
    shutil.rmtree(index)
    with pytest.raises(MathScoutError, match="is gone"):
        scout.search("prime number", mode="bm25", k=3)
