"""Build memory over hostile corpora (`mathscout bench robust`, issue 32): the most the process tree of one
`mathscout index --components bm25,structure` held at once over a gzip bomb, a 50 MB document, a line nested
100,000 deep and a 50 MB note (built cut to the document bound), next to a normal build of the shared collection,
with the ratio of each to the normal one.

    mathscout bench robust [--docs N] [--output DIR] [--part builds|queries|all] [--index DIR]

Goal: no growth, at most 1.5 GB (1,536 MiB) each. `--docs N`: the normal build over the collection's first N
documents (default: all 37,651; ~6 min here). Each build's stderr is kept in DIR/index.log.

Then what one query may cost (issue 42, `query_costs.py`): the longest scan of a 100 KB query, and the latency of
a plain question while six slow computations run (goal <= 1 s), over `--index` (default: the demo index).
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from mathscout.benchmarks.scale import measure_command
from mathscout.config import shared_data

GOAL_MIB = 1536
NORMAL = [
    '{"id": "n1", "text": "Euler: $e^{i\\\\pi}+1=0$ holds."}',
    '{"id": "n2", "text": "Gauss: $\\\\sum_{k=1}^n k$."}',
]
DEEP = 100_000


def gzip_bomb(folder: Path) -> Path:
    """6 MB of .jsonl.gz holding a 3 GiB line between normal ones: gzip members of one compressed 16 MiB block."""
    block = gzip.compress(b"x y z $a^2$ " * ((16 << 20) // 12), compresslevel=9)
    path = folder / "bomb.jsonl.gz"
    with open(path, "wb") as f:
        f.write(gzip.compress(NORMAL[0].encode() + b'\n{"id": "bomb", "text": "'))
        for _ in range(3 << 30 >> 24):
            f.write(block)
        f.write(gzip.compress(b'"}\n' + NORMAL[1].encode() + b"\n"))
    return path


def big_jsonl_document(folder: Path) -> Path:
    """One 50 MB JSONL document (text and formulas) between normal lines."""
    path = folder / "big.jsonl"
    text = "Let $x_n = \\frac{1}{n^2}$ and sum it over every n. " * (50_000_000 // 50)
    path.write_bytes(
        NORMAL[0].encode()
        + b"\n"
        + json.dumps({"id": "big", "text": text}).encode()
        + b"\n"
        + NORMAL[1].encode()
        + b"\n"
    )
    return path


def big_note(folder: Path) -> Path:
    """A 50 MB Markdown note beside a small one: read only up to the bound, cut there outside formulas, and built."""
    notes = folder / "notes"
    notes.mkdir(exist_ok=True)
    (notes / "big.md").write_text("# Big\n\n" + "Let $x_n = \\frac{1}{n^2}$ and sum it over every n. " * 1_000_000)
    (notes / "small.md").write_text("# Small\n\n$a^2+b^2=c^2$\n")
    return notes


def deep_json(folder: Path) -> Path:
    """A JSONL line nested 100,000 brackets deep, and one whose metadata is, between normal lines."""
    path = folder / "deep.jsonl"
    path.write_bytes(
        NORMAL[0].encode()
        + b"\n"
        + b"[" * DEEP
        + b"]" * DEEP
        + b"\n"
        + b'{"id": "deep", "text": "t", "meta": '
        + b"[" * DEEP
        + b"]" * DEEP
        + b"}\n"
        + NORMAL[1].encode()
        + b"\n"
    )
    return path


def _collection(docs: int | None) -> Callable[[Path], Path]:
    """The normal corpus: the shared collection, or its first `docs` documents."""

    def write(folder: Path) -> Path:
        source = shared_data() / "collection" / "docs.jsonl"
        if docs is None:
            return source
        path = folder / f"docs-{docs}.jsonl"
        with open(source, "rb") as f, open(path, "wb") as out:
            for _, line in zip(range(docs), f):
                out.write(line)
        return path

    return write


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="mathscout bench robust", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--docs", type=int, default=None, help="normal build over the first N shared documents (default: all)"
    )
    parser.add_argument(
        "--output", type=Path, default=None, help="keep the corpora, indexes and log here (default: removed)"
    )
    parser.add_argument(
        "--part", choices=("builds", "queries", "all"), default="all", help="the build memory, the query costs, or both"
    )
    parser.add_argument("--index", type=Path, default=None, help="the index of the query costs (default: the demo)")
    args = parser.parse_args(argv)
    if args.part != "queries":
        _builds(args)
    if args.part != "builds":
        from mathscout.agent.assistant import Assistant
        from mathscout.benchmarks.query_costs import report

        report(Assistant(args.index, use_llm=False))


def _builds(args: argparse.Namespace) -> None:
    """The build memory over hostile corpora (the table above)."""
    out = args.output or Path(tempfile.mkdtemp(prefix="mathscout-robust-"))
    out.mkdir(parents=True, exist_ok=True)
    label = f"normal ({args.docs:,} shared docs)" if args.docs else "normal 1x (shared collection)"
    corpora = {
        label: _collection(args.docs),
        "gzip bomb (3 GiB line)": gzip_bomb,
        "50 MB JSONL document": big_jsonl_document,
        "line nested 100,000 deep": deep_json,
        "50 MB note (cut to 1 Mi chars)": big_note,
    }
    rows = []
    try:
        for n, (name, write) in enumerate(corpora.items()):
            folder = out / f"corpus-{n}"
            folder.mkdir(exist_ok=True)
            corpus = write(folder)
            shutil.rmtree(out / f"index-{n}", ignore_errors=True)
            result = measure_command(corpus, out / f"index-{n}", out / "index.log")
            documents = json.loads((out / f"index-{n}" / "manifest.json").read_text())["documents"]
            size = sum(p.stat().st_size for p in corpus.rglob("*")) if corpus.is_dir() else corpus.stat().st_size
            rows.append((name, size / 1e6, documents, result["tree_peak_mib"], result["seconds"]))
            print(f"{name}: {result['tree_peak_mib']:,.0f} MiB, {result['seconds']:.0f} s", flush=True)
    finally:
        if args.output is None:
            shutil.rmtree(out, ignore_errors=True)
    normal = rows[0][3]
    print(f"\n{'corpus':34} {'input MB':>9} {'documents':>10} {'peak MiB':>9} {'x normal':>9} {'seconds':>8}")
    for name, megabytes, documents, peak, seconds in rows:
        print(f"{name:34} {megabytes:9,.1f} {documents:10,} {peak:9,.0f} {peak / normal:9.2f} {seconds:8.0f}")
    worst = max(row[3] for row in rows)
    print(
        f"\nprocess tree peak (sampled every 0.25 s): at most {worst:,.0f} MiB; goal <= {GOAL_MIB:,} MiB each: "
        f"{'met' if worst <= GOAL_MIB else 'MISSED'}"
    )
