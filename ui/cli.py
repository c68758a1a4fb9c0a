"""The `mathscout` command line (an entry point: it may import every layer below it): the top-level parser, its
common options and error handling. Each command is a module of mathscout.ui.commands (index, search, ask, serve, run,
eval, train, bench) with its own `add` and `run`; `train` commands come from the entry layer's table
(`mathscout.ui.registry.trainers`)."""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys

from mathscout.errors import MathScoutError, did_you_mean
from mathscout.terminal import printable
from mathscout.ui.commands import ask, bench, evaluate, index, run, search, serve, train

COMMANDS = [index, search, run, evaluate, bench, train, serve, ask]  # in the order `mathscout --help` lists them


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: `mathscout search: error: … (see 'mathscout search --help')`, exit 2; a
    mistyped choice (a command's name, `--format`, …) is answered with the closest one."""

    def error(self, message: str):
        if choice := re.match(r"argument .*?: invalid choice: '(.*?)' \(choose from (.*)\)$", message):
            message += did_you_mean(choice.group(1), re.findall(r"'([^']*)'", choice.group(2)))
        self.exit(2, f"{self.prog}: error: {printable(message, lines=False)} (see '{self.prog} --help')\n")


def _parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """The arguments; an option no command knows is refused by the command it was given to, with that command's help
    named and the closest option it has (`mathscout search --mdoe` → 'did you mean --mode?')."""
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
        command = commands.get(str(getattr(args, "command", "")), parser)
        options = [o for action in command._actions for o in action.option_strings]
        hint = next((did_you_mean(word.split("=")[0], options) for word in unknown if word.startswith("-")), "")
        command.error(f"unrecognized arguments: {' '.join(unknown)}{hint}")
    return args


def _common_options(top_level: bool) -> argparse.ArgumentParser:
    """Options every command takes, before or after its name (`mathscout --quiet search …` or `… search --quiet`)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--quiet",
        "-q",
        action="store_true",
        default=False if top_level else argparse.SUPPRESS,
        help="nothing on stderr but errors: no warnings, logs or progress",
    )
    common.add_argument(
        "--verbose",
        "-v",
        action="count",
        default=0 if top_level else argparse.SUPPRESS,
        help="log what is done on stderr (-v info, -vv debug; or set MATHSCOUT_LOG)",
    )
    return common


def _version() -> str:
    from mathscout import __version__

    return f"mathscout {__version__} (Python {sys.version.split()[0]})"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="mathscout", description="Math-aware search over math Q&A.", parents=[_common_options(True)])
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    common = _common_options(False)
    for command in COMMANDS:
        command.add(sub, common)
    return parser


@contextlib.contextmanager
def _results_stream(as_json: bool):
    """Where a command prints its result. With --json: a stream on the original stdout, while everything else
    printed meanwhile goes to stderr — Python's prints and, when stdout is the process's file descriptor 1, also
    Java's or C code's output (fd 1 points at stderr for the command's duration)."""
    if not as_json:
        yield sys.stdout
        return
    results = sys.stdout
    try:
        real_fd = results.fileno() == 1
    except (AttributeError, OSError, ValueError):  # stdout replaced in-process (a test, a notebook)
        real_fd = False
    if not real_fd:
        with contextlib.redirect_stdout(sys.stderr):
            yield results
        return
    results.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        with os.fdopen(os.dup(saved), "w", encoding="utf-8") as results, contextlib.redirect_stdout(sys.stderr):
            yield results
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def main(argv: list[str] | None = None) -> int:
    args = _parse(build_parser(), argv)
    if args.quiet:
        from mathscout.notices import set_quiet

        set_quiet()
    try:
        from mathscout import logs

        logs.configure(args.verbose, args.quiet)  # a library call logs nothing; a command its warnings, or more
        with _results_stream(getattr(args, "json", False)) as out:
            args.out = out
            args.func(args)
    except MathScoutError as exc:  # the message may quote a query, an id or a file: shown, never obeyed
        print(f"mathscout: error: {printable(exc, lines=False)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("mathscout: interrupted", file=sys.stderr)
        return 130
    except ImportError as exc:
        from mathscout.extras import missing_extra

        message = missing_extra(exc)
        if message is None and not _debug():
            message = f"a module is missing ({exc}): reinstall MathScout ('bash scripts/setup.sh')"
        if message is None:
            raise
        print(f"mathscout: error: {printable(message, lines=False)}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `mathscout search … | head`: the reader left; not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:  # a defect or a library's own error: one line, the traceback only on request
        if _debug():
            raise
        detail = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        print(
            f"mathscout: internal error: {type(exc).__name__}: {detail} (set MATHSCOUT_DEBUG=1 for the details)",
            file=sys.stderr,
        )
        return 1
    return 0


def _debug() -> bool:
    """MATHSCOUT_DEBUG; False when the settings are unreadable (that error was said already)."""
    from mathscout.settings import settings

    try:
        return settings().debug
    except MathScoutError:
        return False


if __name__ == "__main__":
    sys.exit(main())
