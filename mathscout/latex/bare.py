"""Formulas typed without delimiters: `x^2+y^2=z^2`, `\\frac{a}{b}`, `a + b = c` in a question are math.

`delimit_bare_math` finds runs of math outside `$…$` (and the other delimiters `find_math` knows) and wraps each
in `$…$`, so every search mode, the planner and the snippets read them as formulas. A run must hold a clear sign
of math (a LaTeX command, `^`, `_` after a short base, a relation or operator between short operands, `f(x)`, `n!`);
lone letters and numbers join a run only through an operator, so "a proof" or "in 2017" stay words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mathscout.corpus.math_spans import find_math

MAX_RUN_TOKENS = 40  # a run longer than this is prose with symbols, not a formula
_TOKEN = re.compile(r"\S+")
_TRAILING = ".,;:?"  # not "!": `n!` is a factorial
_OPERATOR = re.compile(
    r"(?:[+\-*/=<>^·×÷≤≥≠]|<=|>=|!=|\\(?:le|ge|leq|geq|neq|ne|lt|gt|cdot|times|div|pm|mp|to|in|"
    r"subset|subseteq|approx|equiv|sim|mid))"
)
_STRONG = [
    re.compile(r"\\[A-Za-z]+"),  # a LaTeX command: \frac, \sum, \alpha
    re.compile(r"[A-Za-z0-9)}\]|]\^[\w{(\\+-]"),  # a power: x^2, (a+b)^{n}, e^{i\pi}
    re.compile(r"(?<![A-Za-z])[A-Za-z]{1,2}_[\w{\\]"),  # a subscript on a short base: x_1, a_{n+1}
    re.compile(r"[\w)}\]]\s*(?:<=|>=|!=|[=<>≤≥≠])\s*[\w(\\{-]"),  # a relation: x=1, a<=b, f(x)=0
    # a+b, 2*x, 1/n: a number is tried at the start of its digits only (or at its second digit after a letter, as
    # `x12+3` reads `2+3`), never from every digit of a long run: that retried `\d+` from each position (quadratic)
    re.compile(
        r"(?:(?<![A-Za-z])[A-Za-z]|(?:(?<![A-Za-z\d])|(?<=[A-Za-z]\d))\d+(?:\.\d+)?)[+*/](?:[A-Za-z]|\d)(?![A-Za-z]{2})"
    ),
    re.compile(
        r"(?<![A-Za-z\d])(?:[A-Za-z]|\d{1,2})-(?:[A-Za-z]|\d{1,2})(?![A-Za-z\d])"
    ),  # a-b, 3-1 (not x-axis, 449-464)
    re.compile(r"^(?:[a-z]|sin|cos|tan|log|ln|exp|det|gcd|lcm|max|min)\([^()\s]{1,20}\)"),  # f(x), sin(x), gcd(a,b)
    re.compile(r"^(?:\d+|[A-Za-z])!$"),  # a factorial: n!, 5!
    re.compile(r"^\|[^|\s]{1,20}\|$"),  # an absolute value: |x|
]
_WEAK = re.compile(r"^(?:[A-Za-z]|\d+(?:\.\d+)?|\([A-Za-z0-9]\)|\.\.\.|…)$")  # joins a run only next to an operator
# links, e-mail addresses, Markdown rules, program code, LaTeX layout and definitions (not formulas to search)
_NOT_MATH = re.compile(
    r"://|www\.|@|^[#*>-]{2,}|&&|==|;.|\\(?:newcommand|renewcommand|def|ref|eqref|label|cite|hline|"
    r"begin|end|usepackage|text|mbox)\b"
)
_LONE_COMMAND = re.compile(r"\\[A-Za-z]+[.,;:?]*")  # `\quad`, `\exp` alone: math only beside an operator
# a word of prose inside a token kept whole by its parentheses: "(start with n = 1)" is a remark, not a formula
_PROSE_WORD = re.compile(
    r"(?<![\\A-Za-z])(?!(?:sin|cos|tan|cot|sec|csc|log|ln|exp|lim|max|min|gcd|lcm|det|mod|"
    r"arcsin|arccos|arctan|sinh|cosh|tanh|sup|inf|deg|dim|ker)\b)[A-Za-z]{3,}"
)


@dataclass(frozen=True)
class DelimitedText:
    """`text` with its bare formulas wrapped in `$…$`; `formulas` are the runs that were wrapped, in order."""

    text: str
    formulas: tuple[str, ...] = ()


def _kind(token: str) -> str:
    """ "op", "strong", "weak" or "word" for one whitespace-separated token (trailing punctuation ignored)."""
    core = token.rstrip(_TRAILING) or token
    if _NOT_MATH.search(core) or (" " in core and _PROSE_WORD.search(core)):
        return "word"
    if _OPERATOR.fullmatch(core):
        return "op"
    if _LONE_COMMAND.fullmatch(core):
        return "weak"
    if any(p.search(core) for p in _STRONG):
        return "strong"
    if _WEAK.match(core) and core not in ("a", "A", "I"):
        return "weak"
    return "weak-article" if core in ("a", "A", "I") else "word"


def _tokens(piece: str) -> list[tuple[int, int]]:
    """Whitespace tokens of `piece`, a token kept whole while its braces or parentheses are open (`\\frac{a + b}{c}`)."""
    spans: list[tuple[int, int]] = []
    depth, start = 0, None
    for match in _TOKEN.finditer(piece):
        if start is None:
            start = match.start()
        depth += sum(match.group().count(c) for c in "{(") - sum(match.group().count(c) for c in "})")
        ends_line = "\n" in piece[match.end() : match.end() + 2] or match.end() == len(piece)
        if depth <= 0 or ends_line or match.end() - start > 400:
            spans.append((start, match.end()))
            depth, start = 0, None
    if start is not None:
        spans.append((start, len(piece)))
    return spans


def _runs(piece: str) -> list[tuple[int, int]]:
    """(start, end) of each math run in a piece of plain text."""
    tokens = _tokens(piece)
    kinds = [_kind(piece[a:b]) for a, b in tokens]
    runs, i = [], 0
    while i < len(tokens):
        if kinds[i] in ("word",):
            i += 1
            continue
        j = i + 1  # a run ends at a word, a line break or MAX_RUN_TOKENS
        while (
            j < len(tokens)
            and kinds[j] != "word"
            and j - i < MAX_RUN_TOKENS
            and "\n" not in piece[tokens[j - 1][1] : tokens[j][0]]
        ):
            j += 1
        runs += _math_parts(piece, tokens[i:j], kinds[i:j])
        i = j
    return runs


def _math_parts(piece: str, tokens: list[tuple[int, int]], kinds: list[str]) -> list[tuple[int, int]]:
    """The math inside a stretch of non-word tokens: strong tokens and operator chains, weak tokens only beside an
    operator (`a`, `A`, `I` only before one: an article is followed by a noun, never by `+`)."""
    keep = [False] * len(tokens)
    for n, kind in enumerate(kinds):
        op_before = n > 0 and kinds[n - 1] == "op"
        op_after = n + 1 < len(kinds) and kinds[n + 1] == "op"
        keep[n] = (
            kind == "strong" or (kind == "weak" and (op_before or op_after)) or (kind == "weak-article" and op_after)
        )
    for n, kind in enumerate(kinds):  # an operator between two kept tokens (or after/before a strong one)
        if kind == "op":
            left = n > 0 and keep[n - 1]
            right = n + 1 < len(kinds) and keep[n + 1]
            keep[n] = left and right
    parts, n = [], 0
    while n < len(tokens):
        if not keep[n]:
            n += 1
            continue
        m = n
        while m + 1 < len(tokens) and keep[m + 1]:
            m += 1
        if any(kinds[x] == "strong" for x in range(n, m + 1)) or any(kinds[x] == "op" for x in range(n, m + 1)):
            start, end = tokens[n][0], tokens[m][1]
            text = piece[start:end]
            end -= len(text) - len(text.rstrip(_TRAILING)) if text.rstrip(_TRAILING) else 0
            parts.append((start, end))
        n = m + 1
    return parts


_COMMAND = re.compile(r"\\[A-Za-z]+")
_SHORT_PROSE = re.compile(_PROSE_WORD.pattern.replace("{3,}", "{2,}"))
_DIFFERENTIAL = re.compile(r"d[a-z]")
_MATHY = re.compile(r"[\\^_=]|\d\s*[+\-*/]\s*\d|[a-z]\s*[+\-*/]\s*[a-z0-9]")
MAX_WHOLE_FORMULA = 500  # characters of a question typed as one bare formula


def _all_math(text: str) -> bool:
    """A text typed as one formula without `$` (`\\int_0^1 x dx`, `x^2+y^2=z^2`): a sign of math and no word of
    prose (two letters or more outside LaTeX commands, other than a function name or a differential `dx`)."""
    if len(text) > MAX_WHOLE_FORMULA or not _MATHY.search(text) or find_math(text):
        return False
    return not any(not _DIFFERENTIAL.fullmatch(w) for w in _SHORT_PROSE.findall(_COMMAND.sub(" ", text)))


def bare_formulas(text: str) -> list[tuple[int, int]]:
    """(start, end) in `text` of each bare formula outside its delimited math, in order (see the module docstring);
    a text that is all math is one formula."""
    return _read(text)[0]


def _read(text: str) -> tuple[list[tuple[int, int]], bool]:
    """The bare formulas' spans, and whether the whole text is one formula (decided once)."""
    if not text or not text.strip():
        return [], False
    if _all_math(text.strip()):
        start = len(text) - len(text.lstrip())
        return [(start, start + len(text.strip().rstrip(_TRAILING).strip()))], True
    found, last = [], 0
    for start, end in [(s.start, s.end) for s in find_math(text)] + [(len(text), len(text))]:
        found += [(last + a, last + b) for a, b in _runs(text[last:start]) if "$" not in text[last + a : last + b]]
        last = end
    return found, False


def delimit_bare_math(text: str) -> DelimitedText:
    """`text` with every bare formula (`bare_formulas`) wrapped in `$…$`, and the formulas."""
    spans, whole = _read(text)
    if not spans:
        return DelimitedText(text)
    if whole:  # the whole text is one formula: it alone, without its trailing punctuation
        body = text[spans[0][0] : spans[0][1]]
        return DelimitedText(f"${body}$", (body,))
    pieces, last = [], 0
    for start, end in spans:
        pieces += [text[last:start], f"${text[start:end]}$"]
        last = end
    pieces.append(text[last:])
    return DelimitedText("".join(pieces), tuple(text[a:b] for a, b in spans))
