"""LaTeX and prose → index terms for math-aware BM25.

Zhong 2023 thesis §5.3.1 ("Preprocessing"): formulas are pre-tokenized into symbols, semantically identical
tokens unified, and each math token is then treated like a text word (syntactic tokens and number
digits included); prose words are Porter-stemmed. Terms are analysed here, in Python, and indexed
pre-tokenized, so Lucene never stems `\\sin` or drops the variable `a` as a stopword.

Index terms: prose words are lower-cased, stopped and stemmed (`integr`); math tokens keep their case
and carry the prefix `m_` (`m_frac`, `m_x`, `m_A`), so they never collide with words — except numbers,
which are the same term in prose and in math (`101` in "squares of 101" matches `$101^2$`). Each pair of
consecutive math tokens of a formula is also a term (`m2_x_sup`, `m2_sup_2`): symbol-pair features for
BM25 in the spirit of Tangent-L (Fraser, Kane & Tompa 2018, cited in the thesis' §5.3.1 baselines).
On the dev topics the pairs raise nDCG@10 from 0.341 to 0.425 (see retrievers/bm25.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import NamedTuple, Protocol

from mathscout.latex.aliases import LEGACY_VOCABULARY, token_aliases
from mathscout.latex.commands import (
    DROP_WITH_ARGUMENT,
    ENVIRONMENTS,
    ESCAPED,
    FUNCTION_NAMES,
    LAYOUT,
    LETTER_STYLES,
    NEGATIONS,
    OPERATOR_WRAPPERS,
    SYMBOLS,
    TEXT_WRAPPERS,
)
from mathscout.stemmer import porter_stemmer

MATH_PREFIX = "m_"
PAIR_PREFIX = "m2_"

# Lucene's English stop set (the one Anserini's default analyzer uses), so prose is treated as usual.
STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there "
    "these they this to was will with".split()
)

_LEX = re.compile(
    r"(?P<env>\\(?:begin|end)\s*\{[^{}]*\})"
    r"|(?P<cmd>\\[A-Za-z]+\*?)"
    r"|(?P<esc>\\.)"
    r"|(?P<num>[0-9]+(?:\.[0-9]+)?)"
    r"|(?P<letters>[A-Za-z]+)"
    r"|(?P<sym>\S)",
    re.S,
)
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
_SINGLE_LETTER = re.compile(r"\s*([A-Za-z])\s*")
_STEMMER = porter_stemmer()


class Token(NamedTuple):
    """A math token (canonical name) or a prose word found inside `\\text{…}`, with its span in the LaTeX."""

    text: str
    start: int
    end: int
    is_word: bool = False


class Span(Protocol):
    """Where a formula sits in a text (mathscout.types.Formula satisfies this). Read-only: frozen dataclasses and
    named tuples are spans too."""

    @property
    def latex(self) -> str: ...

    @property
    def start(self) -> int: ...

    @property
    def end(self) -> int: ...


def _closing_braces(latex: str) -> dict[int, int]:
    """For every `{` of `latex`, the index of its matching `}` (len(latex) when it has none), in one pass:
    `\\` escapes the next character, as everywhere in the lexer. Linear even for thousands of unclosed
    braces (a run of `\\mathbb{`), where scanning from each brace to the end would be quadratic."""
    closing: dict[int, int] = {}
    open_at: list[int] = []
    i, n = 0, len(latex)
    while i < n:
        ch = latex[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "{":
            open_at.append(i)
        elif ch == "}" and open_at:
            closing[open_at.pop()] = i
        i += 1
    for at in open_at:
        closing[at] = n
    return closing


class _Lexer:
    """One pass over a formula; `tokens` collects the result."""

    def __init__(self, latex: str, aliases: dict[str, str]):
        self.latex = latex
        self.aliases = aliases
        self.tokens: list[Token] = []
        self.negation_at = -1  # start of a pending `\not`
        self._closing: dict[int, int] | None = None

    def argument(self, pos: int) -> tuple[int, int, int] | None:
        """The braced argument starting at `pos` (after spaces): (content start, content end, position after);
        an unbalanced argument runs to the end."""
        latex, n = self.latex, len(self.latex)
        while pos < n and latex[pos].isspace():
            pos += 1
        if pos >= n or latex[pos] != "{":
            return None
        if self._closing is None:
            self._closing = _closing_braces(latex)
        close = self._closing[pos]
        return (pos + 1, close, close + 1) if close < n else (pos + 1, n, n)

    def emit(self, name: str, start: int, end: int) -> None:
        if self.negation_at >= 0:
            at, self.negation_at = self.negation_at, -1
            if name in NEGATIONS:
                self.tokens.append(Token(NEGATIONS[name], at, end))
                return
            self.tokens.append(Token("not", at, at + 4))
        self.tokens.append(Token(name, start, end))

    def words(self, start: int, end: int) -> None:
        for m in _WORD.finditer(self.latex, start, end):
            self.tokens.append(Token(m.group().lower(), m.start(), m.end(), True))

    def run(self) -> list[Token]:
        latex, pos, split_digits = self.latex, 0, 0
        while (m := _LEX.search(latex, pos)) is not None:
            kind, (start, pos) = m.lastgroup, m.span()
            pending_split, split_digits = split_digits, 0
            if kind == "letters":
                run = m.group()
                if run in FUNCTION_NAMES:
                    self.emit(self.aliases.get(run, run), start, pos)
                else:
                    for i, ch in enumerate(run):
                        self.emit(ch, start + i, start + i + 1)
            elif kind == "num":
                digits = m.group()
                if pending_split and "." not in digits:  # `\frac12` means \frac{1}{2}
                    for i, ch in enumerate(digits[:pending_split]):
                        self.emit(ch, start + i, start + i + 1)
                    if len(digits) > pending_split:
                        self.emit(digits[pending_split:], start + pending_split, pos)
                else:
                    self.emit(digits, start, pos)
            elif kind == "cmd":
                pos, split_digits = self.command(m.group()[1:].rstrip("*"), start, pos)
            elif kind == "sym":
                ch = m.group()
                if ch in SYMBOLS:
                    symbol = SYMBOLS[ch]
                    if symbol:
                        self.emit(symbol, start, pos)
                elif ch.isalnum():
                    self.emit(ch, start, pos)
            elif kind == "esc":
                name = ESCAPED.get(m.group()[1])
                if name:
                    self.emit(name, start, pos)
            elif m.group().startswith("\\begin"):  # env
                name = ENVIRONMENTS.get(m.group()[m.group().index("{") + 1 : -1].strip().rstrip("*"))
                if name:
                    self.emit(name, start, pos)
        return self.tokens

    def command(self, name: str, start: int, pos: int) -> tuple[int, int]:
        """Handle `\\name` found at [start, pos); returns (next position, digits to split after it)."""
        if name in LAYOUT:
            return pos, 0
        if name in DROP_WITH_ARGUMENT:
            arg = self.argument(pos)
            return (arg[2] if arg else pos), 0
        if name in TEXT_WRAPPERS or name in OPERATOR_WRAPPERS:
            arg = self.argument(pos)
            if arg is None:
                return pos, 0
            content = self.latex[arg[0] : arg[1]]
            if _SINGLE_LETTER.fullmatch(content):  # `\text{d}x`, `\operatorname{E}`
                self.emit(content.strip(), start, arg[2])
            elif name in TEXT_WRAPPERS:
                self.words(arg[0], arg[1])
            elif letters := re.sub(r"[^A-Za-z]", "", content):
                self.emit(self.aliases.get(letters, letters), start, arg[2])
            return arg[2], 0
        if name in LETTER_STYLES:
            style = LETTER_STYLES[name]
            arg = self.argument(pos)
            if arg and _SINGLE_LETTER.fullmatch(self.latex, arg[0], arg[1]):
                self.emit(style + self.latex[arg[0] : arg[1]].strip(), start, arg[2])
                return arg[2], 0
            if arg is None and (letter := _SINGLE_LETTER.match(self.latex, pos)):  # `\mathbb R`
                self.emit(style + letter.group(1), start, letter.end(1))
                return letter.end(1), 0
            self.emit(style, start, pos)
            return pos, 0
        if name == "not":
            self.negation_at = start
            return pos, 0
        canonical = self.aliases.get(name, name)
        self.emit(canonical, start, pos)
        return pos, (2 if canonical in ("frac", "binom") else 0)


def lex(latex: str, vocabulary: int = LEGACY_VOCABULARY) -> list[Token]:
    """The tokens of one formula body (no delimiters), with spans, in a token `vocabulary`
    (`mathscout.latex.aliases`); never raises on malformed LaTeX."""
    return _Lexer(latex, token_aliases(vocabulary)).run()


def math_tokens(latex: str, vocabulary: int = LEGACY_VOCABULARY) -> list[str]:
    """The unified math tokens of a formula, e.g. `\\dfrac{1}{2}` and `\\frac12` → ['frac', '1', '2']."""
    return [t.text for t in lex(latex, vocabulary) if not t.is_word]


@lru_cache(maxsize=1 << 18)
def stem(word: str) -> str:
    """Porter stem of a lower-cased word (cached: a collection has few distinct words); words of one or
    two letters are kept, as Lucene's Porter filter does."""
    return word if len(word) <= 2 else _STEMMER.stem(word, to_lowercase=False)


def _word_term(word: str) -> str | None:
    if word.endswith(("'s", "’s")):
        word = word[:-2]
    return None if word in STOPWORDS else stem(word)


def word_terms(text: str) -> list[str]:
    """Index terms of prose: lower-cased, stopped, Porter-stemmed."""
    terms = []
    for word in _WORD.findall(text.lower()):
        term = _word_term(word)
        if term:
            terms.append(term)
    return terms


def word_term_spans(text: str, start: int = 0, end: int | None = None) -> list[tuple[str, int, int]]:
    """(term, start, end) for each prose word of text[start:end] (for highlighting)."""
    spans = []
    for m in _WORD.finditer(text, start, len(text) if end is None else end):
        term = _word_term(m.group().lower())
        if term:
            spans.append((term, m.start(), m.end()))
    return spans


def math_term(token: str) -> str:
    """The index term of a math token: `m_x`, `m_frac`; numbers stay plain (`2`), shared with prose."""
    return token if token[0].isdigit() else MATH_PREFIX + token


def is_math_term(term: str) -> bool:
    """Whether an index term comes from math (a token, a token pair or a number)."""
    return term.startswith((MATH_PREFIX, PAIR_PREFIX)) or term[0].isdigit()


_WILDCARD = re.compile(r"\\qvar(?:@construct)?\s*\{[^{}]*\}")  # NTCIR-12 wildcards, MSE placeholders


CACHED_FORMULA_CHARS = (
    64  # formulas up to this long make 99.7 % of the shared collection's repeats: only they are cached
)


def formula_terms(latex: str, vocabulary: int = LEGACY_VOCABULARY) -> tuple[str, ...]:
    """Index terms of one formula: its math tokens, each pair of consecutive math tokens, and the
    stemmed words of its `\\text{…}` parts. A `\\qvar{…}` wildcard stands for any subexpression: it gives
    no term and breaks the pairs around it. Short formulas are cached (a cache of long ones grows with them)."""
    if len(latex) <= CACHED_FORMULA_CHARS:
        return _cached_formula_terms(latex, vocabulary)
    return _formula_terms(latex, vocabulary)


def _formula_terms(latex: str, vocabulary: int) -> tuple[str, ...]:
    terms: list[str] = []
    for piece in _WILDCARD.split(latex):
        previous = None
        for token in lex(piece, vocabulary):
            if token.is_word:
                if (term := _word_term(token.text)) is not None:
                    terms.append(term)
                continue
            terms.append(math_term(token.text))
            if previous is not None:
                terms.append(f"{PAIR_PREFIX}{previous}_{token.text}")
            previous = token.text
    return tuple(terms)


_cached_formula_terms = lru_cache(maxsize=1 << 17)(_formula_terms)


def analyze(text: str, formulas: Iterable[Span], vocabulary: int = LEGACY_VOCABULARY) -> list[str]:
    """The terms of a document for BM25: its words and, in place, the math tokens of its formulas (in a token
    `vocabulary`: an index's is recorded in its manifest)."""
    terms: list[str] = []
    position = 0
    for formula in sorted(formulas, key=lambda f: f.start):
        if formula.start < position:  # overlapping spans: the first one wins
            continue
        terms += word_terms(text[position : formula.start])
        terms += formula_terms(formula.latex, vocabulary)
        position = formula.end
    terms += word_terms(text[position:])
    return terms


def document_terms(document, vocabulary: int = LEGACY_VOCABULARY) -> list[str]:
    """The BM25 terms of a `mathscout.types.Document`: its missing title's terms (`Document.missing_title`),
    then its text's words and math."""
    terms = analyze(document.text, document.formulas, vocabulary)
    title = document.missing_title()
    return query_terms(title, vocabulary) + terms if title else terms


# ---- queries -------------------------------------------------------------------------------------


class _QuerySpan(NamedTuple):
    latex: str
    start: int
    end: int


def query_formulas(query_text: str) -> Sequence[Span]:
    """The formulas of a query: delimited ones (`$…$`, `\\(…\\)`, …) and those typed without delimiters
    (`mathscout.latex.bare`, the one reader of bare math), in order."""
    from mathscout.corpus.math_spans import find_math
    from mathscout.latex.bare import bare_formulas

    bare = [_QuerySpan(query_text[start:end], start, end) for start, end in bare_formulas(query_text)]
    return sorted([*find_math(query_text), *bare], key=lambda span: span.start)


def query_terms(query_text: str, vocabulary: int = LEGACY_VOCABULARY) -> list[str]:
    """The terms of a query, analysed exactly like documents."""
    return analyze(query_text, query_formulas(query_text), vocabulary)
