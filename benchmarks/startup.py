"""Start-up of the command line: what a user waits for, per command, against the targets of issue 20.

    mathscout bench startup [--runs 3] [--index DIR] [--no-server] [--no-compile]

Each command is a new process (as a user runs it), timed wall-clock; the median of `--runs` is shown with its
target and the ratio to it. "warm" is the same search repeated inside one process (retrievers open);
"--server" is a new client process against a running `mathscout serve` (started here on a free 127.0.0.1
port over the same index). "kernels compile" is the first structure search after an installation: an empty
NUMBA_CACHE_DIR makes numba compile the structure-search kernels as it does once per installation.
The demo index (default) is built first if missing; that build is not timed.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from mathscout.errors import MathScoutError

QUERY = "pythagorean theorem $a^2+b^2=c^2$"
CLI = [sys.executable, "-m", "mathscout.cli"]


@dataclass
class Row:
    measure: str
    seconds: list[float]
    target: float | None = None
    cpu: list[float] | None = None  # CPU seconds (user + system) of the new processes: less sensitive to load

    def line(self) -> str:
        median = statistics.median(self.seconds)
        cpu = f"{statistics.median(self.cpu):>6.2f}" if self.cpu else f"{'':>6}"
        target = f"{self.target:>7.1f}" if self.target else f"{'':>7}"
        ratio = f"{median / self.target:>6.2f}" if self.target else f"{'':>6}"
        return f"{self.measure:58} {median:>8.2f} {cpu} {len(self.seconds):>5} {target} {ratio}"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(command: list[str], env: dict[str, str], cpu: list[float] | None = None) -> float:
    started, cpu_before = time.perf_counter(), _children_cpu()
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        raise MathScoutError(f"{' '.join(command[2:])} failed: {result.stderr.strip().splitlines()[-1:]}")
    if cpu is not None:
        cpu.append(_children_cpu() - cpu_before)
    return seconds


def _row(measure: str, command: list[str], env: dict[str, str], runs: int, target: float | None = None) -> Row:
    cpu: list[float] = []
    return Row(measure, [_timed(command, env, cpu) for _ in range(runs)], target, cpu)


def _warm(index: Path, mode: str, runs: int) -> list[float]:
    """The same search repeated in this process, after a first one that opens everything."""
    from mathscout.agent.assistant import Assistant
    from mathscout.tools.searching import SearchRequest, run_search

    assistant = Assistant(index, use_llm=False)
    request = SearchRequest(QUERY, mode, 10).checked()
    auto = lambda query, k: assistant.search(query, mode="auto", k=k)  # noqa: E731
    run_search(request, assistant.toolbox, auto)
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        run_search(request, assistant.toolbox, auto)
        times.append(time.perf_counter() - started)
    return times


def _through_server(index: Path, env: dict[str, str], runs: int) -> Row:
    from mathscout.benchmarks.ui_load import start_server

    with tempfile.TemporaryDirectory(prefix="mathscout-startup-") as tmp:
        server, url = start_server(index, Path(tmp))
        try:
            command = CLI + ["search", "--quiet", "--server", url, "--index", index.name, "--k", "10", QUERY]
            _timed(command, env)  # the server opens the index's retrievers on its first search
            return _row("mathscout search --server URL (new client process, bm25)", command, env, runs, 1.0)
        finally:
            server.terminate()
            server.wait(timeout=30)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="mathscout bench startup", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, choices=range(1, 21), metavar="N", help="runs per measure (1–20)")
    parser.add_argument("--index", type=Path, help="index directory (default: the demo index)")
    parser.add_argument("--no-server", action="store_true", help="skip the --server measure")
    parser.add_argument("--no-compile", action="store_true", help="skip the kernel-compilation measure (about 15 s)")
    args = parser.parse_args(argv)
    from mathscout.config import default_index_path
    from mathscout.retrievers.indexing import ensure_demo_index

    index = Path(args.index or ensure_demo_index(default_index_path())).resolve()
    env = {**os.environ, "NO_COLOR": "1"}
    search = CLI + ["search", "--quiet", "--index", str(index), "--k", "10"]
    rows = [_row("mathscout --help", CLI + ["--help"], env, args.runs, 0.5),
            _row("mathscout --version", CLI + ["--version"], env, args.runs, 0.5)]
    for mode in ("bm25", "structure", "auto"):
        rows.append(_row(f"mathscout search --mode {mode} (new process)", search + ["--mode", mode, QUERY], env,
                         args.runs, 3.0))
    for mode in ("bm25", "structure", "auto"):
        rows.append(Row(f"  the same search again in one process (warm), {mode}", _warm(index, mode, max(args.runs, 5))))
    if not args.no_server:
        rows.append(_through_server(index, env, args.runs))
    if not args.no_compile:
        with tempfile.TemporaryDirectory() as empty_cache:
            compile_env = {**env, "NUMBA_CACHE_DIR": empty_cache}
            rows.append(_row("first structure search after installation (kernels compile)",
                             search + ["--mode", "structure", QUERY], compile_env, 1))
    print(f"start-up over {index} ({os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}); query {QUERY!r}")
    print(f"{'measure':58} {'median s':>8} {'cpu s':>6} {'runs':>5} {'target':>7} {'ratio':>6}")
    for row in rows:
        print(row.line())
