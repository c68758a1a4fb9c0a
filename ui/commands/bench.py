"""`mathscout bench NAME`: a benchmark against its peers, printed with ratios (mathscout.benchmarks)."""

from __future__ import annotations

import argparse

from mathscout.ui.commands.common import LazyHelp, listing


def add(sub, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "bench",
        parents=[common],
        help="benchmarks against peers, printed with ratios",
        epilog=LazyHelp(_benchmarks),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("name", help="the benchmark (listed below)")
    p.add_argument("rest", nargs=argparse.REMAINDER, help="its own options ('mathscout bench NAME --help')")
    p.set_defaults(func=run)


def _benchmarks() -> str:
    from mathscout.benchmarks import BENCHMARKS

    return listing("benchmarks", {name: text for name, (_, text) in BENCHMARKS.items()})


def run(args: argparse.Namespace) -> None:
    from mathscout.benchmarks import run_benchmark

    run_benchmark(args.name, args.rest)
