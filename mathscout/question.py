"""Reading a question before it is searched: bounds, malformed LaTeX, and its kind (formula-only, text-only, mixed)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from mathscout.corpus.math_spans import formulas_and_words
from mathscout.errors import EMPTY_QUERY, QueryError
from mathscout.latex.bare import delimit_bare_math
from mathscout.limits import QUERY, QUESTION, TextLimit
from mathscout.structure.parser import parse_latex

MAX_QUESTION_CHARS = QUESTION.chars  # a question, not a document (the chat page cuts at the same length)
MAX_FORMULAS = 3  # formulas of one question searched by structure search
QuestionKind = Literal["formula", "text", "mixed", "empty"]

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_WORD = re.compile(r"[A-Za-z]{3,}")
# question words that say nothing about the topic: "Why is $f$?" is a formula-only question
FILLER = frozenset(
    """a an the is are was be does do did can could how why what when which who whom where show prove
prove that this these those it its of for to in on and or i me my we you please help with about mean means
meaning true hold holds find compute calculate evaluate simplify solve explain get""".split()
)
EXAMPLE = "Why is $\\cos^2\\alpha + \\sin^2\\alpha = 1$?"


@dataclass
class Question:
    """What will be searched: the text, its formulas (LaTeX bodies) and its words without the math."""

    text: str
    kind: QuestionKind
    formulas: list[str] = field(default_factory=list)
    words: str = ""
    notices: list[str] = field(default_factory=list)
    compute: str | None = None  # an operation the question orders on its formula ("evaluate", "solve", …)

    @property
    def problem(self) -> str | None:
        """Why there is nothing to search, or None."""
        if self.kind == "empty":
            return f"The question is empty: type words and/or LaTeX between $…$, for example: {EXAMPLE}"
        return None


def _short(latex: str, limit: int = 60) -> str:
    latex = " ".join(latex.split())
    return latex if len(latex) <= limit else latex[: limit - 1] + "…"


def formula_problem(latex: str) -> str | None:
    """Why a formula cannot be read completely (e.g. 'unbalanced {'), or None."""
    result = parse_latex(latex)
    if result.tree is not None and result.complete:
        return None
    return result.error or "it could not be read"


def _size(latex: str) -> int:
    """Operands in the formula's operator tree (0 when unreadable)."""
    tree = parse_latex(latex).tree
    return sum(1 for _ in tree.leaves()) if tree is not None else 0


def choose_formulas(formulas: list[str], has_words: bool, limit: int = MAX_FORMULAS) -> list[str]:
    """The formulas worth a structure search (Zhong 2023 thesis ch. 6: "automatically select best formula(s) for structure
    search"): lone symbols like `$n$` are dropped when there is anything else to search; of the rest, the
    `limit` largest, in question order."""
    sizes = [_size(f) for f in formulas]
    keep = [i for i, size in enumerate(sizes) if size >= 2]
    if not keep:
        keep = [] if has_words else list(range(len(formulas)))[:1]
    keep = sorted(sorted(keep, key=lambda i: -sizes[i])[:limit])
    return [formulas[i] for i in keep]


# An order to compute, at the start of the words: (pattern, operation). Conservative on purpose: questions that ask
# why/how/whether ("why is the integral of x^2 equal to 1/3") are explanations, not orders, and compute nothing.
_ORDERS = [
    (
        re.compile(r"^(?:what is |what's |find |compute |calculate )?(?:the )?(?:derivative|differential) of\b"),
        "differentiate",
    ),
    (re.compile(r"^differentiate\b"), "differentiate"),
    (
        re.compile(r"^(?:what is |what's |find |compute |calculate )?(?:the )?(?:integral|antiderivative) of\b"),
        "integrate",
    ),
    (re.compile(r"^integrate\b"), "integrate"),
    (re.compile(r"^simplify\b"), "simplify"),
    (re.compile(r"^(?:solve|find all solutions of|find the roots of)\b"), "solve"),
    (re.compile(r"^(?:evaluate|compute|calculate|what is|what's|find the value of)\b"), "evaluate"),
]
# words that may remain beside the order ("simplify the expression $…$ for x"); any other word makes it a real question
_ORDER_WORDS = (
    FILLER - {"mean", "means", "meaning", "why", "how", "true", "hold", "holds", "prove", "show", "explain"}
) | frozenset("value expression equation function following result respect dx dy dt".split())
_RELATIONS = frozenset({"EQ", "NEQ", "LT", "GT", "LE", "GE"})


def computation_order(words: str, formulas: list[str]) -> str | None:
    """The operation a question orders on its single formula, or None (see `_ORDERS`)."""
    if len(formulas) != 1:
        return None
    plain = " ".join(re.sub(r"[^a-z' ]", " ", words.lower()).split())
    for pattern, operation in _ORDERS:
        match = pattern.match(plain)
        if match is None:
            continue
        rest = [w for w in plain[match.end() :].split() if len(w) > 1 and w not in _ORDER_WORDS]
        if rest:
            return None
        tree = parse_latex(formulas[0]).tree
        if operation == "evaluate" and tree is not None and tree.token in _RELATIONS:
            return None  # "what is $a^2+b^2=c^2$" asks about an identity, not for a value
        return operation
    return None


@dataclass(frozen=True)
class SearchQuery:
    """A query as every search reads it (`read_query`): `text` as typed (cut to length, control characters as
    spaces), `searched` with its bare formulas between `$…$`, its formulas and what was said."""

    text: str
    searched: str
    formulas: tuple[str, ...]
    bare: tuple[str, ...]  # formulas typed without $…$
    notices: tuple[str, ...]


def _bounded(raw: str | None, limit: TextLimit) -> tuple[str, list[str]]:
    """The text cut to `limit` before anything scans it (with its notice), control characters as spaces."""
    text, cut = limit.cut(raw or "")
    return _CONTROL.sub(" ", text).strip(), [cut] if cut else []


def read_query(raw: str | None, limit: TextLimit = QUERY) -> SearchQuery:
    """The one reading of a search's query, whichever entry point sent it: cut to `limit` first (a notice), control
    characters as spaces, formulas typed without `$…$` delimited (a notice naming them); an empty query is a
    QueryError."""
    text, notices = _bounded(raw, limit)
    if not text:
        raise QueryError(EMPTY_QUERY)
    read = delimit_bare_math(text)
    if read.formulas:
        notices.append("read as math (typed without $…$): " + ", ".join(f"`{f}`" for f in read.formulas))
    formulas = formulas_and_words(read.text).formulas
    return SearchQuery(text, read.text, tuple(formulas), tuple(read.formulas), tuple(notices))


def read_question(raw: str | None, limit: TextLimit = QUESTION) -> Question:
    """Bound and classify a question; never raises (an empty one has kind "empty"). The text is cut to `limit`
    (with its notice) before anything scans it."""
    text, notices = _bounded(raw, limit)
    if not text:
        return Question("", "empty")
    formulas, words = formulas_and_words(delimit_bare_math(text).text)  # formulas typed without `$` are math too
    topical = [w for w in _WORD.findall(words) if w.lower() not in FILLER]
    chosen = choose_formulas(formulas, bool(topical))
    if len(formulas) > MAX_FORMULAS and len(chosen) == MAX_FORMULAS:
        notices.append(f"The question has {len(formulas)} formulas; structure search used the {MAX_FORMULAS} largest.")
    formulas = chosen
    for latex in formulas:
        problem = formula_problem(latex)
        if problem:
            notices.append(
                f"The formula `{_short(latex)}` looks malformed ({problem}): it was searched as far as "
                "it could be read."
            )
    kind: QuestionKind = "mixed" if formulas and topical else ("formula" if formulas else "text")
    return Question(text, kind, formulas, words, notices, computation_order(words, formulas))
