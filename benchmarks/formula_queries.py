"""`mathscout bench formulas`: formula-only queries made from real collection formulas, by kind.

Kinds (each query's relevant documents: those holding a formula with the source formula's operator tree):
- renamed: single-letter variables renamed consistently (a → r, b → s, …): Approach Zero's invariance;
- rerendered: the same formula written differently (`\\dfrac` → `\\frac`, `x^2` → `x^{2}`, `\\left(` → `(`);
- transformed: an algebraically equivalent form from SymPy (`mathscout.rewrite`, as `mathscout bench rewrite`);
- subexpression: the widest braced argument of the formula (a sub-tree of it).

Source formulas are drawn only from the *reporting* half of the documents (CRC-32 of the id is odd); the
fitting half is for `mathscout train structure`, which fits the formula-only setting on queries made the same
way from it. nDCG@10 (binary) per kind for BM25 over math tokens and for structure search with and without
rewriting, each by the index's own settings (run it on an untuned index and on a tuned copy), and for reference
structure search with the question setting of the full index (λ_m = 0.1, BM25 over the whole query) applied to
formula-only queries.

    mathscout bench formulas --index DIR [--sample 150] [--seed 7] [--json OUT] [--queries JSON]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict

from mathscout.errors import QueryError
from mathscout.evaluation.formula_queries import KINDS, build_queries, ndcg10
from mathscout.index.layout import IndexDir
from mathscout.retrievers import open_retriever

QUESTION_TUNED = {"lambda_m": 0.1, "text": "full"}  # the setting `mathscout train structure` stored on the full index


def systems(index: IndexDir) -> dict:
    """The retrievers compared, each by the index's stored settings (the reference row overrides them)."""
    old = {**QUESTION_TUNED, "formula_text": "full", "formula_lambda_m": QUESTION_TUNED["lambda_m"]}
    return {
        "bm25": open_retriever(index, "bm25"),
        "structure": open_retriever(index, "structure"),
        "structure-rewrite": open_retriever(index, "structure-rewrite"),
        "structure, question setting on formulas": open_retriever(index, "structure", **old),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="mathscout bench formulas", description=__doc__.splitlines()[0])
    parser.add_argument("--index", required=True)
    parser.add_argument("--sample", type=int, default=150, help="queries per kind")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", help="write the figures and queries here")
    parser.add_argument("--queries", help="reuse the queries of an earlier --json output (same index collection)")
    args = parser.parse_args(argv)
    index = IndexDir(args.index)
    started = time.perf_counter()
    if args.queries:
        with open(args.queries, encoding="utf-8") as f:
            queries = json.load(f)["queries"]
    else:
        queries = build_queries(index, args.sample, args.seed)
    print(
        f"{len(queries)} queries from the reporting half ({time.perf_counter() - started:.0f} s): "
        + ", ".join(f"{k} {sum(q['kind'] == k for q in queries)}" for k in KINDS),
        file=sys.stderr,
    )
    table: dict[str, dict[str, float]] = {}
    for name, retriever in systems(index).items():
        scores: dict[str, list[float]] = defaultdict(list)
        for q in queries:
            try:
                ranked = [h.doc_id for h in retriever.search(f"${q['latex']}$", k=10)]
            except QueryError:
                ranked = []
            scores[q["kind"]].append(ndcg10(ranked, set(q["relevant"])))
        table[name] = {k: sum(v) / len(v) for k, v in scores.items()}
        table[name]["all"] = sum(sum(v) for v in scores.values()) / sum(len(v) for v in scores.values())
        print(
            f"{name:36s} " + "  ".join(f"{k} {table[name].get(k, float('nan')):.3f}" for k in (*KINDS, "all")),
            flush=True,
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({"ndcg@10": table, "queries": queries}, out, indent=1, ensure_ascii=False)
