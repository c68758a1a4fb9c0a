"""Answers that compute: one SymPy operation on a question's formula, in the limited rewrite worker.

    compute(r"\\int_0^1 x^2 dx", "integrate")  →  Computation(..., result=r"\\frac{1}{3}", error=None)

The formula reaches SymPy only through MathScout's OPT → SymPy converter (or SymPy's lark LaTeX parser for
sums, integrals, limits), inside the worker process with its CPU-time and memory limits (`pool.py`); this
module bounds the input and turns the reply into one line for the answer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from mathscout.rewrite import MAX_REWRITE_CHARS
from mathscout.rewrite.pool import WorkerPool, default_pool

COMPUTE_SECONDS = 3.0
OPERATIONS = ("evaluate", "simplify", "solve", "differentiate", "integrate")  # carried out by evaluate.py (worker side)


@dataclass
class Computation:
    """What SymPy did with one formula: `statement` is the LaTeX shown (`input = result`), or `error` says why not."""

    latex: str
    operation: str
    result: str | None = None
    action: str | None = None
    error: str | None = None
    seconds: float = 0.0

    @property
    def statement(self) -> str | None:
        """`\\int_0^1 x^2 dx = \\frac{1}{3}`; for equations solved, `x \\in \\{2, 3\\}`; for derivatives,
        `\\frac{d}{dx}\\left(…\\right) = …`."""
        if self.result is None:
            return None
        if self.operation == "solve" or (self.action or "").startswith(("solved", "no solution")):
            return self.result
        left = " ".join(self.latex.split())
        if self.operation == "differentiate":
            variable = (self.action or "derivative in x").rsplit(" ", 1)[-1]
            left = f"\\frac{{d}}{{d{variable}}}\\left({left}\\right)"
        elif self.operation == "integrate" and "\\int" not in left:
            left = f"\\int {left}\\,dx"
        return f"{left} = {self.result}"


def compute(
    latex: str, operation: str, seconds: float = COMPUTE_SECONDS, pool: WorkerPool | None = None
) -> Computation:
    """Run `operation` on `latex` in a limited worker; never raises for a formula SymPy cannot handle."""
    text = (latex or "").strip().strip("$").strip()
    found = Computation(latex=text, operation=operation)
    if operation not in OPERATIONS:
        found.error = f"unknown operation {operation!r} (one of {', '.join(OPERATIONS)})"
        return found
    if not text or len(text) > MAX_REWRITE_CHARS:
        found.error = "no formula to compute" if not text else f"formula longer than {MAX_REWRITE_CHARS:,} characters"
        return found
    started = time.perf_counter()
    reply = (pool or default_pool()).run(text, None, seconds, op=operation)
    found.seconds = time.perf_counter() - started
    if reply.result is not None and not reply.stopped:
        found.result, found.action = reply.result, reply.action
    else:
        found.error = (reply.stopped or reply.error or "SymPy gave no result").removeprefix("not rewritten: it holds ")
    return found


__all__ = ["COMPUTE_SECONDS", "OPERATIONS", "Computation", "compute"]
