"""Tables that reduce LaTeX math to a small vocabulary of meaningful tokens.

Zhong 2023 thesis §5.3.1 (pre-tokenization with the PyA0 lexer): each math token counts as one word; semantically identical
spellings (`\\emptyset`, `\\varnothing`, `\\empty` → one token) are unified by the one alias table,
`mathscout.latex.aliases`.
Canonical names are plain ASCII identifiers so they survive as index terms.
"""

from __future__ import annotations


def _same(canonical: str, *names: str) -> dict[str, str]:
    return dict.fromkeys((canonical, *names), canonical)


# Pure layout: dropped without a trace (their arguments, if any, stay and are tokenized).
LAYOUT: frozenset[str] = frozenset(
    """left right middle big Big bigg Bigg bigl bigr Bigl Bigr biggl biggr Biggl Biggr bigm Bigm
    displaystyle textstyle scriptstyle scriptscriptstyle ds limits nolimits quad qquad enspace thinspace
    negthinspace hfill hline cline nonumber notag noindent newline cr strut mathstrut displaylines
    lbrace rbrace lbrack rbrack lparen rparen brace brack colon
    mathrm mathbf mathit mathsf mathtt mathnormal boldsymbol bm bf rm it sf tt em emph pmb
    boxed mathop mathord mathbin mathrel mathpunct underbrace overbrace underset overset stackrel
    mathclap mathllap mathrlap llap rlap smash
    paren map set struct tuple sqbrk family sequence eval
    """.split()
)

# Dropped together with their first braced argument.
DROP_WITH_ARGUMENT: frozenset[str] = frozenset(
    "label tag hspace vspace hskip vskip color textcolor phantom hphantom vphantom rule kern mkern raisebox".split()
)

# The braced argument is prose: its words are indexed as text.
TEXT_WRAPPERS: frozenset[str] = frozenset(
    "text textrm textit textbf textsf texttt textnormal mbox hbox intertext".split()
)

# The braced argument is a single operator name: `\operatorname{rank}` → one token `rank`.
OPERATOR_WRAPPERS: frozenset[str] = frozenset({"operatorname"})

# Letter styles whose single-letter argument forms one token with the style: `\mathbb{R}` → `bbR`.
LETTER_STYLES: dict[str, str] = {
    "mathbb": "bb",
    "Bbb": "bb",
    "mathbbm": "bb",
    "bbb": "bb",
    "mathcal": "cal",
    "cal": "cal",
    "mathscr": "scr",
    "mathfrak": "frak",
}

# Multi-letter names written without a backslash that mean the same as the command.
FUNCTION_NAMES: frozenset[str] = frozenset(
    """sin cos tan cot sec csc arcsin arccos arctan sinh cosh tanh log ln exp lim liminf limsup
    max min sup inf det gcd lcm deg dim ker arg mod""".split()
)

# Environments worth a token; every other environment is layout (align, array, cases …).
ENVIRONMENTS: dict[str, str] = {
    **_same("matrix", "pmatrix", "bmatrix", "Bmatrix", "smallmatrix"),
    **_same("vmatrix", "Vmatrix"),
    "cases": "cases",
}

# Single characters → token names. `None` drops the character (grouping and punctuation).
SYMBOLS: dict[str, str | None] = {
    "+": "plus",
    "-": "minus",
    "=": "eq",
    "<": "lt",
    ">": "gt",
    "*": "ast",
    "/": "slash",
    "^": "sup",
    "_": "sub",
    "!": "fact",
    "|": "vert",
    "'": "prime",
    **dict.fromkeys('{}()[],;.:&~@`"#%?$\\'),
    # Unicode math that occasionally appears instead of commands.
    "−": "minus",
    "–": "minus",
    "×": "times",
    "≤": "le",
    "≥": "ge",
    "≠": "neq",
    "∞": "infty",
    "→": "to",
    "∈": "in",
    "·": "cdot",
    "⋅": "cdot",
    "±": "pm",
    "∑": "sum",
    "∫": "int",
    "∂": "partial",
    "√": "sqrt",
    "∀": "forall",
    "∃": "exists",
    "∘": "circ",
    "≡": "equiv",
    "′": "prime",
    "…": "dots",
    "⊕": "oplus",
    "π": "pi",
    "α": "alpha",
    "β": "beta",
    "γ": "gamma",
    "δ": "delta",
    "ε": "epsilon",
    "θ": "theta",
    "λ": "lambda",
    "μ": "mu",
    "ν": "nu",
    "σ": "sigma",
    "φ": "phi",
    "ϕ": "phi",
    "ω": "omega",
    "η": "eta",
    "Δ": "Delta",
    "Σ": "Sigma",
    "Ω": "Omega",
    "ℝ": "bbR",
    "ℤ": "bbZ",
    "ℕ": "bbN",
    "ℚ": "bbQ",
    "ℂ": "bbC",
}

# Escaped single characters (`\{`, `\,`, `\|` …) → token names; unlisted ones are dropped.
ESCAPED: dict[str, str] = {"|": "Vert", "%": "percent"}

# `\not` followed by a relation → its negation.
NEGATIONS: dict[str, str] = {
    "eq": "neq",
    "in": "notin",
    "subset": "nsubset",
    "subseteq": "nsubseteq",
    "mid": "nmid",
    "equiv": "nequiv",
}
