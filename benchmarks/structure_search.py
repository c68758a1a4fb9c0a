"""Structure search latency per pruning strategy vs pya0, with a rank-safety check (Zhong 2023 thesis §4.4 discipline).

    mathscout bench structure --index INDEX_DIR [--ks 100,1000] [--pya0-index DIR | --no-pya0]
                              [--per-formula] [--json OUT.json]

Queries: every ARQMath Task 2 topic formula 2020–2022 (285) and the 40 NTCIR-12 formula-browsing topics
(20 with `\\qvar` wildcards; η = 0.05 for them, 0.3 for ARQMath, Zhong 2023 thesis §3.3.1). One process, one thread, warm: every query is run once per system and k
before timing (the thesis drops the first run too), then timed once per system, queries interleaved so
both systems see the same cache state. Our latency includes parsing the query; pya0's includes its own.

Systems: exhaustive, MaxRef, GBP-NUM, GBP-LEN (ours, `StructureSearcher`) and pya0 0.3.7 (Approach Zero's
C engine, optional `peers` extra) over the same documents: `--pya0-index` reuses a pya0 index built by
`mathscout.benchmarks.pya0_peer` when it holds exactly the index's documents, and builds one otherwise (≈ 30 min
for the whole shared collection; keep it outside the repository). Both return documents ranked by their
best formula (pya0's formula-only search is document-level); `--per-formula` ranks our formulas instead.
Every pruned top-k is compared with the exhaustive top-k (ids and scores). Latencies are printed as
p50/p95/max/mean and as ratios to pya0; index build time and size too.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mathscout.errors import QueryError
from mathscout.evaluation.topics import load_topics
from mathscout.index.layout import IndexDir
from mathscout.structure.index import PathIndex
from mathscout.structure.lexer import recorded_lexer
from mathscout.structure.scoring import ETA_NTCIR
from mathscout.structure.search import STRATEGIES, StructureSearcher

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
QUERY_SETS = {
    "ARQMath Task 2": [f"arqmath/topics.arqmath-{year}-task2-origin.xml" for year in (2020, 2021, 2022)],
    "NTCIR-12": ["ntcir12/topics.ntcir12-math-browsing.txt"],
}
PYA0 = "pya0"


@dataclass
class Latencies:
    """Per-query seconds of each system, for one query set and one k."""

    seconds: dict[str, list[float]] = field(default_factory=dict)

    def add(self, system: str, value: float) -> None:
        self.seconds.setdefault(system, []).append(value)

    def stats(self, system: str) -> dict[str, float]:
        ms = np.array(self.seconds.get(system, [np.nan])) * 1000
        return {
            "p50": float(np.percentile(ms, 50)),
            "p95": float(np.percentile(ms, 95)),
            "max": float(ms.max()),
            "mean": float(ms.mean()),
            "n": len(ms),
        }


def load_query_sets(data: Path) -> dict[str, list[tuple[str, str]]]:
    """(topic id, LaTeX) of every query formula, per query set."""
    return {
        name: [(t.id, t.formula) for f in files for t in load_topics(data / f) if t.formula is not None]
        for name, files in QUERY_SETS.items()
    }  # every task 2 topic is a formula


def _open_pya0(args, index_path: Path):
    if args.no_pya0:
        return None
    from mathscout.benchmarks import pya0_peer

    try:
        import pya0  # noqa: F401
    except ImportError:
        print("pya0 is not installed (pip install -e '.[peers]'): comparing our strategies only")
        return None
    folder = args.pya0_index or (index_path.parent / f"{index_path.name}-pya0")
    started = time.perf_counter()
    manifest = pya0_peer.build_or_reuse_for_index(index_path, folder)
    print(
        f"pya0 index {folder}: {manifest.documents:,} documents, {manifest.formulas:,} formulas "
        f"({manifest.parser_errors:,} parser errors), ready in {time.perf_counter() - started:.1f} s"
    )
    return pya0_peer.Pya0Searcher(folder)


def run(args) -> dict:
    index_dir = IndexDir(args.index)
    started = time.perf_counter()
    paths = PathIndex.open(index_dir.component_path("structure"))
    lexer = recorded_lexer(index_dir.manifest.components.get("structure", {}))  # queries parsed as the index's formulas
    searcher = StructureSearcher(paths, lexer=lexer)  # η = 0.3 (ARQMath setting, Zhong 2023 thesis §3.3.1)
    searchers = {
        name: StructureSearcher(paths, eta=ETA_NTCIR, lexer=lexer) if name == "NTCIR-12" else searcher
        for name in QUERY_SETS
    }
    print(f"structure index opened in {time.perf_counter() - started:.2f} s")
    peer = _open_pya0(args, Path(args.index))
    per_document = not args.per_formula
    query_sets = load_query_sets(args.data)
    systems = [
        s
        for s in list(STRATEGIES) + ([PYA0] if peer else [])
        if not args.systems or s in args.systems or (s == "exhaustive" and not args.no_reference)
    ]
    results: dict = {"k": {}, "unreadable": {}, "violations": {}, "per_document": per_document}

    prepared: dict[str, list] = {}
    for name, queries in query_sets.items():
        prepared[name] = []
        unreadable = 0
        for topic_id, latex in queries:
            t0 = time.perf_counter()
            try:
                query = searchers[name].prepare(latex)
            except QueryError:
                unreadable += 1
                continue
            prepared[name].append((topic_id, latex, query, time.perf_counter() - t0))
        results["unreadable"][name] = unreadable

    for k in args.ks:

        def one(system: str, latex: str, query, searcher, k: int = k) -> tuple[float, list]:
            t0 = time.perf_counter()
            hits = peer.search([latex], (), k) if system == PYA0 else searcher.search(query, k, system, per_document)
            return time.perf_counter() - t0, hits

        for name, items in prepared.items():  # warm-up: every query once per system
            for _, latex, query, _ in items:
                for system in systems:
                    one(system, latex, query, searchers[name])
        per_set: dict[str, Latencies] = {}
        violations = {s: 0 for s in systems if s not in ("exhaustive", PYA0)}
        for name, items in prepared.items():
            lat = per_set.setdefault(name, Latencies())
            for _, latex, query, parse in items:
                reference = None
                for system in systems:
                    seconds, hits = one(system, latex, query, searchers[name])
                    if system == PYA0:
                        lat.add(system, seconds)
                        continue
                    lat.add(system, seconds + parse)
                    ranking = [(h.formula if not per_document else h.doc, h.score) for h in hits]
                    if system == "exhaustive":
                        reference = ranking
                    elif reference is not None and ranking != reference:
                        violations[system] += 1
                        print(f"rank-safety violation: {system}, k={k}, {latex!r}")
        every = Latencies()
        for lat in per_set.values():
            for system, values in lat.seconds.items():
                every.seconds.setdefault(system, []).extend(values)
        per_set["all"] = every
        results["k"][k] = {name: {s: lat.stats(s) for s in systems} for name, lat in per_set.items()}
        results["violations"][k] = violations

    results["build"] = _build_figures(index_dir, peer)
    if peer:
        peer.close()
    return results


def _build_figures(index_dir: IndexDir, peer) -> dict:
    ours = index_dir.manifest.components.get("structure", {})
    figures = {
        "ours": {
            "seconds": ours.get("seconds"),
            "bytes": ours.get("bytes"),
            "formulas": ours.get("formulas"),
            "indexed": ours.get("indexed_formulas"),
        }
    }
    if peer is not None and peer.manifest is not None:
        m = peer.manifest
        figures[PYA0] = {
            "seconds": m.build_seconds,
            "bytes": m.content_bytes,
            "disk_bytes": m.disk_bytes,
            "formulas": m.formulas,
            "parser_errors": m.parser_errors,
            "files": m.files,
        }
    return figures


def report(results: dict) -> str:
    """Markdown tables: latency per query set and k (with ratios to pya0), rank safety, build figures."""
    lines = []
    unit = "documents (best formula)" if results["per_document"] else "formulas"
    for k, per_set in results["k"].items():
        for name, stats in per_set.items():
            peer = stats.get(PYA0)
            n = next(iter(stats.values()))["n"]
            lines.append(f"\n{name}, {n} queries, k = {k}, ranking {unit}:\n")
            lines.append(
                "| system | p50 ms | p95 ms | max ms | mean ms | p50 / pya0 | p95 / pya0 | p50 speed-up vs exhaustive |"
            )
            lines.append("|---|---|---|---|---|---|---|---|")
            for system, s in stats.items():

                def ratio(key: str, s: dict = s, peer: dict | None = peer) -> str:
                    return f"{s[key] / peer[key]:.2f}" if peer else "—"

                speed = stats["exhaustive"]["p50"] / s["p50"] if "exhaustive" in stats else float("nan")
                lines.append(
                    f"| {system} | {s['p50']:.1f} | {s['p95']:.1f} | {s['max']:.1f} | {s['mean']:.1f} "
                    f"| {ratio('p50')} | {ratio('p95')} | {speed:.1f}× |"
                )
        lines.append(
            f"\nrank-safety violations at k = {k} (pruned top-k ≠ exhaustive top-k, ids and scores): "
            + ", ".join(f"{s} {n}" for s, n in results["violations"][k].items())
        )
    lines.append("\nunreadable queries (ours): " + ", ".join(f"{n} {c}" for n, c in results["unreadable"].items()))
    build = results["build"]
    ours, peer = build["ours"], build.get(PYA0)
    lines.append("\n| build | formulas | seconds | formulas/s | MiB |")
    lines.append("|---|---|---|---|---|")
    for name, b in (("MathScout", ours), (PYA0, peer)):
        if b and b.get("seconds"):
            rate = (b.get("formulas") or 0) / b["seconds"]
            lines.append(
                f"| {name} | {b.get('formulas') or 0:,} | {b['seconds']:.1f} | {rate:,.0f} | {b['bytes'] / 2**20:.1f} |"
            )
    if peer and ours.get("seconds"):
        lines.append(
            f"\nbuild time ratio (ours / pya0) {ours['seconds'] / peer['seconds']:.3f}; "
            f"size ratio {ours['bytes'] / peer['bytes']:.2f} (pya0 on disk: {peer['disk_bytes'] / 2**20:,.0f} MiB "
            f"in {peer['files']:,} files; {peer['parser_errors']:,} pya0 parser errors)"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", required=True, type=Path, help="an index directory with the structure component")
    parser.add_argument("--ks", type=lambda s: [int(x) for x in s.split(",")], default=[100, 1000])
    parser.add_argument("--k", type=int, help="a single k (same as --ks K)")
    parser.add_argument("--pya0-index", type=Path, help="pya0 index folder (reused when it matches, else built)")
    parser.add_argument("--no-pya0", action="store_true", help="compare our strategies only")
    parser.add_argument(
        "--per-formula", action="store_true", help="rank formulas (default: documents by best formula, like pya0)"
    )
    parser.add_argument(
        "--per-document", action="store_true", help=argparse.SUPPRESS
    )  # the default; kept for old commands
    parser.add_argument(
        "--systems",
        type=lambda s: s.split(","),
        default=None,
        help="only these systems, e.g. gbp-len,pya0 (exhaustive always runs: it is the rank-safety reference)",
    )
    parser.add_argument(
        "--no-reference",
        action="store_true",
        help="with --systems: leave exhaustive out (no rank-safety check, no speed-up column)",
    )
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    args = parser.parse_args(argv)
    if args.k:
        args.ks = [args.k]
    results = run(args)
    print(report(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
