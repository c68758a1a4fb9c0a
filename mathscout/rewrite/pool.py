"""A reusable pool of rewrite workers (`worker.py`): wall-clock deadlines, kill and respawn.

Each worker is a child process that has SymPy imported already, so a query pays no start-up. The
parent sends one request, reads the forms as they arrive, and at the deadline kills the worker
(SIGKILL), keeps the forms it already got, and starts a replacement at once. The child enforces its own
CPU-time and address-space limits (`resource.setrlimit`), so even a call the parent stopped waiting for
cannot run away. Start-up (importing SymPy) is not charged to a request's deadline.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

from mathscout.settings import settings

STARTUP_SECONDS = 60.0  # importing SymPy on a busy machine


@dataclass
class WorkerReply:
    """What one request produced: forms (latex, rule) in arrival order, and why it stopped early, if it did."""

    forms: list[tuple[str, str]] = field(default_factory=list)
    error: str | None = None  # the worker could not read the formula
    stopped: str | None = None  # the deadline, a crash or a resource limit ended the request
    skipped: dict[str, str] = field(default_factory=dict)
    result: str | None = None  # a computation's LaTeX result (requests with an `op`)
    action: str | None = None  # what the computation did ("evaluated", "solved", …)


class RewriteWorker:
    """One child process speaking the JSON-lines protocol of `worker.py`."""

    def __init__(self, memory_mb: int | None = None):
        memory_mb = memory_mb or settings().rewrite_memory_mb
        self.process = subprocess.Popen(
            [sys.executable, "-m", "mathscout.rewrite.worker", str(memory_mb)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self._buffer = b""
        self.ready = False

    def _read(self, deadline: float) -> dict | None:
        """The next message, or None at the deadline or when the worker has died."""
        assert self.process.stdout is not None  # opened as a pipe
        fd = self.process.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            readable, _, _ = select.select([fd], [], [], remaining)
            if not readable:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return None  # EOF: the worker died (SIGXCPU, out of memory, …)
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def wait_ready(self) -> bool:
        if not self.ready:
            message = self._read(time.monotonic() + STARTUP_SECONDS)
            self.ready = bool(message and message.get("ready"))
        return self.ready

    def run(self, latex: str, rules: list[str] | None, seconds: float, op: str = "rewrite") -> WorkerReply:
        reply = WorkerReply()
        if not self.wait_ready():
            reply.stopped = "the rewrite worker did not start"
            return reply
        request = json.dumps({"latex": latex, "rules": rules, "seconds": seconds, "op": op}) + "\n"
        assert self.process.stdin is not None  # opened as a pipe
        try:
            self.process.stdin.write(request.encode())
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            reply.stopped = "the rewrite worker had stopped"
            return reply
        deadline = time.monotonic() + seconds
        while True:
            message = self._read(deadline)
            if message is None:
                alive = self.process.poll() is None
                reply.stopped = (
                    f"time limit of {seconds:g} s reached"
                    if alive
                    else "the rewrite worker hit its CPU or memory limit"
                )
                return reply
            if "form" in message:
                reply.forms.append((message["form"], message["rule"]))
            elif "result" in message:
                reply.result, reply.action = message["result"], message.get("action")
            elif message.get("done"):
                reply.error = message.get("error")
                reply.skipped = message.get("skipped") or {}
                return reply

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            assert stream is not None  # both opened as pipes
            with contextlib.suppress(OSError):
                stream.close()


class WorkerPool:
    """`size` warm workers; `run` borrows one, and replaces it when its request did not finish cleanly."""

    def __init__(self, size: int = 1, memory_mb: int | None = None):
        self.memory_mb = memory_mb or settings().rewrite_memory_mb
        self._idle = [RewriteWorker(memory_mb) for _ in range(size)]
        self._all = list(self._idle)
        self._available = threading.Condition()
        self.restarts = 0

    def run(self, latex: str, rules: list[str] | None, seconds: float, op: str = "rewrite") -> WorkerReply:
        """One request on a borrowed worker: rewrite with `rules` (None: all), or compute when `op` names an operation."""
        with self._available:
            while not self._idle:
                self._available.wait()
            worker = self._idle.pop()
        reply = worker.run(latex, rules, seconds, op)
        if reply.stopped is not None or not worker.alive:
            worker.kill()
            replacement = RewriteWorker(self.memory_mb)  # starts importing SymPy right away
            self.restarts += 1
            with self._available:
                self._all = [w for w in self._all if w is not worker] + [replacement]
            worker = replacement
        with self._available:
            self._idle.append(worker)
            self._available.notify()
        return reply

    def close(self) -> None:
        with self._available:
            for worker in self._all:
                worker.kill()
            self._all, self._idle = [], []


_DEFAULT: WorkerPool | None = None
_DEFAULT_LOCK = threading.Lock()


def default_pool() -> WorkerPool:
    """The process-wide pool (one worker; `MATHSCOUT_REWRITE_WORKERS` for more), closed at exit."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = WorkerPool(size=max(1, settings().rewrite_workers))
            atexit.register(_DEFAULT.close)
        return _DEFAULT
