"""Files a run writes for a later run to read back (candidate caches, structure dumps, a benchmark's caches): JSON
lines, never pickles, so that such a file handed over by someone else is data and never code. A file that is not one
of ours (another format, a damaged line, an old pickle) is one MathScoutError line naming it and what to do.

The first line is a header (`{"mathscout": KIND, "version": N, …}`), each further line one record. Records are
appended as a run goes (a later line for the same key replaces an earlier one, see the readers); a last line cut by an
interrupted write is passed over, so the run that reads it resumes."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from mathscout.errors import MathScoutError

PICKLE_MARK = b"\x80"  # the first byte of a pickle (protocol 2 and later): the format these files had before


class WorkFile:
    """One work file of `kind` (its header's "mathscout" value) at `path`; `remedy` says what to do when it is unusable."""

    def __init__(self, path: Path | str, kind: str, version: int, remedy: str):
        self.path, self.kind, self.version, self.remedy = Path(path), kind, version, remedy

    def error(self, reason: str) -> MathScoutError:
        return MathScoutError(f"the {self.kind} {self.path} is unusable ({reason}): {self.remedy}")

    def read(self) -> tuple[dict, Iterator[tuple[int, Any]]]:
        """The header and the records (line number, JSON value); raises `error` for a file that is not this kind."""
        try:
            with open(self.path, "rb") as f:
                if f.read(1) == PICKLE_MARK:
                    raise self.error(
                        "it is a Python pickle, the format before this version, which can run code when read; "
                        "it was not opened"
                    )
        except OSError as exc:
            raise self.error(exc.strerror or type(exc).__name__) from None
        lines = self._lines()
        header = next(lines, None)
        if header is None:
            raise self.error("it is empty")
        _, value = header
        if not (isinstance(value, dict) and value.get("mathscout") == self.kind):
            raise self.error(f"line 1 is not a {self.kind}'s header")
        if value.get("version") != self.version:
            raise self.error(f"version {value.get('version')!r}, not {self.version}")
        return value, lines

    def _lines(self) -> Iterator[tuple[int, Any]]:
        with open(self.path, encoding="utf-8", errors="strict") as f:
            try:
                for number, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    try:
                        yield number, json.loads(line)
                    except ValueError as exc:  # JSONDecodeError; a last line cut by an interrupted write is passed over
                        if not line.endswith("\n"):
                            return
                        raise self.error(f"line {number} is not JSON: {str(exc)[:120]}") from None
            except UnicodeDecodeError:
                raise self.error("it is not UTF-8 text") from None

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
        """Records added at the end (the file and its header exist), after a last line cut by an interrupted write is
        dropped."""
        self._drop_cut_line()
        with open(self.path, "a", encoding="utf-8") as f:
            for record in records:
                f.write(json.dumps(record) + "\n")

    def _drop_cut_line(self, chunk: int = 1 << 16) -> None:
        """A file that does not end with a newline: its last line ended when it is whole JSON, else cut off (as the
        readers pass it over)."""
        with open(self.path, "r+b") as f:
            end = f.seek(0, os.SEEK_END)
            position = end
            while position > 0:
                start = max(0, position - chunk)
                f.seek(start)
                block = f.read(position - start)
                if position == end and block.endswith(b"\n"):
                    return
                newline = block.rfind(b"\n")
                if newline >= 0:
                    position = start + newline + 1
                    break
                position = start
            f.seek(position)
            try:
                json.loads(f.read())
                f.write(b"\n")
            except ValueError:
                f.truncate(position)


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
