"""Text for a terminal: a control character from a document or a query is shown, never obeyed (issue 42 item 5).

A title, id or snippet holding ESC, BEL or a C1 control would otherwise clear the screen, set the window title,
write the clipboard (OSC 52) or plant a hyperlink (OSC 8) when `mathscout search` prints it. `printable` shows each
C0 and C1 control character, DEL and Unicode's bidirectional overrides as a visible escape (`\\x1b`, `\\u202e`),
keeping line breaks and tabs; every printer of the command line writes through it (hits, answers, the trace,
notices, error lines, the search prompt), and `--json` output escapes the same characters as JSON's `\\u…`. The
colours MathScout itself adds are written after its values are made printable. Document ids holding such a
character are refused when an index is built (`has_control`).
"""

from __future__ import annotations

import io
import re
from typing import TextIO, cast

# C0 controls but tab and line feed, DEL, C1 controls, the bidirectional embeddings, overrides and isolates
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_LINE = re.compile("[\t\n]")


def _shown(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: object, lines: bool = True) -> str:
    """`text` (made a str) with every control character shown as an escape; `lines=False` escapes tabs and line
    breaks too (for what must stay on one line)."""
    shown = CONTROL.sub(_shown, str(text))
    return shown if lines else _LINE.sub(_shown, shown)


def has_control(text: str) -> str | None:
    """The first control character of `text` as U+XXXX, or None."""
    found = CONTROL.search(text)
    return f"U+{ord(found.group()):04X}" if found else None


def json_escaped(text: str) -> str:
    """JSON text with the control characters JSON leaves raw (DEL, C1, bidirectional) written as `\\uXXXX`; valid
    JSON, since they can stand only inside its strings."""
    return CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


class _Printable(io.TextIOBase):
    """A text stream that makes everything written to it printable, then hands it to `stream`."""

    def __init__(self, stream: TextIO):
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(printable(text))
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.stream, "encoding", "utf-8")


def printing(stream: TextIO) -> TextIO:
    """`stream` for output that holds no formatting of MathScout's own: everything written is made printable."""
    return stream if isinstance(stream, _Printable) else cast(TextIO, _Printable(stream))


__all__ = ["CONTROL", "has_control", "json_escaped", "printable", "printing"]
