"""What one query may cost (issue 42 items 3 and 4), two figures of `mathscout bench robust`:

- the longest scan of a 100 KB query: every scanner of user text (`mathscout.benchmarks.scanners.SCANNERS`) on
  every hostile shape (`SHAPES`) of 100,000 characters, without the query limit (what a scanner itself costs), and
  the search path's reading of the same text (cut to the limit first, as every entry point does);
- the latency of a plain question while six slow computations run: `ask --no-llm` of PLAIN alone, then while six
  SLOW questions of one client are being computed, asked by another client and by the same one (in this process,
  each thread with its client as `mathscout serve` sets it from the address).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from mathscout.benchmarks.scanners import SCANNERS, SHAPES, shaped
from mathscout.clients import CLIENT
from mathscout.latex.bare import delimit_bare_math
from mathscout.latex.tokens import query_terms
from mathscout.limits import QUERY
from mathscout.notices import collecting
from mathscout.question import read_question

QUERY_CHARS = 100_000
SLOW = [f"solve $x^{{97}}+x^{{53}}+{n}x^{{31}}+x+1=0$" for n in range(2, 8)]  # SymPy: past any time limit
PLAIN = "How do I simplify $\\frac{t+1}{t}$?"
ISSUE = {"scan": 8_580.0, "plain": 13_400.0}  # ms measured in issue 42: 9,990 digits; PLAIN beside six SLOW
GOAL_PLAIN_MS = 1_000.0


@dataclass(frozen=True)
class Scan:
    scanner: str
    shape: str
    ms: float


def _ms(scan: Callable[[str], object], text: str) -> float:
    """Milliseconds of this thread's CPU that `scan(text)` took."""
    started = time.thread_time()
    scan(text)
    return (time.thread_time() - started) * 1000


def longest_scans(chars: int = QUERY_CHARS) -> tuple[Scan, Scan, Scan]:
    """(the longest single scan of any shape, the longest reading by the search path, the words shape's reading)."""
    texts = {shape: shaped(unit, chars) for shape, unit in SHAPES.items()}
    for scan in SCANNERS.values():
        scan("x")  # what a first call imports (the page's preview imports Gradio) is not a scan
    scans = [Scan(name, shape, _ms(scan, text)) for shape, text in texts.items() for name, scan in SCANNERS.items()]
    readings = [Scan("search path", shape, _ms(_read, text)) for shape, text in texts.items()]
    words = next(r for r in readings if r.shape == "words")
    return max(scans, key=lambda s: s.ms), max(readings, key=lambda s: s.ms), words


def _read(text: str) -> None:
    """What `search` and `ask` read of a query before searching it: cut to the limit, then scanned."""
    cut, _ = QUERY.cut(text)
    query_terms(delimit_bare_math(cut).text)
    read_question(cut, QUERY)


def _ask(assistant, question: str, client: str) -> float:
    """Seconds `assistant` took to answer `question` for `client` (its notices kept out of the output)."""
    CLIENT.set(client)
    started = time.perf_counter()
    with collecting():
        assistant.ask(question, use_llm=False)
    return time.perf_counter() - started


def plain_beside_slow(assistant, repeats: int = 3) -> dict[str, float]:
    """ms of PLAIN: alone (median of `repeats`), and while the six SLOW questions of client "slow" are being
    computed, asked by another client and by "slow" itself."""
    _ask(assistant, PLAIN, "warm")  # every worker warm, the index open
    alone = statistics.median(_ask(assistant, PLAIN, "alone") for _ in range(repeats)) * 1000
    figures = {"alone": alone}
    for label, client in (("another client", "plain"), ("the same client", "slow")):
        with ThreadPoolExecutor(len(SLOW) + 1) as threads:
            slow = [threads.submit(_ask, assistant, question, "slow") for question in SLOW]
            time.sleep(0.5)  # they are being computed
            figures[label] = threads.submit(_ask, assistant, PLAIN, client).result() * 1000
            for future in slow:
                future.result()
    return figures


def report(assistant) -> None:
    """Print both figures with their ratios (to a plain reading / to the question alone) and the issue's."""
    worst, path, words = longest_scans()
    print(f"\nlongest scan of a {QUERY_CHARS:,}-character query ({len(SCANNERS)} scanners x {len(SHAPES)} shapes):")
    print(f"  one scanner, no limit: {worst.ms:8,.1f} ms  {worst.scanner} on {worst.shape!r}")
    print(
        f"  the search path:       {path.ms:8,.1f} ms  on {path.shape!r} (cut to {QUERY.chars:,}); "
        f"{path.ms / max(words.ms, 1e-3):.2f}x its reading of words ({words.ms:,.1f} ms)"
    )
    digits = _ms(_read, "9" * 9_990)
    print(f"  9,990 digits, the search path: {digits:,.1f} ms (issue 42: {ISSUE['scan']:,.0f} ms)")
    figures = plain_beside_slow(assistant)
    alone = figures["alone"]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\nplain question {PLAIN!r} while six slow computations run (ask --no-llm, in this process; load {load}):")
    for label, ms in figures.items():
        print(f"  {label:16} {ms:8,.0f} ms  {ms / alone:5.2f}x alone")
    shown = figures["another client"]
    print(
        f"  goal <= {GOAL_PLAIN_MS:,.0f} ms (another client): {'met' if shown <= GOAL_PLAIN_MS else 'MISSED'}; "
        f"issue 42: {ISSUE['plain']:,.0f} ms"
    )


__all__ = ["PLAIN", "SLOW", "longest_scans", "plain_beside_slow", "report"]
