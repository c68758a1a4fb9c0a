"""Files a run writes for a later run to read back (candidate caches, structure dumps, a benchmark's caches): JSON
lines, never pickles, so that such a file handed over by someone else is data and never code. A file that is not one
of ours (another format, a damaged line, an old pickle) is one MathScoutError line naming it and what to do.

The first line is a header (`{"mathscout": KIND, "version": N, …}`), each further line one record. Records are
appended as a run goes (a later line for the same key replaces an earlier one, see the readers); a last line cut by an
interrupted write is passed over, so the run that reads it resumes (and writes the file whole at its next save)."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from mathscout.errors import MathScoutError

T = TypeVar("T")
PICKLE_MARK = b"\x80"  # the first byte of a pickle (protocol 2 and later): the format these files had before


DECODE_ERRORS = (KeyError, IndexError, TypeError, ValueError, AttributeError)  # a record of another shape


@dataclass
class Contents(Generic[T]):
    """A work file as read: its header, its records decoded in order, and whether more may be appended after them
    (the file ends with a whole line; else the next save writes it whole)."""

    header: dict
    records: list[T]
    appendable: bool


class WorkFile:
    """One work file of `kind` (its header's "mathscout" value) at `path`; `remedy` says what to do when it is unusable."""

    def __init__(self, path: Path | str, kind: str, version: int, remedy: str):
        self.path, self.kind, self.version, self.remedy = Path(path), kind, version, remedy

    def error(self, reason: str) -> MathScoutError:
        return MathScoutError(f"the {self.kind} {self.path} is unusable ({reason}): {self.remedy}")

    def read(self, decode: Callable[[Any], T], what: str) -> Contents[T]:
        """The header and each record through `decode` (a record it cannot decode: `error` naming the line as not
        `what`); a last line cut by an interrupted write is passed over."""
        try:
            with open(self.path, "rb") as raw:
                if raw.peek(1)[:1] == PICKLE_MARK:
                    raise self.error(
                        "it is a Python pickle, the format before this version, which can run code when read; "
                        "it was not opened"
                    )
                return self._decoded(io.TextIOWrapper(raw, encoding="utf-8"), decode, what)
        except OSError as exc:
            raise self.error(exc.strerror or type(exc).__name__) from None
        except UnicodeDecodeError:
            raise self.error("it is not UTF-8 text") from None

    def _decoded(self, lines: Iterable[str], decode: Callable[[Any], T], what: str) -> Contents[T]:
        header: dict | None = None
        records: list[T] = []
        appendable = True
        for number, line in enumerate(lines, 1):
            appendable = line.endswith("\n")
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except ValueError as exc:  # JSONDecodeError
                if not appendable:  # the last line, cut by an interrupted write
                    break
                raise self.error(f"line {number} is not JSON: {str(exc)[:120]}") from None
            if header is None:
                if not (isinstance(value, dict) and value.get("mathscout") == self.kind):
                    raise self.error(f"line {number} is not a {self.kind}'s header")
                if value.get("version") != self.version:
                    raise self.error(f"version {value.get('version')!r}, not {self.version}")
                header = value
                continue
            try:
                records.append(decode(value))
            except DECODE_ERRORS as exc:
                raise self.error(f"line {number} is not {what}: {type(exc).__name__} {exc}") from None
        if header is None:
            raise self.error("it is empty")
        return Contents(header, records, appendable)

    def write(self, header: dict, records: Iterable[Any]) -> None:
        """The whole file, replaced at once (a crash leaves the old one)."""
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(json.dumps({"mathscout": self.kind, "version": self.version, **header}) + "\n")
            for record in records:
                f.write(json.dumps(record) + "\n")
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(self.path)

    def append(self, records: Iterable[Any]) -> None:
        """Records added at the end of a file `read` found appendable."""
        with open(self.path, "a", encoding="utf-8") as f:
            for record in records:
                f.write(json.dumps(record) + "\n")


# --- a record's values, typed on the way back (a TypeError names what was found instead) --------------------------


def as_text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{type(value).__name__} where text belongs")
    return value


def as_number(value: Any) -> float:
    if type(value) not in (int, float):
        raise TypeError(f"{type(value).__name__} where a number belongs")
    return float(value)


def as_whole(value: Any) -> int:
    if type(value) is not int:
        raise TypeError(f"{type(value).__name__} where a whole number belongs")
    return value


def as_scores(value: Any) -> dict[str, float]:
    """A {document id: number} object."""
    if not isinstance(value, dict):
        raise TypeError(f"{type(value).__name__} where an object of scores belongs")
    return {as_text(k): as_number(v) for k, v in value.items()}
