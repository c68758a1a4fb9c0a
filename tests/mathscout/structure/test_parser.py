"""The tolerant LaTeX → OPT parser (thesis §3.1): tree shapes, unification, robustness, real data."""

from __future__ import annotations

import random
import sys
import time
from collections import Counter

import pytest

from mathscout.structure.highlight import highlight_spans
from mathscout.structure.opt import Node
from mathscout.structure.parser import parse_latex


def leaf_root_paths(tree: Node) -> list[str]:
    """Tokenized leaf-root paths (Fig. 3.1), e.g. `VAR/rank1/FRAC/ADD`, with multiplicity."""
    paths, stack = [], [(tree, ())]
    while stack:
        node, above = stack.pop()
        chain = (node.token, *above)
        if node.is_leaf:
            paths.append("/".join(chain))
        stack.extend((child, chain) for child in node.children)
    return sorted(paths)


def symbol_paths(latex: str) -> Counter:
    """(leaf symbol, path) pairs: equal for formulas that differ only in operand order or spelling."""
    tree = tree_of(latex)
    out = Counter()
    stack = [(tree, ())]
    while stack:
        node, above = stack.pop()
        chain = (node.token, *above)
        if node.is_leaf:
            out[(node.symbol, "/".join(chain))] += 1
        stack.extend((child, chain) for child in node.children)
    return out


def tree_of(latex: str) -> Node:
    result = parse_latex(latex)
    assert result.complete, (latex, result.error)
    assert result.tree is not None
    return result.tree


def sexpr(node: Node) -> str:
    """Compact rendering with rank nodes elided: FRAC(a b)."""
    if node.is_leaf:
        return node.symbol or node.token
    if node.token.startswith("rank"):
        return sexpr(node.children[0])
    return f"{node.token}({' '.join(sexpr(c) for c in node.children)})"


# --- structure (§3.1, Figures 3.1 and 3.2) --------------------------------------------------------
def test_figure_3_1_leaf_root_paths():
    # Fig. 3.1's formula ab + c/d + e^2_1 (the figure's "VAR/SUB" path is for the subscript 1, a NUM)
    assert leaf_root_paths(tree_of(r"ab+\frac{c}{d}+e_1^2")) == sorted(
        [
            "VAR/MUL/ADD",
            "VAR/MUL/ADD",
            "VAR/rank1/FRAC/ADD",
            "VAR/rank2/FRAC/ADD",
            "VAR/BASE/SUBSUP/ADD",
            "NUM/SUB/SUBSUP/ADD",
            "NUM/SUP/SUBSUP/ADD",
        ]
    )


def test_commutative_operands_are_unordered_and_chains_flattened():
    assert symbol_paths("a+b") == symbol_paths("b+a")
    assert symbol_paths("xy = 2") == symbol_paths("2 = yx")
    tree = tree_of("a+b+c-d")
    assert tree.token == "ADD" and tree.commutative and len(tree.children) == 4
    assert sexpr(tree) == "ADD(a b c NEG(d))"
    assert sexpr(tree_of("2xy")) == "MUL(2 x y)"
    assert sexpr(tree_of(r"2x \cdot 3y")) == "MUL(2 x 3 y)"


def test_parentheses_keep_subexpressions_apart():
    # Fig. 3.2: (a+bc)+xy keeps a+bc as its own ADD under the top ADD
    assert sexpr(tree_of("(a+bc)+xy")) == "ADD(ADD(a MUL(b c)) MUL(x y))"


def test_non_commutative_operators_get_rank_nodes():
    tree = tree_of(r"\frac{a}{b}")
    assert tree.token == "FRAC" and [c.token for c in tree.children] == ["rank1", "rank2"]
    assert symbol_paths("a/b") == symbol_paths(r"\frac{a}{b}")
    assert symbol_paths("a<b") != symbol_paths("b<a")
    assert sexpr(tree_of("a < b < c")) == "LT(a b c)"
    assert sexpr(tree_of(r"a < b \le c")) == "LE(LT(a b) c)"


def test_scripts_in_any_order():
    assert tree_of("x_i^2") == tree_of("x^2_i")
    assert tree_of("x_{i}^{2}") == tree_of("x^2_i")
    assert sexpr(tree_of("x^23")) == "MUL(SUBSUP(BASE(x) SUP(2)) 3)"  # as TeX reads it
    assert sexpr(tree_of("f'(x)")) == "APPLY(SUBSUP(BASE(f) SUP(')) x)"


@pytest.mark.parametrize(
    "a, b",
    [
        (r"\dfrac{1}{2}", r"\frac12"),
        (r"\tfrac{a}{b}", r"{a \over b}"),
        (r"\binom{n}{k}", r"{n \choose k}"),
        (r"a \le b", r"a \leq b"),
        (r"a \ne b", r"a \not= b"),
        (r"A = \varnothing", r"A = \emptyset"),
        (r"x \to 0", r"x \rightarrow 0"),
        (r"\left( a+b \right)^2", r"\bigl(a+b\bigr)^2"),
        (r"\left(a+b\right)", r"(a+b)"),
        (r"\Bigg{(}x\Bigg{)}", "(x)"),
        (r"\mathrm{d}x", "dx"),
        (r"\operatorname{sin} x", r"\sin x"),
        (r"a \cdot b", "a*b"),
        (r"\lvert x \rvert", "|x|"),
        (r"x\,\!\;y", "xy"),
    ],
)
def test_equivalent_spellings_give_the_same_tree(a, b):
    assert tree_of(a) == tree_of(b)


@pytest.mark.parametrize(
    "latex, expected",
    [
        (r"\sqrt[3]{x}", "ROOT(x 3)"),
        (r"\sqrt{x+1}", "SQRT(ADD(x 1))"),
        (r"\sum_{i=1}^{n} i^2", r"SUM(SUBSUP(BASE(i) SUP(2)) SUB(EQ(i 1)) SUP(n))"),
        (r"\int_0^1 f(x)\,dx", "INT(MUL(APPLY(f x) d x) SUB(0) SUP(1))"),
        (r"\lim_{x\to 0} \frac{\sin x}{x}", r"LIM(FRAC(APPLY(\sin x) x) SUB(RIGHTARROW(x 0)))"),
        (r"\log_2 n", r"APPLY(SUBSUP(BASE(\log) SUB(2)) n)"),
        (
            r"\sin^2 x + \cos^2 x = 1",
            r"EQ(ADD(APPLY(SUBSUP(BASE(\sin) SUP(2)) x) APPLY(SUBSUP(BASE(\cos) SUP(2)) x)) 1)",
        ),
        ("f(x, y)", "APPLY(f x y)"),
        ("a(b+c)", "MUL(a ADD(b c))"),
        (r"\operatorname{rank}(A) \le n", r"LE(APPLY(\rank A) n)"),
        ("n!", "FACT(n)"),
        ("|x| + 2|y|", "ADD(ABS(x) MUL(2 ABS(y)))"),
        (r"\|v\|_2", "SUBSUP(BASE(NORM(v)) SUB(2))"),
        ("P(A|B)", "APPLY(P MID(A B))"),
        (r"\{1, 2, 3\}", "SET(1 2 3)"),
        (r"\{x \in \mathbb{R} : x > 0\}", r"SET(COLON(IN(x \mathbb{R}) GT(x 0)))"),
        ("[a,b)", "INTERVAL(a b)"),
        ("(0,1]", "INTERVAL(0 1)"),
        ("(a, b)", "TUPLE(a b)"),
        (r"a \pm b", "ADD(a PM(b))"),
        (r"-x^2", "NEG(SUBSUP(BASE(x) SUP(2)))"),
        (r"2 \times 3", "TIMES(2 3)"),
        (r"x \mapsto x^2", "MAPSTO(x SUBSUP(BASE(x) SUP(2)))"),
        (r"f: A \to B", "COLON(f RIGHTARROW(A B))"),
        (r"A \subset B", "SUBSET(A B)"),
        (r"\forall \epsilon > 0 \exists \delta > 0", r"COMMA(FORALL(GT(\epsilon 0)) EXISTS(GT(\delta 0)))"),
        (r"p \implies q", "IMPLIES(p q)"),
        (r"\hat{x} + \mathbb{R}", r"ADD(\hat{x} \mathbb{R})"),
        (r"\begin{pmatrix} a & b \\ c & d \end{pmatrix}", "MATRIX(ROW(a b) ROW(c d))"),
        (
            r"|x| = \begin{cases} x & \text{if } x \ge 0 \\ -x & \text{otherwise} \end{cases}",
            "EQ(ABS(x) CASES(ROW(x GE(x 0)) ROW(NEG(x) otherwise)))",
        ),
        (r"\begin{align} a &= b \\ &= c \end{align}", "EQ(a b c)"),
        (r"\text{Var}(X) = E[X^2]", r"EQ(APPLY(\Var X) MUL(E SUBSUP(BASE(X) SUP(2))))"),
        (
            r"a_1, a_2, \ldots, a_n",
            r"COMMA(SUBSUP(BASE(a) SUB(1)) SUBSUP(BASE(a) SUB(2)) \dots SUBSUP(BASE(a) SUB(n)))",
        ),
        (r"x \stackrel{?}{=} y", "EQ(x y)"),
        (r"\foo{x}", r"APPLY(\foo x)"),
    ],
)
def test_representative_formulas(latex, expected):
    assert sexpr(tree_of(latex)) == expected


def test_leaf_types_keep_unified_symbols():
    leaves = list(tree_of(r"2\pi r + \alpha x + \sin \theta + \text{area}").leaves())
    assert [(leaf.token, leaf.symbol) for leaf in leaves] == [
        ("NUM", "2"),
        ("CONST", "\\pi"),
        ("VAR", "r"),
        ("VAR", "\\alpha"),
        ("VAR", "x"),
        ("FUNC", "\\sin"),
        ("VAR", "\\theta"),
        ("TEXT", "area"),
    ]
    assert [leaf.symbol for leaf in tree_of(r"\varepsilon + \varphi").leaves()] == ["\\epsilon", "\\phi"]


def test_qvar_wildcards():
    tree = tree_of(r"\qvar{x}^2 + 1")
    wild = [leaf for leaf in tree.leaves() if leaf.wildcard]
    assert [(leaf.token, leaf.symbol) for leaf in wild] == [("QVAR", "x")]
    assert leaf_root_paths(tree) == ["NUM/ADD", "NUM/SUP/SUBSUP/ADD", "QVAR/BASE/SUBSUP/ADD"]


def test_ntcir12_wildcard_topics_parse(shared_data):
    lines = (shared_data / "ntcir12" / "topics.ntcir12-math-browsing-wildcards.txt").read_text().splitlines()
    for line in lines:
        latex = line.split("\t", 1)[1]
        result = parse_latex(latex)
        assert result.tree is not None, latex
        assert any(leaf.wildcard for leaf in result.tree.leaves()), latex


# --- robustness -------------------------------------------------------------------------------------
PATHOLOGICAL = {
    "10,000 tokens": "+".join(["x"] * 5000),
    "10,000 letters": "x" * 10000,
    "500 nested braces": "{" * 500 + "x" + "}" * 500,
    "500 nested parentheses": "(" * 500 + "x" + ")" * 500,
    "500 nested \\left(": r"\left(" * 500 + "x" + r"\right)" * 500,
    "500 nested superscripts": "x^{" * 500 + "1" + "}" * 500,
    "500 nested fractions": r"\frac{" * 500 + "1" + "}{2}" * 500,
    "2,000 unary minus": "-" * 2000 + "x",
    "2,000 sums": r"\sum " * 2000 + "x",
    "2,000 accents": r"\hat " * 2000 + "x",
    "1,000 bars": "|" * 1000 + "x" + "|" * 1000,
    "\\left( without \\right": r"\left( \frac{a}{b}",
    "unbalanced braces": r"\frac{a+b}{c",
    "garbage": r"}}}{{\end{x}\right)&&\\ ^^__''!! $ \begin{pmatrix}",
    "a megabyte": "x+" * 500_000,
}


@pytest.mark.parametrize("name", list(PATHOLOGICAL))
def test_pathological_inputs_return_quickly_and_partially(name):
    start = time.perf_counter()
    result = parse_latex(PATHOLOGICAL[name])
    assert time.perf_counter() - start < 5  # a guard against hangs (speed is measured by benchmarks.parse_rate)
    assert not result.complete and result.error
    if result.tree is not None:  # a partial tree that downstream (recursive) walkers can handle
        assert sum(1 for _ in result.tree.walk()) > 0


def test_random_token_soup_never_raises():
    """Random sequences of LaTeX constructs (unbalanced groups, stray scripts, environments, bars)."""
    pieces = r"""{ } ( ) [ ] | \| \left( \right) \left. \right| ^ _ ' ! & \\ \frac \sqrt \sum \int \sin x 2 + - =
        < \le , ; : \in \{ \} \langle \rangle \begin{pmatrix} \end{pmatrix} \begin{cases} \end{cases} \hat
        \mathbb \operatorname{rank} \qvar{x} \over \choose \not \stackrel \forall / \cdot \mathrm \bigl \lim
        d \mid . \text{ if }""".split()
    rng = random.Random(7)
    for size in [3] * 100 + [30] * 100 + [300] * 20 + [3000] * 3:
        latex = " ".join(rng.choice(pieces) for _ in range(size))
        start = time.perf_counter()
        result = parse_latex(latex)
        assert time.perf_counter() - start < 5, latex  # a guard against hangs, loose for a busy machine
        assert result.error != "nesting too deep", latex
        if result.tree is not None:
            assert sum(1 for _ in result.tree.walk()) > 0


def test_deep_input_under_a_deep_call_stack():
    """The recursion budget (≤ ~300 frames) leaves room for callers already 400 frames deep."""

    def nested(depth: int):
        return nested(depth - 1) if depth else [parse_latex(PATHOLOGICAL[name]) for name in PATHOLOGICAL]

    assert sys.getrecursionlimit() >= 1000
    results = nested(400)
    assert all(r.error != "nesting too deep" for r in results)


def test_unknown_macros_and_text_do_not_break_parsing():
    result = parse_latex(r"\mycustom x + \text{some words} = \frob{a}{b}")
    assert result.complete and result.tree is not None
    assert parse_latex("").tree is None and not parse_latex("").complete
    assert parse_latex(r"\quad").tree is None


# --- leaf offsets, highlighting ------------------------------------------------------------------------
def test_leaves_know_their_characters():
    latex = r"\hat{x} + \mathbb{R}^{n} + \frac{12}{y}"
    assert [latex[leaf.start : leaf.end] for leaf in tree_of(latex).leaves()] == [
        r"\hat{x}",
        r"\mathbb{R}",
        "n",
        "12",
        "y",
    ]


def test_highlight_spans_cover_matched_leaves():
    latex = r"ab+\frac{c}{d}+e_1^2"
    spans = highlight_spans(latex, [0, 1, 4])  # a, b, e
    assert [latex[s:e] for s, e in spans] == ["ab", "e"]
    assert highlight_spans("}}}", [0]) == []


# --- real data ------------------------------------------------------------------------------------------
def test_real_collection_formulas_parse_completely(shared_data):
    from mathscout.benchmarks.parse_rate import collection_formulas

    formulas = list(collection_formulas(shared_data / "collection" / "docs.jsonl", limit=1000))
    assert len(formulas) > 5000
    results = [parse_latex(f) for f in formulas]
    complete = sum(r.complete for r in results)
    assert complete / len(formulas) >= 0.97
    assert all(r.tree is not None for r in results if r.complete)


def _whitespace_leaves(tree: Node | None) -> list[str]:
    return [
        leaf.symbol for leaf in (tree.leaves() if tree is not None else []) if leaf.symbol and not leaf.symbol.strip()
    ]


def test_document_formulas_written_with_spaces_get_no_whitespace_leaf(shared_data):
    """A post's `$ x^2 $` keeps its spaces in the store; the lexer new builds use (version 2) drops them, so the tree is
    the one of `x^2`. Version 1 (indexes whose manifest records no lexer) read trailing whitespace as a leaf `' '`:
    old indexes keep parsing queries as their formulas were parsed."""
    from mathscout.benchmarks.parse_rate import collection_formulas
    from mathscout.structure.lexer import LEGACY_LEXER

    for latex in (" x^2 ", "x + y \n", "\\frac{a}{b}\t", "a = b \\quad "):
        assert _whitespace_leaves(parse_latex(latex).tree) == []
        assert sexpr(parse_latex(latex).tree) == sexpr(parse_latex(latex.strip()).tree)
    assert _whitespace_leaves(parse_latex(" x^2 ", LEGACY_LEXER).tree) == [" "]
    assert sexpr(parse_latex(" x^2 ", LEGACY_LEXER).tree) == "MUL(SUBSUP(BASE(x) SUP(2))  )"

    formulas = list(collection_formulas(shared_data / "collection" / "docs.jsonl", limit=1000))
    spaced = [f for f in formulas if f != f.rstrip() and not f.rstrip().endswith("\\")]
    assert len(spaced) > 50  # real posts write `$ … $`
    assert all(_whitespace_leaves(parse_latex(f, LEGACY_LEXER).tree) for f in spaced)  # what old indexes hold
    assert not any(_whitespace_leaves(parse_latex(f).tree) for f in formulas)
    assert all(parse_latex(f).tree == parse_latex(f.rstrip(), LEGACY_LEXER).tree for f in spaced)


def test_the_same_latex_always_gives_the_same_tree():
    # Regression: grouping decisions once depended on reused object ids of freed nodes.
    latex = r"d(x,A)\leqslant d(x,y)+d(y,A)"
    first = parse_latex(latex).tree.pretty()
    assert all(parse_latex(latex).tree.pretty() == first for _ in range(200))
