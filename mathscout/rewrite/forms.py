"""Inside the worker: read a formula into SymPy, apply the rules, render and check each form.

Reading: MathScout's operator tree → SymPy (`to_sympy`), SymPy's lark LaTeX parser as the fallback
for what the converter refuses (sums, integrals, …). Each form is rendered with `sympy.latex`, must
re-parse completely with MathScout's parser (so structure search can use it) and must differ from the
input and from earlier forms as an operator tree (`canonical.tree_key`).
"""

from __future__ import annotations

from collections.abc import Callable

import sympy as sp
from sympy.core.function import AppliedUndef
from sympy.core.relational import Relational
from sympy.printing.latex import LatexPrinter

from mathscout.rewrite.canonical import tree_key
from mathscout.rewrite.rules import RULE_NAMES, apply_rule
from mathscout.rewrite.to_sympy import TooLarge, Unsupported, opt_to_sympy
from mathscout.structure.parser import parse_latex

Send = Callable[[dict], None]


LARK_OPERATORS = frozenset({"SUM", "PROD", "INT", "LIM"})  # what the converter leaves to SymPy's LaTeX parser


def read_formula(latex: str) -> tuple[sp.Basic, str]:
    """The SymPy expression of `latex` and which reader produced it; ValueError when neither can.

    SymPy's lark parser is the fallback only for sums, products, integrals and limits, and its result
    is kept only when it names the same variables as the operator tree: on other input it silently
    misreads (`\\Delta y/\\Delta x` → y/x).
    """
    parsed = parse_latex(latex)
    if parsed.tree is None:
        raise ValueError(f"not a formula ({parsed.error or 'no math content'})")
    if not parsed.complete:
        raise ValueError(f"SymPy cannot read it (incomplete parse: {parsed.error})")
    try:
        return opt_to_sympy(parsed.tree, latex), "opt"
    except TooLarge as exc:
        raise ValueError(f"not rewritten: it holds {exc}") from None
    except (Unsupported, TypeError, ValueError, AttributeError) as exc:
        reason = str(exc) or type(exc).__name__
    if not any(node.token in LARK_OPERATORS for node in parsed.tree.walk()):
        raise ValueError(f"SymPy cannot read it ({reason})")
    try:
        from sympy.parsing.latex import parse_latex as sympy_parse_latex

        expr = sympy_parse_latex(latex, backend="lark")
    except Exception as exc:  # noqa: BLE001 — lark raises its own error classes
        raise ValueError(f"SymPy cannot read it ({reason}; lark: {type(exc).__name__})") from None
    if not isinstance(expr, sp.Basic):  # lark hands back a formula it reads two ways as an unresolved `_ambig` Tree
        readings = {r for r in getattr(expr, "children", ()) if isinstance(r, sp.Basic)}
        if len(readings) != 1:
            raise ValueError(
                "SymPy can read it in more than one way (as f(x): f of x, or f times x); write \\cdot or "
                "brackets to say which is meant"
            )
        expr = readings.pop()
    leaf_names = {leaf.symbol.lstrip("\\") for leaf in parsed.tree.leaves() if leaf.token == "VAR"}
    names = {s.name for s in expr.free_symbols | expr.atoms(sp.Symbol)}
    if not names <= leaf_names:
        raise ValueError(f"SymPy cannot read it ({reason}; lark misread the variables)")
    return expr, "lark"


class FormulaPrinter(LatexPrinter):
    """`sympy.latex` as people write it: `f(x)` not `f{\\left(x \\right)}`, `\\arcsin` not `\\operatorname{asin}`."""

    def __init__(self, ln: bool):
        super().__init__({"inv_trig_style": "full", "ln_notation": ln})

    def _print_Function(self, expr, exp=None):
        if isinstance(expr, AppliedUndef):
            name = self._print(sp.Symbol(expr.func.__name__))
            head = name if exp is None else f"{name}^{{{exp}}}"
            return f"{head}({', '.join(self._print(a) for a in expr.args)})"
        return super()._print_Function(expr, exp)


def render(expr: sp.Basic, ln: bool) -> str:
    return FormulaPrinter(ln).doprint(expr)


def rewrite_in_worker(latex: str, rules: list[str] | None, send: Send) -> None:
    """Send every new, re-parsable form (one message per form), then a `done` message (rules None: all)."""
    rules = RULE_NAMES if rules is None else rules
    try:
        expr, _reader = read_formula(latex)
    except (ValueError, RecursionError) as exc:
        send({"done": True, "error": str(exc), "skipped": {}})
        return
    original = parse_latex(latex)
    seen = {tree_key(original.tree)} if original.tree is not None else set()
    ln = "\\ln" in latex
    skipped: dict[str, str] = {}
    for rule in rules:
        try:
            results = apply_rule(rule, expr)
            texts = [render(r, ln) for r in results]
        except (MemoryError, RecursionError) as exc:
            skipped[rule] = type(exc).__name__
            continue
        except Exception as exc:  # noqa: BLE001 — SymPy raises many kinds (PolynomialError, NotImplementedError, …)
            skipped[rule] = f"{type(exc).__name__}: {exc}"[:120]
            continue
        for result, text in zip(results, texts):
            if isinstance(result, Relational) and (result.lhs == result.rhs or result == sp.true):
                continue  # an identity rewritten into `a = a` says nothing
            parsed = parse_latex(text)
            if parsed.tree is None or not parsed.complete:
                skipped[rule] = "rendered LaTeX does not re-parse"
                continue
            key = tree_key(parsed.tree)
            if key in seen:
                continue
            seen.add(key)
            send({"form": text, "rule": rule})
    send({"done": True, "error": None, "skipped": skipped})
