"""Benchmarks against peers, run in one process and printed with ratios (`mathscout bench NAME …`).

Each benchmark is a module with a `main(argv)` function; later issues add theirs to BENCHMARKS.
"""

from __future__ import annotations

import importlib

from mathscout.errors import MathScoutError, did_you_mean

BENCHMARKS = {
    "parse": ("mathscout.benchmarks.parse_rate", "LaTeX parse rate and speed: MathScout's OPT parser vs pya0"),
    "bm25": ("mathscout.benchmarks.bm25", "BM25 build and query latency: MathScout math-aware vs pyserini raw text"),
    "structure": (
        "mathscout.benchmarks.structure_search",
        "structure search latency: exhaustive, MaxRef, GBP-NUM, GBP-LEN vs pya0",
    ),
    "hybrid": (
        "mathscout.benchmarks.hybrid",
        "hybrid (MABOWDOR) search latency: p50/p95 per component and fused, full collection",
    ),
    "rewrite": (
        "mathscout.benchmarks.rewrite_equivalence",
        "formula-equivalence test: recall@10 of structure search with and without SymPy rewriting",
    ),
    "formulas": (
        "mathscout.benchmarks.formula_queries",
        "formula-only queries by kind (renamed, re-rendered, transformed, sub-expression): nDCG@10 of BM25 and structure search, untuned and question-tuned",
    ),
    "types": (
        "mathscout.benchmarks.types_detect",
        "type detection speed: tokens/s of the tokeniser and of longest-match detection",
    ),
    "answers": (
        "mathscout.benchmarks.answers",
        "offline answers: how often the summary's first cited document is judged relevant vs the top hit (dev qrels), McNemar, latency; --grid tunes on train",
    ),
    "agent": (
        "mathscout.benchmarks.agent",
        "offline planner latency per question (p50/p95, per tool) and its ranking vs one retriever",
    ),
    "startup": (
        "mathscout.benchmarks.startup",
        "command-line start-up per mode (bm25, structure, auto, ask --no-llm): cold (--local) and through a running service, medians of 5 new processes with the load beside them; --help, warm, kernel compilation; against the targets",
    ),
    "scale": (
        "mathscout.benchmarks.scale",
        "scale corpora (--make) and cost curves per factor: build time and peak RSS per component, size, open time, query p50/p95, rank safety",
    ),
    "shards": (
        "mathscout.benchmarks.shards",
        "a sharded (or single) index: open time, p50/p95 and throughput of bm25, structure, formula-only structure and hybrid, coordinator and shard-actor peak RSS, per-shard rank safety",
    ),
    "robust": (
        "mathscout.benchmarks.robust",
        "build memory over hostile corpora (a gzip bomb, a 50 MB document, a line nested 100,000 deep) against a normal build: process tree peak RSS and ratio; what one query may cost: the longest scan of a 100 KB query, a plain question's latency while six slow computations run",
    ),
    "rerank": (
        "mathscout.benchmarks.rerank",
        "reranking latency of the top 30 and top 100 (p50/p90 over dev queries): the index's cross-encoder on each backend beside the embedding reranker, the machine's load beside them, against the targets",
    ),
    "ui-load": (
        "mathscout.benchmarks.ui_load",
        "chat page under 20 simultaneous sessions: p50/p95 latency, session isolation",
    ),
}


def run_benchmark(name: str, argv: list[str]) -> None:
    if name not in BENCHMARKS:
        raise MathScoutError(
            f"unknown benchmark '{name}'{did_you_mean(name, BENCHMARKS)} (available: {', '.join(sorted(BENCHMARKS))}; "
            "'mathscout bench --help' says what each measures)"
        )
    importlib.import_module(BENCHMARKS[name][0]).main(argv)
