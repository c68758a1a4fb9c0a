"""`mathscout eval`: score runs against qrels; several runs side by side with paired tests."""

from __future__ import annotations

import argparse
from pathlib import Path

from mathscout.ui.commands.common import strict_json


def add(sub, common: argparse.ArgumentParser) -> None:
    from mathscout.evaluation.scope import add_topics_argument
    from mathscout.evaluation.significance import CORRECTIONS, DEFAULT_CORRECTION

    p = sub.add_parser(
        "eval", parents=[common], help="score runs against qrels (several runs: side by side with significance)"
    )
    p.add_argument("--run", nargs="+", required=True, type=Path)
    p.add_argument("--qrels", required=True, type=Path)
    p.add_argument("--prime", action="store_true", help="ARQMath prime measures (unjudged documents removed)")
    p.add_argument(
        "--measures",
        choices=["arqmath", "collection"],
        default=None,
        help="measure set (default: arqmath with --prime or ARQMath qrels, else collection)",
    )
    p.add_argument(
        "--topics-with-relevant",
        action="store_true",
        help="average over the topics with a relevant document only (default: every assessed topic, "
        "as the official ARQMath evaluation)",
    )
    add_topics_argument(p)
    p.add_argument(
        "--correction",
        choices=CORRECTIONS,
        default=DEFAULT_CORRECTION,
        help="several runs: multiple-testing correction of the p-values against the first run, per measure "
        f"(default {DEFAULT_CORRECTION})",
    )
    p.add_argument("--json", action="store_true")
    p.add_argument("--per-topic", action="store_true", help="print the per-topic table")
    p.add_argument(
        "--by-family",
        action="store_true",
        help="means per topic family (id prefix: mo, mse, math, …), each run tested against the first",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    from mathscout.evaluation.measures import compare_runs, evaluate_run
    from mathscout.evaluation.report import format_comparison, format_evaluation
    from mathscout.notices import warning

    scoring = dict(
        prime=args.prime, measure_set=args.measures, topics_with_relevant=args.topics_with_relevant, topics=args.topics
    )
    comparison = None
    if len(args.run) == 1:
        results = [evaluate_run(args.run[0], args.qrels, **scoring)]
    else:
        comparison = compare_runs(args.run, args.qrels, correction=args.correction, **scoring)
        results = comparison.results
    for result in results:
        if said := result.coverage_warning():
            warning(said)
    if args.by_family:
        from mathscout.evaluation.families import families_json, family_scores, format_families

        families = family_scores(results)
        print(
            strict_json(families_json(results, families)) if args.json else format_families(results, families),
            file=args.out,
        )
    elif comparison is None:
        print(
            strict_json(results[0].to_json()) if args.json else format_evaluation(results[0], per_topic=args.per_topic),
            file=args.out,
        )
    else:
        print(strict_json(comparison.to_json()) if args.json else format_comparison(comparison), file=args.out)
