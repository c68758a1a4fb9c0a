"""`mathscout train NAME`: a trainer of the entry layer's table (mathscout.ui.registry.trainers)."""

from __future__ import annotations

import argparse

from mathscout.errors import MathScoutError, did_you_mean
from mathscout.ui.commands.common import add_table_command, listing


def add(sub, common: argparse.ArgumentParser) -> None:
    p = add_table_command(
        sub,
        common,
        "train",
        "train a model or tune an index (dense, cross-encoder, fusion weights, ranker, …)",
        "what to train (listed below)",
        _trainers,
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    from mathscout.retrievers.registry import resolve
    from mathscout.ui.registry import trainers

    known = trainers()
    if args.name not in known:
        raise MathScoutError(
            f"unknown trainer '{args.name}'{did_you_mean(args.name, known)} (available: {', '.join(sorted(known))}; "
            "'mathscout train --help' says what each trains)"
        )
    resolve(known[args.name].target)(args.rest)


def _trainers() -> str:
    from mathscout.ui.registry import trainers

    return listing("trainers", {name: trainer.description for name, trainer in trainers().items()})
