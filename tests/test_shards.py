"""Sharded indexes on Ray (issue 18), on real documents of the shared collection and a local Ray instance.

The specification: a sharded index answers every query as one index over the same documents would (same ids in the
same order, scores within 1e-5); a shard actor that dies is restarted and the query retried; a shard that stays
unreachable gives partial results that say which shard is missing.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the optional 'distributed' part (ray) is not installed")

from mathscout.evaluation.topics import load_topics  # noqa: E402
from mathscout.index.layout import IndexDir  # noqa: E402
from mathscout.retrievers import open_retriever  # noqa: E402
from tests.cli_helpers import run_cli  # noqa: E402

K = 100
TOLERANCE = 1e-5


@pytest.fixture(scope="session")
def ray_local():
    """One local Ray instance for the whole session (shard actors take a quarter of a CPU each)."""
    from mathscout.retrievers.shards.cluster import connect

    connect("local")
    yield
    ray.shutdown()


@pytest.fixture(scope="session")
def sharded_small(small_collection, ray_local, tmp_path_factory) -> Path:
    """The small index's documents in 3 shards (bm25, structure)."""
    from mathscout.retrievers.shards.build import build_sharded_index

    path = tmp_path_factory.mktemp("sharded") / "small-3"
    build_sharded_index([small_collection], path, 3, ["bm25", "structure"])
    return path


@pytest.fixture(scope="session")
def topics(dev_subset):
    return load_topics(dev_subset[0])[:30]


def assert_same_runs(single: dict, sharded: dict) -> None:
    assert set(single) == set(sharded)
    for topic, hits in single.items():
        other = sharded[topic]
        assert [h.doc_id for h in other] == [h.doc_id for h in hits], topic
        assert max((abs(a.score - b.score) for a, b in zip(hits, other)), default=0.0) <= TOLERANCE, topic


def test_manifest_lists_the_shards_and_every_shard_holds_the_global_statistics(sharded_small, small_index):
    from mathscout.retrievers.shards.layout import ShardSet
    from mathscout.retrievers.shards.stats import read_global_statistics

    shards = ShardSet.read(sharded_small)
    single = IndexDir(small_index).manifest
    assert len(shards.shards) == 3 and sum(s.documents for s in shards.shards) == single.documents
    assert [s.first_document for s in shards.shards] == [0, shards.shards[0].documents, shards.shards[0].documents + shards.shards[1].documents]
    for n in range(3):
        stats = read_global_statistics(shards.folder(sharded_small, n))
        assert stats.documents == single.documents and stats.shards == 3
    assert IndexDir(sharded_small).manifest.formulas == single.formulas


@pytest.mark.parametrize("mode", ["bm25", "structure", "hybrid"])
def test_sharded_runs_equal_the_single_index_runs(sharded_small, small_index, topics, mode):
    single = open_retriever(small_index, mode).batch_search(topics, K)
    sharded = open_retriever(sharded_small, mode).batch_search(topics, K)
    assert_same_runs(single, sharded)


def test_search_and_python_api_on_a_sharded_index(sharded_small, small_index):
    from mathscout.agent import MathScout

    query = "continuous function with $\\int_0^1 f(x) x^n dx = 0$"
    scout = MathScout(sharded_small, use_llm=False)
    assert {"bm25", "structure", "hybrid"} <= set(scout.modes())
    hits = scout.search(query, mode="structure", k=10)
    expected = open_retriever(small_index, "structure").search(query, k=10)
    assert [h.doc_id for h in hits] == [h.doc_id for h in expected]
    assert hits[0].snippet  # explained from the index's own store
    assert getattr(hits, "missing_shards", []) == []
    answer = scout.ask(query, use_llm=False)
    assert answer.citations


def test_cli_search_json_on_a_sharded_index(sharded_small, small_index, tmp_path):
    result = run_cli(["search", "--index", str(sharded_small), "--mode", "bm25", "--k", "5", "--json",
                      "integral of a continuous function"], tmp_path / "home")
    assert result.returncode == 0, result.stderr[-2000:]
    data = json.loads(result.stdout)
    expected = open_retriever(small_index, "bm25").search("integral of a continuous function", k=5)
    assert [h["doc_id"] for h in data["hits"]] == [h.doc_id for h in expected]
    assert data["missing_shards"] == []


def test_an_actor_killed_mid_query_is_restarted_and_the_query_retried(sharded_small, topics):
    from mathscout.retrievers.shards.retriever import ShardPool

    retriever = open_retriever(sharded_small, "structure")
    expected = retriever.batch_search(topics, K)
    pool = ShardPool.of(IndexDir(sharded_small))
    before = pool.ping()
    result: dict = {}
    worker = threading.Thread(target=lambda: result.update(runs=retriever.batch_search(topics, K)))
    worker.start()
    time.sleep(0.5)  # the run's first calls are in flight
    ray.kill(pool.actors[1], no_restart=False)  # Ray restarts it (max_restarts) and retries the call
    worker.join(timeout=300)
    assert "runs" in result
    assert_same_runs(expected, result["runs"])
    assert all(getattr(hits, "missing_shards", []) == [] for hits in result["runs"].values())
    assert pool.ping()[1] != before[1]  # a new process holds shard 2


def test_a_shard_that_stays_unreachable_gives_flagged_partial_results(sharded_small, small_index):
    from mathscout.retrievers.shards.layout import ShardSet
    from mathscout.retrievers.shards.retriever import ShardPool
    from mathscout.tools.searching import SearchRequest, run_search
    from mathscout.tools.toolbox import ToolBox

    query = "integral of a continuous function"
    complete = open_retriever(sharded_small, "bm25").search(query, k=20)
    shards = ShardSet.read(sharded_small)
    folder = shards.folder(sharded_small, 2)
    hidden = folder.with_name(folder.name + ".away")
    pool = ShardPool.of(IndexDir(sharded_small))
    shutil.move(folder, hidden)
    try:
        ray.kill(pool.actors[2], no_restart=True)  # gone for good: a new actor cannot open the missing folder
        hits = open_retriever(sharded_small, "bm25").search(query, k=20)
        assert len(hits.missing_shards) == 1 and "shard 3 of 3" in hits.missing_shards[0]
        first = shards.shards[2].first_document
        ordinals = {d: n for n, d in enumerate(IndexDir(sharded_small).store.doc_ids())}
        assert all(ordinals[h.doc_id] < first for h in hits)
        expected = [h.doc_id for h in complete if ordinals[h.doc_id] < first]  # the other shards' part of the answer
        assert [h.doc_id for h in hits][:len(expected)] == expected
        result = run_search(SearchRequest(query, "bm25", 10).checked(), ToolBox(sharded_small)).to_json()
        assert result["missing_shards"] and any("partial results" in n for n in result["notices"])
    finally:
        shutil.move(hidden, folder)
    assert open_retriever(sharded_small, "bm25").search(query, k=20).missing_shards == []  # back once it is back


def _fault_handler_library(signal_number: int) -> str:
    """The shared library whose function handles `signal_number` in this process (dladdr of its sigaction)."""
    import ctypes

    libc = ctypes.CDLL(None)
    buffer = ctypes.create_string_buffer(512)
    assert libc.sigaction(signal_number, None, buffer) == 0
    handler = ctypes.c_void_p.from_buffer(buffer).value

    class DlInfo(ctypes.Structure):
        _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p), ("sname", ctypes.c_char_p), ("saddr", ctypes.c_void_p)]

    info = DlInfo()
    libc.dladdr(ctypes.c_void_p(handler), ctypes.byref(info))
    return Path((info.fname or b"").decode()).name


_JVM_THEN_RAY = """
import sys
from mathscout.retrievers import open_retriever
from mathscout.retrievers.shards.cluster import connect
from tests.test_shards import _fault_handler_library
open_retriever(sys.argv[1], "bm25").search("integral of a polynomial", k=5)  # the JVM starts first
connect(sys.argv[2])
print(_fault_handler_library(11))
"""


def test_a_process_searching_lucene_then_joining_ray_keeps_the_jvm_fault_handler(small_index, ray_local):
    """Ray's core worker installs its own SIGSEGV handler; HotSpot raises SIGSEGV on purpose (null checks, safepoints),
    so without the JVM's handler a BM25 search in a Ray driver crashes the process now and then."""
    import subprocess
    import sys

    import ray

    address = ray.get_runtime_context().gcs_address
    done = subprocess.run([sys.executable, "-c", _JVM_THEN_RAY, str(small_index), address], capture_output=True, text=True,
                          timeout=300, cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "libjvm.so"


def test_sharding_refuses_bad_requests_in_one_line(small_collection, tmp_path):
    result = run_cli(["index", "--input", str(small_collection), "--index", str(tmp_path / "x"), "--shards", "0"],
                     tmp_path / "home")
    assert result.returncode == 2 and "--shards must be 1–64" in result.stderr and "Traceback" not in result.stderr


@pytest.fixture(scope="session")
def dense_pair(dense_index, dense_topics, ray_local, tmp_path_factory) -> tuple[Path, Path, list]:
    """The dense test collection as one index and as 2 shards, both with bm25 and dense (so that hybrid's equal-weight
    fusion fuses the same components), and its topics. Encoded with the fp32 torch backend: the default int8 ONNX
    encoder gives a passage a vector that depends on the other passages of its batch (63 of 127 passages of a shard
    differed from the single index's, by up to 0.048), so only fp32 vectors are the same in a shard and in one index."""
    import os

    from mathscout.retrievers.indexing import build_index
    from mathscout.retrievers.shards.build import build_sharded_index

    folder = tmp_path_factory.mktemp("sharded-dense")
    corpus = dense_index.parent / "docs.jsonl"
    before = os.environ.get("MATHSCOUT_DENSE_BACKEND")
    os.environ["MATHSCOUT_DENSE_BACKEND"] = "torch"  # read when a dense component is built (here and in the Ray tasks)
    try:
        build_index([corpus], folder / "single", ["bm25", "dense"])
        build_sharded_index([corpus], folder / "shards", 2, ["bm25", "dense"])
    finally:
        if before is None:
            os.environ.pop("MATHSCOUT_DENSE_BACKEND")
        else:
            os.environ["MATHSCOUT_DENSE_BACKEND"] = before
    (folder / "topics.jsonl").write_text("".join(json.dumps(t) + "\n" for t in dense_topics), encoding="utf-8")
    return folder / "single", folder / "shards", load_topics(folder / "topics.jsonl")


@pytest.mark.parametrize("mode", ["dense", "hybrid"])
def test_dense_and_hybrid_on_shards_equal_the_single_index(dense_pair, mode):
    single_index, sharded_index, queries = dense_pair
    assert_same_runs(open_retriever(single_index, mode).batch_search(queries, 50),
                     open_retriever(sharded_index, mode).batch_search(queries, 50))
