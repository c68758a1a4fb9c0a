"""The one table of LaTeX spellings that mean the same thing, read by both math readers.

Zhong 2023 thesis §5.3.1 unifies "semantically identical math tokens" before BM25 indexes them; §3.2.1 compares the leaf
symbols of structure matches, so the OPT parser unifies spellings too. Each row names one canonical spelling (the
one the structure parser's trees store: `\\leq`, `<`, `|`) and the other spellings of it. Two readers derive what
their index format stores:

- the structure parser (`mathscout.structure.symbols.ALIASES`): `\\spelling` → the canonical spelling, for the
  row's `spellings` and `tree_only`;
- BM25's tokenizer (`mathscout.latex.tokens`, through `token_aliases(vocabulary)`): spelling (no backslash) → the row's `token`, the name BM25
  indexes store (`m_le`), for the canonical command, the row's `spellings` and `tokens_only`.

`tree_only` spellings are unified by the parser but stay their own token in BM25 indexes; `tokens_only` ones are
unified by BM25's bag of tokens but kept apart by the parser, which needs their role in the tree (an opening and a
closing delimiter, `\\lfloor` and `\\rfloor`; the infix `\\over`; the operator `\\star`) or has no single-token
canonical for them (`\\R` → ℝ). Both lists are what the existing indexes were built with: moving a spelling
between lists changes the terms an index holds, so it needs a rebuild of that component.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

LEGACY_VOCABULARY = 1  # BM25 token vocabulary of an index whose manifest records none
VOCABULARY = 2  # the vocabulary new bm25 and structure builds use, recorded in their manifests ("vocabulary")
# token names changed by a vocabulary, to fix a collision: in vocabulary 1 the supremum `\sup` (and `sup` written
# without a backslash) and the superscript `^` were both the token `sup` (`m_sup`, `m2_x_sup`)
RENAMED_TOKENS: dict[int, dict[str, str]] = {2: {"sup": "supremum"}}


@dataclass(frozen=True)
class Spellings:
    """One meaning: its canonical spelling, its BM25 token name, and its other spellings (commands, no backslash)."""

    canonical: str
    spellings: tuple[str, ...] = ()
    tree_only: tuple[str, ...] = ()
    tokens_only: tuple[str, ...] = ()
    token: str = ""  # BM25's token name; default the canonical command without its backslash


def _row(canonical: str, spellings: str = "", *, tree: str = "", tokens: str = "", token: str = "") -> Spellings:
    return Spellings(
        canonical,
        tuple(spellings.split()),
        tuple(tree.split()),
        tuple(tokens.split()),
        token or canonical.removeprefix("\\"),
    )


TABLE: tuple[Spellings, ...] = (
    # fractions and binomials
    _row("\\frac", "dfrac tfrac cfrac", tree="nicefrac sfrac", tokens="over"),
    _row("\\binom", "dbinom tbinom", tokens="choose"),
    # relations
    _row("\\leq", "le leqslant leqq", token="le"),
    _row("\\geq", "ge geqslant geqq", token="ge"),
    _row("\\neq", "ne"),
    _row("<", "lt", tree="lneq", token="lt"),
    _row(">", "gt", tree="gneq", token="gt"),
    _row("\\approx", tree="doteq thickapprox"),
    _row("\\sim", tree="thicksim"),
    _row("\\coloneqq", tree="triangleq coloneq defeq eqqcolon"),
    _row("\\subseteq", "subseteqq"),
    _row("\\supseteq", "supseteqq"),
    _row("\\ni", tree="owns"),
    # arrows
    _row("\\rightarrow", "to longrightarrow", tree="dashrightarrow rightsquigarrow", token="to"),
    _row("\\leftarrow", "gets longleftarrow", token="gets"),
    _row("\\leftrightarrow", tree="longleftrightarrow"),
    _row("\\mapsto", "longmapsto"),
    _row("\\hookrightarrow", tree="longhookrightarrow rightarrowtail"),
    _row("\\Rightarrow", "implies Longrightarrow", token="implies"),
    _row("\\Leftarrow", "impliedby Longleftarrow", token="impliedby"),
    _row("\\Leftrightarrow", "iff Longleftrightarrow", token="iff"),
    # logic and sets
    _row("\\wedge", "land"),
    _row("\\vee", "lor"),
    _row("\\neg", "lnot"),
    _row("\\emptyset", "varnothing", tree="O", tokens="empty"),
    _row("\\exists", tokens="exist"),
    _row("\\setminus", tree="backslash smallsetminus"),
    _row("\\bigcup", tree="Bigcup"),
    _row("\\bigcap", tree="Bigcap"),
    # Greek variants (`\\varpi` stays its own letter in trees)
    _row("\\epsilon", "varepsilon"),
    _row("\\theta", "vartheta"),
    _row("\\phi", "varphi"),
    _row("\\rho", "varrho"),
    _row("\\sigma", "varsigma"),
    _row("\\kappa", tree="varkappa"),
    _row("\\pi", tokens="varpi"),
    _row("i", tree="imath"),
    _row("j", tree="jmath"),
    # operators and symbols
    _row("*", "ast", tokens="star", token="ast"),
    _row("\\cdot", "centerdot bullet", tree="cdotp"),
    _row("\\bmod", "mod", tokens="pmod", token="mod"),
    _row("'", "prime", token="prime"),
    _row("\\top", tree="intercal"),
    _row("\\infty", tokens="infin"),
    _row("\\dots", "ldots cdots dotsc dotsb dotsm dotso", tree="dotsi vdots ddots mathellipsis"),
    # delimiters
    _row("|", "vert lvert rvert", tokens="abs size", token="vert"),
    _row("\\|", "Vert lVert rVert", tokens="norm", token="Vert"),
    _row("\\{", tree="lbrace"),
    _row("\\}", tree="rbrace"),
    _row("[", tree="lbrack"),
    _row("]", tree="rbrack"),
    _row(":", tree="colon"),
    _row("\\floor", tokens="lfloor rfloor"),
    _row("\\ceil", tokens="lceil rceil"),
    _row("\\langle", tokens="rangle"),
    # accents and fonts
    _row("\\hat", "widehat"),
    _row("\\tilde", "widetilde"),
    _row("\\bar", "overline"),
    _row("\\vec", "overrightarrow"),
    _row("\\mathbf", tree="bm boldsymbol pmb"),
    _row("\\mathbb", tree="Bbb mathbbm"),
    _row("\\mathfrak", tree="frak"),
    # number sets written as macros
    _row("\\mathbb{R}", tokens="R RR reals real Reals", token="bbR"),
    _row("\\mathbb{Z}", tokens="Z ZZ Ints integers Integers", token="bbZ"),
    _row("\\mathbb{N}", tokens="N NN nat naturals Naturals", token="bbN"),
    _row("\\mathbb{Q}", tokens="Q QQ Rats rationals Rationals", token="bbQ"),
    _row("\\mathbb{C}", tokens="C CC complexes Complex", token="bbC"),
    # function names
    _row("\\tan", tree="tg"),
    _row("\\cot", tree="ctg"),
    _row("\\csc", tree="cosec"),
    _row("\\tr", tree="Tr trace"),
    _row("\\iiint", tree="iiiint idotsint"),
)


def tree_aliases() -> dict[str, str]:
    """What the structure parser unifies: `\\spelling` → canonical spelling (`\\le` → `\\leq`, `\\lt` → `<`)."""
    return {"\\" + name: row.canonical for row in TABLE for name in row.spellings + row.tree_only}


@cache
def token_aliases(vocabulary: int = LEGACY_VOCABULARY) -> dict[str, str]:
    """What BM25's tokenizer unifies in `vocabulary`: command name → token name (`leq` and `le` → `le`,
    `rightarrow` → `to`; from vocabulary 2 on `sup` → `supremum`). Not to be modified."""
    aliases = {}
    for row in TABLE:
        command = row.canonical.removeprefix("\\")
        if command.isalpha() and command != row.canonical:
            aliases[command] = row.token
        aliases.update((name, row.token) for name in row.spellings + row.tokens_only)
    for version in range(LEGACY_VOCABULARY + 1, vocabulary + 1):
        renamed = RENAMED_TOKENS.get(version, {})
        aliases = {name: renamed.get(token, token) for name, token in aliases.items()} | renamed
    return aliases


def recorded_vocabulary(component: dict) -> int:
    """The token vocabulary an index component's manifest entry records (none: the legacy vocabulary)."""
    return int(component.get("vocabulary", LEGACY_VOCABULARY))
