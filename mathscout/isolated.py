"""Run one function in a fresh (spawned) Python process and return its result or raise its error.

Whatever the function held — a JVM and its heap, a model, a fragmented allocator — goes back to the system when it
returns, so a caller running several heavy steps one after another holds only the largest of them at once. The
child dies with its caller (Linux `PR_SET_PDEATHSIG`): a killed build leaves no process writing behind it.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import pickle
import signal
import sys
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

from mathscout.errors import MathScoutError

T = TypeVar("T")
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Have the kernel kill this process when its parent dies (Linux; a no-op elsewhere)."""
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
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
    except Exception:
        text = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, OSError) and exc.errno is not None:
            return OSError(exc.errno, text)
        return MathScoutError(text)


def _child(sender, function: Callable[..., Any], args: tuple) -> None:
    die_with_parent()
    try:
        message = ("ok", function(*args))
    except BaseException as exc:  # the caller re-raises it
        message = ("error", _plain(exc), traceback.format_exc())
    sender.send(message)
    sender.close()


def run_isolated(function: Callable[..., T], *args: Any, name: str = "mathscout-step") -> T:
    """`function(*args)` run in a spawned process (never forked: a JVM or threads may live in this one); its
    arguments and result must pickle. Its exception is raised here, with the child's traceback as a note."""
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(sender, function, args), name=name)
    try:
        process.start()
        sender.close()
        try:
            message = receiver.recv()
        except EOFError:
            process.join()
            code = process.exitcode
            how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
            hint = " (out of memory?)" if code == -signal.SIGKILL else ""
            raise MathScoutError(f"the {name} process {how} before it finished{hint}") from None
        process.join()
        if message[0] == "error":
            _, error, child_traceback = message
            error.add_note(f"raised in the {name} process:\n{child_traceback}")
            raise error
        return message[1]
    finally:
        receiver.close()
        if process.is_alive():
            process.kill()
            process.join()
