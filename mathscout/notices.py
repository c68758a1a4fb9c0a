"""Notices: one-line things said along the way (a query cut to length, a formula also searched in another form,
an index opened read-only). They are data and diagnostics, not output:

- every notice goes to the collectors of the calls that are running (`with collecting() as notices:` — a context
  variable, so each thread or task collects its own): a search result or an answer carries them as `notices`, and
  its owner shows them with the result (on stdout, in `--json`, in the page);
- and to the logger of the package that said it (`mathscout.<package>`): INFO, or WARNING for what a user must act
  on (`warning()`: a topic left out of a run, a component left out of an index); a collected notice is logged at
  INFO at most, since the result shows it. A library call prints nothing (mathscout/logs.py); the command line
  shows warnings on stderr, and the rest with -v or MATHSCOUT_LOG.

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

_collectors: ContextVar[tuple[list[str], ...]] = ContextVar("mathscout_notice_collectors", default=())


def quiet() -> bool:
    return settings().quiet


def set_quiet() -> None:
    """Silence notices and progress bars in this process and the ones it starts (tqdm reads TQDM_DISABLE)."""
    os.environ["MATHSCOUT_QUIET"] = "1"
    os.environ["TQDM_DISABLE"] = "1"
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"  # model loading bars of transformers / sentence-transformers
    os.environ["TRANSFORMERS_VERBOSITY"] = "error"


def _logger(depth: int) -> logging.Logger:
    """The logger of the module `depth` frames up: `mathscout.<package>.<module>`, else `mathscout`."""
    name = sys._getframe(depth).f_globals.get("__name__", "")
    return logging.getLogger(name if name == "mathscout" or name.startswith("mathscout.") else "mathscout")


def notice(message: str, level: int = logging.INFO, _depth: int = 2) -> None:
    """Say one line: handed to every running collector, and logged (`level`, at most INFO when collected) to the
    logger of the caller's package."""
    sinks = _collectors.get()
    for sink in sinks:
        sink.append(message)
    _logger(_depth).log(min(level, logging.INFO) if sinks else level, message, stacklevel=_depth)


def warning(message: str) -> None:
    """A notice a user must act on (a run without some topics, an index without a component): shown on stderr by
    the command line unless a collector takes it (its owner shows it with the result)."""
    notice(message, logging.WARNING, _depth=3)


@contextmanager
def collecting() -> Iterator[list[str]]:
    """The notices said inside the block (in this thread or task), in order; the caller shows or returns them."""
    sink: list[str] = []
    token = _collectors.set((*_collectors.get(), sink))
    try:
        yield sink
    finally:
        _collectors.reset(token)
