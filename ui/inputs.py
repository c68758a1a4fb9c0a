"""Checking what a person typed before it is searched: empty messages, huge pastes, malformed LaTeX."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mathscout.corpus.math_spans import find_math
from mathscout.limits import QUESTION
from mathscout.structure.parser import parse_latex

MAX_QUESTION_CHARS = QUESTION.chars  # longer messages are searched up to here (a question, not a document)
MAX_ECHO_CHARS = 600  # how much of a long message is shown back in the chat
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_LONE_DOLLAR = re.compile(r"(?<!\\)\$(?![\d\s])")  # `$3` and `$ 5` are currency, not math
EXAMPLE = "Why is $\\cos^2\\alpha + \\sin^2\\alpha = 1$?"


@dataclass
class CheckedQuestion:
    """What will be searched (`text`), what the chat shows as the user's message (`echo`), what to tell the
    user about their input (`notices`), and `problem` when there is nothing to search at all."""

    text: str
    echo: str
    notices: list[str] = field(default_factory=list)
    problem: str | None = None


def _short(latex: str, limit: int = 60) -> str:
    latex = " ".join(latex.split())
    return latex if len(latex) <= limit else latex[: limit - 1] + "…"


def formula_problem(latex: str) -> str | None:
    """Why a formula body cannot be read completely (e.g. 'unbalanced {'), or None when it parses."""
    if not latex.strip():
        return "the formula is empty"
    result = parse_latex(latex)
    if result.tree is not None and result.complete:
        return None
    return result.error or "it could not be read"


def latex_notices(text: str) -> list[str]:
    notices = []
    spans = find_math(text)
    for span in spans:
        problem = formula_problem(span.latex)
        if problem:
            notices.append(
                f"The formula `{_short(span.latex)}` looks malformed ({problem}). It was searched as far as it "
                "could be read; check the braces and \\left/\\right pairs for better matches."
            )
    kept, last = [], 0  # the text outside the spans, joined once (cutting each span out copied the text per span)
    for span in spans:
        kept.append(text[last : span.start])
        last = span.end
    outside = "".join(kept) + text[last:]
    if _LONE_DOLLAR.search(outside):
        notices.append("A `$` has no closing `$`, so the text after it was read as words, not as a formula.")
    if "\\(" in outside or "\\[" in outside:
        notices.append("A `\\(` or `\\[` has no closing `\\)` / `\\]`, so it was read as words, not as a formula.")
    return notices


def check_question(raw: str | None) -> CheckedQuestion:
    """Validate a chat message; never raises."""
    text, cut = QUESTION.cut(raw or "")  # the question limit, before anything scans the text
    text = _CONTROL.sub(" ", text).strip()
    if not text:
        return CheckedQuestion(
            "", "", problem=(f"Your message is empty. Type a question in words and/or LaTeX, for example: {EXAMPLE}")
        )
    notices = [cut] if cut else []
    echo = text
    if cut:
        echo = text[:MAX_ECHO_CHARS].rstrip() + f" … *({len(raw or ''):,} characters, shortened here)*"
    notices += latex_notices(text)
    return CheckedQuestion(text, echo, notices)
