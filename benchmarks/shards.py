"""A sharded (or single) index under query load: open time, latency, throughput, memory, rank safety (issue 18).

    mathscout bench shards --index DIR --queries T [--limit 50] [--k 100] [--modes bm25,structure,formula,hybrid[,dense]]
                           [--formulas X.xml …] [--safety 20] [--safety-k 100,1000] [--out-dir D]

Prints one JSON object. `open_seconds`: `open_retriever` until every shard actor answers (actors started, shard
manifests read). Per mode, one query at a time, the first one apart (`first_query_seconds`: the shards open their
retrievers, JVM and kernels) and not timed: latency p50 / p95 and throughput in queries/s. Modes: bm25, structure
and hybrid over the first `--limit` topics of T; `formula`: the structure mode over formula-only queries (default
the ARQMath Task 2 formulas of 2020–2022). Memory: peak RSS of this process (the coordinator) and of every shard
actor. Rank safety (sharded index only): for a sample of `--safety` formulas and each global k, every shard's
pruned formula search (the structure mode's strategy with the global path weights) against exhaustive search on
that shard, and the shards' merged top k against the merged exhaustive top k (ids and scores). With `--out-dir`,
each mode's run is written to D/<mode>.txt (TREC) and the JSON to D/shards-bench.json; compare two runs with
`python -m mathscout.evaluation.run_equality SINGLE SHARDED`.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from mathscout.benchmarks.scale import even_sample, percentiles
from mathscout.config import shared_data
from mathscout.evaluation.runs import write_run
from mathscout.evaluation.topics import load_topics
from mathscout.index.layout import IndexDir
from mathscout.retrievers import open_retriever
from mathscout.retrievers.shards.layout import is_sharded
from mathscout.usage import process_usage

TASK2 = [f"arqmath/topics.arqmath-{year}-task2-origin.xml" for year in (2020, 2021, 2022)]  # in the shared data
MODES = ("bm25", "structure", "formula", "hybrid", "dense")  # dense on request (an index with dense vectors)
DEFAULT_MODES = MODES[:4]


def load() -> list[float]:
    """The 1-, 5- and 15-minute load averages."""
    return [round(x, 2) for x in os.getloadavg()]


def measure_mode(index: Path, mode: str, queries: list, k: int, out_dir: Path | None) -> dict:
    """One query at a time after one untimed first query: latency p50 / p95, throughput."""
    retriever = open_retriever(index, "structure" if mode == "formula" else mode)
    started = time.perf_counter()
    runs = retriever.batch_search(queries[:1], k)
    first = time.perf_counter() - started
    latencies = []
    began = time.perf_counter()
    for query in queries[1:]:
        t0 = time.perf_counter()
        runs.update(retriever.batch_search([query], k))
        latencies.append(time.perf_counter() - t0)
    total = time.perf_counter() - began
    if out_dir is not None:
        write_run(runs, out_dir / f"{mode}.txt", f"mathscout-{mode}")
    missing = sorted({m for hits in runs.values() for m in getattr(hits, "missing_shards", [])})
    return {
        "mode": mode,
        "queries": len(latencies),
        "k": k,
        "first_query_seconds": round(first, 2),
        "seconds": round(total, 1),
        "queries_per_second": round(len(latencies) / total, 2),
        **{name: round(value, 1) for name, value in percentiles(latencies).items() if name != "n"},
        "missing_shards": missing,
        "load": load(),
    }


def merged_top(lists: list[list[tuple[int, float]]], k: int) -> list[tuple[int, float]]:
    """The shards' lists merged into the global top k: by score, then document ordinal (as one index breaks ties)."""
    return sorted((hit for hits in lists for hit in hits), key=lambda h: (-h[1], h[0]))[:k]


def rank_safety(index: Path, formulas: list[str], ks: list[int]) -> dict:
    """Per global k: formulas whose pruned top k differs from the exhaustive one on some shard, or once merged."""
    from mathscout.retrievers.shards.retriever import ShardedStructure, ShardPool

    structure = open_retriever(index, "structure")
    assert isinstance(structure, ShardedStructure)
    pool = ShardPool.of(IndexDir(index))
    out = {}
    for k in ks:
        shard_violations = merged_violations = 0
        pruned_s = exhaustive_s = 0.0
        for latex in formulas:
            t0 = time.perf_counter()
            pruned = pool.each("formula_documents", structure.options, latex, k, False)
            t1 = time.perf_counter()
            exhaustive = pool.each("formula_documents", structure.options, latex, k, True)
            pruned_s, exhaustive_s = pruned_s + t1 - t0, exhaustive_s + time.perf_counter() - t1
            shard_violations += sum(p != e for p, e in zip(pruned, exhaustive))
            merged_violations += merged_top(pruned, k) != merged_top(exhaustive, k)
        out[str(k)] = {
            "formulas": len(formulas),
            "shard_searches": len(formulas) * len(pool.actors),
            "shard_violations": shard_violations,
            "merged_violations": merged_violations,
            "pruned_seconds": round(pruned_s, 1),
            "exhaustive_seconds": round(exhaustive_s, 1),
        }
    return out


def benchmark(
    index: Path,
    topics: list,
    formula_topics: list,
    modes: list[str],
    k: int,
    safety: int,
    safety_ks: list[int],
    out_dir: Path | None,
) -> dict:
    sharded = is_sharded(index)
    result: dict = {"index": str(index), "sharded": sharded, "load_start": load()}
    if sharded:
        from mathscout.retrievers.shards.layout import ShardSet
        from mathscout.retrievers.shards.retriever import ShardPool

        shards = ShardSet.read(index)
        result["shards"] = len(shards.shards)
        result["documents_per_shard"] = [s.documents for s in shards.shards]
        result["build"] = shards.build
    started = time.perf_counter()
    open_retriever(index, "bm25")
    if sharded:
        ShardPool.of(IndexDir(index)).ping()
    result["open_seconds"] = round(time.perf_counter() - started, 2)
    result["modes"] = {}
    for mode in modes:
        queries = formula_topics if mode == "formula" else topics
        result["modes"][mode] = measure_mode(index, mode, queries, k, out_dir)
        print(json.dumps(result["modes"][mode]), flush=True)  # progress: one line per mode
    usage = process_usage()
    result["coordinator"] = {"peak_rss_mib": round(usage.peak_mib, 1), "cpu_seconds": round(usage.cpu_seconds, 1)}
    if sharded:
        result["shard_actors"] = ShardPool.of(IndexDir(index)).each("usage")
        if safety:
            formulas = [t.formula for t in formula_topics if t.formula]
            sample = even_sample(formulas, safety)
            result["rank_safety"] = rank_safety(index, sample, safety_ks)
    result["load_end"] = load()
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="mathscout bench shards", description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument(
        "--queries",
        "--topics",
        dest="queries",
        type=Path,
        required=True,
        help="topics for bm25, structure and hybrid (the collection's dev topics)",
    )
    parser.add_argument(
        "--formulas",
        type=Path,
        nargs="+",
        default=[shared_data() / name for name in TASK2],
        help="formula-only queries for the 'formula' mode (default: ARQMath Task 2 2020–2022)",
    )
    parser.add_argument("--modes", default=",".join(DEFAULT_MODES), help=f"of {', '.join(MODES)}")
    parser.add_argument("--k", type=int, default=1000)
    parser.add_argument("--limit", type=int, default=0, help="the first N topics (0: all)")
    parser.add_argument("--formula-limit", type=int, default=0, help="the first N formulas (0: all)")
    parser.add_argument("--safety", type=int, default=0, help="formulas sampled for the rank-safety check (0: none)")
    parser.add_argument("--safety-k", default="100,1000", help="the global k values of the rank-safety check")
    parser.add_argument("--out-dir", type=Path)
    args = parser.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        parser.error(f"unknown mode(s) {', '.join(unknown)} (choose from {', '.join(MODES)})")
    topics = load_topics(args.queries)
    topics = topics[: args.limit] if args.limit else topics
    formula_topics = (
        [t for path in args.formulas for t in load_topics(path)] if "formula" in modes or args.safety else []
    )
    formula_topics = formula_topics[: args.formula_limit] if args.formula_limit else formula_topics
    if args.out_dir is not None:
        args.out_dir.mkdir(parents=True, exist_ok=True)
    result = benchmark(
        args.index,
        topics,
        formula_topics,
        modes,
        args.k,
        args.safety,
        [int(k) for k in args.safety_k.split(",")],
        args.out_dir,
    )
    text = json.dumps(result, indent=1)
    print(text)
    if args.out_dir is not None:
        (args.out_dir / "shards-bench.json").write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
