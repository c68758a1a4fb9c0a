"""What several commands share: strict JSON output, the index a command opens, the options of `search`, `ask` and
`run` (from the option table, mathscout.options), and the table commands `bench` and `train`."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

from mathscout.errors import MathScoutError
from mathscout.limits import RERANK_DEPTH, K
from mathscout.terminal import json_escaped


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


def add_index_option(p: argparse.ArgumentParser) -> None:
    """--index of `search` and `ask`: a folder here, or the name of an index a server offers."""
    p.add_argument(
        "--index",
        type=Path,
        help="index directory (default: the embedded demo index; with --server, the name of one the server offers)",
    )


def add_service_options(p: argparse.ArgumentParser, server_help: str, local_verb: str, local_tail: str = "") -> None:
    """--server, --auth and --local of `search` and `ask`: who answers (a given server, the user's running service,
    or this process)."""
    p.add_argument(
        "--server", metavar="URL", help=f"{server_help} a running 'mathscout serve' (e.g. http://127.0.0.1:7860)"
    )
    p.add_argument("--auth", metavar="USER:PASSWORD", help="the server's login (or set MATHSCOUT_AUTH)")
    p.add_argument(
        "--local",
        action="store_true",
        help=f"{local_verb} in this process, even when a MathScout service of "
        "yours serves the index ('mathscout serve', or 'serve --background'): without --server or --local "
        f"such a service answers, with the same output{local_tail}",
    )


def add_table_command(
    sub, common: argparse.ArgumentParser, name: str, help: str, name_help: str, listed: Callable[[], str]
) -> argparse.ArgumentParser:
    """A command that runs one entry of a table (`bench NAME …`, `train NAME …`): its help lists the table (`listed`,
    made only when help is printed) and the entry's own options follow its name."""
    p = sub.add_parser(
        name,
        parents=[common],
        help=help,
        epilog=LazyHelp(listed),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("name", help=name_help)
    p.add_argument("rest", nargs=argparse.REMAINDER, help=f"its own options ('mathscout {name} NAME --help')")
    return p


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
