"""Progress bars only where a person watches: in a command (the command line and the processes it starts), on a
terminal (stderr a TTY), not under --quiet. Every progress bar of MathScout is made here (`bar`), so a library call,
a pipe or a log file never gets one. `status` says what a long wait is (compiling the kernels, once) the same way:
on the terminal of a command, else as a log line.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable
from typing import Any

from mathscout.settings import settings

log = logging.getLogger(__name__)


def shown() -> bool:
    """Whether progress is shown here: a command, on a terminal, not --quiet."""
    try:
        current = settings()
    except Exception:  # noqa: BLE001 — unreadable settings are said elsewhere; no bar meanwhile
        return False
    if not current.command_line or current.quiet or not logging.getLogger("mathscout").isEnabledFor(logging.WARNING):
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # stderr replaced or closed
        return False


def bar(iterable: Iterable[Any] | None = None, disable: bool | None = False, **options: Any):
    """A tqdm progress bar on stderr (tqdm's options), disabled unless `shown()` (or with `disable`); a disabled
    one is used the same way (it still iterates and counts)."""
    from tqdm import tqdm

    options.setdefault("file", sys.stderr)
    options.setdefault("mininterval", 1.0)
    return tqdm(iterable, disable=bool(disable) or not shown(), **options)


def status(message: str) -> None:
    """A line about a wait: on the terminal of a command, else logged (info)."""
    if shown():
        print(message, file=sys.stderr, flush=True)
    else:
        log.info(message)
