"""`mathscout search`: one query (through a running service of the user's when there is one, else in this process),
or the interactive search prompt."""

from __future__ import annotations

import argparse
from typing import TextIO

from mathscout.errors import MathScoutError
from mathscout.limits import K
from mathscout.terminal import printable
from mathscout.ui.commands.common import (
    add_index_option,
    add_search_options,
    add_service_options,
    open_index,
    strict_json,
)


def add(sub, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("search", parents=[common], help="search an index (interactive when no query is given)")
    p.add_argument("query", nargs="*", help="words and LaTeX, e.g. 'prove $a^2+b^2=c^2$'")
    add_index_option(p)
    add_search_options(p)
    p.add_argument("--json", action="store_true", help="print the result as JSON (stdout carries only the JSON)")
    add_service_options(p, "search through", "search")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    out: TextIO = args.out
    if args.query and not args.server and not args.local and _search_service(args, out):
        return
    from mathscout.tools.searching import SearchRequest

    request = SearchRequest(" ".join(args.query), args.mode, args.k, args.rerank, args.rerank_depth)
    if args.server:
        _search_server(args, request, out)
        return
    if args.query:
        from mathscout import java

        java.prefer_quick_start()  # one search: the JVM's quick compiler starts a second sooner
        _search_once(_LocalSearch(args), request.checked(), args.json, out)
        return
    _interactive(_LocalSearch(args), request, args.json, out)


def _search_server(args: argparse.Namespace, request, out: TextIO) -> None:
    from mathscout.ui.client import Client

    request = request.checked()
    result = Client(args.server, args.auth).search(
        request.query,
        mode=request.mode,
        k=request.k,
        rerank=request.rerank,
        rerank_depth=request.rerank_depth,
        index=args.index.name if args.index else None,
    )
    _print_search_result(result, request.query, args.json, out)


def _search_service(args: argparse.Namespace, out: TextIO) -> bool:
    """The search through a running MathScout service of this user for the index (`mathscout serve`,
    mathscout.ui.services), printed as a search in this process prints it. False, with nothing printed, when there is
    none or it fails in any way (bad input included): the search then runs in this process and says why."""
    from mathscout.ui.services import debug, find

    service = find(args.index)
    if service is None:
        return False
    query = " ".join(args.query)
    try:
        result = service.client().search(
            query, mode=args.mode, k=args.k, rerank=args.rerank, rerank_depth=args.rerank_depth, index=service.key
        )
    except Exception as exc:  # noqa: BLE001 - whatever went wrong, this process searches by itself
        debug(f"the service at {service.url} failed ({exc}): searching here")
        return False
    _print_search_result(result, query, args.json, out)
    return True


def _print_search_result(result: dict, query: str, as_json: bool, out: TextIO) -> None:
    """A search's result as JSON (`SearchResult` as a dict) printed: JSON, or its notices and hits."""
    if as_json:
        print(strict_json(result), file=out)
        return
    from mathscout.render import print_hit_records

    say_notices(result.get("notices", []), out)
    print_hit_records(result["hits"], query, out)


def say_notices(notices: list[str], out: TextIO) -> None:
    """A result's notices (also searched forms, a query cut to length, …): part of the result, before its hits."""
    for text in notices:
        print(f"note: {printable(text)}", file=out)


class _LocalSearch:
    """Searches of one index in this process (retrievers and rerankers opened once, by a ToolBox); every mode,
    `auto` included, opened by the one mode resolver (`mathscout.agent.planned.open_mode`)."""

    def __init__(self, args: argparse.Namespace):
        from mathscout.tools.toolbox import ToolBox

        self.index = open_index(args)
        self.toolbox = ToolBox(self.index)

    def modes(self) -> list[str]:
        from mathscout.agent.planned import offered_modes

        return offered_modes(self.toolbox)

    def run(self, request):
        """The one search service (`run_search`), as the HTTP API and the Python API run it; `auto` reranks with the
        LLM when one is configured."""
        from mathscout.agent.planned import open_mode
        from mathscout.settings import settings
        from mathscout.tools.searching import run_search

        return run_search(request, self.toolbox, open_mode, llm=settings().llm_configured)


def _search_once(search: _LocalSearch, request, as_json: bool, out: TextIO) -> None:
    _print_search_result(search.run(request).to_dict(), request.query, as_json, out)


PROMPT_HELP = """commands (anything else is searched):
  :mode NAME     search mode (:modes lists this index's)     :k N          hits per search
  :rerank KIND   rerank with KIND, or :rerank none            :json         JSON output on/off
  :help          this list                                    :quit         leave (also an empty line or Ctrl-D)"""


def _interactive(search: _LocalSearch, request, as_json: bool, out: TextIO) -> None:
    """The search prompt: each line is a query, or one of its own `:commands` (PROMPT_HELP)."""
    from dataclasses import replace

    settings = replace(request, query="")
    print(
        f"MathScout search over {search.index.path} ({search.index.manifest.documents:,} documents, mode "
        f"{settings.mode}, k {settings.k}). :help lists the commands; an empty line or Ctrl-D quits.",
        file=out,
    )
    while True:
        try:
            line = input("query> ").strip()
        except EOFError:
            break
        if not line or line in (":quit", ":q", ":exit"):
            break
        try:
            if line.startswith(":"):
                settings, as_json, message = _prompt_command(line, settings, as_json, search.modes())
                print(printable(message), file=out)
            else:
                _search_once(search, replace(settings, query=line).checked(), as_json, out)
        except MathScoutError as exc:
            print(f"error: {printable(exc, lines=False)}", file=out)


def _prompt_command(line: str, settings, as_json: bool, modes: list[str]):
    """(settings, as_json, message) after one `:command` of the search prompt; MathScoutError if it is wrong."""
    from dataclasses import replace

    from mathscout.retrievers.registry import rerank_kind, unknown_mode

    name, _, value = line[1:].partition(" ")
    name, value = name.strip().lower(), value.strip()
    if name == "help":
        return settings, as_json, PROMPT_HELP
    if name == "modes":
        return settings, as_json, "modes: " + ", ".join(modes)
    if name == "mode" and value:
        if value not in modes:
            raise MathScoutError(unknown_mode(value, modes))
        return replace(settings, mode=value), as_json, f"mode {value}"
    if name == "k" and value:
        k = K.check(value)
        return replace(settings, k=k), as_json, f"k {k}"
    if name == "rerank" and value:
        kind = rerank_kind(value)
        return replace(settings, rerank=kind), as_json, f"rerank {kind or 'none'}"
    if name == "json":
        return settings, not as_json, f"JSON output {'off' if as_json else 'on'}"
    raise MathScoutError(f"unknown command '{line}' (:help lists the commands)")
