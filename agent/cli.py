"""`mathscout ask "…"`: the answer streamed to stdout, live progress on stderr, then the tool trace."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TextIO

from agent.events import AgentEvent, Answer, ToolCall
from mathscout.limits import AGENT_K, K


def add_parser(sub) -> None:
    p = sub.add_parser("ask", help="ask the assistant: a cited answer and the tool calls behind it")
    p.add_argument("question", nargs="+", help="words and LaTeX, e.g. 'why is $\\cos^2 x + \\sin^2 x = 1$?'")
    p.add_argument("--index", type=Path, help="index directory (default: the embedded demo index)")
    p.add_argument("--mode", default="auto", help="auto (the agent plans) or a search mode of the index")
    p.add_argument("--k", type=K.argparse(), default=10,
                   help=f"hits to return (the assistant shows at most {AGENT_K.high}; a larger k is capped with a notice)")
    p.add_argument("--rerank", action="store_true", help="rerank the top hits")
    p.add_argument("--no-llm", action="store_true", help="never call an LLM (offline planner only)")
    p.add_argument("--json", action="store_true", help="print the answer, hits and trace as JSON")
    p.set_defaults(func=run)


def _arguments(call: ToolCall, limit: int = 120) -> str:
    shown = " ".join(f"{k}={v!r}" if not isinstance(v, str) else f'{k}="{v}"' for k, v in call.arguments.items())
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def _progress(event: AgentEvent, out: TextIO) -> None:
    if event.kind == "plan":
        print(f"plan: {event.text}", file=out)
    elif event.kind == "tool_end" and event.call:
        call = event.call
        result = f"FAILED: {call.error}" if call.error else call.summary
        print(f"  {call.tool} {_arguments(call)} → {result} ({call.seconds:.2f} s)", file=out)
    elif event.kind == "notice":
        print(f"note: {event.text}", file=out)
    out.flush()


def print_trace(answer: Answer, out: TextIO) -> None:
    print(f"\n--- trace: planner {answer.planner}, mode {answer.mode}, {len(answer.trace)} tool calls, "
          f"{answer.seconds:.2f} s", file=out)
    for n, call in enumerate(answer.trace, 1):
        result = f"FAILED: {call.error}" if call.error else call.summary
        print(f"{n:>3}. {call.tool} {_arguments(call)}\n     → {result} ({call.seconds:.3f} s)", file=out)
    for rewrite in answer.rewrites:
        print(f"rewrite: {rewrite.original} → {rewrite.rewritten} ({rewrite.rule})", file=out)
    for expansion in answer.expansions:
        related = ", ".join(f"{t} ({c:.2f})" for t, c in expansion.related)
        print(f"type: {expansion.type} → {related or 'no related types'}", file=out)
    if answer.hits:
        print("hits: " + ", ".join(f"{h.rank}. {h.doc_id}" for h in answer.hits), file=out)


def answer_json(answer: Answer) -> dict:
    from mathscout.render import explain_score

    record = asdict(answer)
    for hit, entry in zip(answer.hits, record["hits"]):
        entry["score_explained"] = explain_score(hit)
    return record


def run(args: argparse.Namespace) -> None:
    from agent.assistant import Assistant

    assistant = Assistant(args.index, use_llm=False if args.no_llm else None)
    question = " ".join(args.question)
    options = dict(mode=args.mode, k=args.k, rerank=args.rerank)
    if args.json:
        print(json.dumps(answer_json(assistant.ask(question, **options)), ensure_ascii=False, indent=2))
        return
    answer, streamed = None, ""
    for event in assistant.stream(question, **options):
        if event.kind == "token":
            if not streamed:
                sys.stderr.flush()
            streamed += event.text
            sys.stdout.write(event.text)
            sys.stdout.flush()
        elif event.kind == "answer":
            answer = event.answer
        else:
            if streamed and event.kind != "notice":  # the LLM wrote text before calling more tools
                sys.stdout.write("\n")
            _progress(event, sys.stderr)
    if answer is None:
        return
    if answer.text.strip() != streamed.strip():  # the planner changed, or invented citations were removed
        print("\n\n--- answer (checked) ---\n" + answer.text if streamed else answer.text)
    else:
        print()
    print_trace(answer, sys.stdout)
