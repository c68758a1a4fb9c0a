"""What several commands share: strict JSON output, notices before hits, the index a command opens, and the search
options of `search`, `ask` and `run` (from the option table, mathscout.options)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import TextIO

from mathscout.errors import MathScoutError
from mathscout.limits import RERANK_DEPTH, K
from mathscout.terminal import json_escaped, printable


def strict_json(data) -> str:
    """`data` as strict JSON: a NaN or infinity (which JSON has not) is one clear error before anything is printed."""
    try:  # the control characters JSON leaves raw (DEL, C1, bidirectional) as \u escapes: shown, never obeyed
        return json_escaped(json.dumps(data, ensure_ascii=False, indent=2, allow_nan=False))
    except ValueError as exc:
        raise MathScoutError(
            f"the result holds a number JSON cannot represent ({exc}): check the index's tuned files "
            "(structure.json, fusion.json, ranker.json)"
        ) from None


def open_index(args: argparse.Namespace):
    from mathscout.config import default_index_path
    from mathscout.index.layout import IndexDir
    from mathscout.retrievers.indexing import ensure_demo_index

    if args.index is None:
        return IndexDir(ensure_demo_index(default_index_path()))
    return IndexDir(args.index)


def say_notices(notices: list[str], out: TextIO) -> None:
    """A result's notices (also searched forms, a query cut to length, …): part of the result, before its hits."""
    for text in notices:
        print(f"note: {printable(text)}", file=out)


def add_search_options(p: argparse.ArgumentParser) -> None:
    """--mode, --k, --rerank and --rerank-depth, from the option table (mathscout.options), as on search and ask."""
    from mathscout import options

    p.add_argument(
        options.MODE.flag, default=options.MODE.default, help=f"{options.MODE.help} (default: {options.MODE.default})"
    )
    p.add_argument(
        options.K.flag,
        type=K.argparse(),
        default=options.K.default,
        help=f"{options.K.help} (default {options.K.default})",
    )
    add_rerank_options(p)


def add_rerank_options(p: argparse.ArgumentParser) -> None:
    """--rerank KIND and --rerank-depth N, the same on search, ask and run (defaults: the option table)."""
    from mathscout import options
    from mathscout.retrievers.registry import rerank_argument, rerank_help

    p.add_argument(
        options.RERANK.flag,
        nargs="?",
        const="auto",
        default=options.RERANK.default,
        type=rerank_argument,
        metavar="KIND",
        help=f"{rerank_help()} (a bare --rerank means auto; default none)",
    )
    p.add_argument(
        options.RERANK_DEPTH.flag,
        type=RERANK_DEPTH.argparse(),
        default=options.RERANK_DEPTH.default,
        help=f"first-stage hits reranked ({RERANK_DEPTH.low}–{RERANK_DEPTH.high:,}; "
        f"default {options.RERANK_DEPTH.default})",
    )


class LazyHelp(str):
    """A help or epilog text made by `make()` only when help is printed (argparse %-formats every help text, which
    calls `__mod__`): a command's parser is built without importing the table the text lists."""

    make: Callable[[], str]

    def __new__(cls, make: Callable[[], str]) -> LazyHelp:
        text = super().__new__(cls, "%(prog)s")
        text.make = make
        return text

    def __mod__(self, params) -> str:
        return self.make()


def listing(title: str, entries: dict[str, str], width: int = 100) -> str:
    """`title:` then one entry a line, `NAME  what it is` wrapped under its name (an epilog of `bench`, `train`)."""
    import textwrap

    column = max(len(name) for name in entries) + 4
    lines = [f"{title}:"]
    for name, text in sorted(entries.items()):
        wrapped = textwrap.wrap(text, width - column) or [""]
        lines.append(f"  {name:<{column - 2}}{wrapped[0]}")
        lines += [" " * column + more for more in wrapped[1:]]
    return "\n".join(lines)
