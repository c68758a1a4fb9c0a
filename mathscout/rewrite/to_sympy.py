"""MathScout operator tree (OPT) → SymPy expression, for the rewrite worker process only.

One parser for the whole product: the tree is the one structure search indexes (`structure.parser`,
tolerant, 99.8 % of the collection's formulas), so every formula structure search can read is a
candidate, and what we cannot express in SymPy is refused explicitly (`Unsupported`), never guessed.
Building SymPy objects can itself evaluate (`2^{2^{100}}`), so this module is imported and run only
inside the limited worker (`rewrite.pool`). Nothing here calls sympify/eval on text.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import sympy as sp
from sympy.core.relational import Relational

from mathscout.structure.opt import Node

MAX_INTEGER_DIGITS = 60  # literal integers longer than this are refused (no arithmetic on giant numbers)
MAX_NUMERIC_EXPONENT = 4096  # a numeric power n^m with |m| above this is refused instead of evaluated


class Unsupported(Exception):
    """The tree holds something the converter does not translate (its message names it)."""


class TooLarge(Exception):
    """The formula asks for arithmetic on numbers too large to evaluate (`2^{2^{100}}`)."""


# LaTeX function names → SymPy functions of one argument (inverse trig via ^{-1} handled separately)
FUNCTIONS: dict[str, Callable[..., sp.Basic]] = {
    "\\sin": sp.sin,
    "\\cos": sp.cos,
    "\\tan": sp.tan,
    "\\cot": sp.cot,
    "\\sec": sp.sec,
    "\\csc": sp.csc,
    "\\arcsin": sp.asin,
    "\\arccos": sp.acos,
    "\\arctan": sp.atan,
    "\\arccot": sp.acot,
    "\\arcsec": sp.asec,
    "\\arccsc": sp.acsc,
    "\\sinh": sp.sinh,
    "\\cosh": sp.cosh,
    "\\tanh": sp.tanh,
    "\\coth": sp.coth,
    "\\sech": sp.sech,
    "\\csch": sp.csch,
    "\\arsinh": sp.asinh,
    "\\arcosh": sp.acosh,
    "\\artanh": sp.atanh,
    "\\log": sp.log,
    "\\ln": sp.log,
    "\\exp": sp.exp,
}
INVERSES: dict[str, Callable[..., sp.Basic]] = {
    "\\sin": sp.asin,
    "\\cos": sp.acos,
    "\\tan": sp.atan,
    "\\cot": sp.acot,
    "\\sec": sp.asec,
    "\\csc": sp.acsc,
    "\\sinh": sp.asinh,
    "\\cosh": sp.acosh,
    "\\tanh": sp.atanh,
}
RELATIONS: dict[str, Callable[..., sp.Basic]] = {
    "EQ": sp.Eq,
    "NEQ": sp.Ne,
    "LT": sp.Lt,
    "GT": sp.Gt,
    "LE": sp.Le,
    "GE": sp.Ge,
}
FUNCTION_LETTERS = frozenset("f g h F G H".split())
_NUMBER = re.compile(r"^\d+(\.\d+)?$")


class OptToSympy:
    """Converts one parsed formula; `latex` is the parsed text (leaf spans name subscripted symbols)."""

    def __init__(self, latex: str):
        self.latex = latex
        self.symbols: dict[str, sp.Symbol] = {}

    def convert(self, node: Node) -> sp.Basic:
        handler = getattr(self, f"_{node.token.lower()}", None)
        if handler is None:
            raise Unsupported(f"no SymPy form for {node.token}")
        return handler(node)

    # --- leaves ----------------------------------------------------------------------------------
    def _num(self, node: Node) -> sp.Basic:
        text = node.symbol
        if not _NUMBER.match(text) or len(text) > MAX_INTEGER_DIGITS:
            raise (TooLarge if text.isdigit() else Unsupported)(f"number {text[:20]}…")
        return sp.Float(text) if "." in text else sp.Integer(text)

    def _var(self, node: Node) -> sp.Basic:
        name = node.symbol
        if name == "e":
            return sp.E
        if name.startswith(("\\mathbb", "\\mathcal", "\\mathbf")):
            raise Unsupported(f"set or vector symbol {name}")
        return self.symbol(name.lstrip("\\"))

    def _const(self, node: Node) -> sp.Basic:
        if node.symbol == "\\pi":
            return sp.pi
        if node.symbol == "\\infty":
            return sp.oo
        raise Unsupported(f"constant {node.symbol}")

    def symbol(self, name: str) -> sp.Symbol:
        if name not in self.symbols:
            self.symbols[name] = sp.Symbol(name)
        return self.symbols[name]

    # --- arithmetic ------------------------------------------------------------------------------
    def _add(self, node: Node) -> sp.Basic:
        return sp.Add(*[self.convert(c) for c in node.children])

    def _neg(self, node: Node) -> sp.Basic:
        (child,) = node.children
        return -self.convert(child)

    def _mul(self, node: Node) -> sp.Basic:
        return sp.Mul(*[self.convert(c) for c in node.children])

    _times = _mul

    def _frac(self, node: Node) -> sp.Basic:
        num, den = self._ranks(node, 2)
        return self.convert(num) / self.convert(den)

    _div = _frac

    def _sqrt(self, node: Node) -> sp.Basic:
        (child,) = node.children
        return sp.sqrt(self.convert(child))

    def _root(self, node: Node) -> sp.Basic:
        radicand, index = self._ranks(node, 2)
        return sp.root(self.convert(radicand), self.convert(index))

    def _fact(self, node: Node) -> sp.Basic:
        (child,) = node.children
        return sp.factorial(self.convert(child))

    def _binom(self, node: Node) -> sp.Basic:
        n, k = self._ranks(node, 2)
        return sp.binomial(self.convert(n), self.convert(k))

    def _abs(self, node: Node) -> sp.Basic:
        (child,) = node.children
        return sp.Abs(self.convert(child))

    def _subsup(self, node: Node) -> sp.Basic:
        parts = {c.token: c.children[0] for c in node.children if c.children}
        base = parts.get("BASE")
        if base is None:
            raise Unsupported("script without a base")
        if "SUB" in parts:
            if base.token != "VAR":
                raise Unsupported("subscript on a non-variable")
            expr = self.symbol(f"{base.symbol.lstrip(chr(92))}_{{{self._source(parts['SUB'])}}}")
        else:
            expr = self.convert(base)
        if "SUP" not in parts:
            return expr
        exponent = self.convert(parts["SUP"])
        if expr.is_Number and exponent.is_Number and abs(exponent) > MAX_NUMERIC_EXPONENT:
            raise TooLarge("a numeric power too large to evaluate")
        if expr.is_Number and isinstance(exponent, sp.Pow) and exponent.base.is_Number:
            raise TooLarge("a tower of numeric powers")
        return sp.Pow(expr, exponent)

    # --- function application --------------------------------------------------------------------
    def _apply(self, node: Node) -> sp.Basic:
        head, *args = self._ranks(node, None)
        if not args:
            raise Unsupported("function without an argument")
        values = [self.convert(a) for a in args]
        power = None
        base = None
        if head.token == "SUBSUP":
            parts = {c.token: c.children[0] for c in head.children if c.children}
            head = parts.get("BASE", head)
            if "SUB" in parts:
                if head.symbol != "\\log":
                    raise Unsupported(f"subscripted function {head.symbol}")
                base = self.convert(parts["SUB"])
            if "SUP" in parts:
                power = self.convert(parts["SUP"])
        if head.token == "FUNC" and head.symbol in FUNCTIONS and len(values) == 1:
            if power == -1 and head.symbol in INVERSES:
                return INVERSES[head.symbol](values[0])
            value = sp.log(values[0], base) if base is not None else FUNCTIONS[head.symbol](values[0])
            return value**power if power is not None else value
        if head.token == "VAR" and head.symbol in FUNCTION_LETTERS and base is None:
            value = sp.Function(head.symbol)(*values)
            return value**power if power is not None else value
        raise Unsupported(f"function {head.symbol or head.token}")

    # --- relations -------------------------------------------------------------------------------
    def _relation(self, node: Node) -> sp.Basic:
        sides = node.children if node.commutative else self._ranks(node, None)
        if len(sides) != 2:
            raise Unsupported(f"chain of {len(sides)} relation operands")
        left, right = (self.convert(s) for s in sides)
        if isinstance(left, Relational) or isinstance(right, Relational):
            raise Unsupported("chained relation")  # `0 \\le a < 3` is two relations, not one
        return RELATIONS[node.token](left, right, evaluate=False)

    _eq = _neq = _lt = _gt = _le = _ge = _relation

    # --- helpers ---------------------------------------------------------------------------------
    def _ranks(self, node: Node, count: int | None) -> list[Node]:
        """The children under rank nodes, in order (`count` checks arity)."""
        ranked = [c.children[0] for c in node.children if c.token.startswith("rank") and c.children]
        if count is not None and len(ranked) != count:
            raise Unsupported(f"{node.token} with {len(ranked)} operands")
        return ranked

    def _source(self, node: Node) -> str:
        """The LaTeX source of a subtree, from its leaves' spans (used to name `a_{n+1}`)."""
        spans = [(leaf.start, leaf.end) for leaf in node.leaves() if leaf.start is not None and leaf.end is not None]
        if not spans:
            return "".join(leaf.symbol for leaf in node.leaves())
        text = self.latex[min(s for s, _ in spans) : max(e for _, e in spans)]
        return re.sub(r"\s+", "", text)


def opt_to_sympy(tree: Node, latex: str) -> sp.Basic:
    """The SymPy expression of a parsed formula, or `Unsupported`."""
    return OptToSympy(latex).convert(tree)
