"""Cost curves over scale corpora (`mathscout bench scale`): how every cost grows with the collection.

    mathscout bench scale --make --factors 1,2,4 --output DIR [--xml] [--source docs.jsonl]   # make the corpora
    mathscout bench scale --factors 1,2,4 --output DIR [--queries 100] [--safety 50]          # build, open, query
    mathscout bench scale --factors 1,2 --stages build --keep-indexes --output DIR             # build only; then
    mathscout bench scale --factors 1,2 --stages query --output DIR                            # query the kept index
    mathscout bench scale --factors 1,40 --stages command --keep-indexes --output DIR          # one `mathscout index`
    mathscout bench scale --factors 1,2,4,8,16 --stages dense --dense-from INDEX --dense-passages 50636 --output DIR
    mathscout bench scale --output DIR --merge DIR2 DIR3                                       # merge, fit, plot

Corpora: mathscout/scale/corpus.py (copy 0 is the real collection, the others variants of its documents).
Per factor the index is built the way `mathscout index` builds it, one stage per fresh process so each
stage's peak RSS is its own (ru_maxrss): the store (ingest), then `--components bm25`, then `--components
structure` (path index + text lists). `--stages command` instead builds with one `mathscout index --components bm25,structure` command, as a user would
(it builds each component in a process of its own), and records the most its whole process tree held at once.
Then, in another fresh process: open time and RSS of bm25 and
structure, query latency p50/p95 at k = 100 and 1,000 for `bm25` and `structure` (Zhong 2023 thesis, Eq. 3.18 over the dev
topics' words and formulas) and for formula-only structure search (GBP-LEN, per document, ARQMath Task 2
formulas), and rank safety: GBP-LEN's top k against exhaustive search (ids and scores) on a sample of formulas.
Dense (`--stages dense`, benchmarks/scale_dense.py): IVF-PQ built from disk over vectors DERIVED from an encoded
index, open time, ANN latency at k = 100 and 1,000 and recall@k against exact Flat search.
Each cost's growth exponent b is fitted as cost ∝ formulas^b (dense costs: ∝ passages^b) (least squares in log-log) and written to
DIR/scale.json with every figure; DIR/scale.png plots them. Extrapolations to 40× are labelled as such.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from mathscout.config import shared_data
from mathscout.errors import MathScoutError
from mathscout.usage import TreePeak, process_usage

REPO = Path(__file__).resolve().parents[1]
TARGET_FACTOR = 40  # the ARQMath collection is ~40× the shared one


# ---------------------------------------------------------------- worker side (fresh processes)


def _rss() -> dict[str, float]:
    """Peak and current RSS of this process in MiB (anonymous and file-backed current RSS apart), CPU and load."""
    usage = process_usage()
    return {
        "peak_mib": usage.peak_mib,
        "rss_mib": usage.rss_mib,
        "anon_mib": usage.anon_mib,
        "file_mib": usage.file_mib,
        "cpu_seconds": usage.cpu_seconds,
        "load_average": os.getloadavg()[0],
    }


def _worker_store(corpus: Path, index: Path) -> dict:
    from mathscout.index import builder

    started = time.perf_counter()
    builder.build_index([corpus], index, store_only=True)
    return {"seconds": time.perf_counter() - started, **_rss()}


def _worker_component(index: Path, name: str) -> dict:
    from mathscout.index.layout import IndexDir
    from mathscout.retrievers.indexing import add_components

    baseline = _rss()["rss_mib"]
    started = time.perf_counter()
    with TreePeak() as tree:  # this process, the component's build process and its workers, at once
        add_components(index, [name])
    seconds = time.perf_counter() - started
    stats = IndexDir(index).manifest.components[name]
    result: dict[str, Any] = {
        "seconds": seconds,
        "baseline_mib": baseline,
        "bytes": stats.get("bytes"),
        "stats": {k: v for k, v in stats.items() if k != "files"},
        **_rss(),
    }
    result["tree_peak_mib"], result["tree_samples"] = tree.peak_mib, tree.samples
    children = resource.getrusage(resource.RUSAGE_CHILDREN)  # the component builds in a process of its own
    result["own_peak_mib"], result["own_cpu_seconds"] = result["peak_mib"], result["cpu_seconds"]
    # the most held at once: sampled over the process tree, and at least the build process's own peak
    result["peak_mib"] = max(result["own_peak_mib"], tree.peak_mib, stats["process_peak_mib"])
    # an upper bound: every process's peak summed (they need not coincide)
    result["peak_sum_mib"] = result["own_peak_mib"] + stats["process_peak_mib"] + stats.get("workers_peak_mib_sum", 0)
    result["cpu_seconds"] = result["own_cpu_seconds"] + children.ru_utime + children.ru_stime
    return result


def percentiles(values: list[float]) -> dict[str, float]:
    """p50, p95 and mean in milliseconds of latencies in seconds."""
    import numpy as np

    a = np.array(values) * 1000
    return {
        "p50_ms": float(np.percentile(a, 50)),
        "p95_ms": float(np.percentile(a, 95)),
        "mean_ms": float(a.mean()),
        "n": len(values),
    }


def even_sample(items: list, n: int) -> list:
    """At most n items spread evenly over `items` (the rank-safety checks' formula sample)."""
    return items[:: max(1, len(items) // n)][:n] if n > 0 else []


def _worker_query(index: Path, n_queries: int, n_safety: int) -> dict:
    """The query stage, with the query process's anonymous memory sampled at its peak (page cache and mapped index
    pages aside, which VmHWM counts)."""
    with TreePeak(measure=lambda: process_usage().anon_mib) as anon:
        out = _query_stage(index, n_queries, n_safety)
    out["anon_peak_mib"] = anon.peak_mib
    return out


def _query_stage(index: Path, n_queries: int, n_safety: int) -> dict:
    from mathscout import java
    from mathscout.errors import QueryError
    from mathscout.evaluation.topics import load_topics
    from mathscout.index.layout import IndexDir
    from mathscout.retrievers import open_retriever
    from mathscout.retrievers.structure import StructureRetriever
    from mathscout.structure.search import StructureSearcher

    started = time.perf_counter()
    java.boot()  # the JVM's start (seconds) is not the index's open time: measured apart
    boot_seconds, vm_info = time.perf_counter() - started, java.vm_info()
    runtime = java.autoclass("java.lang.Runtime").getRuntime()
    heap_peak = [0.0]

    def heap_seen() -> None:  # what the JVM heap holds after a search (garbage included)
        heap_peak[0] = max(heap_peak[0], (runtime.totalMemory() - runtime.freeMemory()) / 2**20)

    out: dict = {"rss_start": _rss(), "jvm_boot_s": boot_seconds, "jvm_info": vm_info}  # "sharing": a CDS archive
    started = time.perf_counter()
    index_dir = IndexDir(index)
    bm25 = open_retriever(index_dir, "bm25")
    out["open_bm25_s"] = time.perf_counter() - started
    started = time.perf_counter()
    structure = open_retriever(index_dir, "structure")
    assert isinstance(structure, StructureRetriever)  # one index's
    out["open_structure_s"] = time.perf_counter() - started
    out["rss_open"] = _rss()
    topics = load_topics(shared_data() / "collection" / "topics.dev.jsonl")[:n_queries]
    formulas = [
        t.formula
        for year in (2020, 2021, 2022)
        for t in load_topics(shared_data() / "arqmath" / f"topics.arqmath-{year}-task2-origin.xml")
        if t.formula is not None
    ]  # every task 2 topic is a formula
    searcher = StructureSearcher(structure.paths, lexer=structure.searcher.lexer)
    valid = []  # the formulas that parse; prepared one at a time (a prepared query holds the blocks it decoded)
    for latex in formulas:
        try:
            searcher.prepare(latex)
            valid.append(latex)
        except QueryError:
            pass
    for q in topics[:3]:  # warm-up: JIT caches, the JVM's first searches
        bm25.search(q, k=10)
        structure.search(q, k=10)
    searcher.search(searcher.prepare(valid[0]), k=10, per_document=True)
    out["latency"] = {}
    for k in (100, 1000):
        for mode, retriever in (("bm25", bm25), ("structure", structure)):
            times = []
            for q in topics:
                t0 = time.perf_counter()
                retriever.search(q, k=k)
                times.append(time.perf_counter() - t0)
                heap_seen()
            out["latency"][f"{mode}@{k}"] = percentiles(times)
        times, decoded, blocks = [], 0, 0
        for latex in valid:  # formula-only structure search, GBP-LEN (prepare = parse + lay out the lists, included)
            t0 = time.perf_counter()
            prepared = searcher.prepare(latex)
            searcher.search(prepared, k=k, per_document=True)
            times.append(time.perf_counter() - t0)
            done, total = prepared.blocks_decoded
            decoded, blocks = decoded + done, blocks + total
        out["latency"][f"formula@{k}"] = percentiles(times)
        out[f"blocks_decoded@{k}"] = decoded / max(blocks, 1)  # the share of the queries' list blocks decoded
    out["rss_queries"] = _rss()
    java.autoclass("java.lang.System").gc()
    out["jvm"] = {
        "max_mib": runtime.maxMemory() / 2**20,
        "committed_mib": runtime.totalMemory() / 2**20,
        "used_peak_mib": heap_peak[0],
        "live_after_gc_mib": (runtime.totalMemory() - runtime.freeMemory()) / 2**20,
    }
    sample = even_sample(valid, n_safety)
    safety = {str(k): {"queries": len(sample), "violations": 0} for k in (100, 1000)}
    for latex in sample:
        once = searcher.prepare(latex)  # once for both depths (a search leaves the prepared query as it was)
        for k in (100, 1000):
            pruned = [(h.formula, h.score) for h in searcher.search(once, k=k, strategy="gbp-len", per_document=True)]
            exact = [(h.formula, h.score) for h in searcher.search(once, k=k, strategy="exhaustive", per_document=True)]
            safety[str(k)]["violations"] += pruned != exact
    out["rank_safety"] = safety
    out["rss_end"] = _rss()
    return out


def _worker_dense(kind: str, args: list[str]) -> dict:
    from mathscout.benchmarks import scale_dense

    if kind == "dense-derive":
        return scale_dense.write_derived(Path(args[0]), int(args[1]), Path(args[2]), int(args[3]) or None)
    if kind == "dense-queries":
        return {
            "queries": scale_dense.query_vectors(
                Path(args[0]), shared_data() / "collection" / "topics.dev.jsonl", int(args[1]), Path(args[2])
            )
        }
    if kind == "dense-build":
        return {**scale_dense.build(Path(args[0]), int(args[1]), Path(args[2])), **_rss()}
    return scale_dense.query(Path(args[0]), int(args[1]), Path(args[2]), Path(args[3]), _rss)


def measure_dense(
    source: Path, factor: int, folder: Path, queries: Path, log: Path, keep: bool, passages_1x: int | None = None
) -> dict:
    """Derived F× passage vectors → IVF-PQ from disk (fresh process) → open, latency, recall (fresh process)."""
    folder.mkdir(parents=True, exist_ok=True)
    vectors, ivfpq = folder / "passage_vectors.f32", folder / "ivfpq.faiss"
    result = _run_worker(["dense-derive", str(source), str(factor), str(vectors), str(passages_1x or 0)], log)
    result["vector_bytes"] = vectors.stat().st_size
    result["build"] = _run_worker(["dense-build", str(vectors), str(result["dimension"]), str(ivfpq)], log)
    result["query"] = _run_worker(
        ["dense-query", str(vectors), str(result["dimension"]), str(ivfpq), str(queries)], log
    )
    result["note"] = (
        f"vectors derived from the {result['source_documents']:,} documents encoded in {source} (copy c ≥ 1: "
        "source vector + seeded Gaussian noise, cosine ≈ 0.96), not encoded from the scale corpus"
    )
    if not keep:
        shutil.rmtree(folder, ignore_errors=True)
    return result


def _worker(argv: list[str]) -> None:
    kind = argv[0]
    if kind.startswith("dense-"):
        result = _worker_dense(kind, argv[1:])
    elif kind == "store":
        result = _worker_store(Path(argv[1]), Path(argv[2]))
    elif kind == "component":
        result = _worker_component(Path(argv[1]), argv[2])
    else:
        result = _worker_query(Path(argv[1]), int(argv[2]), int(argv[3]))
    print("RESULT " + json.dumps(result))


# ---------------------------------------------------------------- driver


def _run_worker(args: list[str], log: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with open(log, "a", encoding="utf-8") as err:
        done = subprocess.run(
            [sys.executable, "-m", "mathscout.benchmarks.scale", "--worker", *args],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=env,
            cwd=REPO,
        )
    if done.returncode != 0:
        raise MathScoutError(f"the bench's {args[0]} step failed (exit {done.returncode}); its output is in {log}")
    line = [out for out in done.stdout.splitlines() if out.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT ") :])


def _size(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def measure_command(corpus: Path, index: Path, log: Path) -> dict:
    """One `mathscout index --components bm25,structure` command, as a user runs it: wall time, the most its
    process tree (the command, each component's build process and its workers) held at once, and the manifest's
    per-component figures."""
    from mathscout.index.layout import IndexDir

    command = [
        sys.executable,
        "-m",
        "mathscout.cli",
        "index",
        "--input",
        str(corpus),
        "--index",
        str(index),
        "--components",
        "bm25,structure",
    ]
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    started = time.perf_counter()
    with TreePeak() as tree, open(log, "a", encoding="utf-8") as err:
        done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=REPO)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise MathScoutError(f"`mathscout index` failed (exit {done.returncode}); its output is in {log}")
    manifest = IndexDir(index).manifest
    return {
        "seconds": seconds,
        "tree_peak_mib": tree.peak_mib,
        "tree_samples": tree.samples,
        "components": {
            name: {k: manifest.components[name].get(k) for k in ("seconds", "process_peak_mib", "bytes")}
            for name in ("store", "bm25", "structure")
        },
    }


def measure_factor(
    corpus: Path,
    index: Path,
    n_queries: int,
    n_safety: int,
    log: Path,
    stages: tuple[str, ...] = ("build", "query"),
    previous: dict | None = None,
) -> dict:
    """Build (fresh processes, one per stage) and/or query one factor; `previous` keeps the figures of the
    stages not run again (e.g. the query stage re-run on a kept index)."""
    from mathscout.index.layout import IndexDir

    result: dict = dict(previous or {})
    if "build" in stages:
        shutil.rmtree(index, ignore_errors=True)
        result["build"] = {}
        result["build"]["store"] = _run_worker(["store", str(corpus), str(index)], log)
        for name in ("bm25", "structure"):
            result["build"][name] = _run_worker(["component", str(index), name], log)
    if "command" in stages:
        shutil.rmtree(index, ignore_errors=True)
        result["command"] = measure_command(corpus, index, log)
    if {"build", "command"} & set(stages):
        manifest = IndexDir(index).manifest
        result["documents"], result["formulas"] = manifest.documents, manifest.formulas
        result["bytes"] = {
            "store": (index / "store.sqlite").stat().st_size
            if (index / "store.sqlite").exists()
            else _size(index) - _size(index / "bm25") - _size(index / "structure"),
            "bm25": _size(index / "bm25"),
            "structure": _size(index / "structure"),
        }
    if "query" in stages:
        if not (index / "manifest.json").exists():
            raise SystemExit(f"no index {index} to query: build it first (--stages build --keep-indexes)")
        result["query"] = _run_worker(["query", str(index), str(n_queries), str(n_safety)], log)
    return result


def fit_exponent(xs: list[float], ys: list[float]) -> float | None:
    """b of y ∝ x^b by least squares over log-log points (None with fewer than two usable points)."""
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if x > 0 and y and y > 0]
    if len(pts) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    var = sum((p[0] - mx) ** 2 for p in pts)
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / var if var else None


def cost_table(factors: dict[int, dict]) -> dict[str, dict[int, float]]:
    """Every cost per factor, by name."""
    costs: dict[str, dict[int, float]] = {}

    def put(name: str, f: int, value) -> None:
        if value is not None:
            costs.setdefault(name, {})[f] = float(value)

    for f, r in factors.items():
        build = r.get("build", {})
        for stage in ("store", "bm25", "structure"):  # a partial factor (a stopped run) may lack some figures
            put(f"build seconds: {stage}", f, build.get(stage, {}).get("seconds"))
            put(f"build CPU seconds: {stage}", f, build.get(stage, {}).get("cpu_seconds"))
            put(f"build peak RSS MiB: {stage}", f, build.get(stage, {}).get("peak_mib"))
        if "command" in r:
            put("build seconds: one `mathscout index`", f, r["command"]["seconds"])
            put("build peak RSS MiB: one `mathscout index`", f, r["command"]["tree_peak_mib"])
        for part, size in r.get("bytes", {}).items():
            put(f"size MiB: {part}", f, size / 2**20)
        if build.get("structure", {}).get("cpu_seconds"):
            put("structure formulas per CPU second", f, r["formulas"] / build["structure"]["cpu_seconds"])
        if build.get("structure", {}).get("seconds"):
            put("structure formulas/s", f, r["formulas"] / build["structure"]["seconds"])
        if "dense" in r:
            d = r["dense"]
            put("build seconds: dense IVF-PQ from disk", f, d["build"]["seconds"])
            put("build CPU seconds: dense IVF-PQ from disk", f, d["build"].get("cpu_seconds"))
            put("build peak RSS MiB: dense IVF-PQ from disk", f, d["build"]["peak_mib"])
            put("size MiB: dense IVF-PQ", f, d["build"]["bytes"] / 2**20)
            put("size MiB: dense vectors (float32)", f, d["vector_bytes"] / 2**20)
            if "query" in d:
                put("open seconds: dense IVF-PQ", f, d["query"]["open_s"])
                put("dense query process anon RSS MiB after queries", f, d["query"]["rss_queries"]["anon_mib"])
                for name, stats in d["query"]["latency"].items():
                    put(f"p50 ms: {name}", f, stats["p50_ms"])
                    put(f"p95 ms: {name}", f, stats["p95_ms"])
        if "query" not in r:
            continue
        q = r["query"]
        put("JVM boot seconds (query process)", f, q.get("jvm_boot_s"))
        put("open seconds: bm25", f, q["open_bm25_s"])
        put("open seconds: structure", f, q["open_structure_s"])
        put("query process RSS MiB after open", f, q["rss_open"]["rss_mib"])
        put("query process anon RSS MiB after queries", f, q["rss_queries"]["anon_mib"])
        put("query process peak RSS MiB", f, q["rss_end"]["peak_mib"])
        if "jvm" in q:
            put("JVM heap used MiB (max seen)", f, q["jvm"]["used_peak_mib"])
        for name, stats in q["latency"].items():
            put(f"p50 ms: {name}", f, stats["p50_ms"])
            put(f"p95 ms: {name}", f, stats["p95_ms"])
    return costs


def _sizes(factors: dict[int, dict], dense: bool) -> dict[int, float]:
    """The size a cost is fitted against: passages for dense costs, formulas for the others."""
    if dense:
        return {f: r["dense"]["passages"] for f, r in factors.items() if "dense" in r}
    return {f: r["formulas"] for f, r in factors.items() if "formulas" in r}


def summarise(factors: dict[int, dict]) -> dict:
    costs = cost_table(factors)
    summary = {}
    for name, values in costs.items():
        sizes = _sizes(factors, "dense" in name)
        fs = sorted(f for f in values if f in sizes)
        b = fit_exponent([sizes[f] for f in fs], [values[f] for f in fs])
        entry = {
            "values": {str(f): round(values[f], 3) for f in sorted(values)},
            "exponent": None if b is None else round(b, 3),
            "fitted_against": "passages" if "dense" in name else "formulas",
        }
        if b is not None:
            base = fs[-1]
            entry[f"extrapolated_{TARGET_FACTOR}x"] = round(values[base] * (TARGET_FACTOR / base) ** b, 1)
        summary[name] = entry
    return summary


def plot(factors: dict[int, dict], summary: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = [
        (("build seconds", "build CPU seconds"), "build time (s): wall and CPU"),
        (("build peak RSS MiB",), "build peak RSS (MiB)"),
        (("size MiB",), "index size (MiB)"),
        (("open seconds",), "open time (s)"),
        (("p50 ms",), "query p50 (ms)"),
        (("p95 ms",), "query p95 (ms)"),
    ]
    fig, axes = plt.subplots(2, 3, figsize=(16, 9))
    for ax, (prefix, title) in zip(axes.flat, groups):
        for name, entry in summary.items():
            if not any(name.startswith(p + ":") for p in prefix):
                continue
            fs = sorted(int(f) for f in entry["values"])
            label = (
                ("CPU " if "CPU" in name else "")
                + name.split(": ", 1)[1]
                + (f" (b={entry['exponent']:.2f})" if entry["exponent"] is not None else "")
            )
            ax.plot(fs, [entry["values"][str(f)] for f in fs], marker="o", label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(title)
        ax.set_xlabel("collection size (× the shared collection)")
        ax.legend(fontsize=7)
        ax.grid(True, which="both", alpha=0.3)
    fig.suptitle(
        "MathScout cost curves over scale corpora (measured points; b = fitted growth exponent, cost ∝ formulas^b,\n"
        "dense: ∝ passages^b; dense vectors DERIVED from real encodings by noisy copies, see scale.json)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "--worker":
        _worker(argv[1:])
        return
    parser = argparse.ArgumentParser(prog="mathscout bench scale", description=__doc__.split("\n\n")[0])
    parser.add_argument("--factors", default="1,2,4", help="comma-separated factors of the shared collection")
    parser.add_argument("--output", type=Path, required=True, help="folder for the corpora, indexes and results")
    parser.add_argument(
        "--make", action="store_true", help="only make the scale corpora (JSONL.gz, --xml also Posts XML)"
    )
    parser.add_argument("--xml", action="store_true", help="with --make: also write ARQMath Posts XML")
    parser.add_argument(
        "--source", type=Path, default=shared_data() / "collection" / "docs.jsonl", help="the real collection (JSONL)"
    )
    parser.add_argument("--queries", type=int, default=100, help="dev topics timed per mode and k")
    parser.add_argument(
        "--safety", type=int, default=50, help="formula queries checked against exhaustive search per k"
    )
    parser.add_argument(
        "--keep-indexes", action="store_true", help="keep each factor's index (default: removed after measuring)"
    )
    parser.add_argument(
        "--stages",
        default="build,query",
        help="comma-separated: build (one process per stage) or command (one `mathscout index`), "
        "query (on a kept index DIR/index-<F>x), dense (needs --dense-from)",
    )
    parser.add_argument(
        "--dense-from",
        type=Path,
        default=None,
        help="an index with a `dense` component: its vectors give every factor's (derived) vectors",
    )
    parser.add_argument(
        "--dense-passages",
        type=int,
        default=None,
        help="passages at 1× for the derived vectors (default: those of --dense-from; the shared "
        "collection has 50,636)",
    )
    parser.add_argument(
        "--merge",
        type=Path,
        nargs="*",
        default=None,
        help="measure nothing: merge the scale.json of these folders into --output's, then fit, plot, report",
    )
    args = parser.parse_args(argv)
    args.output = args.output.resolve()
    factors = [int(f) for f in args.factors.split(",") if f.strip()]
    args.output.mkdir(parents=True, exist_ok=True)
    if args.make:
        from mathscout.scale.corpus import write_scale_corpus

        for f in factors:
            started = time.perf_counter()
            made = write_scale_corpus(args.source, f, args.output, xml=args.xml)
            print(
                f"{f}×: {made.documents:,} documents → {made.jsonl}"
                + (f", {made.xml}" if made.xml else "")
                + f" in {time.perf_counter() - started:.1f} s"
            )
        return
    results_path = args.output / "scale.json"
    previous = json.loads(results_path.read_text(encoding="utf-8")) if results_path.exists() else {}
    measured = {int(f): r for f, r in previous.get("factors", {}).items()}
    log = args.output / "scale.log"
    for folder in args.merge or []:
        other = json.loads((folder.resolve() / "scale.json").read_text(encoding="utf-8"))
        for f, r in other.get(
            "factors", {}
        ).items():  # per stage: a folder may hold only a factor's query or dense figures
            measured.setdefault(int(f), {}).update(r)
    if args.merge is not None:
        factors = []
        _save(results_path, measured)
    stages = tuple(s.strip() for s in args.stages.split(",") if s.strip())
    if not stages or set(stages) - {"build", "command", "query", "dense"} or {"build", "command"} <= set(stages):
        raise SystemExit(f"--stages {args.stages!r}: use build or command, query and/or dense")
    if "dense" in stages:
        if args.dense_from is None or not (args.dense_from / "dense" / "meta.json").exists():
            raise SystemExit("--stages dense needs --dense-from INDEX, an index with a built `dense` component")
        dense_queries = args.output / "dense-queries.npy"
        if not dense_queries.exists():
            _run_worker(["dense-queries", str(args.dense_from.resolve()), str(args.queries), str(dense_queries)], log)
    for f in factors:
        corpus = args.output / f"scale-{f}x.jsonl.gz"
        if {"build", "command"} & set(stages) and not corpus.exists():
            raise SystemExit(f"no corpus {corpus}: make it first with --make --factors {f}")
        print(f"measuring {f}× …", flush=True)
        started = time.perf_counter()
        index = args.output / f"index-{f}x"
        if {"build", "command", "query"} & set(stages):
            measured[f] = measure_factor(corpus, index, args.queries, args.safety, log, stages, measured.get(f))
        if "dense" in stages:
            measured.setdefault(f, {})["dense"] = measure_dense(
                args.dense_from.resolve(),
                f,
                args.output / f"dense-{f}x",
                dense_queries,
                log,
                args.keep_indexes,
                args.dense_passages,
            )
            from mathscout.benchmarks.scale_dense import summary_line

            print(summary_line(f, measured[f]["dense"]), flush=True)
        if not args.keep_indexes:
            shutil.rmtree(index, ignore_errors=True)
        print(
            f"{f}×: {measured[f].get('formulas', 0):,} formulas, measured in {time.perf_counter() - started:.0f} s",
            flush=True,
        )
        _save(results_path, measured)
    summary = summarise(measured)
    plot(measured, summary, args.output / "scale.png")
    print(report(measured, summary))


def _save(path: Path, measured: dict[int, dict]) -> None:
    path.write_text(
        json.dumps(
            {
                "factors": {str(k): v for k, v in sorted(measured.items())},
                "summary": summarise(measured),
                "note": f"extrapolated_{TARGET_FACTOR}x values are extrapolations from the fitted "
                "exponents, not measurements",
            },
            indent=2,
        ),
        encoding="utf-8",
    )


def report(factors: dict[int, dict], summary: dict) -> str:
    fs = sorted(factors)
    lines = [
        "| cost | " + " | ".join(f"{f}×" for f in fs) + f" | exponent b | {TARGET_FACTOR}× (extrapolated) |",
        "|---|" + "---|" * (len(fs) + 2),
    ]
    for name, entry in summary.items():
        cells = [f"{entry['values'].get(str(f), float('nan')):,.1f}" if str(f) in entry["values"] else "—" for f in fs]
        b = entry["exponent"]
        ext = entry.get(f"extrapolated_{TARGET_FACTOR}x")
        lines.append(
            f"| {name} | "
            + " | ".join(cells)
            + f" | {'—' if b is None else f'{b:.2f}'} | {'—' if ext is None else f'{ext:,.1f}'} |"
        )
    safety = "; ".join(
        f"{f}×: "
        + ", ".join(f"k={k} {v['violations']}/{v['queries']}" for k, v in factors[f]["query"]["rank_safety"].items())
        for f in fs
        if "rank_safety" in factors[f].get("query", {})
    )
    lines.append(f"\nrank-safety violations (GBP-LEN vs exhaustive, ids and scores): {safety}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
