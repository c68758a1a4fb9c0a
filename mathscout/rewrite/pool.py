"""A reusable pool of rewrite workers (`worker.py`): deadlines that include the wait, fair turns, kill and respawn.

Each worker is a child process that has SymPy imported already, so a query pays no start-up. The
parent sends one request, reads the forms as they arrive, and at the deadline kills the worker
(SIGKILL), keeps the forms it already got, and starts a replacement at once. The child enforces its own
CPU-time and address-space limits (`resource.setrlimit`), so even a call the parent stopped waiting for
cannot run away. Start-up (importing SymPy) is not charged to a request's deadline.

A request's `seconds` is its whole time limit, the wait for a worker included (issue 42): a caller that gets no
worker in time is told so (`WorkerReply.stopped`) and goes on without SymPy. One warm worker is kept for a client
that holds none (`mathscout.clients.CLIENT`: the HTTP server's client address), so one client's slow computations
never take every worker; waiting requests are served by the fewest workers their client holds, then in order of
arrival. The pool grows to `size` workers with the clients waiting: a spare starts importing SymPy for each waiting
request whose client holds no worker, never for one client's extra requests (they would only burn the CPU that the
others' requests need). (Workers keep the normal CPU priority: lowering a slow request's worker starved it behind every other
process of a busy machine, quick requests included.)
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import json
import os
import select
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from mathscout.clients import CLIENT
from mathscout.settings import settings

STARTUP_SECONDS = 60.0  # importing SymPy on a busy machine
WARM = 2  # workers kept ready while idle (one of them is held back for a client that holds none)
STARTING_AT_ONCE = 2  # SymPy imports under way at once (each takes ~2 s of CPU)
LEAST_SECONDS = 0.05  # a request left with less time than this is not sent to a worker


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

    def run(
        self,
        latex: str,
        rules: list[str] | None,
        seconds: float,
        op: str = "rewrite",
        deadline: float | None = None,
    ) -> WorkerReply:
        """One request: `seconds` of CPU at most, until `deadline` (time.monotonic(); default `seconds` from now)."""
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
        deadline = time.monotonic() + seconds if deadline is None else deadline
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


@dataclass(frozen=True)
class _Turn:
    """A request waiting for a worker: its client and its place in the order of arrival."""

    client: str
    arrived: int


class WorkerPool:
    """Up to `size` workers, `warm` of them kept ready while idle (default: 2, at most `size`). `run` borrows one
    for at most its request's time limit, waiting included (see the module docstring), and replaces a worker
    whose request did not finish cleanly."""

    def __init__(self, size: int = 1, memory_mb: int | None = None, warm: int | None = None):
        self.size = max(1, size)
        self.warm = min(self.size, max(1, WARM if warm is None else warm))
        self.memory_mb = memory_mb or settings().rewrite_memory_mb
        self._lock = threading.Condition()
        self._idle: list[RewriteWorker] = []
        self._busy: dict[RewriteWorker, str] = {}  # worker → the client it works for
        self._starting = 0
        self._turns: list[_Turn] = []
        self._arrivals = itertools.count()
        self._ready_at: float | None = None  # when a first worker was ready: waiting before that is start-up
        self._closed = False
        self.restarts = 0
        with self._lock:
            self._top_up()

    @property
    def workers(self) -> int:
        """Worker processes now: idle, busy and starting."""
        with self._lock:
            return len(self._idle) + len(self._busy) + self._starting

    def run(
        self, latex: str, rules: list[str] | None, seconds: float, op: str = "rewrite", client: str | None = None
    ) -> WorkerReply:
        """One request within `seconds` in all: rewrite with `rules` (None: all), or compute when `op` names an
        operation; `client` (default: `mathscout.clients.CLIENT`) decides its turn."""
        worker, deadline, why = self._borrow(CLIENT.get() if client is None else client, seconds)
        if worker is None:
            return WorkerReply(stopped=why)
        reply = worker.run(latex, rules, seconds, op, deadline=deadline)
        self._give_back(worker, clean=reply.stopped is None and worker.alive)
        return reply

    def _borrow(self, client: str, seconds: float) -> tuple[RewriteWorker | None, float, str]:
        """A ready worker and the request's deadline, or None and why (no worker within the time limit)."""
        turn, arrived = _Turn(client, next(self._arrivals)), time.monotonic()
        with self._lock:
            self._turns.append(turn)
            try:
                while True:
                    if self._closed:
                        return None, 0.0, "the rewrite workers were closed"
                    now = time.monotonic()
                    if self._ready_at is None:  # start-up: not charged to the request
                        if now > arrived + STARTUP_SECONDS or (not self._starting and not self._idle):
                            return None, 0.0, "the rewrite worker did not start"
                        self._lock.wait(arrived + STARTUP_SECONDS - now)
                        continue
                    deadline = max(arrived, self._ready_at) + seconds
                    if deadline - now < LEAST_SECONDS:
                        return None, deadline, f"every SymPy worker was busy for the time limit of {seconds:g} s"
                    if self._next() is turn:
                        worker = self._idle.pop()
                        self._busy[worker] = client
                        return worker, deadline, ""
                    self._top_up()
                    self._lock.wait(deadline - now)
            finally:
                self._turns.remove(turn)
                self._top_up()
                self._lock.notify_all()

    def _next(self) -> _Turn | None:
        """The waiting request an idle worker goes to (under the lock): of those whose client holds the fewest
        workers, the first to arrive; a client that holds one already takes none of the last idle worker."""
        if not self._idle:
            return None
        held = Counter(self._busy.values())
        allowed = [t for t in self._turns if not held[t.client] or len(self._idle) > 1]
        return min(allowed, key=lambda t: (held[t.client], t.arrived), default=None)

    def _give_back(self, worker: RewriteWorker, clean: bool) -> None:
        with self._lock:
            del self._busy[worker]
            keep = clean and not self._closed and (len(self._idle) < self.warm or bool(self._turns))
            if keep:
                self._idle.append(worker)
            self.restarts += not clean
            self._top_up()
            self._lock.notify_all()
        if not keep:
            worker.kill()

    def _top_up(self) -> None:
        """Start workers (under the lock): `warm` in all while idle, and one ready or starting for each waiting
        request whose client holds none and one more, within `size` and STARTING_AT_ONCE."""
        held = Counter(self._busy.values())
        wanted = max(self.warm - len(self._busy), 1 + sum(1 for turn in self._turns if not held[turn.client]))
        while (
            not self._closed
            and len(self._idle) + self._starting < wanted
            and len(self._idle) + len(self._busy) + self._starting < self.size
            and self._starting < STARTING_AT_ONCE
        ):
            self._starting += 1
            threading.Thread(target=self._start, name="mathscout-rewrite-start", daemon=True).start()

    def _start(self) -> None:
        """One worker, imported in this thread and then handed to the idle ones (or killed if the pool closed)."""
        worker: RewriteWorker | None = None
        try:
            worker = RewriteWorker(self.memory_mb)
            ready = worker.wait_ready()
        except OSError:
            ready = False
        with self._lock:
            self._starting -= 1
            if ready and worker is not None and not self._closed:
                self._idle.append(worker)
                self._ready_at = self._ready_at or time.monotonic()
                worker = None
            self._lock.notify_all()
        if worker is not None:
            worker.kill()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            workers = self._idle + list(self._busy)
            self._idle = []
            self._lock.notify_all()
        for worker in workers:
            worker.kill()


_DEFAULT: WorkerPool | None = None
_DEFAULT_LOCK = threading.Lock()


def default_pool() -> WorkerPool:
    """The process-wide pool (up to `MATHSCOUT_REWRITE_WORKERS` workers), closed at exit."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = WorkerPool(size=max(1, settings().rewrite_workers))
            atexit.register(_DEFAULT.close)
        return _DEFAULT
