"""MathScout's diagnostics go to the standard `logging` module, one logger per package under `mathscout`
(`logging.getLogger(__name__)`: `mathscout.index.builder`, `mathscout.retrievers.rewrite`, …).

A library call configures nothing: the `mathscout` logger has a `NullHandler` (mathscout/__init__.py), so a search
or an answer that succeeded prints nothing; an application shows the logs as it shows any library's
(`logging.basicConfig(level=logging.INFO)`). The command line configures logging once (`configure`): the level from
`--quiet` (error), `-v` (info), `-vv` (debug), else `MATHSCOUT_LOG`, else warning; plain lines on stderr, a warning
prefixed `warning:`. It hands the level down to the processes it starts (`MATHSCOUT_LOG`, `MATHSCOUT_COMMAND_LINE`),
whose `configure_child` logs the same way.
"""

from __future__ import annotations

import logging
import os
import sys

from mathscout.errors import MathScoutError
from mathscout.settings import settings

LOGGER = "mathscout"
LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


class _Stderr(logging.StreamHandler):
    """A handler writing to the `sys.stderr` of the moment (a test or a notebook may replace it)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


class _Plain(logging.Formatter):
    """MathScout's lines as they are (`warning: …` for a warning); another library's named; control characters
    shown, never obeyed (a line may quote a document or a query)."""

    def format(self, record: logging.LogRecord) -> str:
        from mathscout.terminal import printable

        text = record.getMessage()
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            text = f"{text}\n{record.exc_text}"
        level = record.levelname.lower()
        if record.name != LOGGER and not record.name.startswith(LOGGER + "."):
            text = f"{record.name}: {level}: {text}"
        elif record.levelno >= logging.WARNING and not text.startswith(f"{level}:"):
            text = f"{level}: {text}"
        return printable(text)


def level_named(name: str | None) -> int:
    """The level MATHSCOUT_LOG names (unset: warning); MathScoutError for another word."""
    if not name:
        return logging.WARNING
    try:
        return LEVELS[name.strip().lower()]
    except KeyError:
        raise MathScoutError(
            f"MATHSCOUT_LOG is '{name}', not one of {', '.join(LEVELS)}: see docs/settings.md"
        ) from None


def configure(verbosity: int = 0, quiet: bool = False) -> int:
    """The command line's logging (once per command; again replaces it): --quiet → error, -v → info, -vv → debug,
    else MATHSCOUT_LOG, else warning. Handed down to the processes it starts. Returns the level."""
    if quiet:
        level = logging.ERROR
    elif verbosity:
        level = logging.INFO if verbosity == 1 else logging.DEBUG
    else:
        level = level_named(settings().log)
    os.environ["MATHSCOUT_LOG"] = logging.getLevelName(level).lower()  # read back through mathscout.settings
    os.environ["MATHSCOUT_COMMAND_LINE"] = "1"
    _install(level)
    return level


def configure_child() -> None:
    """In a process MathScout started (mathscout.isolated): log as the command line that started it, if one did."""
    try:
        current = settings()
        if current.command_line:
            _install(level_named(current.log))
    except MathScoutError:  # the parent said it already
        pass


def _install(level: int) -> None:
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, _Stderr)]:
        root.removeHandler(handler)
    handler = _Stderr()
    handler.setFormatter(_Plain())
    root.addHandler(handler)
    # other libraries: their warnings (errors under --quiet); MathScout's own at the level asked
    root.setLevel(max(level, logging.WARNING))
    logging.getLogger(LOGGER).setLevel(level)
    logging.captureWarnings(True)  # a Python warning that escaped its narrow suppression is a log line too


def reset() -> None:
    """Undo `configure` in this process (the tests that run the command line in-process)."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, _Stderr)]:
        root.removeHandler(handler)
    root.setLevel(logging.WARNING)
    logging.getLogger(LOGGER).setLevel(logging.NOTSET)
    logging.captureWarnings(False)
    for name in ("MATHSCOUT_LOG", "MATHSCOUT_COMMAND_LINE"):
        os.environ.pop(name, None)


def shows(level: int) -> bool:
    """Whether MathScout's logs at `level` are shown (by the command line's handler or the application's)."""
    return logging.getLogger(LOGGER).isEnabledFor(level)
