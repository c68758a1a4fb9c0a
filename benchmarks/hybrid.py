"""Hybrid (MABOWDOR) search latency: each component and the fused search, per query, in one process; and the
learned ranker's (`ranked` mode) when the index has one.

Usage: mathscout bench hybrid --index INDEX_DIR [--topics FILE] [--queries 100] [--k 10] [--depth N] [--sequential]

Queries: the first N topics of the dev set (title + body, as `mathscout run` sends them). The hybrid
retriever is the one `--mode hybrid` opens (the index's fusion.json, or equal weights); each component
fetches `depth` hits (the fused ranking needs them), then the rankings are fused. Two warm-up queries
are not timed. Prints p50/p95/mean per component, for the fusion step alone and for the whole search.
With a ranker (`mathscout train ranker`), the same queries through the `ranked` mode: each retriever, the
feature rows (document metadata read from the store included), the model, and the ranker's cost (features +
model) per 100 candidates, against the target of TARGET_RANKER_MS.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from mathscout.errors import MathScoutError
from mathscout.evaluation.topics import load_topics
from mathscout.index.layout import IndexDir
from mathscout.retrievers.base import prepare_query
from mathscout.retrievers.fusion import FusedRetriever, describe_weights
from mathscout.retrievers.registry import open_retriever

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
WARM_UP = 2
TARGET_P50_MS = 300
TARGET_RANKER_MS = 20  # scoring 100 candidates (features + model)


def print_latencies(timings: dict[str, list[float]]) -> None:
    """p50/p95/mean in milliseconds of each named list of seconds, one line each."""
    for name, values in timings.items():
        ms = np.array(values) * 1000
        print(
            f"  {name:<16} p50 {np.percentile(ms, 50):8.1f} ms  p95 {np.percentile(ms, 95):8.1f} ms  "
            f"mean {ms.mean():8.1f} ms"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="mathscout bench hybrid", description=__doc__.splitlines()[0])
    parser.add_argument("--index", required=True, type=Path)
    parser.add_argument("--topics", type=Path, default=SHARED_DATA / "collection" / "topics.dev.jsonl")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--k", type=int, default=10, help="fused hits returned")
    parser.add_argument("--depth", type=int, help="hits fetched from each component (default: the stored setting)")
    parser.add_argument("--sequential", action="store_true", help="run the components one after another")
    args = parser.parse_args(argv)

    index = IndexDir(args.index)
    started = time.perf_counter()
    options = {"parallel": not args.sequential, **({"depth": args.depth} if args.depth else {})}
    hybrid = open_retriever(index, "hybrid", **options)
    if not isinstance(hybrid, FusedRetriever):
        raise MathScoutError("the hybrid mode did not open a fused retriever")
    print(
        f"index {index.path} ({index.manifest.documents:,} documents); hybrid = {hybrid!r}, "
        f"{describe_weights(hybrid.weights)}, depth {hybrid.depth}; opened in {time.perf_counter() - started:.1f} s"
    )
    queries = [prepare_query(q) for q in load_topics(args.topics)[: args.queries + WARM_UP]]
    for query in queries[:WARM_UP]:
        hybrid.batch_search([query], args.k)
    timings: dict[str, list[float]] = {name: [] for name in [*hybrid.weights, "fusion", "hybrid (total)"]}
    unanswered = 0
    for query in queries[WARM_UP:]:
        t0 = time.perf_counter()
        try:
            hybrid.batch_search([query], args.k)
        except MathScoutError:
            unanswered += 1
            continue
        timings["hybrid (total)"].append(time.perf_counter() - t0)
        for name, seconds in hybrid.timings.items():
            timings[name].append(seconds)
    measured = len(timings["hybrid (total)"])
    if not measured:
        raise MathScoutError(f"none of the {len(queries) - WARM_UP} queries could be searched")
    print(
        f"{measured} queries from {args.topics.name} (after {WARM_UP} warm-up){f', {unanswered} unanswered' if unanswered else ''}, "
        f"k = {args.k}, single process, components in " + ("parallel threads" if hybrid.parallel else "sequence")
    )
    print_latencies(timings)
    p50 = float(np.percentile(np.array(timings["hybrid (total)"]) * 1000, 50))
    verdict = "meets" if p50 <= TARGET_P50_MS else "misses"
    print(f"hybrid p50 {p50:.0f} ms {verdict} the target of {TARGET_P50_MS} ms")
    from mathscout.retrievers.ranked import has_ranker

    if has_ranker(index):
        ranker_latency(index, queries, args.k)


def ranker_latency(index: IndexDir, queries: list, k: int) -> None:
    """The `ranked` mode over the same queries: per retriever, features, model, and per 100 candidates."""
    from mathscout.retrievers.ranked import RankedRetriever

    ranked = open_retriever(index, "ranked")
    assert isinstance(ranked, RankedRetriever)
    for query in queries[:WARM_UP]:
        ranked.batch_search([query], k)
    timings: dict[str, list[float]] = {}
    per_hundred, totals = [], []
    for query in queries[WARM_UP:]:
        t0 = time.perf_counter()
        try:
            ranked.batch_search([query], k)
        except MathScoutError:
            continue
        totals.append(time.perf_counter() - t0)
        for name, value in ranked.timings.items():
            timings.setdefault(name, []).append(value)
        if ranked.timings["candidates"]:
            per_hundred.append(
                (ranked.timings["features"] + ranked.timings["model"]) * 100 / ranked.timings["candidates"]
            )
    if not totals:
        return
    counts = np.array(timings.pop("candidates"))
    print(
        f"ranked ({', '.join(ranked.ranker.config.used)}, depth {ranked.ranker.config.depth}): {len(totals)} queries, "
        f"candidates per query p50 {np.percentile(counts, 50):.0f} (max {counts.max():.0f})"
    )
    print_latencies({**timings, "ranked (total)": totals})
    hundred = np.array(per_hundred) * 1000
    verdict = "meets" if np.percentile(hundred, 50) <= TARGET_RANKER_MS else "misses"
    print(
        f"ranker (features + model) per 100 candidates: p50 {np.percentile(hundred, 50):.1f} ms, p95 "
        f"{np.percentile(hundred, 95):.1f} ms: {verdict} the target of {TARGET_RANKER_MS} ms"
    )


if __name__ == "__main__":
    main()
