"""Start-up of the command line: what a user waits for, per command, cold and through a running service (issues 20, 35).

    mathscout bench startup [--runs 5] [--index DIR] [--no-service] [--no-compile]

Every command is a new process (as a user runs it), timed wall-clock; each figure is the median of `--runs`, with the
machine's 1-minute load average while they ran beside it (the median of the loads read after each run). Per mode
(bm25, structure, auto search, and `ask --no-llm`): "cold" is `mathscout … --local` (the search runs in the new
process: JVM, kernels, index), "service" the same command without `--local` while a `mathscout serve --background`
serves the index, so the new process only asks it; the ratio is cold / service. The service and its command lines
run a copy of the code taken at the start, in a home of their own: an edit of a shared checkout during the run
would rightly make the command line pass the service over (its code changed), and nothing of the user's is touched.
"warm" is the same search repeated inside one process. "kernels compile" is the first structure search after an
installation (an empty NUMBA_CACHE_DIR). The demo index (default) is built first if missing; that is not timed.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from mathscout.errors import MathScoutError

QUERY = "pythagorean theorem $a^2+b^2=c^2$"
QUESTION = "Why is $a^2+b^2=c^2$ for a right triangle?"
CLI = [sys.executable, "-m", "mathscout.cli"]
MODES = ("bm25", "structure", "auto", "ask")  # "ask": `mathscout ask --no-llm`
COLD_TARGET = {"bm25": 3.0, "structure": 3.0, "auto": 3.0}  # issue 20; issue 35: the first structure search ≤ 3 s
SERVICE_TARGET = 0.3  # issue 35: any mode through the running service, p50
THROUGH = "through the service at"  # the command line's MATHSCOUT_DEBUG line when a service answered


@dataclass
class Timing:
    """Runs of one command: wall seconds, CPU seconds of the process, the load average after each run."""

    seconds: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    load: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    def cells(self) -> str:
        return f"{self.median:>7.2f} {statistics.median(self.cpu):>6.2f} {statistics.median(self.load):>5.1f}"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(command: list[str], env: dict[str, str], timing: Timing | None = None, cwd: Path | None = None) -> str:
    """Run one command (timed into `timing`); its stderr. A failure stops the benchmark with its last line."""
    started, cpu_before = time.perf_counter(), _children_cpu()
    result = subprocess.run(command, check=False, capture_output=True, text=True, env=env, timeout=900, cwd=cwd)
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        raise MathScoutError(f"{' '.join(command[3:])} failed: {result.stderr.strip().splitlines()[-1:]}")
    if timing is not None:
        timing.seconds.append(seconds)
        timing.cpu.append(_children_cpu() - cpu_before)
        timing.load.append(os.getloadavg()[0])
    return result.stderr


def _timed(command: list[str], env: dict[str, str], runs: int, cwd: Path | None = None) -> Timing:
    timing = Timing()
    for _ in range(runs):
        _run(command, env, timing, cwd)
    return timing


def _command(mode: str, index: Path) -> list[str]:
    if mode == "ask":
        return CLI + ["ask", "--quiet", "--no-llm", "--index", str(index), "--k", "10", QUESTION]
    return CLI + ["search", "--quiet", "--index", str(index), "--mode", mode, "--k", "10", QUERY]


def _warm(index: Path, mode: str, runs: int) -> list[float]:
    """The same search repeated in this process, after a first one that opens everything."""
    from mathscout.agent.planned import open_mode
    from mathscout.tools.searching import SearchRequest, run_search
    from mathscout.tools.toolbox import ToolBox

    toolbox = ToolBox(index)
    request = SearchRequest(QUERY, mode, 10).checked()
    run_search(request, toolbox, open_mode)
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        run_search(request, toolbox, open_mode)
        times.append(time.perf_counter() - started)
    return times


def _code_copy(where: Path) -> Path:
    """A copy of the installed code (linked folders copied, numba caches and modification times kept)."""
    import mathscout

    shutil.copytree(Path(mathscout.__file__).resolve().parent, where / "mathscout")
    return where


def _through_service(index: Path, runs: int) -> dict[str, Timing]:
    """Per mode: new command-line processes while a background service serves `index` (each one checked to have
    gone through it)."""
    with tempfile.TemporaryDirectory(prefix="mathscout-startup-") as tmp:
        code = _code_copy(Path(tmp))
        env = {
            **os.environ,
            "NO_COLOR": "1",
            "MATHSCOUT_HOME": str(Path(tmp) / "home"),
            "PYTHONPATH": str(code),
            "MATHSCOUT_DEBUG": "1",
        }
        env.pop("MATHSCOUT_INDEX", None)
        _run(CLI + ["serve", "--background", "--no-llm", "--index", str(index)], env, cwd=code)
        try:
            timings = {}
            for mode in MODES:
                command = _command(mode, index)
                _run(command, env, cwd=code)  # the first request of a mode after the warm-up: not timed
                timing = Timing()
                for _ in range(runs):
                    said = _run(command, env, timing, cwd=code)
                    if THROUGH not in said:
                        reason = [line for line in said.splitlines() if line.startswith("mathscout: ")]
                        raise MathScoutError(f"{mode}: the command line did not use the service ({reason})")
                timings[mode] = timing
            return timings
        finally:
            _run(CLI + ["serve", "--stop"], env, cwd=code)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="mathscout bench startup", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--runs", type=int, default=5, choices=range(1, 21), metavar="N", help="runs per measure (1–20)"
    )
    parser.add_argument("--index", type=Path, help="index directory (default: the demo index)")
    parser.add_argument("--no-service", action="store_true", help="skip the through-service measures")
    parser.add_argument("--no-compile", action="store_true", help="skip the kernel-compilation measure (about 15 s)")
    args = parser.parse_args(argv)
    from mathscout.config import default_index_path
    from mathscout.retrievers.indexing import ensure_demo_index

    index = Path(args.index or ensure_demo_index(default_index_path())).resolve()
    env = {**os.environ, "NO_COLOR": "1"}
    started_load = os.getloadavg()[0]
    other: list[tuple[str, Timing, float | None]] = [
        ("mathscout --help", _timed(CLI + ["--help"], env, args.runs), 0.5),
        ("mathscout --version", _timed(CLI + ["--version"], env, args.runs), 0.5),
    ]
    cold = {mode: _timed(_command(mode, index) + ["--local"], env, args.runs) for mode in MODES}
    service = {} if args.no_service else _through_service(index, args.runs)
    warm = [
        (f"the same search again in one process (warm), {mode}", _warm(index, mode, max(args.runs, 5)))
        for mode in MODES
        if mode != "ask"
    ]
    if not args.no_compile:
        with tempfile.TemporaryDirectory() as empty_cache:
            compile_env = {**env, "NUMBA_CACHE_DIR": empty_cache}
            other.append(
                (
                    "first structure search after installation (kernels compile)",
                    _timed(_command("structure", index) + ["--local"], compile_env, 1),
                    None,
                )
            )

    print(
        f"start-up over {index} ({os.cpu_count()} cores; load {started_load:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end); query {QUERY!r}, question {QUESTION!r}"
    )
    print(f"median of {args.runs} new processes each; load: the 1-minute load average after each run (median)\n")
    print(
        f"{'command':<26} {'cold s':>7} {'cpu s':>6} {'load':>5}   {'service s':>9} {'cpu s':>6} {'load':>5}   "
        f"{'cold/service':>12}   {'targets (cold / service)':>24}"
    )
    for mode in MODES:
        name = "ask --no-llm" if mode == "ask" else f"search --mode {mode}"
        through = service.get(mode)
        served = (
            f"{through.median:>9.2f} {statistics.median(through.cpu):>6.2f} {statistics.median(through.load):>5.1f}"
            if through
            else f"{'—':>9} {'':>6} {'':>5}"
        )
        ratio = f"{cold[mode].median / through.median:>11.1f}×" if through else f"{'':>12}"
        cold_target = f"{COLD_TARGET[mode]:.1f} s" if mode in COLD_TARGET else "—"
        print(
            f"{name:<26} {cold[mode].cells()}   {served}   {ratio}   {cold_target + f' / {SERVICE_TARGET:.1f} s':>24}"
        )
    print(f"\n{'measure':62} {'median s':>8} {'cpu s':>6} {'load':>5} {'target':>7} {'ratio':>6}")
    for measure, timing, target in other:
        ratio = f"{timing.median / target:>6.2f}" if target else ""
        print(
            f"{measure:62} {timing.median:>8.2f} {statistics.median(timing.cpu):>6.2f} "
            f"{statistics.median(timing.load):>5.1f} {f'{target:.1f}' if target else '':>7} {ratio:>6}"
        )
    for measure, seconds in warm:
        print(f"{measure:62} {statistics.median(seconds):>8.3f}")
