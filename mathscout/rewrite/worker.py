"""The rewrite worker: a child process that runs every SymPy call, under CPU and memory limits.

Run as `python -m mathscout.rewrite.worker MEMORY_MB`; speaks JSON lines on stdin/stdout:
    ← {"ready": true}                                   once SymPy is imported and has rewritten WARM_UP
    → {"latex": "...", "rules": ["expand", ...] | null (all), "seconds": 2.0}
    ← {"form": "...", "rule": "expand"}                  one line per new, re-parsable form
    ← {"done": true, "error": null | "why nothing could be rewritten", "skipped": {"rule": "why"}}
A request with "op": "evaluate" | "simplify" | "solve" | "differentiate" | "integrate" computes instead
(`evaluate.py`): ← {"result": "latex", "action": "…"} then the `done` line.
Before each request the soft RLIMIT_CPU is moved to (CPU used so far + seconds + 1): a runaway SymPy
call is killed by SIGXCPU even if the parent's wall-clock deadline (`pool.py`) did not fire first.
RLIMIT_AS caps memory for the worker's whole life. Nothing here evaluates text: LaTeX goes through
MathScout's parser and `to_sympy`, or SymPy's own LaTeX parser (lark backend) as the fallback.
"""

from __future__ import annotations

import json
import math
import resource
import sys

WARM_UP = r"1 + \frac{1}{x}"  # rewritten once before the worker says it is ready


def _set_memory_limit(megabytes: int) -> None:
    limit = megabytes * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _set_cpu_budget(seconds: float) -> None:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = math.ceil(usage.ru_utime + usage.ru_stime + seconds) + 1
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def _send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> None:
    _set_memory_limit(int(sys.argv[1]) if len(sys.argv) > 1 else 1024)
    sys.setrecursionlimit(3000)
    from mathscout.rewrite.evaluate import compute_in_worker
    from mathscout.rewrite.forms import rewrite_in_worker  # SymPy is imported here, under the limits

    rewrite_in_worker(WARM_UP, None, lambda _message: None)  # SymPy's first rewrite loads more (~1 s): paid here
    _send({"ready": True})
    for line in sys.stdin:
        try:
            request = json.loads(line)
            _set_cpu_budget(float(request.get("seconds", 2.0)))
            if request.get("op", "rewrite") == "rewrite":
                rewrite_in_worker(request["latex"], request["rules"], _send)
            else:
                compute_in_worker(request["latex"], request["op"], _send)
        except Exception as exc:  # noqa: BLE001 — a bad request or a failure outside a rule: report, keep serving
            _send({"done": True, "error": f"{type(exc).__name__}: {exc}"[:300], "skipped": {}})


if __name__ == "__main__":
    main()
