"""Run one function in a fresh Python process and return its result or raise its error.

Whatever the function held — a JVM and its heap, a model, a fragmented allocator — goes back to the system when it
returns, so a caller running several heavy steps one after another holds only the largest of them at once. The
child is a new interpreter (never a fork: a JVM or threads may live in the caller) that does not re-run the caller's
script, so a user's script needs no `if __name__ == "__main__"` guard. It dies with its caller (Linux
`PR_SET_PDEATHSIG`): a killed build leaves no process writing behind it.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import pickle
import signal
import subprocess
import sys
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

from mathscout.errors import MathScoutError

T = TypeVar("T")
_PR_SET_PDEATHSIG = 1
# The child's first words: read the caller's import path, then run the step (mathscout may be found only through it).
_BOOTSTRAP = (
    "import pickle, sys; sys.path[:0] = pickle.load(sys.stdin.buffer); "
    "from mathscout.isolated import _run_step; _run_step(int(sys.argv[1]), int(sys.argv[2]))"
)


def die_with_parent(parent: int | None = None) -> None:
    """Have the kernel kill this process when its parent (pid `parent`; by default the multiprocessing parent or
    else the current one) dies (Linux; a no-op elsewhere). A parent already gone ends this process at once."""
    if not sys.platform.startswith("linux"):
        return
    if parent is None:
        spawner = multiprocessing.parent_process()
        parent = spawner.pid if spawner is not None else os.getppid()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def _plain(exc: BaseException) -> BaseException:
    """`exc` if it survives pickling, else an exception of a plain type with its text (an OSError keeps its errno:
    a full disk stays recognisable)."""
    try:
        return pickle.loads(pickle.dumps(exc))
    except Exception:  # noqa: BLE001 — whatever does not pickle
        text = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, OSError) and exc.errno is not None:
            return OSError(exc.errno, text)
        return MathScoutError(text)


def _run_step(result_fd: int, caller: int) -> None:
    """In the child: read (function, args) from stdin, run it, write ("ok", result) or ("error", exc, traceback)."""
    die_with_parent(caller)
    from mathscout.logs import configure_child

    configure_child()  # logs as the command line that started it, if one did
    message: tuple[Any, ...]
    try:
        function, args = pickle.load(sys.stdin.buffer)
        message = ("ok", function(*args))
    except BaseException as exc:  # noqa: BLE001 — the caller re-raises it
        message = ("error", _plain(exc), traceback.format_exc())
    with os.fdopen(result_fd, "wb") as out:
        pickle.dump(message, out)


def run_isolated(function: Callable[..., T], *args: Any, name: str = "mathscout-step") -> T:
    """`function(*args)` run in a new Python process; the function must be importable by module and name, and its
    arguments and result must pickle. Its exception is raised here, with the child's traceback as a note."""
    payload = pickle.dumps(sys.path) + pickle.dumps((function, args))
    result_read, result_write = os.pipe()
    try:
        process = subprocess.Popen(
            [sys.executable, "-c", _BOOTSTRAP, str(result_write), str(os.getpid())],
            stdin=subprocess.PIPE,
            pass_fds=(result_write,),
        )
    except BaseException:
        os.close(result_read)
        raise
    finally:
        os.close(result_write)
    assert process.stdin is not None  # opened as a pipe
    try:
        try:
            process.stdin.write(payload)
            process.stdin.close()
        except BrokenPipeError:  # it died at once: its exit code says how
            pass
        with os.fdopen(result_read, "rb") as results:
            data = results.read()
        code = process.wait()
        if not data:
            how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
            hint = " (out of memory?)" if code == -signal.SIGKILL else ""
            raise MathScoutError(f"the {name} process {how} before it finished{hint}")
        message = pickle.loads(data)
        if message[0] == "error":
            _, error, child_traceback = message
            error.add_note(f"raised in the {name} process:\n{child_traceback}")
            raise error
        return message[1]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
