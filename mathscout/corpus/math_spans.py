"""Finding LaTeX math in text under every common delimiter.

Delimiters: `$…$`, `$$…$$`, `\\(…\\)`, `\\[…\\]`, `\\begin{equation|align|gather|…}…\\end{…}` and
`[imath]…[/imath]`. An escaped `\\$` is never a delimiter. Currency is told apart from inline math with
pandoc's rule: an opening `$` is followed by a non-space, a closing `$` is preceded by a non-space and not
followed by a digit; an inline span never crosses a blank line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

MATH_ENVIRONMENTS = (
    "equation",
    "align",
    "gather",
    "multline",
    "eqnarray",
    "displaymath",
    "math",
    "alignat",
    "flalign",
    "split",
)
_ENV = "|".join(MATH_ENVIRONMENTS)
_OPENER = re.compile(r"\\\$|\$\$|\$|\\\(|\\\[|\\begin\{(" + _ENV + r")(\*?)\}|\[imath\]")
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
MAX_FORMULA_CHARS = 20_000  # longer "formulas" (under any delimiter) are almost certainly unbalanced delimiters


@dataclass(frozen=True)
class MathSpan:
    """A formula in a text: `text[start:end]` is the delimited span, `latex` its body."""

    start: int
    end: int
    latex: str
    display: bool


class _Closers:
    """Next occurrences of closing delimiters, remembered: positions only move forward during a scan, so
    each closer is searched across any stretch of the text at most once (linear time even when a text
    holds thousands of unclosed openers; thesis-independent, see tests/robust/test_scanners.py)."""

    def __init__(self, text: str):
        self.text = text
        self._next: dict[tuple[str, bool], tuple[int, int]] = {}  # (needle, unescaped) → (searched from, found at)

    def find(self, needle: str, start: int, unescaped: bool = False) -> int:
        """Index of the next `needle` at or after `start` (not preceded by a backslash if `unescaped`), or -1."""
        key = (needle, unescaped)
        cached = self._next.get(key)
        if cached is not None:
            searched_from, found = cached
            if searched_from <= start and (found < 0 or found >= start):
                return found
        found = self._search(needle, start, unescaped)
        self._next[key] = (start, found)
        return found

    def _search(self, needle: str, start: int, unescaped: bool) -> int:
        text = self.text
        while True:
            i = text.find(needle, start)
            if not unescaped or i <= 0 or text[i - 1] != "\\":
                return i
            start = i + 1


def _inline_dollar_end(text: str, open_at: int, closers: _Closers) -> int:
    """The index of the `$` closing the inline span opened at `open_at`, or -1 (then it is literal)."""
    body_start = open_at + 1
    if body_start >= len(text) or text[body_start].isspace():
        return -1
    close = closers.find("$", body_start, unescaped=True)
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
    closers = _Closers(text)
    pos = 0
    while match := _OPENER.search(text, pos):
        token, at = match.group(0), match.start()
        span = None
        if token == "\\$":
            pos = match.end()
            continue
        if token == "$$":
            close = closers.find("$$", match.end(), unescaped=True)
            if close >= 0 and close - match.end() <= MAX_FORMULA_CHARS:
                span = MathSpan(at, close + 2, text[match.end() : close], True)
        elif token == "$":
            close = _inline_dollar_end(text, at, closers)
            if close >= 0:
                span = MathSpan(at, close + 1, text[at + 1 : close], False)
        elif token in ("\\(", "\\["):
            closer = "\\)" if token == "\\(" else "\\]"
            close = closers.find(closer, match.end())
            if close >= 0 and close - match.end() <= MAX_FORMULA_CHARS:
                span = MathSpan(at, close + 2, text[match.end() : close], token == "\\[")
        elif token == "[imath]":
            close = closers.find("[/imath]", match.end())
            if 0 <= close - match.end() <= MAX_FORMULA_CHARS:
                span = MathSpan(at, close + len("[/imath]"), text[match.end() : close], False)
        else:  # \begin{env}
            closer = f"\\end{{{match.group(1)}{match.group(2)}}}"
            close = closers.find(closer, match.end())
            if 0 <= close - match.end() <= MAX_FORMULA_CHARS:
                span = MathSpan(at, close + len(closer), text[match.end() : close], True)
        if span is None or not span.latex.strip():
            pos = match.end()
            continue
        spans.append(span)
        pos = span.end
    return spans


class FormulasAndWords(NamedTuple):
    """A query split into its formulas (LaTeX bodies, stripped) and its words (the text around them)."""

    formulas: list[str]
    words: str


def formulas_and_words(text: str) -> FormulasAndWords:
    """The one split of a query into formulas and words (structure search and the question reader use it): each
    delimited formula `find_math` finds (never an empty one), stripped; the words are the text before, between and
    after the formulas, each piece's whitespace collapsed, joined by single spaces."""
    spans = find_math(text)
    pieces, last = [], 0
    for span in spans:
        pieces.append(text[last : span.start])
        last = span.end
    pieces.append(text[last:])
    words = " ".join(" ".join(piece.split()) for piece in pieces if piece.strip())
    return FormulasAndWords([span.latex.strip() for span in spans], words)
