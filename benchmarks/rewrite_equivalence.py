"""Formula-equivalence benchmark: does SymPy rewriting help structure search find equivalent formulas?

    mathscout bench rewrite --index INDEX_DIR [--sample 300] [--seed 13] [--k 10] [--seconds 2]
                            [--weights 1.0,0.9,0.8] [--json OUT.json]

Built from real formulas of the index's collection: formulas are drawn at random (seed) among those with
4–30 operands that occur, as the same operator tree, in 1–10 documents; a drawn formula F is kept when
SymPy can rewrite it (`equivalent_forms`). Queries:
- untransformed: F itself;
- transformed: up to two of F's equivalent forms (expanded, factored, together/apart, cancelled, trig/log
  identities, relation moved to one side / sides swapped), i.e. how another author may have written F.
Relevant documents: every document holding a formula with F's operator tree (`canonical.tree_key`).
Measure: recall@k (|relevant ∩ top-k| / |relevant|) of structure search (GBP-LEN, per document) and of
`structure-rewrite` (max fusion) for each rewrite weight, on both query sets, with a per-rule breakdown.
Caveat: the transformed queries and the rewriter use the same SymPy functions, so the test measures
whether the rewrite round trip brings a reformulated query back to the documents' form, and whether the
extra forms cost anything on queries that need no rewriting.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from mathscout.errors import QueryError
from mathscout.evaluation.formula_queries import keyed_formulas
from mathscout.evaluation.work_files import WorkFile, as_text, as_whole
from mathscout.index.layout import IndexDir
from mathscout.retrievers.rewrite import MIN_FORM_LEAVES, REWRITE_WEIGHT, StructureRewriteRetriever
from mathscout.retrievers.structure import StructureRetriever
from mathscout.rewrite import EquivalentForm, RewriteResult, equivalent_forms
from mathscout.structure.parser import parse_latex
from mathscout.types import Hit, Query

MIN_LEAVES, MAX_LEAVES = 4, 30
MAX_CHARS = 200
MAX_DOCS = 10  # formulas found in more documents than this are too common to be a target
FORMS_PER_FORMULA = 2


def formula_keys(index: IndexDir) -> tuple[dict[str, set[str]], list[tuple[int, str, str, str]]]:
    """Documents per operator-tree key over the whole collection, and (ordinal, doc, latex, key) of the candidates."""
    docs_by_key: dict[str, set[str]] = defaultdict(set)
    candidates = []
    for ordinal, formula, tree, key in keyed_formulas(index, MAX_CHARS):
        docs_by_key[key].add(formula.doc_id)
        leaves = sum(1 for _ in tree.leaves())
        if MIN_LEAVES <= leaves <= MAX_LEAVES:
            candidates.append((ordinal, formula.doc_id, formula.latex, key))
    return docs_by_key, candidates


def _keys_file(path: Path) -> WorkFile:
    return WorkFile(path, "formula keys cache", 1, "delete it: the benchmark makes it again")


def _rewrites_file(path: Path) -> WorkFile:
    return WorkFile(path, "rewrite cache", 1, "delete it: the benchmark makes it again")


def _key_or_candidate(record: dict) -> tuple[str, Any]:
    if "key" in record:
        return "key", (as_text(record["key"]), {as_text(d) for d in record["docs"]})
    ordinal, doc_id, latex, key = record["candidate"]
    return "candidate", (as_whole(ordinal), as_text(doc_id), as_text(latex), as_text(key))


def read_keys(path: Path) -> tuple[dict[str, set[str]], list[tuple[int, str, str, str]]]:
    """`formula_keys`' result as `--keys-cache` holds it (JSON lines: never run, whoever made the file)."""
    records = _keys_file(path).read(_key_or_candidate, "a formula key or a candidate formula").records
    return dict(v for kind, v in records if kind == "key"), [v for kind, v in records if kind == "candidate"]


def _rewrite_from_line(record: dict) -> tuple[tuple[str, int], RewriteResult]:
    notice = record["notice"]
    result = RewriteResult(
        as_text(record["original"]),
        [EquivalentForm(as_text(latex), as_text(rule)) for latex, rule in record["forms"]],
        None if notice is None else as_text(notice),
    )
    return (as_text(record["latex"]), as_whole(record["max_forms"])), result


def read_rewrites(path: Path) -> dict[tuple[str, int], RewriteResult]:
    """The rewrite results `--rewrite-cache` holds, by (formula, max forms)."""
    return dict(_rewrites_file(path).read(_rewrite_from_line, "a rewrite result").records)


def build_queries(candidates, docs_by_key, sample: int, seed: int, rewrite, limit_draws: int):
    """(untransformed, transformed) query lists: dicts with id, latex, rule, relevant."""
    rng = random.Random(seed)
    order = rng.sample(range(len(candidates)), min(len(candidates), limit_draws))
    untransformed: list[dict] = []
    transformed: list[dict] = []
    seen_keys: set[str] = set()
    stats = {"drawn": 0, "too common": 0, "not rewritable": 0}
    for i in order:
        if len(untransformed) >= sample:
            break
        ordinal, _doc_id, latex, key = candidates[i]
        if key in seen_keys:
            continue
        seen_keys.add(key)
        stats["drawn"] += 1
        relevant = docs_by_key[key]
        if len(relevant) > MAX_DOCS:
            stats["too common"] += 1
            continue
        result = rewrite(latex)
        if not result.forms:
            stats["not rewritable"] += 1
            continue
        qid = f"f{ordinal}"
        untransformed.append({"id": qid, "latex": latex, "rule": "original", "relevant": sorted(relevant)})
        by_rule: dict[str, EquivalentForm] = {}
        for form in result.forms:
            by_rule.setdefault(form.rule, form)
        forms = list(by_rule.values())
        rng.shuffle(forms)
        forms = [f for f in forms if _leaves(f.latex) >= MIN_FORM_LEAVES]  # `0`, `1`: not a query anyone searches
        for n, form in enumerate(forms[:FORMS_PER_FORMULA]):
            transformed.append(
                {
                    "id": f"{qid}.{n}",
                    "latex": form.latex,
                    "rule": form.rule,
                    "relevant": sorted(relevant),
                    "source": latex,
                }
            )
    return untransformed, transformed, stats


def _leaves(latex: str) -> int:
    tree = parse_latex(latex).tree
    return sum(1 for _ in tree.leaves()) if tree is not None else 0


def recall(hits, relevant: set[str], k: int) -> float:
    return len({h.doc_id for h in hits[:k]} & relevant) / len(relevant)


def evaluate(queries, systems, k: int) -> dict[str, dict]:
    """recall@k per system (mean, and per rule), and mean latency."""
    out = {}
    for name, search in systems.items():
        values, by_rule, seconds = [], defaultdict(list), []
        for q in queries:
            started = time.perf_counter()
            try:
                hits = search(q["latex"], k)
            except QueryError:  # a query sharing no structure with the index finds nothing
                hits = []
            seconds.append(time.perf_counter() - started)
            r = recall(hits, set(q["relevant"]), k)
            values.append(r)
            by_rule[q["rule"]].append(r)
        out[name] = {
            "recall": float(np.mean(values)) if values else float("nan"),
            "by_rule": {rule: (float(np.mean(v)), len(v)) for rule, v in sorted(by_rule.items())},
            "mean_ms": float(np.mean(seconds) * 1000) if seconds else float("nan"),
            "per_query": values,
        }
        print(
            f"  {name}: recall@{k} {out[name]['recall']:.3f} ({len(values)} queries, {out[name]['mean_ms']:.0f} ms/query)",
            file=sys.stderr,
        )
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="mathscout bench rewrite", description=__doc__.split("\n")[0])
    parser.add_argument("--index", required=True)
    parser.add_argument("--sample", type=int, default=300, help="formulas (untransformed queries)")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument(
        "--seconds",
        type=float,
        default=10.0,
        help="rewrite time limit per formula (generous: on a shared CPU a short limit measures the load)",
    )
    parser.add_argument("--weights", default="1.0,0.9,0.8", help="rewrite weights to compare (max fusion)")
    parser.add_argument("--json", help="write all figures and queries here")
    parser.add_argument("--keys-cache", help="the collection's formula keys, JSON lines (reused when it exists)")
    parser.add_argument("--rewrite-cache", help="rewrite results by formula, JSON lines (reused and extended)")
    args = parser.parse_args(argv)

    index = IndexDir(args.index)
    started = time.perf_counter()
    cache = Path(args.keys_cache) if args.keys_cache else None
    if cache is not None and cache.is_file():
        docs_by_key, candidates = read_keys(cache)
    else:
        docs_by_key, candidates = formula_keys(index)
        if cache is not None:
            _keys_file(cache).write(
                {},
                [
                    *({"key": k, "docs": sorted(d)} for k, d in docs_by_key.items()),
                    *({"candidate": c} for c in candidates),
                ],
            )
    print(
        f"collection: {len(candidates):,} candidate formulas, {len(docs_by_key):,} distinct trees ({time.perf_counter() - started:.0f} s)",
        file=sys.stderr,
    )

    timings: list[float] = []
    notices: dict[str, int] = defaultdict(int)

    stored: dict[tuple[str, int], RewriteResult] = {}
    rewrite_cache = Path(args.rewrite_cache) if args.rewrite_cache else None
    if rewrite_cache is not None and rewrite_cache.is_file():
        stored = read_rewrites(rewrite_cache)

    def save_rewrites() -> None:
        if rewrite_cache is not None:
            _rewrites_file(rewrite_cache).write(
                {},
                (
                    {
                        "latex": latex,
                        "max_forms": n,
                        "original": r.original,
                        "notice": r.notice,
                        "forms": [[f.latex, f.rule] for f in r.forms],
                    }
                    for (latex, n), r in stored.items()
                ),
            )

    def cached(latex: str, max_forms: int = 8, seconds: float = args.seconds) -> RewriteResult:
        if (latex, max_forms) not in stored:
            t = time.perf_counter()
            result = equivalent_forms(latex, max_forms=max_forms, seconds=args.seconds)
            timings.append(time.perf_counter() - t)
            if result.notice:
                notices[result.notice.split(":")[0][:60]] += 1
            stored[(latex, max_forms)] = result
        return stored[(latex, max_forms)]

    started = time.perf_counter()
    untransformed, transformed, stats = build_queries(
        candidates, docs_by_key, args.sample, args.seed, cached, limit_draws=args.sample * 20
    )
    save_rewrites()
    print(
        f"queries: {len(untransformed)} untransformed, {len(transformed)} transformed; draws {stats} ({time.perf_counter() - started:.0f} s)",
        file=sys.stderr,
    )

    structure = StructureRetriever(index)
    systems: dict[str, Callable[[str, int], list[Hit]]] = {
        "structure": lambda latex, k: structure.rank(Query(id="q", text="", formula=latex), k).hits
    }
    weights = [float(w) for w in args.weights.split(",")]
    for w in weights:
        rewriter = StructureRewriteRetriever(index, rewrite_weight=w, rewriter=cached)
        rewriter.structure = structure

        def rewritten(latex: str, k: int, r: StructureRewriteRetriever = rewriter) -> list[Hit]:
            return r.rank(Query(id="q", text="", formula=latex), k).hits

        systems[f"structure-rewrite w={w:g}"] = rewritten

    results = {}
    for label, queries in (("transformed", transformed), ("untransformed", untransformed)):
        print(f"{label} queries:", file=sys.stderr)
        results[label] = evaluate(queries, systems, args.k)
    save_rewrites()

    print(f"\nrecall@{args.k}            transformed   untransformed")
    for name in systems:
        print(
            f"{name:<26} {results['transformed'][name]['recall']:.3f}         {results['untransformed'][name]['recall']:.3f}"
        )
    best = (
        f"structure-rewrite w={REWRITE_WEIGHT:g}"
        if f"structure-rewrite w={REWRITE_WEIGHT:g}" in systems
        else f"structure-rewrite w={weights[0]:g}"
    )
    print(f"\ntransformed, by rule (structure → {best}):")
    for rule, (value, n) in results["transformed"]["structure"]["by_rule"].items():
        print(f"  {rule:<12} n={n:<4} {value:.3f} → {results['transformed'][best]['by_rule'][rule][0]:.3f}")
    ms = np.array(timings or [float("nan")]) * 1000
    print(
        f"\nrewrite time per formula: p50 {np.percentile(ms, 50):.0f} ms, p95 {np.percentile(ms, 95):.0f} ms, max {ms.max():.0f} ms ({len(ms)} formulas); notices: {dict(notices) or 'none'}"
    )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as report:
            json.dump(
                {
                    "args": vars(args),
                    "draws": stats,
                    "results": results,
                    "untransformed": untransformed,
                    "transformed": transformed,
                    "rewrite_ms": {
                        "p50": float(np.percentile(ms, 50)),
                        "p95": float(np.percentile(ms, 95)),
                        "max": float(ms.max()),
                    },
                    "notices": notices,
                },
                report,
                indent=1,
            )
