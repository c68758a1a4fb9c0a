"""The `mathscout` command line (an entry point: it may import every layer below it): index, search, ask, serve,
run, eval, train, bench. A subcommand is a `_add_<name>` function in SUBCOMMANDS below; `train` commands come
from the entry layer's table (`mathscout.ui.registry.trainers`)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path
from typing import TextIO

from mathscout.dense.device import add_device_argument
from mathscout.errors import MathScoutError
from mathscout.limits import LLM_BUDGET, LLM_RATE, PORT, RERANK_DEPTH, K
from mathscout.options import MODE
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


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: `mathscout search: error: … (see 'mathscout search --help')`, exit 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {printable(message, lines=False)} (see '{self.prog} --help')\n")


def _cmd_index(args: argparse.Namespace) -> None:
    from mathscout.index.components import BuildOptions
    from mathscout.retrievers.indexing import add_components, build_index

    components = [c.strip() for c in args.components.split(",") if c.strip()] if args.components else None
    if args.workers is not None and args.workers < 1:
        raise MathScoutError(f"--workers must be at least 1, not {args.workers}")
    # the structure component's path index builders (parallel.py); where the dense encoding runs
    options = BuildOptions(workers=args.workers, device=args.device)
    if args.shards is not None:
        if not args.input:
            raise MathScoutError("--shards needs --input PATH… (a sharded index is built whole)")
        from mathscout.retrievers.shards.build import build_sharded_index

        manifest = build_sharded_index(
            args.input, args.index, args.shards, components, args.ray, fresh=args.fresh, options=options
        )
    elif args.input:
        manifest = build_index(args.input, args.index, components, fresh=args.fresh, options=options)
    elif components:
        manifest = add_components(args.index, components, options)
    else:
        raise MathScoutError("give --input PATH… to build an index, or --components NAME to add to one")
    print(
        f"index {args.index}: {manifest.documents:,} documents, {manifest.formulas:,} formulas, "
        f"components: {', '.join(manifest.components)}"
    )


def _open_index(args: argparse.Namespace):
    from mathscout.config import default_index_path
    from mathscout.index.layout import IndexDir
    from mathscout.retrievers.indexing import ensure_demo_index

    if args.index is None:
        return IndexDir(ensure_demo_index(default_index_path()))
    return IndexDir(args.index)


def _cmd_search(args: argparse.Namespace) -> None:
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

    _say_notices(result.get("notices", []), out)
    print_hit_records(result["hits"], query, out)


class _LocalSearch:
    """Searches of one index in this process (retrievers and rerankers opened once, by a ToolBox); every mode,
    `auto` included, opened by the one mode resolver (`mathscout.agent.planned.open_mode`)."""

    def __init__(self, args: argparse.Namespace):
        from mathscout.tools.toolbox import ToolBox

        self.index = _open_index(args)
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


def _say_notices(notices: list[str], out: TextIO) -> None:
    """A result's notices (also searched forms, a query cut to length, …): part of the result, before its hits."""
    for text in notices:
        print(f"note: {printable(text)}", file=out)


def _search_once(search: _LocalSearch, request, as_json: bool, out: TextIO) -> None:
    from mathscout.render import print_hit_records

    result = search.run(request)
    if as_json:
        print(strict_json(result.to_dict()), file=out)
        return
    _say_notices(result.notices, out)
    print_hit_records([h.to_dict() for h in result.record.hits], request.query, out)


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

    from mathscout.retrievers.registry import rerank_kind

    name, _, value = line[1:].partition(" ")
    name, value = name.strip().lower(), value.strip()
    if name == "help":
        return settings, as_json, PROMPT_HELP
    if name == "modes":
        return settings, as_json, "modes: " + ", ".join(modes)
    if name == "mode" and value:
        if value not in modes:
            raise MathScoutError(f"unknown search mode '{value}' (modes: {', '.join(modes)})")
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


def _cmd_run(args: argparse.Namespace) -> None:
    from mathscout.agent.planned import open_mode
    from mathscout.evaluation.runner import run_topics

    index = _open_index(args)
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


def _cmd_eval(args: argparse.Namespace) -> None:
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


def _cmd_bench(args: argparse.Namespace) -> None:
    from mathscout.benchmarks import run_benchmark

    run_benchmark(args.name, args.rest)


def _cmd_train(args: argparse.Namespace) -> None:
    from mathscout.retrievers.registry import resolve
    from mathscout.ui.registry import trainers

    known = trainers()
    if args.name not in known:
        listing = "; ".join(f"{n}: {t.description}" for n, t in sorted(known.items()))
        raise MathScoutError(f"unknown trainer '{args.name}' (available — {listing})")
    resolve(known[args.name].target)(args.rest)


def _trainer_names() -> list[str]:
    from mathscout.ui.registry import trainers

    return list(trainers())


class _TrainersHelp(str):
    """`train`'s help, listing the registry's trainers only when help is printed (argparse formats it with `%`):
    every other command starts without importing the registry."""

    def __mod__(self, params) -> str:
        return f"what to train ({', '.join(_trainer_names())})"


DEFAULT_PORT = 7860


def _cmd_serve(args: argparse.Namespace) -> None:
    from mathscout.settings import settings

    configured = settings()  # unless given: MATHSCOUT_HOST, MATHSCOUT_PORT, MATHSCOUT_AUTH, … or the config file
    args.host = args.host or configured.host
    args.port = args.port or configured.port
    args.auth = args.auth or configured.auth
    args.allow_host = args.allow_host or [n.strip() for n in (configured.allow_hosts or "").split(",") if n.strip()]
    if args.stop or args.background:
        _serve_background(args)
        return
    from mathscout.ui.app import serve
    from mathscout.ui.llm_allowance import LlmPolicy

    serve(
        args.index or [],
        host=args.host,
        port=args.port or DEFAULT_PORT,
        public=args.public,
        share=args.share,
        auth=args.auth,
        use_llm=False if args.no_llm else None,
        allow_hosts=args.allow_host,
        llm=LlmPolicy.configured(args.llm_public or None, args.llm_rate, args.llm_budget, share=args.share),
    )


def _serve_background(args: argparse.Namespace) -> None:
    """`serve --stop`, and `serve --background`: the same `serve` in a process of its own (mathscout.ui.services)."""
    from mathscout.ui import services

    if args.stop:
        services.stop(args.index or [])
        return
    if args.share:
        raise MathScoutError("--share serves the page only, which the command line cannot use: leave out --background")
    port = args.port or services.free_port(args.host)
    serve_arguments = [f"--index={path}" for path in args.index or []] + [f"--host={args.host}", f"--port={port}"]
    serve_arguments += [
        flag
        for flag, on in (
            ("--public", args.public),
            ("--no-llm", args.no_llm),
            ("--quiet", args.quiet),
            ("--llm-public", args.llm_public),
        )
        if on
    ]
    serve_arguments += [f"--allow-host={name}" for name in args.allow_host]
    serve_arguments += [
        f"--{name}={value}" for name, value in (("llm-rate", args.llm_rate), ("llm-budget", args.llm_budget)) if value
    ]
    services.start_background(serve_arguments, args.auth)


def _add_index(sub, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("index", parents=[common], help="build an index directory (or add components to one)")
    p.add_argument(
        "--input", nargs="+", type=Path, help="JSONL files, ARQMath Posts XML files, or folders of .md/.tex/.txt"
    )
    p.add_argument("--index", required=True, type=Path, help="the index directory to create or extend")
    p.add_argument(
        "--components",
        help="comma-separated components (default: an existing index's own, else "
        "bm25,structure); with --input on an existing index, the ones not listed are dropped",
    )
    p.add_argument(
        "--shards",
        type=int,
        help="split the collection into N shards built and searched on Ray "
        "(optional part 'distributed'); searches fan out to one actor per shard",
    )
    p.add_argument(
        "--ray",
        help="with --shards: the Ray cluster, 'auto' (default: this machine's, else a local one), "
        "'local' or HOST:PORT of a head started with 'ray start --head' (searches: $MATHSCOUT_RAY)",
    )
    p.add_argument(
        "--workers",
        type=int,
        help="processes building the structure path index (default: min(2, CPU "
        "count); from 100,000 formulas on); the files are the same for any number",
    )
    p.add_argument(
        "--fresh",
        action="store_true",
        help="with --input on an existing index: do not keep its tuned files (structure.json, fusion.json, models)",
    )
    add_device_argument(p)  # where the dense encoding runs
    p.set_defaults(func=_cmd_index)


def _add_search(sub, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("search", parents=[common], help="search an index (interactive when no query is given)")
    p.add_argument("query", nargs="*", help="words and LaTeX, e.g. 'prove $a^2+b^2=c^2$'")
    p.add_argument(
        "--index",
        type=Path,
        help="index directory (default: the embedded demo index; with --server, the name of one the server offers)",
    )
    add_search_options(p)
    p.add_argument("--json", action="store_true", help="print the result as JSON (stdout carries only the JSON)")
    p.add_argument(
        "--server", metavar="URL", help="search through a running 'mathscout serve' (e.g. http://127.0.0.1:7860)"
    )
    p.add_argument("--auth", metavar="USER:PASSWORD", help="the server's login (or set MATHSCOUT_AUTH)")
    p.add_argument(
        "--local",
        action="store_true",
        help="search in this process, even when a MathScout service of "
        "yours serves the index ('mathscout serve', or 'serve --background'): without --server or --local "
        "such a service answers, with the same output",
    )
    p.set_defaults(func=_cmd_search)


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
    _add_rerank(p)


def _add_rerank(p: argparse.ArgumentParser) -> None:
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


def _add_run(sub, common: argparse.ArgumentParser) -> None:
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
    _add_rerank(p)
    p.add_argument(
        "--first-stage",
        type=Path,
        default=None,
        metavar="RUN",
        help="take each topic's ranking from this run file instead of searching (to rerank a stored run)",
    )
    p.set_defaults(func=_cmd_run)


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


def _add_eval(sub, common: argparse.ArgumentParser) -> None:
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
    p.set_defaults(func=_cmd_eval)


def _add_bench(sub, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("bench", parents=[common], help="benchmarks against peers, printed with ratios")
    p.add_argument("name", help="benchmark name (e.g. bm25)")
    p.add_argument("rest", nargs=argparse.REMAINDER, help="options passed to the benchmark")
    p.set_defaults(func=_cmd_bench)


def _add_train(sub, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("train", parents=[common], help="train a model (dense bi-encoder, type embeddings)")
    p.add_argument("name", help=_TrainersHelp("what to train"))
    p.add_argument("rest", nargs=argparse.REMAINDER, help="options passed to the trainer")
    p.set_defaults(func=_cmd_train)


def _add_serve(sub, common: argparse.ArgumentParser) -> None:
    from mathscout.settings import Settings

    p = sub.add_parser("serve", parents=[common], help="the chat page in a browser (Gradio), on 127.0.0.1 by default")
    p.add_argument(
        "--index",
        type=Path,
        action="append",
        help="an index to offer (repeatable; default: the demo index and every index under $MATHSCOUT_HOME/indexes)",
    )
    p.add_argument(
        "--host", help="address to bind (default 127.0.0.1 or $MATHSCOUT_HOST; non-local ones need --public)"
    )
    p.add_argument(
        "--port",
        type=PORT.argparse(),
        help=f"port (default {DEFAULT_PORT} or $MATHSCOUT_PORT; with --background a free one)",
    )
    p.add_argument("--public", action="store_true", help="allow binding beyond localhost (e.g. --host 0.0.0.0)")
    p.add_argument("--share", action="store_true", help="also open a public gradio.live link")
    p.add_argument("--auth", metavar="USER:PASSWORD", help="require a login (or set MATHSCOUT_AUTH)")
    p.add_argument(
        "--allow-host",
        metavar="NAME",
        action="append",
        help="a host name the server answers for besides localhost, 127.0.0.1, [::1] and --host (repeatable; or "
        "MATHSCOUT_ALLOW_HOSTS); any other Host header is refused (DNS rebinding)",
    )
    p.add_argument("--no-llm", action="store_true", help="never call an LLM (offline planner only)")
    p.add_argument(
        "--llm-public",
        action="store_true",
        help="let clients beyond this machine have the LLM answer (default: only clients on this machine)",
    )
    p.add_argument(
        "--llm-rate",
        type=LLM_RATE.argparse(),
        metavar="N",
        help=f"{LLM_RATE.meaning} (default {Settings.llm_rate} or $MATHSCOUT_LLM_RATE)",
    )
    p.add_argument(
        "--llm-budget",
        type=LLM_BUDGET.argparse(),
        metavar="N",
        help=f"{LLM_BUDGET.meaning} (default {Settings.llm_budget} or $MATHSCOUT_LLM_BUDGET)",
    )
    p.add_argument(
        "--background",
        action="store_true",
        help="serve in a process of its own: returns once it listens, "
        "printing its URL and process id; 'mathscout search' and 'ask' then use it (as any 'serve' of yours "
        "on this machine)",
    )
    p.add_argument("--stop", action="store_true", help="stop your running services (with --index: those serving it)")
    p.set_defaults(func=_cmd_serve)


def _add_ask(sub, common: argparse.ArgumentParser) -> None:
    from mathscout.ui.ask import add_parser

    add_parser(sub, common)


SUBCOMMANDS = [_add_index, _add_search, _add_run, _add_eval, _add_bench, _add_train, _add_serve, _add_ask]


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
    for add in SUBCOMMANDS:
        add(sub, common)
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
    args = build_parser().parse_args(argv)
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
