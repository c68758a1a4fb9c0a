"""The rewrite rules: each maps a SymPy expression to an equivalent one (worker process only).

A rule returns None when it does not apply. Relations are rewritten side by side, and have their own
normalisations (everything on one side, `a - b = 0` back to `a = b`, inequality sides swapped).
Log rules substitute positive symbols first, the domain where `log(ab) = log a + log b` holds.
"""

from __future__ import annotations

from collections.abc import Callable

import sympy as sp
from sympy.core.relational import Relational

Rule = Callable[[sp.Basic], sp.Basic | None]

_SWAPPED = {sp.StrictLessThan: sp.Gt, sp.StrictGreaterThan: sp.Lt, sp.LessThan: sp.Ge, sp.GreaterThan: sp.Le}


def _has_trig(e: sp.Basic) -> bool:
    return e.has(sp.sin, sp.cos, sp.tan, sp.cot, sp.sec, sp.csc, sp.sinh, sp.cosh, sp.tanh)


def _positive(e: sp.Basic, rule: Callable[[sp.Basic], sp.Basic]) -> sp.Basic:
    """Apply `rule` with every symbol assumed positive, then restore the original symbols."""
    positives = {s: sp.Symbol(s.name, positive=True) for s in e.free_symbols if isinstance(s, sp.Symbol)}
    result = rule(e.xreplace(positives))
    return result.xreplace({p: s for s, p in positives.items()})


def _apart(e: sp.Basic) -> sp.Basic | None:
    symbols = e.free_symbols
    if len(symbols) != 1 or not e.is_rational_function():
        return None
    return sp.apart(e, next(iter(symbols)))


def collect_terms(e: sp.Basic) -> list[sp.Basic]:
    """Common factors pulled out of a sum, per variable (`jl + l + 1` → `l(j + 1) + 1`), most frequent first."""
    if not isinstance(e, sp.Add):
        return []
    symbols = sorted(e.free_symbols, key=lambda s: (-sum(1 for t in e.args if t.has(s)), str(s)))
    return [sp.collect(e, s) for s in symbols[:2]]


# name → rule over a non-relational expression (order = preference when max_forms cuts the list)
EXPRESSION_RULES: dict[str, Rule] = {
    "expand": sp.expand,
    "factor": sp.factor,
    "together": sp.together,
    "apart": _apart,
    "cancel": sp.cancel,
    "collect": collect_terms,
    "trigsimp": lambda e: sp.trigsimp(e) if _has_trig(e) else None,
    "expand_trig": lambda e: sp.expand_trig(e) if _has_trig(e) else None,
    "expand_log": lambda e: _positive(e, lambda x: sp.expand_log(x)) if e.has(sp.log) else None,
    "logcombine": lambda e: _positive(e, lambda x: sp.logcombine(x)) if e.has(sp.log) else None,
    "simplify": sp.simplify,
}


def one_side(rel: Relational) -> Relational | None:
    """`a = b` → `a - b = 0` (a relation with a zero side is left alone)."""
    if rel.rhs == 0 or rel.lhs == 0:
        return None
    return rel.func(sp.expand(rel.lhs - rel.rhs), 0, evaluate=False)


def two_sides(rel: Relational) -> Relational | None:
    """`a - b = 0` → `a = b`: negative terms of a sum move to the other side."""
    side, other = (rel.lhs, rel.rhs) if rel.rhs == 0 else (rel.rhs, rel.lhs) if rel.lhs == 0 else (None, None)
    if side is None or not isinstance(side, sp.Add):
        return None
    positive = [t for t in side.args if not t.could_extract_minus_sign()]
    negative = [-t for t in side.args if t.could_extract_minus_sign()]
    if not positive or not negative:
        return None
    left, right = sp.Add(*positive), sp.Add(*negative) + other
    if rel.lhs == 0:  # keep the side the zero was on
        left, right = right, left
    return rel.func(left, right, evaluate=False)


def swap_sides(rel: Relational) -> Relational | None:
    """`a < b` → `b > a` (an equation's sides are unordered in the operator tree already)."""
    swapped = _SWAPPED.get(type(rel))
    return swapped(rel.rhs, rel.lhs, evaluate=False) if swapped else None


MAX_ISOLATED_TERMS = 4


def isolate(rel: Relational) -> list[Relational]:
    """Solve for one term, as people write equations: `abc - c + 1 = 0` → `abc = c - 1`, `c = abc + 1`;
    the constant alone on the right: `x^2 + h^2 - 16 = 0` → `x^2 + h^2 = 16`."""
    if not isinstance(rel, (sp.Eq, sp.Ne)):
        return []
    total = sp.expand(rel.lhs - rel.rhs)
    if not isinstance(total, sp.Add):
        return []
    terms = list(total.args)
    constant = sp.Add(*[t for t in terms if t.is_number])
    forms = []
    if constant != 0 and len(terms) > 2:
        forms.append(rel.func(total - constant, -constant, evaluate=False))
    for term in [t for t in terms if not t.is_number][:MAX_ISOLATED_TERMS]:
        rest = total - term
        if term.could_extract_minus_sign():
            forms.append(rel.func(-term, rest, evaluate=False))
        else:
            forms.append(rel.func(term, -rest, evaluate=False))
    return forms


RELATION_RULES: dict[str, Callable[[Relational], Relational | None]] = {
    "one side": one_side,
    "two sides": two_sides,
    "swap sides": swap_sides,
    "isolate": isolate,
}


def _as_list(value) -> list:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def apply_rule(name: str, expr: sp.Basic) -> list[sp.Basic]:
    """Apply one named rule (a rule may give several forms); expression rules rewrite both sides of a relation."""
    if name in RELATION_RULES:
        return _as_list(RELATION_RULES[name](expr)) if isinstance(expr, Relational) else []
    rule = EXPRESSION_RULES[name]
    if isinstance(expr, Relational):
        lefts, rights = _as_list(rule(expr.lhs)), _as_list(rule(expr.rhs))
        pairs = [(left, expr.rhs) for left in lefts] + [(expr.lhs, right) for right in rights]
        if lefts and rights:
            pairs.insert(0, (lefts[0], rights[0]))
        return [expr.func(left, right, evaluate=False) for left, right in pairs]
    return _as_list(rule(expr))


# the order rules are tried in (and kept in, when `max_forms` cuts the list)
RULE_NAMES: list[str] = [
    "expand",
    "factor",
    "together",
    "apart",
    "cancel",
    "one side",
    "two sides",
    "isolate",
    "swap sides",
    "collect",
    "trigsimp",
    "expand_trig",
    "expand_log",
    "logcombine",
    "simplify",
]
