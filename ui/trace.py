"""The transparency trace: which tools the agent called (arguments, hits, time), the SymPy rewrites it
tried and the type expansions it used — as Markdown for a collapsible panel."""

from __future__ import annotations

from collections.abc import Sequence

from mathscout.events import Answer, ToolCall
from mathscout.markup import sanitize_answer

MAX_ARGUMENT_CHARS = 160


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell: no links, images or HTML (summaries hold document ids)."""
    return sanitize_answer(" ".join(str(text).split())).replace("|", "\\|")


def _code(text: str) -> str:
    text = _cell(text).replace("`", "'")
    return f"`{text}`" if text else ""


def _arguments(arguments: dict) -> str:
    """`query="…", k=10`: readable (no JSON escaping of LaTeX backslashes), long values cut."""
    shown = ", ".join(
        f"{name}={value!r}" if not isinstance(value, str) else f'{name}="{value}"' for name, value in arguments.items()
    )
    return shown if len(shown) <= MAX_ARGUMENT_CHARS else shown[: MAX_ARGUMENT_CHARS - 1] + "…"


def _returns_hits(tool: str) -> bool:
    """Search and rerank tools return hits (0 hits is news); rewriting, type expansion, documents do not."""
    return "search" in tool or "rerank" in tool


def calls_markdown(calls: Sequence[ToolCall]) -> str:
    """One numbered line per tool call (tool, hits, time, result) with its arguments underneath."""
    if not calls:
        return "_No tool was called._"
    lines = []
    for n, call in enumerate(calls, 1):
        result = f"**failed:** {_cell(call.error)}" if call.error else _cell(call.summary)
        result = "" if result == f"{call.hit_count} hits" else result
        hits = f" · {call.hit_count} hits" if call.hit_count or _returns_hits(call.tool) else ""
        lines.append(f"{n}. **{_cell(call.tool)}**{hits} · {call.seconds:.2f} s" + (f" — {result}" if result else ""))
        if call.arguments:
            lines.append(f"   {_code(_arguments(call.arguments))}")
    return "\n".join(lines)


def _called(answer: Answer, tool: str) -> bool:
    return any(call.tool == tool and not call.error for call in answer.trace)


def trace_markdown(answer: Answer) -> str:
    """The whole trace of one answer: planner, tool calls, rewrites, type expansions, notices."""
    parts = [
        f"**Question:** {_cell(answer.question)}",
        f"**Planner:** {answer.planner} · **mode:** {answer.mode} · **total:** {answer.seconds:.2f} s",
        "#### Tool calls",
        calls_markdown(answer.trace),
    ]
    parts.append("#### Formula rewrites (SymPy)")
    if answer.rewrites:
        parts.append("\n".join(f"- ${r.original}$ → ${r.rewritten}$ ({_cell(r.rule)})" for r in answer.rewrites))
    elif _called(answer, "rewrite_formula"):
        parts.append("_No equivalent form found (SymPy could not read the formula, or it is already simplest)._")
    else:
        parts.append("_Not used for this answer (no formula in the question, or a mode without rewriting)._")
    parts.append("#### Type expansions")
    if answer.expansions:
        parts.append(
            "\n".join(
                f"- **{_cell(e.type)}** → "
                + (", ".join(f"{_cell(t)} ({s:.2f})" for t, s in e.related) or "no related types")
                for e in answer.expansions
            )
        )
    elif _called(answer, "type_expansion"):
        parts.append("_No mathematical type detected in the question._")
    else:
        parts.append("_Not used for this answer (type expansion needs an index with the types component)._")
    if answer.notices:
        parts.append("#### Notices")
        parts.append("\n".join(f"- {_cell(n)}" for n in answer.notices))
    return "\n\n".join(parts)


def progress_markdown(lines: Sequence[str]) -> str:
    """The live trace while the agent works (one line per step)."""
    return "\n".join(f"- {sanitize_answer(line)}" for line in lines) if lines else "_Starting…_"
