"""Finding LaTeX math in text under every common delimiter.

Delimiters: `$…$`, `$$…$$`, `\\(…\\)`, `\\[…\\]`, `\\begin{equation|align|gather|…}…\\end{…}` and
`[imath]…[/imath]`. An escaped `\\$` is never a delimiter. Currency is told apart from inline math with
pandoc's rule: an opening `$` is followed by a non-space, a closing `$` is preceded by a non-space and not
followed by a digit; an inline span never crosses a blank line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MATH_ENVIRONMENTS = (
    "equation", "align", "gather", "multline", "eqnarray", "displaymath", "math", "alignat", "flalign",
    "split",
)
_ENV = "|".join(MATH_ENVIRONMENTS)
_OPENER = re.compile(r"\\\$|\$\$|\$|\\\(|\\\[|\\begin\{(" + _ENV + r")(\*?)\}|\[imath\]")
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
MAX_FORMULA_CHARS = 20_000  # longer "formulas" are almost certainly unbalanced delimiters


@dataclass(frozen=True)
class MathSpan:
    """A formula in a text: `text[start:end]` is the delimited span, `latex` its body."""

    start: int
    end: int
    latex: str
    display: bool


def _unescaped(text: str, needle: str, start: int) -> int:
    """Index of the next `needle` at or after `start` not preceded by a backslash (-1 if none)."""
    while True:
        i = text.find(needle, start)
        if i <= 0 or text[i - 1] != "\\":
            return i
        start = i + 1


def _inline_dollar_end(text: str, open_at: int) -> int:
    """The index of the `$` closing the inline span opened at `open_at`, or -1 (then it is literal)."""
    body_start = open_at + 1
    if body_start >= len(text) or text[body_start].isspace():
        return -1
    close = _unescaped(text, "$", body_start)
    if close < 0 or close == body_start:
        return -1
    if text[close - 1].isspace() or (close + 1 < len(text) and text[close + 1].isdigit()):
        return -1
    if close - body_start > MAX_FORMULA_CHARS or _BLANK_LINE.search(text, body_start, close):
        return -1
    return close


def find_math(text: str) -> list[MathSpan]:
    """Every formula in `text`, in order; unmatched or currency-like delimiters are left as text."""
    spans: list[MathSpan] = []
    pos = 0
    while match := _OPENER.search(text, pos):
        token, at = match.group(0), match.start()
        span = None
        if token == "\\$":
            pos = match.end()
            continue
        if token == "$$":
            close = _unescaped(text, "$$", match.end())
            if close >= 0 and close - match.end() <= MAX_FORMULA_CHARS:
                span = MathSpan(at, close + 2, text[match.end():close], True)
        elif token == "$":
            close = _inline_dollar_end(text, at)
            if close >= 0:
                span = MathSpan(at, close + 1, text[at + 1:close], False)
        elif token in ("\\(", "\\["):
            closer = "\\)" if token == "\\(" else "\\]"
            close = text.find(closer, match.end())
            if close >= 0 and close - match.end() <= MAX_FORMULA_CHARS:
                span = MathSpan(at, close + 2, text[match.end():close], token == "\\[")
        elif token == "[imath]":
            close = text.find("[/imath]", match.end())
            if close >= 0:
                span = MathSpan(at, close + len("[/imath]"), text[match.end():close], False)
        else:  # \begin{env}
            closer = f"\\end{{{match.group(1)}{match.group(2)}}}"
            close = text.find(closer, match.end())
            if close >= 0:
                span = MathSpan(at, close + len(closer), text[match.end():close], True)
        if span is None or not span.latex.strip():
            pos = match.end()
            continue
        spans.append(span)
        pos = span.end
    return spans
