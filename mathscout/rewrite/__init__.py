"""SymPy formula rewriting: equivalent forms of a query formula for structure search (issue 5).

    equivalent_forms(r"1 + \\frac{1}{x}")  →  RewriteResult(forms=[EquivalentForm(r"\\frac{x + 1}{x}", "factor")])

Every SymPy call runs in a separate worker process under a CPU-time and memory limit (`pool.py`,
`worker.py`); this module only bounds the input, asks the pool, and explains what happened.
Zhong 2023 thesis ch. 6 names query rewriting as future work for structure search; the rules are in `rules.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mathscout.errors import QueryError
from mathscout.rewrite.pool import WorkerPool, default_pool
from mathscout.structure.parser import parse_latex

MAX_REWRITE_CHARS = 1000  # longer formulas are not rewritten (a notice says so)
MAX_REWRITE_LEAVES = 120  # nor formulas with more operands than this


@dataclass
class EquivalentForm:
    latex: str
    rule: str


@dataclass
class RewriteResult:
    original: str
    forms: list[EquivalentForm] = field(default_factory=list)
    notice: str | None = None


def equivalent_forms(
    latex: str, max_forms: int = 8, seconds: float = 2.0, pool: WorkerPool | None = None
) -> RewriteResult:
    """At most `max_forms` equivalent forms of `latex`, none identical to it as an operator tree.

    Returns within about `seconds` (plus process hand-over); whatever stopped the rewriting early —
    unreadable input, a formula too long, the time or memory limit — is explained in `notice`.
    """
    text = (latex or "").strip().strip("$").strip()
    if not text:
        raise QueryError("nothing to rewrite: give a formula such as 1 + \\frac{1}{x}")
    result = RewriteResult(original=latex)
    if len(text) > MAX_REWRITE_CHARS:
        result.notice = f"formula of {len(text):,} characters not rewritten (limit {MAX_REWRITE_CHARS:,})"
        return result
    parsed = parse_latex(text)
    if parsed.tree is None:
        result.notice = f"could not read the formula ({parsed.error or 'no math content'}); not rewritten"
        return result
    leaves = sum(1 for _ in parsed.tree.leaves())
    if leaves > MAX_REWRITE_LEAVES:
        result.notice = f"formula with {leaves} operands not rewritten (limit {MAX_REWRITE_LEAVES})"
        return result
    reply = (pool or default_pool()).run(text, None, seconds)  # every rule, in rules.RULE_NAMES order
    result.forms = [EquivalentForm(form, rule) for form, rule in reply.forms[: max(0, max_forms)]]
    if reply.error:
        result.notice = reply.error if reply.error.startswith("not rewritten") else f"not rewritten: {reply.error}"
    elif reply.stopped:
        kept = f"; kept {len(result.forms)} form(s) found before" if result.forms else ""
        result.notice = f"rewriting stopped: {reply.stopped}{kept}"
    return result


__all__ = ["MAX_REWRITE_CHARS", "MAX_REWRITE_LEAVES", "EquivalentForm", "RewriteResult", "equivalent_forms"]
