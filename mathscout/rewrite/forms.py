"""Inside the worker: read a formula into SymPy, apply the rules, render and check each form.

Reading: MathScout's operator tree → SymPy (`to_sympy`), SymPy's lark LaTeX parser as the fallback
for what the converter refuses (sums, integrals, …). Each form is rendered with `sympy.latex`, must
re-parse completely with MathScout's parser (so structure search can use it) and must differ from the
input and from earlier forms as an operator tree (`canonical.tree_key`).
"""

from __future__ import annotations

from collections.abc import Callable

import sympy as sp
from sympy.core.relational import Relational

from mathscout.rewrite.canonical import tree_key
from mathscout.rewrite.rules import apply_rule
from mathscout.rewrite.to_sympy import TooLarge, Unsupported, opt_to_sympy
from mathscout.structure.parser import parse_latex

Send = Callable[[dict], None]


def read_formula(latex: str) -> tuple[sp.Basic, str]:
    """The SymPy expression of `latex` and which reader produced it; ValueError when neither can."""
    parsed = parse_latex(latex)
    if parsed.tree is None:
        raise ValueError(f"not a formula ({parsed.error or 'no math content'})")
    reason = "incomplete parse: " + parsed.error
    if parsed.complete:
        try:
            return opt_to_sympy(parsed.tree, latex), "opt"
        except TooLarge as exc:
            raise ValueError(f"not rewritten: it holds {exc}") from None
        except (Unsupported, TypeError, ValueError, AttributeError) as exc:
            reason = str(exc) or type(exc).__name__
    try:
        from sympy.parsing.latex import parse_latex as sympy_parse_latex

        return sympy_parse_latex(latex, backend="lark"), "lark"
    except Exception as exc:  # lark raises its own error classes
        raise ValueError(f"SymPy cannot read it ({reason}; lark: {type(exc).__name__})") from None


def render(expr: sp.Basic, ln: bool) -> str:
    return sp.latex(expr, ln_notation=ln)


def rewrite_in_worker(latex: str, rules: list[str], send: Send) -> None:
    """Send every new, re-parsable form (one message per form), then a `done` message."""
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
            result = apply_rule(rule, expr)
            if result is None:
                continue
            text = render(result, ln)
        except (MemoryError, RecursionError) as exc:
            skipped[rule] = type(exc).__name__
            continue
        except Exception as exc:  # SymPy raises many kinds (PolynomialError, NotImplementedError, …)
            skipped[rule] = f"{type(exc).__name__}: {exc}"[:120]
            continue
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
