"""A single-regex LaTeX math tokenizer with character offsets (for the OPT parser and highlighting).

Tokens are plain tuples `(kind, value, start, end)` for speed; `start:end` is the token's span in the
input. Kinds:

    l  a letter (one per token: `xy` is two tokens), or a letter-like symbol such as `\\mathbb{R}` from `ℝ`
    n  a number (`12`, `3.14`)
    c  a command, already unified (`\\dfrac` → `\\frac`), or a punctuation/operator character (`+`, `{`)
    T  the raw content of `\\text{…}` and friends
    F  the name inside `\\operatorname{…}`
    Q  the name inside a `\\qvar{…}` wildcard
    B  `\\begin{name}` (value: the environment name)
    E  `\\end{name}`

Spacing, sizing and style commands are dropped; so are commands with bookkeeping arguments (`\\label{…}`,
`\\color{…}`). The lexer stops after `max_tokens` tokens and reports it.

Lexer versions: a structure index is searched with the lexer that parsed its formulas, recorded as `"lexer"` in the
component's manifest entry (`recorded_lexer`). Version 1 (a component recording none) read a formula's trailing
whitespace as a token `' '` (`x^2 ` gave a symbol leaf `' '`); version 2, which new builds use, drops whitespace
wherever it stands.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from mathscout.structure.symbols import (
    ALIASES,
    DROP_ARGS,
    DROP_ARGS_LEAVES,
    IGNORED,
    OPERATOR_NAME_COMMANDS,
    SIZES,
    TEXT_COMMANDS,
    UNICODE,
)

MAX_TOKENS = 4000  # formulas longer than this are truncated (partial parse)
LEGACY_LEXER = 1  # the lexer of a structure component whose manifest records none: trailing whitespace is a token
LEXER = 2  # the lexer new structure builds use and record in their manifest entry ("lexer"): whitespace is no token
_CLASS_MARKERS = frozenset({"\\mathop", "\\mathrel", "\\mathbin", "\\mathord"})

Token = tuple[str, str, int, int]

_SCAN = re.compile(
    r"\s*(?:(?P<c>\\(?:[a-zA-Z]+|.))|(?P<n>[0-9]+(?:\.[0-9]+)?)|(?P<l>[a-zA-Z])|(?P<p>%[^\n]*)|(?P<s>.))",
    re.S,
)
_BRACES = re.compile(r"\\.|[{}]", re.S)
_SPACE = re.compile(r"\s*")
_BRACED_DELIMITER = re.compile(r"\s*\{\s*(\\[a-zA-Z]+|\\.|[^{}\s])\s*\}")
_DIMENSION = re.compile(r"\s*-?[0-9.]*\s*(?:pt|em|ex|mu|cm|mm|in|px|bp|sp|pc)?", re.I)


class LexResult(NamedTuple):
    tokens: list[Token]
    errors: list[str]


def _match_end(pattern: re.Pattern[str], text: str, pos: int) -> int:
    """Where `pattern` stops matching at `pos`: `_SPACE` and `_DIMENSION` match everywhere (the empty string at worst)."""
    found = pattern.match(text, pos)
    assert found is not None
    return found.end()


def _braced(text: str, pos: int) -> tuple[str | None, int, bool]:
    """The content of a `{…}` group starting at `pos` (after optional spaces).

    Returns (content or None when no group starts there, position after the group, balanced?).
    """
    pos = _match_end(_SPACE, text, pos)
    if pos >= len(text) or text[pos] != "{":
        return None, pos, True
    depth = 0
    for m in _BRACES.finditer(text, pos):
        ch = m.group()
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[pos + 1 : m.start()], m.end(), True
    return text[pos + 1 :], len(text), False


def _bracketed(text: str, pos: int) -> int:
    """Skip an optional `[…]` argument (no nesting) starting at `pos`."""
    p = _match_end(_SPACE, text, pos)
    if p < len(text) and text[p] == "[":
        close = text.find("]", p)
        if close != -1:
            return close + 1
    return pos


def recorded_lexer(component: dict) -> int:
    """The lexer version a structure component's manifest entry records (none: the legacy lexer)."""
    return int(component.get("lexer", LEGACY_LEXER))


def tokenize(latex: str, max_tokens: int = MAX_TOKENS, lexer: int = LEXER) -> LexResult:
    """Tokenize LaTeX math with lexer version `lexer`; never raises. See the module docstring for token kinds."""
    tokens: list[Token] = []
    errors: list[str] = []
    append = tokens.append
    match = _SCAN.match
    aliases, ignored, unicode = ALIASES, IGNORED, UNICODE
    pos, n = 0, len(latex)
    while pos < n:
        if len(tokens) >= max_tokens:
            errors.append(f"formula longer than {max_tokens} tokens: truncated")
            break
        m = match(latex, pos)
        if m is None:
            break
        kind = m.lastgroup
        assert kind is not None  # every alternative of _SCAN is a named group
        start, pos = m.start(kind), m.end()
        value = m.group(kind)
        if kind == "l" or kind == "n":
            append((kind, value, start, pos))
        elif kind == "c":
            if value in ignored:
                continue
            if value in SIZES:
                delimiter = _BRACED_DELIMITER.match(latex, pos)
                if delimiter is not None:
                    inner = delimiter.group(1)
                    append(("c", aliases.get(inner, unicode.get(inner, inner)), delimiter.start(1), delimiter.end(1)))
                    pos = delimiter.end()
                continue
            value = aliases.get(value, value)
            if value in _CLASS_MARKERS and not latex.startswith("{", _match_end(_SPACE, latex, pos)):
                continue  # `i \mathop \in I` (ProofWiki): a bare class marker carries nothing
            if value in TEXT_COMMANDS or value in OPERATOR_NAME_COMMANDS or value == "\\qvar":
                if latex.startswith("*", pos):
                    pos += 1
                content, pos, ok = _braced(latex, pos)
                if not ok:
                    errors.append(f"unbalanced braces after {value}")
                if content is None:
                    continue
                kind = "T" if value in TEXT_COMMANDS else ("Q" if value == "\\qvar" else "F")
                append((kind, content, start, pos))
            elif value == "\\begin" or value == "\\end":
                content, pos, ok = _braced(latex, pos)
                if not ok:
                    errors.append(f"unbalanced braces after {value}")
                append(("B" if value == "\\begin" else "E", (content or "").strip(), start, pos))
            elif value in DROP_ARGS:
                pos = _skip_arguments(latex, pos, value, DROP_ARGS[value])
                leaves = DROP_ARGS_LEAVES.get(value)
                if leaves:
                    append(("c", leaves, start, pos))
            elif value[0] != "\\":  # aliased to a plain character (`\\lt` → `<`, `\\imath` → `i`)
                append(("l" if value.isalpha() else "c", value, start, pos))
            else:
                append(("c", value, start, pos))
        elif kind == "s":
            if lexer >= 2 and value.isspace():  # trailing whitespace: `\s*` before a token takes every other space
                continue
            mapped = unicode.get(value)
            if mapped is not None:
                if mapped == " ":
                    continue
                if "{" in mapped:  # ℝ → \mathbb{R}: one letter-like leaf
                    append(("l", mapped, start, pos))
                elif mapped[0] == "\\" or not mapped.isalpha():
                    append(("c", mapped, start, pos))
                else:
                    append(("l", mapped, start, pos))
            elif value == "~":
                continue
            elif value.isalpha():
                append(("l", value, start, pos))
            elif value.isdigit():
                append(("n", value, start, pos))
            else:
                append(("c", value, start, pos))
        # kind "p" (a % comment) is skipped
    return LexResult(tokens, errors)


def _skip_arguments(latex: str, pos: int, command: str, count: int) -> int:
    """Skip the arguments of a command whose arguments carry no math (`\\label{…}`, `\\hspace{…}`)."""
    if count == 0:  # `\\kern3pt`, `\\hskip 1em`: a bare dimension
        return _match_end(_DIMENSION, latex, pos)
    pos = _bracketed(latex, pos)
    for _ in range(count):
        content, after, _ok = _braced(latex, pos)
        if content is None:
            break
        pos = after
    return pos
