"""Formula-only queries made from real collection formulas, by kind, with their qrels (`mathscout bench
formulas` reports on them; `mathscout train structure` fits the formula-only setting on them).

Kinds (each query's relevant documents: those holding a formula with the source formula's operator tree):
- renamed: single-letter variables renamed consistently (a → r, b → s, …): Approach Zero's invariance;
- rerendered: the same formula written differently (`\\dfrac` → `\\frac`, `x^2` → `x^{2}`, `\\left(` → `(`);
- transformed: an algebraically equivalent form from SymPy (`mathscout.rewrite`, as `mathscout bench rewrite`);
- subexpression: the widest braced argument of the formula (a sub-tree of it).

Source formulas come from one half of the documents (`HALVES`: CRC-32 of the id odd = reporting, even = fitting).
"""

from __future__ import annotations

import math
import random
import re
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterator
from functools import partial

from mathscout.index.layout import IndexDir
from mathscout.rewrite import equivalent_forms
from mathscout.rewrite.canonical import tree_key
from mathscout.structure.lexer import LEXER, recorded_lexer
from mathscout.structure.opt import Node
from mathscout.structure.parser import parse_latex
from mathscout.structure.paths import leaf_count
from mathscout.types import Formula

MIN_LEAVES, MAX_LEAVES, MAX_CHARS = 5, 30, 200
MAX_DOCS = 10  # formulas held by more documents are too common to be a target
_LETTER = re.compile(r"(?<![\\A-Za-z])([a-z])(?![A-Za-z])")
KINDS = ("renamed", "rerendered", "transformed", "subexpression")


def reporting_half(doc_id: str) -> bool:
    return zlib.crc32(doc_id.encode("utf-8")) % 2 == 1


HALVES = {"reporting": reporting_half, "fitting": lambda doc_id: not reporting_half(doc_id)}


def renamed(latex: str) -> str | None:
    letters: list[str] = sorted(set(_LETTER.findall(latex)))
    if len(letters) < 2:
        return None
    mapping = dict(zip(letters, [c for c in "rstuvwpqmnghk" if c not in letters]))
    return _LETTER.sub(lambda m: mapping.get(m.group(1), m.group(1)), latex)


def rerendered(latex: str) -> str | None:
    out = latex.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac").replace("\\left", "").replace("\\right", "")
    out = re.sub(r"([\^_])([A-Za-z0-9])", r"\1{\2}", out)  # x^2 → x^{2}
    out = re.sub(r"\\[,;!: ]", "", out).replace("  ", " ")
    return out if out != latex else None


def subexpression(latex: str, lexer: int = LEXER) -> str | None:
    """The widest balanced `{…}` argument with at least MIN_LEAVES - 1 leaves that is a sub-tree of the formula's
    operator tree (`\\begin{pmatrix}`, `\\text{such that}` or `x^{n+1}` inside a flattened chain are not), both
    parsed with lexer version `lexer`."""
    source = parse_latex(latex, lexer).tree
    subtrees = {tree_key(node) for node in source.walk()} if source is not None else set()
    best, stack = None, []
    for i, ch in enumerate(latex):
        if ch == "{" and (i == 0 or latex[i - 1] != "\\"):
            stack.append(i)
        elif ch == "}" and stack and latex[i - 1] != "\\":
            start = stack.pop()
            body = latex[start + 1 : i]
            tree = parse_latex(body, lexer).tree
            if (
                tree is not None
                and leaf_count(tree) >= MIN_LEAVES - 1
                and (best is None or len(body) > len(best))
                and tree_key(tree) in subtrees
            ):
                best = body
    return best


def index_lexer(index: IndexDir) -> int:
    """The lexer version that parsed the index's structure component (formulas are keyed as it parsed them)."""
    return recorded_lexer(index.manifest.components.get("structure", {}))


def keyed_formulas(index: IndexDir, max_chars: int) -> Iterator[tuple[int, Formula, Node, str]]:
    """(ordinal, formula, operator tree, tree key) of every formula of the index of at most `max_chars` characters
    that parses completely (with the index's lexer version)."""
    lexer = index_lexer(index)
    for ordinal, formula in index.store.iter_formulas():
        if len(formula.latex) > max_chars:
            continue
        parsed = parse_latex(formula.latex, lexer)
        if parsed.tree is None or not parsed.complete:
            continue
        yield ordinal, formula, parsed.tree, tree_key(parsed.tree)


def build_queries(index: IndexDir, sample: int, seed: int, half: str = "reporting") -> list[dict]:
    """Up to `sample` queries per kind from source formulas of one half of the documents ("reporting" for
    figures, "fitting" for `mathscout train structure`); relevant documents come from the whole collection."""
    in_half = HALVES[half]
    lexer = index_lexer(index)
    docs_by_key: dict[str, set[str]] = defaultdict(set)
    candidates = []
    for _, formula, tree, key in keyed_formulas(index, MAX_CHARS):
        docs_by_key[key].add(formula.doc_id)
        if in_half(formula.doc_id) and MIN_LEAVES <= leaf_count(tree) <= MAX_LEAVES:
            candidates.append((formula.doc_id, formula.latex.strip(), key))
    rng = random.Random(seed)
    rng.shuffle(candidates)
    queries: list[dict] = []
    counts: defaultdict[str, int] = defaultdict(int)
    seen: set[str] = set()
    makers: dict[str, Callable[[str], str | None]] = {
        "renamed": renamed,
        "rerendered": rerendered,
        "subexpression": partial(subexpression, lexer=lexer),
    }
    for _doc_id, latex, key in candidates:
        if key in seen or len(docs_by_key[key]) > MAX_DOCS:
            continue
        seen.add(key)
        relevant = sorted(docs_by_key[key])
        for kind in KINDS:
            if counts[kind] >= sample:
                continue
            if kind == "transformed":
                forms = equivalent_forms(latex, max_forms=4, seconds=2.0).forms
                forms = [f for f in forms if (t := parse_latex(f.latex, lexer).tree) is not None and leaf_count(t) >= 3]
                made = forms[0].latex if forms else None
            else:
                made = makers[kind](latex)
            made = made.strip() if made else None  # as a user types it: `$ x $` is not inline math (pandoc's rule)
            if made and parse_latex(made, lexer).tree is not None:
                queries.append({"kind": kind, "latex": made, "source": latex, "relevant": relevant})
                counts[kind] += 1
        if all(counts[k] >= sample for k in KINDS):
            break
    return queries


def ndcg10(ranked: list[str], relevant: set[str]) -> float:
    """nDCG@10 with binary relevance (the formula queries' measure)."""
    dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(ranked[:10]) if d in relevant)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(relevant), 10)))
    return dcg / ideal if ideal else 0.0
