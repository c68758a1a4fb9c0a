"""Every function that reads a user's query or question, and the hostile shapes of text they are tried on: the one
registry the hostile-input suite (tests/robust/test_scanners.py) and `mathscout bench robust` iterate (issue 42).

Each scanner must take time linear in the text's length, whatever the text: the query limit
(`mathscout.limits.QUERY`, `QUESTION`) is applied before any of them runs, but none may rely on it. Add a scanner
or a shape with one line.
"""

from __future__ import annotations

from collections.abc import Callable

from mathscout.agent.compose import check_citations
from mathscout.corpus.math_spans import find_math, formulas_and_words
from mathscout.latex.bare import delimit_bare_math
from mathscout.latex.tokens import query_terms
from mathscout.limits import TextLimit
from mathscout.markup import document_markdown, sanitize_answer
from mathscout.question import computation_order, read_question
from mathscout.structure.parser import parse_latex
from mathscout.types_expansion.detect import detect_types
from mathscout.ui.inputs import check_question, latex_notices


def _formula_preview(text: str) -> object:
    from mathscout.ui.app import formula_preview  # the page's live preview of the formula editor (imports Gradio)

    return formula_preview(text)


SCANNERS: dict[str, Callable[[str], object]] = {
    "question reader (ask, page, API)": lambda text: read_question(text, TextLimit("any", len(text) + 1)),
    "bare formulas (typed without $)": delimit_bare_math,
    "math spans": find_math,
    "formulas and words (query splitter)": formulas_and_words,
    "query terms (bm25, snippets)": query_terms,
    "formula parser (structure search, rewriting)": parse_latex,
    "computation order": lambda text: computation_order(text, ["x"]),
    "type mentions (types expansion)": detect_types,
    "question echoed as Markdown": document_markdown,
    "answer sanitiser": sanitize_answer,
    "citations of an answer echoing it": lambda text: check_citations(text, ["1"]),
    "page message check": check_question,
    "page message notices": latex_notices,
    "page formula preview": _formula_preview,
}

SHAPES: dict[str, str] = {  # a unit, repeated to the size
    "digit run": "9",
    "digits and spaces": "9 ",
    "digits and dots": "1.",
    "many $": "$",
    "many $$": "$$ x",
    "currency $1": "$1 ",
    "closed $x$": "$x$ ",
    "open braces": "{",
    "close braces": "}",
    "nested braces": "{a",
    "backslashes": "\\",
    "\\frac repeated": "\\frac",
    "\\frac{ repeated": "\\frac{",
    "\\left( repeated": "\\left(",
    "unclosed \\(": "\\(",
    "alternating a+": "a+",
    "alternating 1+": "1+",
    "alternating 1/": "1/",
    "alternating x^": "x^",
    "alternating a_": "a_",
    "alternating a=": "a=",
    "alternating a-": "a-",
    "parentheses": "(",
    "sin(": "sin(",
    "bars": "|",
    "factorials": "x!",
    "words": "ab cd ",
    "one-letter words": "a ",
    "one long word": "x",
    "spaces": " ",
    "line breaks": "\n",
    "brackets [a,": "[a,",
    "links": "http://x",
    "e-mail @": "a@",
    "stars **": "**",
    "backticks": "`",
    "commands \\alpha": "\\alpha ",
    "[imath]": "[imath]x",
}


def shaped(unit: str, chars: int) -> str:
    """`unit` repeated to about `chars` characters (at least once)."""
    return unit * max(1, chars // len(unit))


__all__ = ["SCANNERS", "SHAPES", "shaped"]
