"""`mathscout bench NAME`: a benchmark against its peers, printed with ratios (mathscout.benchmarks)."""

from __future__ import annotations

import argparse

from mathscout.ui.commands.common import add_table_command, listing


def add(sub, common: argparse.ArgumentParser) -> None:
    p = add_table_command(
        sub,
        common,
        "bench",
        "benchmarks against peers, printed with ratios",
        "the benchmark (listed below)",
        _benchmarks,
    )
    p.set_defaults(func=run)


def _benchmarks() -> str:
    from mathscout.benchmarks import BENCHMARKS

    return listing("benchmarks", {name: text for name, (_, text) in BENCHMARKS.items()})


def run(args: argparse.Namespace) -> None:
    from mathscout.benchmarks import run_benchmark

    run_benchmark(args.name, args.rest)
