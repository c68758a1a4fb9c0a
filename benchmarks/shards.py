"""Sharded vs single index: runs, latency and throughput (issue 18).

    python -m mathscout.benchmarks.shards --index DIR --topics T --modes bm25,structure,hybrid --k 1000 --out-dir D [--limit N]

For each mode: one query at a time over the topics (latency p50 / p95 and throughput in queries/s, the open time
apart), the run written to D/<mode>.txt (TREC) and a line of JSON per mode to D/timings.jsonl. Compare two runs with
`python -m mathscout.evaluation.run_equality SINGLE SHARDED`.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from mathscout.evaluation.runs import write_run
from mathscout.evaluation.topics import load_topics
from mathscout.retrievers import open_retriever


def measure(index: Path, topics: list, mode: str, k: int, out_dir: Path) -> dict:
    started = time.perf_counter()
    retriever = open_retriever(index, mode)
    retriever.batch_search(topics[:1], k)  # warm: actors started, kernels compiled, JVM up
    opened = time.perf_counter() - started
    runs, latencies = {}, []
    began = time.perf_counter()
    for topic in topics:
        t0 = time.perf_counter()
        runs.update(retriever.batch_search([topic], k))
        latencies.append(time.perf_counter() - t0)
    total = time.perf_counter() - began
    write_run(runs, out_dir / f"{mode}.txt", f"mathscout-{mode}")
    ms = np.array(latencies) * 1000
    return {"index": str(index), "mode": mode, "topics": len(topics), "k": k, "open_seconds": round(opened, 1),
            "seconds": round(total, 1), "queries_per_second": round(len(topics) / total, 2),
            "p50_ms": round(float(np.percentile(ms, 50)), 1), "p95_ms": round(float(np.percentile(ms, 95)), 1),
            "load": os.getloadavg()[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--topics", type=Path, required=True)
    parser.add_argument("--modes", default="bm25,structure,hybrid")
    parser.add_argument("--k", type=int, default=1000)
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--out-dir", type=Path, required=True)
    args = parser.parse_args()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    topics = load_topics(args.topics)
    topics = topics[: args.limit] if args.limit else topics
    for mode in args.modes.split(","):
        result = measure(args.index, topics, mode, args.k, args.out_dir)
        print(json.dumps(result), flush=True)
        with open(args.out_dir / "timings.jsonl", "a", encoding="utf-8") as out:
            out.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
