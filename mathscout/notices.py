"""Notices: one-line things said along the way (a query cut to length, a formula also searched in another form,
an index opened read-only). They are data, not output:

- every notice goes to the `mathscout` logger (INFO) and to the collectors of the calls that are running
  (`with collecting() as notices:` — a context variable, so each thread or task collects its own);
- they reach stderr only where an entry point asked for that (`show_on_stderr()`: the command line does) and no
  collector takes them (its owner shows or returns them), never from a library call, never under `--quiet`.

stdout carries results only (hits, answers, JSON).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from mathscout.settings import settings
from mathscout.terminal import printable

log = logging.getLogger("mathscout")
_collectors: ContextVar[tuple[list[str], ...]] = ContextVar("mathscout_notice_collectors", default=())


def quiet() -> bool:
    return settings().quiet


def set_quiet() -> None:
    """Silence notices and progress bars in this process and the ones it starts (tqdm reads TQDM_DISABLE)."""
    os.environ["MATHSCOUT_QUIET"] = "1"
    os.environ["TQDM_DISABLE"] = "1"
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"  # model loading bars of transformers / sentence-transformers
    os.environ["TRANSFORMERS_VERBOSITY"] = "error"


def show_on_stderr() -> None:
    """Print notices on stderr from now on, in this process and the ones it starts (the command line's choice)."""
    os.environ["MATHSCOUT_NOTICES_ON_STDERR"] = "1"  # read back through mathscout.settings


def notice(message: str) -> None:
    """Say one line: logged, handed to every running collector, else printed on stderr where an entry point asked."""
    log.info(message)
    sinks = _collectors.get()
    for sink in sinks:
        sink.append(message)
    if not sinks and settings().notices_on_stderr and not quiet():
        print(printable(message), file=sys.stderr, flush=True)


@contextmanager
def collecting() -> Iterator[list[str]]:
    """The notices said inside the block (in this thread or task), in order; the caller shows or returns them."""
    sink: list[str] = []
    token = _collectors.set((*_collectors.get(), sink))
    try:
        yield sink
    finally:
        _collectors.reset(token)
