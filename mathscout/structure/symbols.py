"""Symbol tables for the LaTeX → OPT parser: command unification, operator classes and leaf typing.

Equivalent spellings are unified to one canonical command (`\\dfrac` → `\\frac`, `\\le` → `\\leq`, …) so
that the same mathematics gives the same tree and the same leaf symbols (Zhong 2023 thesis §3.2.1 compares leaf
symbols after a structure match). Leaves are tokenized to a small set of types, as Approach Zero does
(Zhong 2023 thesis §3.1: "two paths can match if they are identical after applying tokenization"):

    VAR    letters, Greek letters, font-decorated letters (`\\mathbb{R}`), unknown symbol macros
    NUM    numbers
    CONST  \\pi, \\infty, \\emptyset
    FUNC   function names (\\sin, \\log, \\operatorname{rank}, …)
    SYM    other symbols used as operands (\\partial, \\nabla, a script `*` or `\\top`, …)
    DOTS   \\dots and friends
    PRIME  primes of `f'`
    TEXT   words from `\\text{…}`
    QVAR   NTCIR-12 `\\qvar{…}` wildcards
"""

from __future__ import annotations

from typing import NamedTuple

from mathscout.latex.aliases import tree_aliases

# --- spelling unification -----------------------------------------------------------------------
# the one alias table's structure reading (`mathscout.latex.aliases`): `\\le` → `\\leq`, `\\lt` → `<`
ALIASES: dict[str, str] = tree_aliases()

UNICODE: dict[str, str] = {
    "≤": "\\leq",
    "≥": "\\geq",
    "≠": "\\neq",
    "∈": "\\in",
    "∉": "\\notin",
    "→": "\\rightarrow",
    "←": "\\leftarrow",
    "↦": "\\mapsto",
    "⇒": "\\Rightarrow",
    "⟹": "\\Rightarrow",
    "⇔": "\\Leftrightarrow",
    "×": "\\times",
    "·": "\\cdot",
    "⋅": "\\cdot",
    "−": "-",
    "–": "-",
    "∞": "\\infty",
    "±": "\\pm",
    "≈": "\\approx",
    "≡": "\\equiv",
    "⊂": "\\subset",
    "⊆": "\\subseteq",
    "∪": "\\cup",
    "∩": "\\cap",
    "∑": "\\sum",
    "∏": "\\prod",
    "∫": "\\int",
    "√": "\\sqrt",
    "∀": "\\forall",
    "∃": "\\exists",
    "∂": "\\partial",
    "∇": "\\nabla",
    "∅": "\\emptyset",
    "…": "\\dots",
    "⋯": "\\dots",
    "∘": "\\circ",
    "⊕": "\\oplus",
    "⊗": "\\otimes",
    "¬": "\\neg",
    "∧": "\\wedge",
    "∨": "\\vee",
    "∼": "\\sim",
    "≅": "\\cong",
    "′": "'",
    "″": "''",
    "α": "\\alpha",
    "β": "\\beta",
    "γ": "\\gamma",
    "δ": "\\delta",
    "ε": "\\epsilon",
    "ϵ": "\\epsilon",
    "θ": "\\theta",
    "λ": "\\lambda",
    "μ": "\\mu",
    "π": "\\pi",
    "ρ": "\\rho",
    "σ": "\\sigma",
    "τ": "\\tau",
    "φ": "\\phi",
    "ϕ": "\\phi",
    "ω": "\\omega",
    "Δ": "\\Delta",
    "Σ": "\\Sigma",
    "Ω": "\\Omega",
    "Γ": "\\Gamma",
    "Λ": "\\Lambda",
    "Φ": "\\Phi",
    "ψ": "\\psi",
    "χ": "\\chi",
    "η": "\\eta",
    "ζ": "\\zeta",
    "ξ": "\\xi",
    "κ": "\\kappa",
    "ν": "\\nu",
    "ι": "\\iota",
    "ℝ": "\\mathbb{R}",
    "ℕ": "\\mathbb{N}",
    "ℤ": "\\mathbb{Z}",
    "ℚ": "\\mathbb{Q}",
    "ℂ": "\\mathbb{C}",
    "\u00a0": " ",
    "\u2009": " ",
    "\u200b": " ",
}

# --- commands the lexer removes --------------------------------------------------------------------
IGNORED: frozenset[str] = frozenset(
    """
\\, \\; \\: \\! \\> \\  \\/ \\displaystyle \\textstyle \\scriptstyle \\scriptscriptstyle \\limits \\nolimits
\\nonumber \\notag \\mathstrut \\strut \\relax \\nobreak \\allowbreak \\hfill \\hfil
\\centering \\protect \\rm \\bf \\it \\sf \\tt \\cal \\mit \\normalsize \\small \\large \\Large \\LARGE
\\huge \\Huge \\tiny \\footnotesize \\scriptsize \\enspace \\thinspace \\negthinspace \\medspace
\\thickspace \\negmedspace \\negthickspace \\space \\nolinebreak \\linebreak \\newline \\noindent
\\smallskip \\medskip \\bigskip \\vfill \\hline \\cline \\toprule \\midrule \\bottomrule \\displaylines
\\ds \\mathclose \\mathopen \\mathpunct \\mathord \\mathinner \\ensuremath \\leftroot \\uproot
""".split()
) | {"\\ ", "\\\n", "\\\t", "\\\r"}
# delimiter sizes: dropped, and so are braces around the delimiter (`\\bigg{(}`, common in converted LaTeX)
SIZES: frozenset[str] = frozenset(
    "\\big \\Big \\bigg \\Bigg \\bigl \\bigr \\Bigl \\Bigr \\biggl \\biggr \\Biggl \\Biggr \\bigm \\Bigm \\biggm"
    " \\Biggm \\middle".split()
)
# commands whose braced arguments are dropped with them: name -> number of arguments
DROP_ARGS: dict[str, int] = {
    "\\label": 1,
    "\\tag": 1,
    "\\hspace": 1,
    "\\vspace": 1,
    "\\color": 1,
    "\\textcolor": 1,
    "\\colorbox": 1,
    "\\fcolorbox": 2,
    "\\cancelto": 1,
    "\\phantom": 1,
    "\\hphantom": 1,
    "\\vphantom": 1,
    "\\ref": 1,
    "\\eqref": 1,
    "\\cite": 1,
    "\\rule": 2,
    "\\raisebox": 1,
    "\\mspace": 1,
    "\\newcommand": 2,
    "\\renewcommand": 2,
    "\\DeclareMathOperator": 2,
    "\\def": 1,
    "\\href": 1,
    "\\url": 1,
    "\\require": 1,
    "\\xrightarrow": 1,
    "\\xleftarrow": 1,
    "\\xRightarrow": 1,
    "\\xLeftarrow": 1,
    "\\xmapsto": 1,
    "\\hskip": 0,
    "\\kern": 0,
    "\\mkern": 0,
    "\\mskip": 0,
}
# what a dropped-argument command leaves behind (others leave nothing)
DROP_ARGS_LEAVES: dict[str, str] = {
    "\\xrightarrow": "\\rightarrow",
    "\\xleftarrow": "\\leftarrow",
    "\\xRightarrow": "\\Rightarrow",
    "\\xLeftarrow": "\\Leftarrow",
    "\\xmapsto": "\\mapsto",
}
TEXT_COMMANDS: frozenset[str] = frozenset(
    "\\text \\textrm \\textit \\textbf \\textsf \\texttt \\textnormal \\textup \\mbox \\hbox \\emph \\textsl"
    " \\fbox \\framebox \\intertext \\textsc".split()
)
OPERATOR_NAME_COMMANDS: frozenset[str] = frozenset({"\\operatorname", "\\operatornamewithlimits"})

# --- operands -------------------------------------------------------------------------------------
GREEK: frozenset[str] = frozenset(
    "\\alpha \\beta \\gamma \\delta \\epsilon \\zeta \\eta \\theta \\iota \\kappa \\lambda \\mu \\nu \\xi"
    " \\omicron \\rho \\sigma \\tau \\upsilon \\phi \\chi \\psi \\omega \\varpi \\digamma \\Gamma \\Delta"
    " \\Theta \\Lambda \\Xi \\Pi \\Sigma \\Upsilon \\Phi \\Psi \\Omega \\ell \\hbar \\aleph \\beth \\gimel"
    " \\wp \\eth \\varGamma \\varDelta \\varTheta \\varLambda \\varXi \\varPi \\varSigma \\varUpsilon"
    " \\varPhi \\varPsi \\varOmega \\mho \\Finv \\Game \\hslash".split()
)
CONSTANTS: frozenset[str] = frozenset({"\\pi", "\\infty", "\\emptyset"})
SYMBOLS: frozenset[str] = frozenset(
    "\\partial \\nabla \\triangle \\angle \\measuredangle \\square \\Box \\blacksquare \\checkmark \\star"
    " \\dagger \\ddagger \\top \\bot \\perp \\flat \\sharp \\natural \\clubsuit \\diamondsuit \\heartsuit"
    " \\spadesuit \\diamond \\Diamond \\lozenge \\S \\P \\# \\$ \\% \\& \\_ \\surd \\degree \\circledR"
    " \\copyright \\bigstar \\blacktriangle \\triangledown \\varDelta \\complement".split()
)
DOTS = "\\dots"

FUNCTIONS: frozenset[str] = frozenset(
    "\\sin \\cos \\tan \\cot \\sec \\csc \\arcsin \\arccos \\arctan \\arccot \\sinh \\cosh \\tanh \\coth"
    " \\sech \\csch \\arsinh \\arcosh \\artanh \\log \\ln \\lg \\exp \\det \\dim \\ker \\deg \\gcd \\lcm"
    " \\hom \\arg \\Pr \\sgn \\sign \\tr \\rank \\diag \\span \\Span \\Hom \\End \\Aut \\Gal \\im \\id"
    " \\ord \\supp \\erf \\Var \\Cov \\var \\cov \\E \\Re \\Im \\max \\min \\sup \\inf \\argmax \\argmin"
    " \\arcsec \\arccsc".split()
)
# big operators take lower/upper limits and a body: command -> operator token
BIG_OPERATORS: dict[str, str] = {
    "\\sum": "SUM",
    "\\prod": "PROD",
    "\\coprod": "COPROD",
    "\\int": "INT",
    "\\iint": "IINT",
    "\\iiint": "IIINT",
    "\\oint": "OINT",
    "\\oiint": "OINT",
    "\\bigcup": "BIGCUP",
    "\\bigcap": "BIGCAP",
    "\\bigoplus": "BIGOPLUS",
    "\\bigotimes": "BIGOTIMES",
    "\\bigsqcup": "BIGCUP",
    "\\biguplus": "BIGCUP",
    "\\bigvee": "BIGVEE",
    "\\bigwedge": "BIGWEDGE",
    "\\bigodot": "BIGODOT",
    "\\lim": "LIM",
    "\\limsup": "LIMSUP",
    "\\liminf": "LIMINF",
    "\\varlimsup": "LIMSUP",
    "\\varliminf": "LIMINF",
    "\\injlim": "LIM",
    "\\projlim": "LIM",
    "\\varinjlim": "LIM",
    "\\varprojlim": "LIM",
}
# functions that act as big operators when given a subscript (`\max_{x\in S} f(x)`)
SCRIPTED_BIG_OPERATORS: dict[str, str] = {
    "\\max": "MAX",
    "\\min": "MIN",
    "\\sup": "SUPREMUM",
    "\\inf": "INFIMUM",
    "\\argmax": "ARGMAX",
    "\\argmin": "ARGMIN",
}
# single letters usually naming functions: `f(x)` is an application, `a(b+c)` a product
FUNCTION_LETTERS: frozenset[str] = frozenset(
    "f g h F G H P \\phi \\psi \\Phi \\Psi \\Gamma \\zeta \\mathbb{P} \\mathbb{E} \\Pr".split()
)

# --- operators ------------------------------------------------------------------------------------
# precedence levels, lowest first (binary operators; implicit multiplication binds tighter than all)
COMMA, COLON, IMPLY, LOGIC, RELATION, ADDITIVE, MULTIPLICATIVE = range(1, 8)


class BinaryOp(NamedTuple):
    """A binary operator: its level, OPT token, symbol, and how chains of it are built."""

    level: int
    token: str
    symbol: str
    commutative: bool
    flatten: bool  # a chain `a op b op c` becomes one node with all operands
    wrap: str = ""  # unary operator wrapped around the right operand (`a - b` → ADD(a, NEG b))
    separator: bool = False  # missing operands are dropped silently (`\\quad`, trailing `.`)


def _ops(level: int, table: dict[str, tuple[str, bool, bool]]) -> dict[str, BinaryOp]:
    return {sym: BinaryOp(level, tok, sym, comm, flat) for sym, (tok, comm, flat) in table.items()}


BINARY_OPS: dict[str, BinaryOp] = {
    ",": BinaryOp(COMMA, "COMMA", ",", False, True, separator=True),
    ";": BinaryOp(COMMA, "COMMA", ";", False, True, separator=True),
    "\\quad": BinaryOp(COMMA, "COMMA", "\\quad", False, True, separator=True),
    "\\qquad": BinaryOp(COMMA, "COMMA", "\\qquad", False, True, separator=True),
    "\\\\": BinaryOp(COMMA, "COMMA", "\\\\", False, True, separator=True),
    "&": BinaryOp(COMMA, "COMMA", "&", False, True, separator=True),
    ":": BinaryOp(COLON, "COLON", ":", False, False),
    "\\mid": BinaryOp(COLON, "MID", "\\mid", False, False),  # set builders, conditionals, divisibility
    **_ops(
        IMPLY,
        {
            "\\Rightarrow": ("IMPLIES", False, False),
            "\\Leftarrow": ("IMPLIEDBY", False, False),
            "\\Leftrightarrow": ("IFF", True, True),
            "\\therefore": ("IMPLIES", False, False),
            "\\because": ("IMPLIEDBY", False, False),
            "\\vdash": ("PROVES", False, False),
            "\\models": ("MODELS", False, False),
        },
    ),
    **_ops(LOGIC, {"\\wedge": ("AND", True, True), "\\vee": ("OR", True, True)}),
    **_ops(
        RELATION,
        {
            "=": ("EQ", True, True),
            "\\neq": ("NEQ", True, True),
            "\\equiv": ("EQUIV", True, True),
            "\\approx": ("APPROX", True, True),
            "\\sim": ("SIM", True, True),
            "\\simeq": ("SIMEQ", True, True),
            "\\cong": ("CONG", True, True),
            "\\propto": ("PROPTO", False, False),
            "\\asymp": ("ASYMP", True, True),
            "\\coloneqq": ("DEFEQ", False, False),
            "<": ("LT", False, True),
            ">": ("GT", False, True),
            "\\leq": ("LE", False, True),
            "\\geq": ("GE", False, True),
            "\\ll": ("LL", False, True),
            "\\gg": ("GG", False, True),
            "\\lesssim": ("LE", False, True),
            "\\gtrsim": ("GE", False, True),
            "\\prec": ("PREC", False, True),
            "\\succ": ("SUCC", False, True),
            "\\preceq": ("PRECEQ", False, True),
            "\\succeq": ("SUCCEQ", False, True),
            "\\in": ("IN", False, False),
            "\\notin": ("NOTIN", False, False),
            "\\ni": ("NI", False, False),
            "\\subset": ("SUBSET", False, True),
            "\\subseteq": ("SUBSETEQ", False, True),
            "\\subsetneq": ("SUBSETNEQ", False, True),
            "\\supset": ("SUPSET", False, True),
            "\\supseteq": ("SUPSETEQ", False, True),
            "\\supsetneq": ("SUPSETNEQ", False, True),
            "\\rightarrow": ("RIGHTARROW", False, True),
            "\\leftarrow": ("LEFTARROW", False, True),
            "\\leftrightarrow": ("LEFTRIGHTARROW", True, True),
            "\\mapsto": ("MAPSTO", False, False),
            "\\hookrightarrow": ("HOOKRIGHTARROW", False, False),
            "\\twoheadrightarrow": ("RIGHTARROW", False, True),
            "\\rightharpoonup": ("RIGHTARROW", False, True),
            "\\uparrow": ("UPARROW", False, False),
            "\\downarrow": ("DOWNARROW", False, False),
            "\\nearrow": ("UPARROW", False, False),
            "\\searrow": ("DOWNARROW", False, False),
            "\\nmid": ("NMID", False, False),
            "\\parallel": ("PARALLEL", True, True),
            "\\perp": ("PERP", True, True),
            "\\nsubseteq": ("NSUBSETEQ", False, False),
            "\\vartriangleleft": ("NORMALSUB", False, False),
            "\\triangleleft": ("NORMALSUB", False, False),
            "\\trianglelefteq": ("NORMALSUB", False, False),
            "\\unlhd": ("NORMALSUB", False, False),
            "\\lhd": ("NORMALSUB", False, False),
            "\\approxeq": ("APPROX", True, True),
            "\\leqq": ("LE", False, True),
        },
    ),
    **_ops(
        ADDITIVE,
        {
            "\\cup": ("CUP", True, True),
            "\\cap": ("CAP", True, True),
            "\\setminus": ("SETMINUS", False, False),
            "\\oplus": ("OPLUS", True, True),
            "\\ominus": ("OMINUS", False, False),
            "\\sqcup": ("CUP", True, True),
            "\\uplus": ("CUP", True, True),
            "\\sqcap": ("CAP", True, True),
        },
    ),
    "+": BinaryOp(ADDITIVE, "ADD", "+", True, True),
    "-": BinaryOp(ADDITIVE, "ADD", "-", True, True, wrap="NEG"),
    "\\pm": BinaryOp(ADDITIVE, "ADD", "\\pm", True, True, wrap="PM"),
    "\\mp": BinaryOp(ADDITIVE, "ADD", "\\mp", True, True, wrap="MP"),
    **_ops(
        MULTIPLICATIVE,
        {
            "\\cdot": ("MUL", True, True),
            "*": ("MUL", True, True),
            "\\times": ("TIMES", True, True),
            "\\div": ("DIV", False, False),
            "/": ("FRAC", False, False),
            "\\circ": ("COMPOSE", False, False),
            "\\otimes": ("OTIMES", False, False),
            "\\odot": ("ODOT", True, True),
            "\\bmod": ("MOD", False, False),
            "\\ltimes": ("SEMIDIRECT", False, False),
            "\\rtimes": ("SEMIDIRECT", False, False),
            "\\star": ("STAR", False, False),
            "\\wr": ("WREATH", False, False),
            "\\amalg": ("AMALG", True, True),
        },
    ),
    ".": BinaryOp(MULTIPLICATIVE, "MUL", ".", True, True, separator=True),
}
# `\\not X` spelled as one relation
NEGATED_RELATIONS: dict[str, str] = {"=": "\\neq", "\\in": "\\notin", "\\mid": "\\nmid", "\\subseteq": "\\nsubseteq"}
# relations (`\\not`-able, `\\stackrel`-able, and continuing a broken line)
RELATION_LIKE: frozenset[str] = frozenset(
    {s for s, op in BINARY_OPS.items() if op.level in (RELATION, IMPLY)} | {"\\mid"}
)
# prefix (unary) operators: symbol -> (token, level of the operand they take)
PREFIX_OPS: dict[str, tuple[str, int]] = {
    "-": ("NEG", MULTIPLICATIVE),
    "+": ("", MULTIPLICATIVE),
    "\\pm": ("PM", MULTIPLICATIVE),
    "\\mp": ("MP", MULTIPLICATIVE),
    "\\neg": ("NOT", MULTIPLICATIVE),
    "\\forall": ("FORALL", RELATION),
    "\\exists": ("EXISTS", RELATION),
    "\\nexists": ("NEXISTS", RELATION),
}

# --- commands with arguments ----------------------------------------------------------------------
ACCENTS: frozenset[str] = frozenset(
    "\\hat \\bar \\tilde \\vec \\dot \\ddot \\dddot \\check \\breve \\acute \\grave \\mathring"
    " \\overleftarrow \\overleftrightarrow \\underline \\utilde \\undertilde \\underbar".split()
)
# font commands: command -> prefix kept in leaf symbols ("" = font dropped)
FONTS: dict[str, str] = {
    "\\mathbb": "\\mathbb",
    "\\mathcal": "\\mathcal",
    "\\mathscr": "\\mathscr",
    "\\mathfrak": "\\mathfrak",
    "\\mathbf": "\\mathbf",
    "\\mathrm": "",
    "\\mathit": "",
    "\\mathsf": "",
    "\\mathtt": "",
    "\\mathnormal": "",
    "\\mathsfit": "",
    "\\mathbfit": "\\mathbf",
    "\\symbf": "\\mathbf",
    "\\symbb": "\\mathbb",
    "\\symcal": "\\mathcal",
    "\\symrm": "",
    "\\mathds": "\\mathbb",
    "\\EuScript": "\\mathscr",
    "\\mathop": "",
}
# one-argument wrappers whose argument is kept as is
TRANSPARENT: frozenset[str] = frozenset(
    "\\boxed \\cancel \\bcancel \\xcancel \\smash \\mathrel \\mathbin \\overbrace \\underbrace \\llap"
    " \\rlap \\mathllap \\mathrlap \\mathclap \\clap \\substack \\enclose \\bbox \\paren".split()
)
TWO_ARG_OPERATORS: dict[str, str] = {"\\frac": "FRAC", "\\binom": "BINOM"}
INFIX_FRACTIONS: dict[str, str] = {"\\over": "FRAC", "\\choose": "BINOM", "\\atop": "ATOP", "\\brace": "BINOM"}
SCRIPTED_BASES: frozenset[str] = frozenset({"\\overset", "\\underset", "\\stackrel", "\\overunderset"})

# --- delimiters -----------------------------------------------------------------------------------
OPENERS: dict[str, str] = {  # opening delimiter -> group kind
    "(": "paren",
    "[": "paren",
    "\\{": "set",
    "\\langle": "angle",
    "\\lfloor": "floor",
    "\\lceil": "ceil",
    "|": "bar",
    "\\|": "norm",
    "\\ulcorner": "paren",
    "\\llbracket": "paren",
}
CLOSERS: dict[str, frozenset[str]] = {  # group kind -> closing tokens
    "paren": frozenset({")", "]", "\\urcorner", "\\rrbracket"}),
    "set": frozenset({"\\}"}),
    "angle": frozenset({"\\rangle"}),
    "floor": frozenset({"\\rfloor"}),
    "ceil": frozenset({"\\rceil"}),
    "bar": frozenset({"|"}),
    "ket": frozenset({"\\rangle"}),  # Dirac |ψ⟩
    "norm": frozenset({"\\|"}),
    "brace": frozenset({"}"}),
    "option": frozenset({"]"}),
    "left": frozenset({"\\right"}),
    "env": frozenset({"\\end", "&", "\\\\"}),
    "top": frozenset({"&", "\\\\"}),
}
ALL_CLOSERS: frozenset[str] = frozenset().union(*CLOSERS.values()) | {"\\end", "}"}
# `\\left<` … `\\right>` mean angle brackets
DELIMITER_ALIASES: dict[str, str] = {"<": "\\langle", ">": "\\rangle", "\\lbrace": "\\{", "\\rbrace": "\\}"}
DELIMITED_TOKENS: dict[str, str] = {  # group kind -> OPT token (paren groups are typed by content)
    "set": "SET",
    "angle": "ANGLE",
    "floor": "FLOOR",
    "ceil": "CEIL",
    "bar": "ABS",
    "norm": "NORM",
    "ket": "KET",
}

# --- environments ---------------------------------------------------------------------------------
MATRIX_ENVIRONMENTS: dict[str, str] = {
    "matrix": "MATRIX",
    "pmatrix": "MATRIX",
    "bmatrix": "MATRIX",
    "Bmatrix": "MATRIX",
    "smallmatrix": "MATRIX",
    "array": "MATRIX",
    "tabular": "MATRIX",
    "vmatrix": "DETMATRIX",
    "Vmatrix": "DETMATRIX",
    "cases": "CASES",
    "dcases": "CASES",
    "rcases": "CASES",
    "numcases": "CASES",
    "subarray": "MATRIX",
    "psmallmatrix": "MATRIX",
    "bsmallmatrix": "MATRIX",
    "CD": "MATRIX",
}
# alignment environments: `&` only aligns, `\\\\` separates lines (any other environment name too)
ENVIRONMENTS_WITH_SPEC: frozenset[str] = frozenset({"array", "tabular", "alignat", "alignedat", "subarray", "numcases"})


def unify_command(name: str) -> str:
    """The canonical spelling of a command (`\\dfrac` → `\\frac`), or the name itself."""
    return ALIASES.get(name, name)


def leaf_token(symbol: str) -> str:
    """The leaf type (VAR, NUM, CONST, FUNC, SYM, DOTS) of a unified single-token symbol."""
    if symbol[0] == "\\":
        if symbol in CONSTANTS:
            return "CONST"
        if symbol in GREEK:
            return "VAR"
        if symbol in FUNCTIONS or symbol in BIG_OPERATORS:
            return "FUNC"
        if symbol == DOTS:
            return "DOTS"
        if symbol in SYMBOLS or symbol in BINARY_OPS or symbol in PREFIX_OPS:
            return "SYM"
        return "VAR"
    if symbol[0].isdigit():
        return "NUM"
    if symbol.isalpha():
        return "VAR"
    return "SYM"
