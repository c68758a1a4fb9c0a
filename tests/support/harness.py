"""The hostile-input suite's harness: run the real `mathscout` command or a real `mathscout serve` on 127.0.0.1,
measure the process tree's peak memory, and check that a failure is clean and changed nothing on disk.

A case is one function call:

    outcome = run_measured(["index", "--input", str(bad), "--index", str(tmp_path / "idx")], tmp_path)
    assert_clean_refusal(outcome)                   # exit 2, one 'mathscout …: error:' line, no traceback
    assert outcome.peak_mib < MEMORY_BOUND_MIB      # measured by sampling the whole process tree

    status, headers, body = server.request("POST", "/api/ask", {"question": "\\ud800"})
    assert_http_error(status, body, 400)            # 4xx, JSON {"error": one line}
    chat = page_ask(server, "Why is $a^2+b^2=c^2$?", use_llm=True)   # the page's own event, as a browser sends it
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.support.cli import MATHSCOUT, REPO, env, one_line_error, stop

MEMORY_BOUND_MIB = 1536  # no build or query over hostile input may hold more than this at once (issue 32: ≤ 1.5 GB)


@dataclass(frozen=True)
class Outcome:
    """A finished `mathscout` run: exit code, output, and the peak resident memory of its process tree."""

    returncode: int
    stdout: str
    stderr: str
    peak_mib: float
    seconds: float


def run_measured(
    args: list[str], home: Path, timeout: float = 600, extra_env: dict | None = None, stdin: str | None = None
) -> Outcome:
    """Run `mathscout ARGS` in a fresh process with MATHSCOUT_HOME=home, sampling its process tree's RSS every
    50 ms (the tree: builds run each component in a child process)."""
    from mathscout.usage import tree_rss_mib

    started = time.perf_counter()
    process = subprocess.Popen(
        MATHSCOUT + args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        text=True,
        env={**env(home), **(extra_env or {})},
        cwd=REPO,
        start_new_session=True,
    )
    peak = [0.0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            with contextlib.suppress(OSError):
                peak[0] = max(peak[0], tree_rss_mib(process.pid))
            done.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        out, err = process.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:  # the whole group: a build's component processes and workers too
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        raise AssertionError(f"mathscout {' '.join(args)[:200]} ran over {timeout} s:\n{err[-2000:]}") from None
    finally:
        done.set()
        sampler.join()
    return Outcome(process.returncode, out, err, peak[0], time.perf_counter() - started)


def assert_clean_refusal(outcome: Outcome) -> str:
    """Exit 2, no traceback, exactly one 'mathscout[ command]: error: …' line on stderr, nothing on stdout."""
    line = one_line_error(subprocess.CompletedProcess([], outcome.returncode, outcome.stdout, outcome.stderr))
    assert outcome.stdout.strip() == "", outcome.stdout[-1000:]
    return line


def refused_unchanged(index: Path, command: Sequence[str], home: Path, ran: Callable[[], bool] = lambda: False) -> str:
    """Run `command` (its `{index}` filled in) against a damaged or crafted `index`: no payload ran (`ran()`), one
    clean error line, nothing changed on disk, memory under the bound. The error line."""
    before = snapshot(index)
    outcome = run_measured([arg.format(index=index) for arg in command], home)
    assert not ran(), "a payload in the index ran"
    line = assert_clean_refusal(outcome)
    assert snapshot(index) == before
    assert outcome.peak_mib < MEMORY_BOUND_MIB
    return line


def assert_no_crash(outcome: Outcome) -> None:
    """Exit 0 or a clean refusal; never an internal error or a traceback."""
    assert "Traceback" not in outcome.stderr, outcome.stderr[-2000:]
    assert "internal error" not in outcome.stderr, outcome.stderr[-2000:]
    if outcome.returncode != 0:
        assert_clean_refusal(outcome)


def snapshot(folder: Path) -> dict[str, tuple[int, str]]:
    """Every file below `folder` (links not followed) with its size and SHA-256: compare before and after."""
    files = {}
    for path in sorted(Path(folder).rglob("*")):
        if path.is_file() and not path.is_symlink():
            files[path.relative_to(folder).as_posix()] = (
                path.stat().st_size,
                hashlib.sha256(path.read_bytes()).hexdigest(),
            )
    return files


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def assert_http_error(status: int, body: bytes, expected: int | None = None) -> str:
    """A refused request: 4xx (or `expected`), a JSON object {"error": one line}; the message is returned."""
    if expected is not None:
        assert status == expected, (status, body[:500])
    else:
        assert 400 <= status < 500, (status, body[:500])
    data = json.loads(body)
    assert isinstance(data, dict) and isinstance(data.get("error"), str), body[:500]
    assert data["error"] and "\n" not in data["error"] and "Traceback" not in data["error"], data
    return data["error"]


class Server:
    """A real `mathscout serve` subprocess on 127.0.0.1 (a free port), for as long as the `with` block lasts."""

    def __init__(
        self,
        home: Path,
        *args: str,
        auth: str | None = None,
        timeout: float = 300,
        extra_env: dict | None = None,
        llm: bool = False,
    ):
        """`llm`: the server may call the LLM that `extra_env` names (OPENAI_BASE_URL); else it runs with --no-llm."""
        self.home, self.auth, self.timeout = Path(home), auth, timeout
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        no_llm = [] if llm else ["--no-llm"]
        self.args = ["serve", "--port", str(self.port), *no_llm, *(["--auth", auth] if auth else []), *args]
        self.extra_env = extra_env or {}
        self.log = self.home / f"serve-{self.port}.log"
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> Server:
        self.home.mkdir(parents=True, exist_ok=True)
        environment = {**env(self.home), "PYTHONUNBUFFERED": "1", **self.extra_env}
        for name in ("MATHSCOUT_INDEX", "OPENAI_API_KEY", "OPENAI_BASE_URL", "MATHSCOUT_AUTH"):
            if name not in self.extra_env:
                environment.pop(name, None)
        with open(self.log, "w") as out:
            self.process = subprocess.Popen(
                MATHSCOUT + self.args, env=environment, stdout=out, stderr=subprocess.STDOUT, cwd=REPO
            )
        deadline = time.monotonic() + self.timeout
        while True:
            assert self.process.poll() is None, f"serve exited:\n{self.log_text()[-3000:]}"
            try:
                if self.request("GET", "/api/health", login=self.auth)[0] == 200:
                    return self
            except OSError:
                pass
            assert time.monotonic() < deadline, f"no API within {self.timeout} s:\n{self.log_text()[-3000:]}"
            time.sleep(0.5)

    def __exit__(self, *exc) -> None:
        if self.process is not None:
            stop(self.process)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def request(
        self,
        method: str,
        path: str,
        body: dict | bytes | str | None = None,
        login: str | None = None,
        headers: dict | None = None,
        timeout: float = 120,
    ) -> tuple[int, dict, bytes]:
        """One HTTP request; (status, lower-cased headers, body bytes), whatever the status."""
        data = (
            body.encode()
            if isinstance(body, str)
            else body
            if isinstance(body, bytes)
            else (json.dumps(body).encode() if body is not None else None)
        )
        sent = {"Content-Type": "application/json"} if data is not None else {}
        if login:
            sent["Authorization"] = "Basic " + base64.b64encode(login.encode()).decode()
        sent.update(headers or {})
        request = urllib.request.Request(self.url + path, data=data, headers=sent, method=method)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read()


def page_ask(
    server: Server,
    question: str,
    *,
    use_llm: bool = False,
    index: str | None = None,
    headers: dict | None = None,
    timeout: float = 120,
) -> str:
    """Ask a server without a login through the chat page's own event (Gradio's call API, every input as the page's
    /config gives it, as a browser's session sends it): the text of its event stream (the chat, results, trace)."""
    sent = {"Content-Type": "application/json", **(headers or {})}

    def call(method: str, path: str, body: dict | None = None) -> bytes:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(server.url + path, data=data, headers=sent, method=method)
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.read()

    config = json.loads(call("GET", "/config"))
    components = {c["id"]: c.get("props", {}) for c in config["components"]}
    event = next(d for d in config["dependencies"] if d.get("api_name") == "ask")
    given = {"ms-question": question, "ms-llm": use_llm, **({"ms-index": index} if index else {})}
    data = [given.get(components[i].get("elem_id"), components[i].get("value")) for i in event["inputs"]]
    started = json.loads(call("POST", "/gradio_api/call/ask", {"data": data}))
    return call("GET", f"/gradio_api/call/ask/{started['event_id']}").decode("utf-8", errors="replace")


def python() -> str:
    return sys.executable


__all__ = [
    "MEMORY_BOUND_MIB",
    "Outcome",
    "Server",
    "assert_clean_refusal",
    "assert_http_error",
    "assert_no_crash",
    "free_port",
    "os",
    "page_ask",
    "run_measured",
    "snapshot",
]
