"""Are two runs the same answers? `python -m mathscout.evaluation.run_equality SINGLE_RUN SHARDED_RUN [--tolerance 1e-5]`

The specification of a sharded index: per topic the same ids in the same order, scores within the tolerance. Printed:
topics compared, topics identical in ids and order, topics identical once documents with equal scores (within the
tolerance) may swap places, the largest score difference at the same rank, and the mean overlap of the top 10s
(how far an approximate mode's sharded run is from the single index's).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mathscout.errors import MathScoutError
from mathscout.evaluation.runs import read_run


@dataclass
class RunComparison:
    topics: int = 0
    identical: int = 0  # same ids, same order, every score within tolerance
    identical_up_to_ties: int = 0  # the same once equal-score documents may swap (and the cut-off tie may differ)
    max_score_difference: float = 0.0
    overlap_at_10: float = 1.0  # mean share of the single run's top 10 that the sharded run's top 10 holds
    differing: list[str] = field(default_factory=list)  # the first topics that differ beyond ties


def ranked_entries(path: Path) -> dict[str, list[tuple[str, float]]]:
    """Each topic's (doc id, score) by rank, from a run file read by `evaluation.runs.read_run` (a clear error on a
    malformed or missing file)."""
    return {
        topic: [(e.doc_id, e.score) for e in sorted(entries, key=lambda e: e.rank)]
        for topic, entries in read_run(path).topics.items()
    }


def _same_up_to_ties(a: list[tuple[str, float]], b: list[tuple[str, float]], tolerance: float) -> bool:
    """Equal score groups hold the same ids (the last group, cut by k, may hold different ones)."""
    if len(a) != len(b):
        return False
    if any(abs(x[1] - y[1]) > tolerance for x, y in zip(a, b)):
        return False
    i = 0
    while i < len(a):
        j = i
        while j + 1 < len(a) and abs(a[j + 1][1] - a[i][1]) <= tolerance:
            j += 1
        if j + 1 < len(a) and {d for d, _ in a[i : j + 1]} != {d for d, _ in b[i : j + 1]}:
            return False
        i = j + 1
    return True


def compare_runs(single: Path, sharded: Path, tolerance: float = 1e-5) -> RunComparison:
    a, b = ranked_entries(single), ranked_entries(sharded)
    out = RunComparison()
    overlaps = []
    for topic in sorted(set(a) | set(b)):
        x, y = a.get(topic, []), b.get(topic, [])
        out.topics += 1
        top = {d for d, _ in x[:10]}
        overlaps.append(len(top & {d for d, _ in y[:10]}) / len(top) if top else float(not y))
        diffs = [abs(p[1] - q[1]) for p, q in zip(x, y)]
        out.max_score_difference = max([out.max_score_difference, *diffs])
        if len(x) == len(y) and all(p[0] == q[0] for p, q in zip(x, y)) and all(d <= tolerance for d in diffs):
            out.identical += 1
            out.identical_up_to_ties += 1
        elif _same_up_to_ties(x, y, tolerance):
            out.identical_up_to_ties += 1
        elif len(out.differing) < 10:
            out.differing.append(topic)
    out.overlap_at_10 = round(sum(overlaps) / len(overlaps), 4) if overlaps else 1.0
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("single", type=Path)
    parser.add_argument("sharded", type=Path)
    parser.add_argument("--tolerance", type=float, default=1e-5)
    args = parser.parse_args(argv)
    return print_verdict(
        lambda: compare_runs(args.single, args.sharded, args.tolerance),
        lambda result: result.identical_up_to_ties == result.topics,
    )


def print_verdict(compare: Callable[[], Any], same: Callable[[Any], bool]) -> int:
    """Print what `compare()` found (a dataclass, as a dict): exit 0 when `same`, 1 when not; its MathScoutError in one
    line, exit 2."""
    try:
        result = compare()
    except MathScoutError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(asdict(result))
    return 0 if same(result) else 1


if __name__ == "__main__":
    sys.exit(main())
