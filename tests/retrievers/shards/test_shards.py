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
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="the optional 'distributed' part (ray) is not installed")
# sharded indexes: nearly every test starts or joins the local Ray instance, behind 3-shard builds of ~40-50 s each
pytestmark = [pytest.mark.ray, pytest.mark.slow]

from mathscout.errors import MathScoutError  # noqa: E402
from mathscout.evaluation.topics import load_topics  # noqa: E402
from mathscout.index.layout import IndexDir  # noqa: E402
from mathscout.retrievers import open_retriever  # noqa: E402
from tests.support.cli import REPO, run_cli  # noqa: E402

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
    assert [s.first_document for s in shards.shards] == [
        0,
        shards.shards[0].documents,
        shards.shards[0].documents + shards.shards[1].documents,
    ]
    for n in range(3):
        stats = read_global_statistics(shards.folder(sharded_small, n))
        assert stats.documents == single.documents and stats.shards == 3
    assert IndexDir(sharded_small).manifest.formulas == single.formulas


@pytest.mark.parametrize("mode", ["bm25", "structure", "hybrid"])
def test_sharded_runs_equal_the_single_index_runs(sharded_small, small_index, topics, mode):
    single = open_retriever(small_index, mode).batch_search(topics, K)
    sharded = open_retriever(sharded_small, mode).batch_search(topics, K)
    assert_same_runs(single, sharded)


def test_bm25_parameters_on_a_shard_are_checked_and_used_as_on_one_index(sharded_small):
    from mathscout.retrievers.shards.layout import ShardSet
    from mathscout.retrievers.shards.scoring import GlobalBM25
    from mathscout.types import Query

    shard = GlobalBM25(IndexDir(ShardSet.read(sharded_small).folder(sharded_small, 0)))
    query = Query(id="q", text="Riemann integral")
    before = [h.score for h in shard.rank(query, 3).hits]
    shard.set_bm25(0.9, 0.4)
    assert (shard.k1, shard.b) == (0.9, 0.4) and [h.score for h in shard.rank(query, 3).hits] != before
    with pytest.raises(MathScoutError, match="invalid BM25"):
        shard.set_bm25(1.2, 1.5)


@pytest.fixture(scope="session")
def task2_queries(shared_data):
    """ARQMath-2 Task 2 formulas: formula-only queries (match tiers, Eq. 3.18 "parts" on an index with bm25)."""
    return load_topics(shared_data / "arqmath" / "topics.arqmath-2021-task2-origin.xml")[:25]


def test_formula_only_queries_on_shards_equal_the_single_index(sharded_small, small_index, task2_queries):
    single = open_retriever(small_index, "structure").batch_search(task2_queries, K)
    sharded = open_retriever(sharded_small, "structure").batch_search(task2_queries, K)
    assert_same_runs(single, sharded)
    tiers = [h.components.get("tier") for hits in sharded.values() for h in hits]
    assert {2.0, 0.0} <= set(tiers)  # ranked by match tier (verbatim matches and partial ones), as on one index


@pytest.fixture(scope="session")
def tuned_pair(small_collection, small_index, ray_local, tmp_path_factory) -> tuple[Path, Path]:
    """A copy of the single index with a fitted Eq. 3.18 setting (structure.json, as `mathscout train structure`
    stores it; not the thesis defaults: other λ_m, text parts, widest formula), and the same documents rebuilt as 3
    shards over another copy: the sharded build keeps the index's tuned files, as a single-index rebuild does."""
    from mathscout.retrievers.shards.build import build_sharded_index

    folder = tmp_path_factory.mktemp("tuned")
    single, sharded = folder / "single", folder / "sharded"
    shutil.copytree(small_index, single)
    setting = {
        "lambda_m": 0.3,
        "max_formulas": 1,
        "text": "full",
        "tuned_on": "a test setting",
        "kinds": {"formula": {"lambda_m": 0.1, "text": "full", "tuned_on": "a test setting"}},
    }
    (single / "structure.json").write_text(json.dumps(setting), encoding="utf-8")
    shutil.copytree(single, sharded)
    build_sharded_index([small_collection], sharded, 3, ["bm25", "structure"])
    assert json.loads((sharded / "structure.json").read_text(encoding="utf-8")) == setting
    return single, sharded


def test_a_tuned_structure_setting_reaches_every_shard(tuned_pair, sharded_small, topics, task2_queries):
    single, sharded = tuned_pair
    queries = topics + task2_queries
    tuned = open_retriever(sharded, "structure").batch_search(queries, K)
    assert_same_runs(open_retriever(single, "structure").batch_search(queries, K), tuned)
    defaults = open_retriever(sharded_small, "structure").batch_search(queries, K)
    changed = [q for q in tuned if [h.doc_id for h in tuned[q]] != [h.doc_id for h in defaults[q]]]
    assert len(changed) > len(queries) // 2  # the shards score with the setting, not the thesis defaults


def test_train_structure_refuses_a_sharded_index_in_one_line(sharded_small, tmp_path):
    result = run_cli(["train", "structure", "--index", str(sharded_small)], tmp_path / "home")
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "is a sharded index" in result.stderr and "structure.json" in result.stderr


def test_structure_rewrite_on_shards_equals_the_single_index(sharded_small, small_index, task2_queries):
    from functools import lru_cache

    from mathscout.rewrite import equivalent_forms

    rewriter = lru_cache(maxsize=None)(
        lambda latex, max_forms=8, seconds=2.0: equivalent_forms(latex, max_forms=max_forms, seconds=30.0)
    )
    queries = task2_queries[:8]
    single = open_retriever(small_index, "structure-rewrite", rewriter=rewriter).batch_search(queries, K)
    sharded = open_retriever(sharded_small, "structure-rewrite", rewriter=rewriter).batch_search(queries, K)
    assert_same_runs(single, sharded)
    assert any(h.components.get("rewrite_form", 0.0) > 0 for hits in sharded.values() for h in hits)  # forms found some


@pytest.fixture(scope="session")
def ranker_pair(tuned_pair, small_collection, shared_data) -> tuple[Path, Path]:
    """A ranker trained on the single index (40 train topics with judged answers in it): the model is two files of the
    index (ranker.json, ranker.lgb.txt), copied into the sharded index's folder. The tuned pair's copies are reused:
    each open sharded index keeps one actor per shard (a quarter CPU each), and a local Ray here has 2 CPUs."""
    single, sharded = tuned_pair
    folder = single.parent
    held = {json.loads(line)["id"] for line in small_collection.read_text(encoding="utf-8").splitlines()}
    collection = shared_data / "collection"
    qrels = [
        line
        for line in (collection / "qrels.train.txt").read_text(encoding="utf-8").splitlines()
        if line.split()[2] in held and int(line.split()[3]) > 0
    ]
    wanted = set(sorted({line.split()[0] for line in qrels})[:40])
    train = folder / "topics.train.jsonl"
    train.write_text(
        "".join(
            line + "\n"
            for line in (collection / "topics.train.jsonl").read_text(encoding="utf-8").splitlines()
            if json.loads(line)["id"] in wanted
        ),
        encoding="utf-8",
    )
    (folder / "qrels.train.txt").write_text(
        "".join(line + "\n" for line in qrels if line.split()[0] in wanted), encoding="utf-8"
    )
    result = run_cli(
        [
            "train",
            "ranker",
            "--index",
            str(single),
            "--topics",
            str(train),
            "--qrels",
            str(folder / "qrels.train.txt"),
            "--sample",
            "0",
            "--folds",
            "2",
            "--rounds",
            "30",
        ],
        folder / "home",
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    for name in ("ranker.json", "ranker.lgb.txt"):
        shutil.copy(single / name, sharded / name)
    return single, sharded


def test_ranked_on_shards_equals_the_single_index(ranker_pair, topics):
    single, sharded = ranker_pair
    assert_same_runs(
        open_retriever(single, "ranked").batch_search(topics, K),
        open_retriever(sharded, "ranked").batch_search(topics, K),
    )
    hits = open_retriever(sharded, "ranked").search(topics[0].text, k=5)
    assert hits and hits[0].snippet


def test_modes_that_combine_others_run_at_the_coordinator(sharded_small, small_index, topics):
    """Every mode without a component of its own (hybrid, structure-rewrite, ranked, auto) opens over the sharded
    modes, never once per shard with the shard's own statistics; `auto` (the assistant's planned search) answers as
    on one index."""
    from mathscout.agent.planned import open_mode
    from mathscout.retrievers.registry import combining_modes
    from mathscout.retrievers.shards.retriever import ShardedRetriever

    assert combining_modes() == {"hybrid", "structure-rewrite", "ranked"}
    auto = open_mode(sharded_small, "auto")
    assert not isinstance(auto, ShardedRetriever)
    queries = [t for t in topics if "$" not in t.text][:4]  # no SymPy rewriting: its time budget varies with the load
    single = open_mode(small_index, "auto")
    assert_same_runs({q.id: single.search(q, 10) for q in queries}, {q.id: auto.search(q, 10) for q in queries})


@pytest.fixture()
def two_shards(small_collection, ray_local, tmp_path_factory):
    """The small index's documents in 2 shards (bm25, structure); its actors are let go afterwards (a local Ray here has
    2 CPUs, and the other sharded indexes of the session hold most of them)."""
    from mathscout.retrievers.shards.build import build_sharded_index
    from mathscout.retrievers.shards.retriever import ShardPool

    path = tmp_path_factory.mktemp("sharded-2") / "small-2"
    build_sharded_index([small_collection], path, 2, ["bm25", "structure"])
    yield path
    pool = ShardPool._pools.pop(str(path.resolve()), None)
    for actor in pool.actors if pool else []:
        ray.kill(actor, no_restart=True)


def test_auto_rewrites_formulas_on_shards_as_on_the_single_index(two_shards, small_index, topics, monkeypatch):
    """The assistant's search (`auto`) on a sharded index rewrites each formula (SymPy) and structure-searches every
    form over the shards, fused at the coordinator as on one index: the same ranked ids and scores. SymPy's forms
    are computed once per formula (a time budget that no load reaches), so both indexes search the same forms."""
    from functools import lru_cache

    from mathscout import MathScout, rewrite
    from mathscout.agent.planned import open_mode

    sympy_forms = rewrite.equivalent_forms
    forms = lru_cache(maxsize=None)(
        lambda latex, max_forms=8, seconds=2.0: sympy_forms(latex, max_forms=max_forms, seconds=30.0)
    )
    monkeypatch.setattr(rewrite, "equivalent_forms", forms)  # what the assistant's rewrite_formula tool calls
    queries = [t for t in topics if "$" in t.text][:6]
    single, sharded = open_mode(small_index, "auto"), open_mode(two_shards, "auto")
    assert_same_runs({q.id: single.search(q, 10) for q in queries}, {q.id: sharded.search(q, 10) for q in queries})
    answers = [MathScout(two_shards, use_llm=False).ask(q.text) for q in queries]
    assert any(answer.rewrites for answer in answers)  # SymPy found forms, and they were searched on the shards
    assert any(sum(call.tool == "structure_search" for call in answer.trace) > 1 for answer in answers)
    assert not any("sharded" in notice for answer in answers for notice in answer.notices)


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
    result = run_cli(
        [
            "search",
            "--index",
            str(sharded_small),
            "--mode",
            "bm25",
            "--k",
            "5",
            "--json",
            "integral of a continuous function",
        ],
        tmp_path / "home",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    data = json.loads(result.stdout)
    expected = open_retriever(small_index, "bm25").search("integral of a continuous function", k=5)
    assert [h["doc_id"] for h in data["hits"]] == [h.doc_id for h in expected]
    assert data["missing_shards"] == []


def test_run_equality_says_a_sharded_run_is_the_single_run_and_refuses_a_broken_file(
    sharded_small, small_index, topics, tmp_path, capsys
):
    """`python -m mathscout.evaluation.run_equality SINGLE SHARDED`: the check the README's equality figures come from."""
    from mathscout.evaluation.run_equality import main
    from mathscout.evaluation.runs import write_run

    single, sharded = tmp_path / "single.txt", tmp_path / "sharded.txt"
    write_run(open_retriever(small_index, "bm25").batch_search(topics, K), single, "single")
    write_run(open_retriever(sharded_small, "bm25").batch_search(topics, K), sharded, "sharded")
    assert main([str(single), str(sharded)]) == 0
    assert f"'identical': {len(topics)}" in capsys.readouterr().out
    broken = tmp_path / "broken.txt"
    broken.write_text(sharded.read_text(encoding="utf-8").splitlines()[0].rsplit(" ", 2)[0] + "\n", encoding="utf-8")
    assert main([str(single), str(broken)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: ") and "got 4 columns" in error and len(error.strip().splitlines()) == 1


def test_bench_shards_reports_latency_memory_and_rank_safety(sharded_small, dev_subset, shared_data, tmp_path):
    """`mathscout bench shards`: one JSON with every mode's latency and throughput, the coordinator's and each shard
    actor's peak RSS, and the per-shard pruning checked against exhaustive search at the global k."""
    from mathscout.benchmarks.shards import main

    main(
        [
            "--index",
            str(sharded_small),
            "--queries",
            str(dev_subset[0]),
            "--limit",
            "4",
            "--k",
            "50",
            "--formulas",
            str(shared_data / "arqmath" / "topics.arqmath-2021-task2-origin.xml"),
            "--formula-limit",
            "12",
            "--safety",
            "4",
            "--safety-k",
            "50,200",
            "--out-dir",
            str(tmp_path),
        ]
    )
    result = json.loads((tmp_path / "shards-bench.json").read_text(encoding="utf-8"))
    assert (
        result["sharded"] and result["shards"] == 3 and result["open_seconds"] >= 0
    )  # 0.0 when earlier tests started the actors
    assert set(result["modes"]) == {"bm25", "structure", "formula", "hybrid"}
    for mode, figures in result["modes"].items():
        assert figures["queries_per_second"] > 0 and 0 < figures["p50_ms"] <= figures["p95_ms"], mode
        assert figures["missing_shards"] == [] and (tmp_path / f"{mode}.txt").is_file(), mode
    assert len(result["shard_actors"]) == 3 and all(a["peak_rss_mib"] > 0 for a in result["shard_actors"])
    assert result["coordinator"]["peak_rss_mib"] > 0
    for k in ("50", "200"):
        safety = result["rank_safety"][k]
        assert safety["formulas"] == 4 and safety["shard_searches"] == 12
        assert safety["shard_violations"] == 0 and safety["merged_violations"] == 0


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
    pool = ShardPool.of(IndexDir(sharded_small))
    # shard 3's machine is gone for good: its actor dies and a new one cannot open the folder it is sent to (a folder
    # missing at the coordinator is a damaged index, refused before Ray starts: tests/robust/test_damaged_files.py)
    gone = [*shards.shards[:2], replace(shards.shards[2], path=str(shards.folder(sharded_small, 2)) + ".away")]
    pool.shards = replace(shards, shards=gone)
    try:
        ray.kill(pool.actors[2], no_restart=True)
        hits = open_retriever(sharded_small, "bm25").search(query, k=20)
        assert len(hits.missing_shards) == 1 and "shard 3 of 3" in hits.missing_shards[0]
        first = shards.shards[2].first_document
        ordinals = {d: n for n, d in enumerate(IndexDir(sharded_small).store.doc_ids())}
        assert all(ordinals[h.doc_id] < first for h in hits)
        expected = [h.doc_id for h in complete if ordinals[h.doc_id] < first]  # the other shards' part of the answer
        assert [h.doc_id for h in hits][: len(expected)] == expected
        result = run_search(SearchRequest(query, "bm25", 10).checked(), ToolBox(sharded_small)).to_dict()
        assert result["missing_shards"] and any("partial results" in n for n in result["notices"])
        tool = ToolBox(sharded_small).search(query, "bm25", k=10)  # what the agent's tools (and an LLM) see
        assert any("partial results" in n and "shard 3 of 3" in n for n in tool.notices)
    finally:
        pool.shards = shards
    assert open_retriever(sharded_small, "bm25").search(query, k=20).missing_shards == []  # back once it is back


_JVM_THEN_RAY = """
import sys
from mathscout.retrievers import open_retriever
from mathscout.retrievers.shards.cluster import connect
from tests.support.signals import fault_handler_library
open_retriever(sys.argv[1], "bm25").search("integral of a polynomial", k=5)  # the JVM starts first
connect(sys.argv[2])
print(fault_handler_library(11))
"""


def test_a_process_searching_lucene_then_joining_ray_keeps_the_jvm_fault_handler(small_index, ray_local):
    """Ray's core worker installs its own SIGSEGV handler; HotSpot raises SIGSEGV on purpose (null checks, safepoints),
    so without the JVM's handler a BM25 search in a Ray driver crashes the process now and then."""
    import subprocess
    import sys

    import ray

    address = ray.get_runtime_context().gcs_address
    done = subprocess.run(
        [sys.executable, "-c", _JVM_THEN_RAY, str(small_index), address],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "libjvm.so"


def test_sharding_refuses_bad_requests_in_one_line(small_collection, tmp_path):
    result = run_cli(
        ["index", "--input", str(small_collection), "--index", str(tmp_path / "x"), "--shards", "0"], tmp_path / "home"
    )
    assert result.returncode == 2 and "--shards must be 1–64" in result.stderr and "Traceback" not in result.stderr


def test_a_shard_build_that_fails_is_one_clear_error_and_leaves_no_index(
    small_collection, ray_local, tmp_path, monkeypatch
):
    """A shard's Ray task fails (here its dense model is missing: the workers inherit MATHSCOUT_*): the build stops
    with the task's own error, not Ray's wrapper, and leaves neither an index nor a half-built folder."""
    from mathscout.retrievers.shards.build import build_sharded_index

    monkeypatch.setenv("MATHSCOUT_DENSE_MODEL", str(tmp_path / "no-model"))
    with pytest.raises(MathScoutError, match="no dense model at") as failed:
        build_sharded_index([small_collection], tmp_path / "idx", 2, ["bm25", "dense"])
    assert "RayTaskError" not in str(failed.value)
    assert not (tmp_path / "idx").exists()
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".idx.building")]


def test_a_shard_stops_before_its_next_step_once_another_failed(tmp_path):
    """The coordinator asks the other shards to stop (a marker beside them) instead of cancelling their Ray tasks: a
    shard that sees it starts nothing and says why."""
    from mathscout.index.components import BuildOptions
    from mathscout.retrievers.shards.build import STOP, build_shard

    (tmp_path / "shards").mkdir()
    (tmp_path / "shards" / STOP).touch()
    folder = tmp_path / "shards" / "shard-001"
    with pytest.raises(MathScoutError, match="shard-001 stopped: another shard failed"):
        build_shard(str(tmp_path / "store.sqlite"), str(folder), 0, 10, ["bm25"], BuildOptions())
    assert not folder.exists()


@pytest.fixture(scope="session")
def dense_pair(dense_index, dense_topics, ray_local, tmp_path_factory) -> tuple[Path, Path, list]:
    """The dense test collection as one index and as 2 shards, both with bm25 and dense (so that hybrid's equal-weight
    fusion fuses the same components), and its topics, with the default encoder (ONNX int8): each passage is encoded
    alone (batching "passage"), so a shard's vectors are the single index's."""
    from mathscout.retrievers.indexing import build_index
    from mathscout.retrievers.shards.build import build_sharded_index

    folder = tmp_path_factory.mktemp("sharded-dense")
    corpus = dense_index.parent / "docs.jsonl"
    build_index([corpus], folder / "single", ["bm25", "dense"])
    build_sharded_index([corpus], folder / "shards", 2, ["bm25", "dense"])
    (folder / "topics.jsonl").write_text("".join(json.dumps(t) + "\n" for t in dense_topics), encoding="utf-8")
    return folder / "single", folder / "shards", load_topics(folder / "topics.jsonl")


@pytest.mark.parametrize("mode", ["dense", "hybrid"])
@pytest.mark.model
def test_dense_and_hybrid_on_shards_equal_the_single_index(dense_pair, mode):
    single_index, sharded_index, queries = dense_pair
    assert_same_runs(
        open_retriever(single_index, mode).batch_search(queries, 50),
        open_retriever(sharded_index, mode).batch_search(queries, 50),
    )
    shard = Path(sharded_index) / "shards" / "shard-000" / "dense" / "meta.json"
    assert json.loads(shard.read_text(encoding="utf-8"))["batching"] == "passage"  # the policy is recorded


@pytest.mark.model
def test_the_shards_passage_vectors_are_the_single_index_vectors(dense_pair, capsys):
    """`python -m mathscout.evaluation.vector_equality SINGLE SHARDED`: byte-identical vectors and passage → document
    map (exit 0); a folder without a shards manifest is one line (exit 2)."""
    from mathscout.evaluation.vector_equality import main

    single_index, sharded_index, _ = dense_pair
    assert main([str(single_index), str(sharded_index)]) == 0
    printed = capsys.readouterr().out
    assert "'byte_identical': True" in printed and "'same_documents': True" in printed
    assert main([str(single_index), str(single_index)]) == 2
    assert "shards manifest" in capsys.readouterr().err


@pytest.mark.model
def test_a_sharded_dense_query_is_encoded_once_at_the_coordinator(dense_pair):
    """The coordinator encodes a dense query with the shards' model and the shards search its vector: the same hits as
    one index, and a query with nothing to encode is the single index's clear error (alone) or a notice (in a run)."""
    from mathscout.errors import QueryError
    from mathscout.retrievers.shards.retriever import ShardedDense
    from mathscout.types import Query

    single_index, sharded_index, queries = dense_pair
    sharded = open_retriever(sharded_index, "dense")
    assert isinstance(sharded, ShardedDense)
    vectors = sharded.query_vectors(queries[:3])
    assert all(v.shape == (384,) for v in vectors)
    single = open_retriever(single_index, "dense")
    assert np.array_equal(np.stack(vectors), single.encode(queries[:3]))
    empty = Query(id="empty", text="\\quad")  # passes the query checks, but nothing reaches the model
    assert sharded.query_vectors([empty, queries[0]])[0] is None
    with pytest.raises(QueryError, match="nothing to encode"):
        sharded.search(empty, k=5)
    run = sharded.batch_search([empty, queries[0]], 5)
    assert run["empty"] == [] and [h.doc_id for h in run[queries[0].id]] == [
        h.doc_id for h in single.search(queries[0], k=5)
    ]
