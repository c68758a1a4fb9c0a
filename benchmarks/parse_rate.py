"""Parse-rate report: MathScout's OPT parser vs pya0 (Approach Zero) on real formulas.

    python -m mathscout.benchmarks.parse_rate [--limit N] [--no-pya0]

Formulas: every formula of the shared collection (docs.jsonl, extracted with `mathscout.corpus.find_math`)
and every ARQMath Task 2 topic formula 2020–2022 (`<Latex>` elements). For each parser: complete-parse %,
partial % (a tree, but some input was skipped or repaired), failed % (no tree), formulas/s. pya0 has no
partial trees: `('OK', tree)` counts as complete, anything else as failed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from mathscout.config import shared_data
from mathscout.structure.parser import NO_MATH, parse_latex

TOPIC_FILES = [f"arqmath/topics.arqmath-{year}-task2-origin.xml" for year in (2020, 2021, 2022)]


def _formula_finder() -> Callable[[str], list[str]]:
    """LaTeX bodies of the formulas in a document text (the same finder ingestion uses)."""
    from mathscout.corpus import find_math

    return lambda text: [span.latex for span in find_math(text)]


def collection_formulas(path: Path, limit: int | None) -> Iterator[str]:
    """Formulas of the first `limit` documents (all when None)."""
    find = _formula_finder()
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f):
            if limit is not None and n >= limit:
                return
            yield from find(json.loads(line)["text"])


def topic_formulas(data: Path) -> list[str]:
    """The query formulas of the ARQMath Task 2 topics 2020–2022."""
    formulas = []
    for name in TOPIC_FILES:
        path = data / name
        if path.is_file():
            formulas += [el.text or "" for el in ET.parse(path).getroot().iter("Latex")]
    return formulas


@dataclass
class Tally:
    """Outcome counts of one parser over one formula set."""

    complete: int = 0
    partial: int = 0
    failed: int = 0
    seconds: float = 0.0
    reasons: Counter = field(default_factory=Counter)

    @property
    def total(self) -> int:
        return self.complete + self.partial + self.failed

    def row(self, name: str) -> str:
        total = max(self.total, 1)
        rate = self.total / self.seconds if self.seconds else 0.0
        return (
            f"{name:<10} {self.total:>9,} {100 * self.complete / total:>9.2f}% {100 * self.partial / total:>8.2f}%"
            f" {100 * self.failed / total:>8.2f}% {rate:>12,.0f}"
        )


def run_mathscout(formulas: list[str]) -> Tally:
    tally = Tally()
    start = time.perf_counter()
    for latex in formulas:
        result = parse_latex(latex)
        if result.tree is None:
            tally.failed += 1
        elif result.complete:
            tally.complete += 1
        else:
            tally.partial += 1
        if not result.complete:
            tally.reasons[re.sub(r"\\begin\{[^}]*\}", r"\\begin{…}", result.error.split("; ")[0])] += 1
    tally.seconds = time.perf_counter() - start
    return tally


@contextmanager
def _stderr_silenced() -> Iterator[None]:
    """pya0's C parser prints its errors on fd 2."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def run_pya0(formulas: list[str]) -> Tally | None:
    try:
        import pya0
    except ImportError:
        return None
    tally = Tally()
    with _stderr_silenced():
        start = time.perf_counter()
        for latex in formulas:
            try:
                result = pya0.parse(latex, insert_rank_node=True)
                ok = bool(result) and result[0] == "OK" and result[1] is not None
            except Exception:  # noqa: BLE001 — any failure of the peer parser counts as failed
                ok = False
            if ok:
                tally.complete += 1
            else:
                tally.failed += 1
        tally.seconds = time.perf_counter() - start
    return tally


def without_empty(formulas: list[str]) -> tuple[list[str], int]:
    """Drop formulas with no math content at all (`&`, `\\enspace`, empty `$$`): pya0 returns an empty tree
    for them and MathScout none; neither is a parse of anything."""
    kept = [f for f in formulas if parse_latex(f).error != NO_MATH]
    return kept, len(formulas) - len(kept)


def report(title: str, formulas: list[str], with_pya0: bool, reasons: int) -> None:
    formulas, empty = without_empty(formulas)
    print(f"\n{title} — {empty:,} formulas without math content left out")
    print(f"{'parser':<10} {'formulas':>9} {'complete':>10} {'partial':>9} {'failed':>9} {'formulas/s':>12}")
    ours = run_mathscout(formulas)
    print(ours.row("MathScout"))
    peer = run_pya0(formulas) if with_pya0 else None
    if peer is not None:
        print(peer.row("pya0"))
    if reasons and ours.reasons:
        print("  most frequent MathScout recovery reasons:")
        for reason, count in ours.reasons.most_common(reasons):
            print(f"  {count:>8,}  {reason[:100]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=None, help="only the first N documents of docs.jsonl")
    ap.add_argument("--no-pya0", action="store_true", help="skip the pya0 comparison")
    ap.add_argument("--reasons", type=int, default=8, help="show this many top partial/failed reasons")
    ap.add_argument("--data", type=Path, default=shared_data(), help="the shared data directory")
    args = ap.parse_args(argv)
    docs = args.data / "collection" / "docs.jsonl"
    if not docs.is_file():
        print(f"error: {docs} not found (set MATHSCOUT_SHARED_DATA)", file=sys.stderr)
        return 2
    scope = f"first {args.limit:,} documents" if args.limit else "all documents"
    report(
        f"Collection formulas ({scope} of {docs})",
        list(collection_formulas(docs, args.limit)),
        not args.no_pya0,
        args.reasons,
    )
    report("ARQMath Task 2 topic formulas 2020–2022", topic_formulas(args.data), not args.no_pya0, args.reasons)
    return 0


if __name__ == "__main__":
    sys.exit(main())
