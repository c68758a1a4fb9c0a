"""Inside the worker: carry out one computation (evaluate, simplify, solve, differentiate, integrate).

The formula is read exactly as for rewriting (`forms.read_formula`: MathScout's operator tree → SymPy, SymPy's
lark LaTeX parser only for sums, products, integrals and limits); nothing here evaluates text. The result is
rendered with the same printer as rewritten forms.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import sympy as sp
from sympy.core.relational import Relational

from mathscout.rewrite.compute import OPERATIONS
from mathscout.rewrite.forms import read_formula, render

Send = Callable[[dict], None]
_DERIVATIVE_NOTATION = re.compile(r"\\frac\s*\{\s*(d|\\partial)[^}]*\}\s*\{\s*(d|\\partial)")


def _variable(expr: sp.Basic, operation: str) -> sp.Symbol:
    """The one free variable to solve for / differentiate by / integrate over (x, then t, …, when several)."""
    symbols = sorted(expr.free_symbols, key=lambda s: s.name)
    if not symbols:
        raise ValueError(f"nothing to {operation}: the formula has no variable")
    for name in ("x", "t", "y", "z", "n"):
        for symbol in symbols:
            if symbol.name == name:
                return symbol
    if len(symbols) > 1:
        raise ValueError(f"which variable? the formula has {', '.join(s.name for s in symbols)}")
    return symbols[0]


def _solve(expr: sp.Basic) -> tuple[str, str]:
    equation = expr if isinstance(expr, sp.Eq) else (sp.Eq(expr, 0) if not isinstance(expr, Relational) else None)
    if equation is None:
        raise ValueError("only equations can be solved here (inequalities are not)")
    variable = _variable(equation, "solve")
    solutions = sp.solve(equation, variable, dict=False)
    if not solutions:
        return "no solution", f"{render(variable, False)} \\in \\emptyset"
    shown = ", ".join(render(s, False) for s in solutions)
    return "solved", f"{render(variable, False)} \\in \\left\\{{{shown}\\right\\}}"


def compute(latex: str, operation: str, ln: bool) -> tuple[str, str]:
    """(what was done, LaTeX of the result) — the result is `= …` of the input unless solving."""
    if _DERIVATIVE_NOTATION.search(latex):
        raise ValueError("derivative notation d/dx is not read; ask 'derivative of $…$' instead")
    expr, _reader = read_formula(latex)
    if operation == "solve" or (operation == "evaluate" and isinstance(expr, sp.Eq) and expr.free_symbols):
        return _solve(expr)
    if isinstance(expr, Relational):
        raise ValueError("a relation cannot be " + {"evaluate": "evaluated"}.get(operation, operation + "d"))
    if operation == "differentiate":
        variable = _variable(expr, "differentiate")
        return f"derivative in {variable.name}", render(sp.simplify(sp.diff(expr, variable)), ln)
    if operation == "integrate":
        if isinstance(expr, sp.Integral):
            result = expr.doit()
        else:
            variable = _variable(expr, "integrate")
            result = sp.integrate(expr, variable)
        if result.has(sp.Integral):
            raise ValueError("SymPy found no closed form")
        return "integrated", render(result, ln)
    result = expr.doit() if isinstance(expr, (sp.Integral, sp.Sum, sp.Product, sp.Limit, sp.Derivative)) else expr
    if result.has(sp.Integral, sp.Sum, sp.Product, sp.Limit):
        raise ValueError("SymPy found no closed form")
    result = sp.simplify(result)
    return ("simplified" if operation == "simplify" else "evaluated"), render(result, ln)


def compute_in_worker(latex: str, operation: str, send: Send) -> None:
    """Send {"result", "done": true} or {"done": true, "error": why}."""
    if operation not in OPERATIONS:
        send({"done": True, "error": f"unknown operation {operation!r}", "skipped": {}})
        return
    try:
        action, result = compute(latex, operation, "\\ln" in latex)
    except (ValueError, RecursionError, MemoryError, NotImplementedError) as exc:
        send({"done": True, "error": str(exc) or type(exc).__name__, "skipped": {}})
        return
    except Exception as exc:  # noqa: BLE001 — SymPy raises many kinds (PolynomialError, …)
        send({"done": True, "error": f"{type(exc).__name__}: {exc}"[:200], "skipped": {}})
        return
    send({"result": result, "action": action})
    send({"done": True, "error": None, "skipped": {}})
