"""Structure search latency per pruning strategy, with a rank-safety check (thesis §4.4 discipline).

Usage: python -m benchmarks.structure_search --index INDEX_DIR [--k 100] [--per-document]

Queries: the 285 ARQMath Task 2 topic formulas (2020–2022). Each query is parsed once (the parse time
is added to every strategy's latency), run once to warm up, then once per strategy; every pruned
top-k is compared with the exhaustive top-k (ids and scores). Prints p50/p95/mean per strategy.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from evaluation.topics import load_topics
from mathscout.errors import QueryError
from mathscout.index.layout import IndexDir
from mathscout.structure.index import PathIndex
from mathscout.structure.search import STRATEGIES, StructureSearcher

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
TOPIC_FILES = [f"arqmath/topics.arqmath-{year}-task2-origin.xml" for year in (2020, 2021, 2022)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", required=True, type=Path, help="an index directory with the structure component")
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--per-document", action="store_true", help="rank documents by their best formula")
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    args = parser.parse_args(argv)

    started = time.perf_counter()
    searcher = StructureSearcher(PathIndex.open(IndexDir(args.index).component_path("structure")))
    print(f"index opened in {time.perf_counter() - started:.2f} s")
    formulas = [t.formula for name in TOPIC_FILES for t in load_topics(args.data / name)]
    latency: dict[str, list[float]] = {s: [] for s in STRATEGIES}
    unsafe = unreadable = 0
    for latex in formulas:
        t0 = time.perf_counter()
        try:
            query = searcher.prepare(latex)
        except QueryError:
            unreadable += 1
            continue
        parse = time.perf_counter() - t0
        searcher.search(query, args.k, "gbp-len", args.per_document)  # warm-up
        reference = None
        for strategy in STRATEGIES:
            t0 = time.perf_counter()
            hits = searcher.search(query, args.k, strategy, args.per_document)
            latency[strategy].append(parse + time.perf_counter() - t0)
            ranking = [(h.formula, h.score) for h in hits]
            if reference is None:
                reference = ranking
            elif ranking != reference:
                unsafe += 1
                print(f"rank-safety violation: {strategy} on {latex!r}")
    print(f"{len(formulas)} queries ({unreadable} unreadable), k={args.k}, per document: {args.per_document}; "
          f"rank-safety violations: {unsafe}")
    for strategy, times in latency.items():
        ms = np.array(times) * 1000
        print(f"  {strategy:<10} p50 {np.percentile(ms, 50):7.2f} ms  p95 {np.percentile(ms, 95):7.2f} ms  mean {ms.mean():7.2f} ms")


if __name__ == "__main__":
    main()
