"""`mathscout bench bm25`: MathScout's math-aware BM25 against the peer, pyserini BM25 over raw text.

Both indexes are built in this process from the same documents and queried with the same dev topics
(title + body), warm, one thread, k1 = 1.2, b = 0.75. Prints build time, size and p50/p95/mean query
latency, with MathScout/peer ratios.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from mathscout import java
from mathscout.evaluation.topics import load_topics
from mathscout.retrievers.indexing import build_index
from mathscout.retrievers.registry import open_retriever

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def _subset(source: Path, docs: int | None, target: Path) -> Path:
    if docs is None:
        return source
    with open(source, encoding="utf-8") as f, open(target, "w", encoding="utf-8") as out:
        for n, line in enumerate(f):
            if n == docs:
                break
            out.write(line)
    return target


def _build_raw(corpus: Path, folder: Path) -> float:
    started = time.perf_counter()
    indexer = java.lucene_index().LuceneIndexer(args=["-index", str(folder), "-quiet"], threads=2)
    batch = []
    with open(corpus, encoding="utf-8") as f:
        for line in f:
            doc = json.loads(line)
            batch.append(json.dumps({"id": doc["id"], "contents": doc["text"]}))
            if len(batch) == 500:
                indexer.add_batch_raw(batch)
                batch = []
    if batch:
        indexer.add_batch_raw(batch)
    indexer.close()
    return time.perf_counter() - started


def _latencies(search, queries) -> list[float]:
    for q in queries[:5]:
        search(q)  # warm up
    times = []
    for q in queries:
        started = time.perf_counter()
        search(q)
        times.append((time.perf_counter() - started) * 1000)
    return times


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _stats(times: list[float]) -> tuple[float, float, float]:
    ordered = sorted(times)
    return ordered[len(ordered) // 2], ordered[int(len(ordered) * 0.95) - 1], statistics.fmean(ordered)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="mathscout bench bm25", description=__doc__)
    ap.add_argument("--docs", type=int, default=None, help="use only the first N documents (default: all)")
    ap.add_argument("--queries", type=int, default=200, help="dev topics to query (default 200)")
    ap.add_argument("--k", type=int, default=1000)
    ap.add_argument("--data", type=Path, default=DATA)
    args = ap.parse_args(argv)
    queries = load_topics(args.data / "collection" / "topics.dev.jsonl")[: args.queries]
    with tempfile.TemporaryDirectory(prefix="mathscout-bench-") as tmp_name:
        tmp = Path(tmp_name)
        corpus = _subset(args.data / "collection" / "docs.jsonl", args.docs, tmp / "subset.jsonl")
        started = time.perf_counter()
        build_index([corpus], tmp / "ours", ["bm25"])
        ours_build = time.perf_counter() - started
        peer_build = _build_raw(corpus, tmp / "peer")
        ours = open_retriever(tmp / "ours", "bm25")
        peer = java.lucene_search().LuceneSearcher(str(tmp / "peer"))
        peer.set_bm25(1.2, 0.75)
        ours_ms = _latencies(lambda q: ours.batch_search([q], args.k), queries)
        peer_ms = _latencies(lambda q: peer.search(q.text[:10_000], k=args.k), queries)
        rows = [
            ("build seconds (store+bm25 vs raw)", ours_build, peer_build),
            ("bm25 index MiB", _size(tmp / "ours" / "bm25") / 2**20, _size(tmp / "peer") / 2**20),
        ]
        for label, a, b in zip(("p50 ms", "p95 ms", "mean ms"), _stats(ours_ms), _stats(peer_ms)):
            rows.append((f"query {label} (k={args.k})", a, b))
    print(f"{len(queries)} dev queries; documents: {'all' if args.docs is None else args.docs}")
    print(f"{'measure':38} {'MathScout':>10} {'pyserini':>10} {'ratio':>7}")
    for label, a, b in rows:
        print(f"{label:38} {a:10.2f} {b:10.2f} {a / b if b else float('nan'):7.2f}")
    return 0
