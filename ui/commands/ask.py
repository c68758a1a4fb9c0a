"""`mathscout ask "…"`: the answer streamed to stdout, then a short trace summary.

The tool calls and notes are listed once: on a terminal live on stderr as they run (`mathscout.progress.shown`:
not under --quiet, not into a pipe or a file), else in the trace after the answer on stdout; in full in `--json`.
With `--server URL` the question goes to a running `mathscout serve` (POST /api/ask) instead.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from mathscout.errors import MathScoutError
from mathscout.events import AgentEvent
from mathscout.progress import shown
from mathscout.terminal import printing
from mathscout.ui.commands.common import add_index_option, add_search_options, add_service_options, strict_json


def add(sub, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("ask", parents=[common], help="ask the assistant: a cited answer and the tool calls behind it")
    p.add_argument("question", nargs="+", help="words and LaTeX, e.g. 'why is $\\cos^2 x + \\sin^2 x = 1$?'")
    add_index_option(p)
    add_search_options(p)
    p.add_argument("--no-llm", action="store_true", help="never call an LLM (offline planner only)")
    p.add_argument("--json", action="store_true", help="print the answer, hits and trace as JSON")
    add_service_options(p, "ask", "answer", ", unless an LLM is to write the answer")
    p.set_defaults(func=run)


def _arguments(arguments: dict[str, Any], limit: int = 120) -> str:
    shown = " ".join(f"{k}={v!r}" if not isinstance(v, str) else f'{k}="{v}"' for k, v in arguments.items())
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def _progress(event: AgentEvent, out: TextIO) -> None:
    """One step, live on a terminal (`shown()`); else nothing (the trace after the answer lists them)."""
    if not shown():
        return
    if event.kind == "plan":
        print(f"plan: {event.text}", file=out)
    elif event.kind == "tool_end" and event.call:
        call = event.call
        result = f"FAILED: {call.error}" if call.error else call.summary
        print(f"  {call.tool} {_arguments(call.arguments)} → {result} ({call.seconds:.2f} s)", file=out)
    elif event.kind == "notice":
        print(f"note: {event.text}", file=out)
    out.flush()


def print_trace(record: dict, out: TextIO, with_calls: bool = False) -> None:
    """The trace summary of an answer (as `Answer.to_dict()` gives it); the notes and the numbered tool calls with
    `with_calls` (when they were not shown live)."""
    print(
        f"\n--- trace: planner {record['planner']}, mode {record['mode']}, {len(record['trace'])} tool calls, "
        f"{record['seconds']:.2f} s",
        file=out,
    )
    for notice in record.get("notices", []) if with_calls else []:
        print(f"note: {notice}", file=out)
    for n, call in enumerate(record["trace"] if with_calls else [], 1):
        result = f"FAILED: {call['error']}" if call.get("error") else call["summary"]
        print(
            f"{n:>3}. {call['tool']} {_arguments(call['arguments'])}\n     → {result} ({call['seconds']:.3f} s)",
            file=out,
        )
    for rewrite in record["rewrites"]:
        print(f"rewrite: {rewrite['original']} → {rewrite['rewritten']} ({rewrite['rule']})", file=out)
    for expansion in record["expansions"]:
        related = ", ".join(f"{t} ({c:.2f})" for t, c in expansion["related"])
        print(f"type: {expansion['type']} → {related or 'no related types'}", file=out)
    if record["hits"]:
        print("hits: " + ", ".join(f"{h['rank']}. {h['doc_id']}" for h in record["hits"]), file=out)


def _ask_server(args: argparse.Namespace, question: str, out: TextIO) -> None:
    from mathscout.ui.client import Client

    record = Client(args.server, args.auth).ask(
        question,
        mode=args.mode,
        k=args.k,
        rerank=args.rerank,
        rerank_depth=args.rerank_depth,
        use_llm=False if args.no_llm else None,
        index=args.index.name if args.index else None,
    )
    if args.json:
        print(strict_json(record), file=out)
        return
    print(record["text"], file=out)
    print_trace(record, out, with_calls=True)


def _ask_service(args: argparse.Namespace, question: str, out: TextIO) -> bool:
    """The answer of a running MathScout service of this user for the index (mathscout.ui.services), printed as an
    answer written in this process is (its tool calls on stderr once it is done). False, with nothing printed, when
    there is none, when an LLM would write the answer here, or when it fails in any way: the question is then
    answered in this process."""
    from mathscout.agent.config import LLMConfig
    from mathscout.events import ToolCall
    from mathscout.ui.services import debug, find

    try:
        if not args.no_llm and LLMConfig.from_env().configured:
            return False
    except MathScoutError:  # an unreadable config file: answering here says so
        return False
    service = find(args.index)
    if service is None:
        return False
    try:
        record = service.client().ask(
            question,
            mode=args.mode,
            k=args.k,
            rerank=args.rerank,
            rerank_depth=args.rerank_depth,
            use_llm=False,
            index=service.key,
        )
        calls = [
            ToolCall(c["tool"], c["arguments"], c["summary"], seconds=c["seconds"], error=c.get("error"))
            for c in record["trace"]
        ]
    except Exception as exc:  # noqa: BLE001 - whatever went wrong, this process answers by itself
        debug(f"the service at {service.url} failed ({exc}): answering here")
        return False
    if args.json:
        print(strict_json(record), file=out)
        return True
    for event in [AgentEvent("notice", text=n) for n in record["notices"]] + [
        AgentEvent("tool_end", call=c) for c in calls
    ]:
        _progress(event, printing(sys.stderr))
    print(record["text"], file=out)
    print_trace(record, out, with_calls=not shown())
    return True


def run(args: argparse.Namespace) -> None:
    out: TextIO = printing(getattr(args, "out", None) or sys.stdout)  # document text is shown, never obeyed
    question = " ".join(args.question)
    if args.server:
        _ask_server(args, question, out)
        return
    if not args.local and _ask_service(args, question, out):
        return
    from mathscout.agent.assistant import Assistant
    from mathscout.rewrite.pool import default_pool

    default_pool()  # the SymPy worker starts importing now, beside the JVM and the kernels
    assistant = Assistant(args.index, use_llm=False if args.no_llm else None)
    options = dict(mode=args.mode, k=args.k, rerank=args.rerank, rerank_depth=args.rerank_depth)
    if args.json:
        print(strict_json(assistant.ask(question, **options).to_dict()), file=out)
        return
    answer, streamed = None, ""
    for event in assistant.stream(question, **options):
        if event.kind == "token":
            if not streamed:
                sys.stderr.flush()
            streamed += event.text
            out.write(event.text)
            out.flush()
        elif event.kind == "answer":
            answer = event.answer
        else:
            if streamed and event.kind != "notice":  # the LLM wrote text before calling more tools
                out.write("\n")
            _progress(event, printing(sys.stderr))
    if answer is None:
        return
    if answer.text.strip() != streamed.strip():  # the planner changed, or invented citations were removed
        print("\n\n--- answer (checked) ---\n" + answer.text if streamed else answer.text, file=out)
    else:
        print(file=out)
    print_trace(answer.to_dict(), out, with_calls=not shown())
