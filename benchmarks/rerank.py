"""Reranking latency (issue 34): the index's cross-encoder on each backend beside the embedding reranker.

    mathscout bench rerank [--index DIR] [--topics T] [--queries 20] [--depths 30,100] [--mode bm25]
                           [--backends onnx-int8,onnx,torch]

The first `--queries` dev topics are searched once (`--mode`, top max(depths)); each reranker then reorders the top d
hits of every query (`Reranker.rerank`, passages read from the store included), timed wall-clock per call after one
untimed call per reranker and depth. Printed: p50 and p90 in ms against the targets (top 30 ≤ 300 ms, top 100 ≤ 1 s,
p50), the CPU time per call, and the machine: CPUs and the 1-minute load average before and after each reranker (the
machine is shared: a load above the CPU count slows every figure).
"""

from __future__ import annotations

import argparse
import functools
import os
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from mathscout.config import default_index_path, shared_data
from mathscout.dense.cross import BACKENDS, CrossEncoderInfo
from mathscout.errors import MathScoutError
from mathscout.evaluation.topics import load_topics
from mathscout.index.layout import IndexDir
from mathscout.retrievers.base import Reranker, prepare_query
from mathscout.retrievers.registry import open_retriever
from mathscout.retrievers.rerank import CrossEncoderReranker, EmbeddingReranker

TARGET_MS = {30: 300, 100: 1000}  # issue 34: p50 of reranking the top 30 / top 100


def _load() -> float:
    return os.getloadavg()[0]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="mathscout bench rerank", description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, default=None, help="default: the default index")
    parser.add_argument("--topics", default=None, help="default: the shared dev topics")
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--depths", default="30,100", help="hits reranked per query, comma-separated")
    parser.add_argument("--mode", default="bm25", help="the first stage")
    parser.add_argument("--backends", default=",".join(BACKENDS), help="cross-encoder backends timed")
    args = parser.parse_args(argv)
    depths = sorted({int(d) for d in args.depths.split(",") if d.strip()})
    if not depths or min(depths) < 1:
        raise MathScoutError("--depths must list positive numbers")
    index = IndexDir(args.index or default_index_path())
    topics = load_topics(args.topics or shared_data() / "collection" / "topics.dev.jsonl")[: args.queries]
    first = open_retriever(index, args.mode)
    queries = [prepare_query(t) for t in topics]
    hits = {q.id: first.batch_search([q], max(depths))[q.id] for q in queries}
    rerankers: list[tuple[str, Callable[[], Reranker]]] = [
        ("embedding (torch fp32)", lambda: EmbeddingReranker(store=index.store))
    ]
    info = CrossEncoderInfo.read(index)
    if info is None:
        print(
            f"the index {index.path} has no cross-encoder (mathscout train cross-encoder --index {index.path}): "
            "the embedding reranker only"
        )
    else:
        for backend in [b.strip() for b in args.backends.split(",") if b.strip()]:
            chosen = " (chosen)" if backend == info.backend else ""
            rerankers.append(
                (
                    f"cross ({backend}){chosen}",
                    functools.partial(CrossEncoderReranker, index, store=index.store, backend=backend),
                )
            )
    print(
        f"{len(queries)} queries of {args.mode} ({index.path}, {index.manifest.documents:,} documents); "
        f"machine: {os.cpu_count()} CPUs, load average {_load():.1f}"
    )
    if info is not None:
        print(
            f"cross-encoder: {info.max_length} word pieces per pair, trained backend choice {info.backend} "
            f"({info.training.get('held_out', {}).get('rule', '')})"
        )
    print(f"{'reranker':<28} {'depth':>5} {'p50 ms':>8} {'p90 ms':>8} {'cpu ms':>8} {'target':>8}  load")
    for name, make in rerankers:
        reranker = make()
        for depth in depths:
            queries_with = [q for q in queries if hits[q.id]]
            reranker.rerank(queries_with[0], hits[queries_with[0].id][:depth])  # untimed: sessions, caches
            load_before = _load()
            wall, cpu = [], []
            for query in queries_with:
                t0, c0 = time.perf_counter(), time.process_time()
                reranker.rerank(query, hits[query.id][:depth])
                wall.append(time.perf_counter() - t0)
                cpu.append(time.process_time() - c0)
            p50, p90 = np.percentile(np.array(wall) * 1000, [50, 90])
            target = TARGET_MS.get(depth)
            verdict = "" if target is None else f"{'≤' if p50 <= target else '>'} {target:>5}"
            print(
                f"{name:<28} {depth:>5} {p50:8.0f} {p90:8.0f} {np.median(cpu) * 1000:8.0f} {verdict:>8}  "
                f"{load_before:.1f} → {_load():.1f}",
                flush=True,
            )
