"""Load on the chat page: N simultaneous browser-like sessions ask questions through Gradio's API.

    mathscout bench ui-load [--sessions 20] [--questions 2] [--timeout 300] [--url http://127.0.0.1:7860/] [--index DIR]

Without --url a server is started on a free 127.0.0.1 port (`mathscout serve --no-llm`, demo index by
default). Every session (its own `gradio_client.Client`, so its own Gradio session and server-side state)
asks `--questions` questions one after another, all sessions at once. Reported: answered/failed requests,
latency to the first streamed update and to the finished answer (p50/p95/max), and an isolation check —
each session's results panel (built from its server-side state) must list only that session's questions.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from mathscout.errors import MathScoutError
from mathscout.settings import settings
from mathscout.ui.app import example_questions

_TAG = re.compile(r"session-(\d+)")
MAX_SESSIONS = 100  # the load is bounded: it always stops by itself
MAX_QUESTIONS = 20
SERVER_START_SECONDS = 900  # warm-up included; a busy shared machine needs minutes


@dataclass
class SessionResult:
    session: int
    latencies: list[float] = field(default_factory=list)
    first_updates: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    leaked: set[int] = field(default_factory=set)  # other sessions' tags seen in this session's state
    answered: int = 0


def _question(session: int, turn: int, examples: list[str]) -> str:
    return f"{examples[(session + turn) % len(examples)]} (session-{session:02d} turn {turn})"


def run_session(
    url: str, session: int, questions: int, examples: list[str], start: threading.Barrier, timeout: float = 300.0
) -> SessionResult:
    from gradio_client import Client

    result = SessionResult(session)
    try:
        client = Client(
            url, verbose=False, analytics_enabled=False, download_files=False, httpx_kwargs={"timeout": timeout}
        )  # a busy server answers its HTTP calls late, not never
    except Exception as exc:  # noqa: BLE001 - reported, not raised: one failed session must not stop the others
        result.failures.append(f"connect: {exc}")
        start.wait()
        return result
    start.wait()
    history: list = []
    for turn in range(questions):
        question = _question(session, turn, examples)
        began = time.perf_counter()
        try:
            job = client.submit(question, history, None, "auto", 10, False, False, api_name="/ask")
            first = None
            while not job.done():
                if first is None and job.outputs():
                    first = time.perf_counter() - began
                if time.perf_counter() - began > timeout:
                    job.cancel()
                    raise TimeoutError(f"no answer within {timeout:.0f} s")
                time.sleep(0.02)
            chat, results, _trace, *_ = job.result()
        except Exception as exc:  # noqa: BLE001
            result.failures.append(f"turn {turn}: {type(exc).__name__}: {exc}")
            continue
        result.latencies.append(time.perf_counter() - began)
        result.first_updates.append(first if first is not None else result.latencies[-1])
        titles = [str((m.get("metadata") or {}).get("title", "")) for m in chat[len(history) :] if isinstance(m, dict)]
        history = chat
        if any(t.startswith("Searched:") for t in titles):
            result.answered += 1
        else:
            result.failures.append(f"turn {turn}: no answer in the chat")
        result.leaked |= {int(t) for t in _TAG.findall(results)} - {session}
        if f"session-{session:02d} turn {turn}" not in results:
            result.failures.append(f"turn {turn}: the results panel does not show this session's question")
    return result


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))] if ordered else float("nan")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(index: Path | None, home: Path) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    command = [sys.executable, "-m", "mathscout.cli", "serve", "--port", str(port), "--no-llm"]
    command += ["--index", str(index)] if index else []
    env = {**os.environ, "MATHSCOUT_HOME": str(settings().home or home)}
    with open(home / "serve.log", "w") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + SERVER_START_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            lines = (home / "serve.log").read_text(errors="replace").strip().splitlines()
            raise MathScoutError(f"the server exited ({process.returncode}): {lines[-1] if lines else 'no output'}")
        try:
            with urllib.request.urlopen(url, timeout=5):
                return process, url
        except OSError:
            time.sleep(0.5)
    process.terminate()
    raise MathScoutError(f"the server did not come up within {SERVER_START_SECONDS} s")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="mathscout bench ui-load", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--questions", type=int, default=2, help="questions per session, asked in turn")
    parser.add_argument("--url", help="a running page (default: start one on a free port)")
    parser.add_argument("--index", type=Path, help="index for the started server (default: the demo index)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds one answer may take (then it fails)")
    args = parser.parse_args(argv)
    if not (1 <= args.sessions <= MAX_SESSIONS and 1 <= args.questions <= MAX_QUESTIONS and args.timeout > 0):
        raise MathScoutError(f"ui-load: --sessions 1–{MAX_SESSIONS}, --questions 1–{MAX_QUESTIONS}, --timeout > 0")
    examples = example_questions(limit=100)
    if not examples:
        raise MathScoutError("no example questions found (mathscout/data/demo_examples.json)")

    process = None
    with tempfile.TemporaryDirectory(prefix="mathscout-ui-load-") as tmp:
        url = args.url
        if not url:
            began = time.perf_counter()
            process, url = start_server(args.index, Path(tmp))
            print(f"server up at {url} in {time.perf_counter() - began:.1f} s (warm-up included)")
        try:
            start = threading.Barrier(args.sessions)
            results: list[SessionResult] = [SessionResult(i) for i in range(args.sessions)]

            def work(i: int) -> None:
                results[i] = run_session(url, i, args.questions, examples, start, args.timeout)

            threads = [threading.Thread(target=work, args=(i,)) for i in range(args.sessions)]
            began = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall = time.perf_counter() - began
            alive = process is None or process.poll() is None
        finally:
            if process is not None:
                process.terminate()
                process.wait(timeout=30)

    latencies = [x for r in results for x in r.latencies]
    firsts = [x for r in results for x in r.first_updates]
    answered = sum(r.answered for r in results)
    failures = [f"session {r.session}: {f}" for r in results for f in r.failures]
    leaks = [f"session {r.session} saw sessions {sorted(r.leaked)}" for r in results if r.leaked]
    requests = args.sessions * args.questions
    print(
        f"{args.sessions} simultaneous sessions × {args.questions} questions = {requests} requests in {wall:.1f} s "
        f"({requests / wall:.2f} answers/s)"
    )
    print(f"answered {answered}/{requests}; failures {len(failures)}; server alive afterwards: {alive}")
    print(f"{'latency (s)':<22}{'p50':>8}{'p95':>8}{'max':>8}")
    for name, values in (("first streamed update", firsts), ("finished answer", latencies)):
        print(
            f"{name:<22}{statistics.median(values) if values else float('nan'):>8.2f}"
            f"{_percentile(values, 0.95):>8.2f}{max(values, default=float('nan')):>8.2f}"
        )
    print("isolation: " + ("OK — every session's state held only its own questions" if not leaks else "; ".join(leaks)))
    for line in failures[:10]:
        print("  " + line)
    if failures or leaks or not alive:
        raise MathScoutError(f"ui-load: {len(failures)} failures, {len(leaks)} leaking sessions, server alive: {alive}")
