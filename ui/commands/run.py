"""`mathscout run`: search every topic of a topic file and write a TREC (or ARQMath) run."""

from __future__ import annotations

import argparse
from pathlib import Path

from mathscout.errors import MathScoutError
from mathscout.limits import K
from mathscout.options import MODE
from mathscout.ui.commands.common import add_rerank_options, open_index


def add(sub, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("run", parents=[common], help="search every topic of a topic file and write a TREC run")
    p.add_argument("--index", type=Path)
    p.add_argument("--topics", required=True, type=Path, help="ARQMath topic XML, JSONL {id,title,body} or {id,query}")
    p.add_argument("--mode", default=MODE.default, help=f"{MODE.help} (default: {MODE.default})")
    p.add_argument(
        "--k",
        type=K.argparse(),
        default=1000,
        help=f"hits per topic ({K.low}–{K.high:,}; default 1000: a run's depth, not a page of hits)",
    )
    p.add_argument("--output", required=True, type=Path)
    p.add_argument("--format", choices=["trec", "arqmath"], default="trec")
    p.add_argument(
        "--task",
        type=int,
        choices=[1, 2],
        default=1,
        help="ARQMath task: 1 ranks documents (default), 2 ranks formulas (--mode structure; "
        "arqmath format: topic formula post rank score run)",
    )
    p.add_argument("--tag", default=None, help="run tag (default: mathscout-<mode>)")
    p.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="a retriever option, e.g. --set lambda_m=1.0 --set eta=0.05 (repeatable)",
    )
    add_rerank_options(p)
    p.add_argument(
        "--first-stage",
        type=Path,
        default=None,
        metavar="RUN",
        help="take each topic's ranking from this run file instead of searching (to rerank a stored run)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    from mathscout.agent.planned import open_mode
    from mathscout.evaluation.runner import run_topics

    index = open_index(args)
    options = dict(_option(o) for o in args.set or [])
    if getattr(args, "task", 1) == 2:
        from mathscout.evaluation.runner import run_task2

        print(
            run_task2(
                index, args.topics, args.mode, args.k, args.output, fmt=args.format, tag=args.tag, options=options
            )
        )
        return
    summary = run_topics(
        index,
        args.topics,
        args.mode,
        args.k,
        args.output,
        fmt=args.format,
        tag=args.tag,
        options=options,
        rerank=args.rerank,
        rerank_depth=args.rerank_depth,
        first_stage=args.first_stage,
        open_mode=open_mode,
    )
    print(summary)


def _option(text: str) -> tuple[str, object]:
    """`KEY=VALUE` of `run --set`: numbers become int/float, true/false booleans, the rest stays text."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise MathScoutError(f"--set wants KEY=VALUE (got '{text}')")
    lowered = value.strip().lower()
    if lowered in ("true", "false"):
        return key.strip(), lowered == "true"
    for cast in (int, float):
        try:
            return key.strip(), cast(value)
        except ValueError:
            pass
    return key.strip(), value
