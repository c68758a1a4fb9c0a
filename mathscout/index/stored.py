"""The JSON files stored with an index (manifest.json, shards.json, fusion.json, structure.json, ranker.json), read
one way: a guarded parse (finite numbers only, bounded size and nesting) and typed checks of each field, so that a
damaged file is one line naming it and what to do (DamagedIndexError), never a crash or a silently wrong answer."""

from __future__ import annotations

import json
import math
from collections.abc import Collection
from pathlib import Path
from typing import Any

from mathscout.corpus.jsonl import nested_deeper
from mathscout.errors import DamagedIndexError
from mathscout.index.integrity import FileRecord
from mathscout.limits import MAX_NESTING

MAX_BYTES = 64 * 2**20  # the largest stored file (a manifest records a few hundred files; they nest 5 deep)


class _OutOfRange(ValueError):
    """A number JSON cannot hold (NaN, Infinity) or a float beyond a double's range (1e400)."""


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _OutOfRange(f"the number {text[:20]} is out of range")
    return value


def _constant(name: str) -> float:
    raise _OutOfRange(f"{name} is not a number")


def _show(value: Any) -> str:
    """A field's value in an error line (short)."""
    if value is None:
        return "missing or null"
    if isinstance(value, (dict, list)):
        return f"{'an object' if isinstance(value, dict) else 'a list'} of {len(value):,}"
    return repr(value)[:40]


class StoredFile:
    """One stored JSON file: its object (`load`) and checked fields; any problem is its one-line DamagedIndexError."""

    def __init__(self, path: Path | str, label: str, remedy: str):
        self.path, self.label, self.remedy = Path(path), label, remedy

    def damaged(self, reason: str) -> DamagedIndexError:
        """'`label` `path` is unusable (`reason`): `remedy`' (remedy: the command that rebuilds or re-tunes it)."""
        return DamagedIndexError(f"{self.label} {self.path} is unusable ({reason}): {self.remedy}")

    def load(self) -> dict:
        """The file's JSON object: finite numbers only, at most MAX_BYTES, nested at most MAX_NESTING deep."""
        return self.mapping(self.value(), "its content")

    def value(self) -> Any:
        """The file's JSON value, whatever its kind (an object, a list …), checked as `load` checks it."""
        try:
            if self.path.stat().st_size > MAX_BYTES:
                raise ValueError(f"larger than {MAX_BYTES // 2**20} MiB")
            data = json.loads(self.path.read_text(encoding="utf-8"), parse_float=_finite, parse_constant=_constant)
        except RecursionError:
            raise self.damaged("nested too deeply") from None
        except _OutOfRange as exc:
            raise self.damaged(str(exc)) from None
        except (OSError, ValueError) as exc:  # JSONDecodeError, UnicodeDecodeError and a too long int are ValueErrors
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise self.damaged(f"unreadable: {first[:200]}") from None
        if nested_deeper(data):
            raise self.damaged(f"nested deeper than {MAX_NESTING} levels")
        return data

    def require(self, ok: Any, reason: str) -> None:
        """The damage error saying `reason` unless `ok`."""
        if not ok:
            raise self.damaged(reason)

    def expect(self, ok: Any, value: Any, what: str, expected: str) -> Any:
        """`value` when `ok`, else the damage error '`what` is `value`, not `expected`'."""
        self.require(ok, f"{what} is {_show(value)}, not {expected}")
        return value

    def mapping(self, value: Any, what: str) -> dict:
        return self.expect(isinstance(value, dict), value, what, "an object")

    def items(self, value: Any, what: str) -> list:
        return self.expect(isinstance(value, list), value, what, "a list")

    def text(self, value: Any, what: str) -> str:
        return self.expect(isinstance(value, str), value, what, "text")

    def flag(self, value: Any, what: str) -> bool:
        return self.expect(isinstance(value, bool), value, what, "true or false")

    def name(self, value: Any, what: str, known: Collection[str]) -> str:
        return self.expect(isinstance(value, str) and value in known, value, what, f"one of {', '.join(sorted(known))}")

    def whole(self, value: Any, what: str, low: int = 0, high: int | None = None) -> int:
        ok = type(value) is int and low <= value and (high is None or value <= high)
        return self.expect(ok, value, what, f"a whole number from {low:,} {'up' if high is None else f'to {high:,}'}")

    def number(self, value: Any, what: str, low: float, high: float) -> float:
        ok = type(value) in (int, float) and low <= value <= high
        return float(self.expect(ok, value, what, f"a number from {low:g} to {high:g}"))

    def record(self, value: Any, what: str) -> FileRecord:
        """A file's recorded size and checksum (`mathscout.index.integrity`)."""
        value = self.mapping(value, f"the record of {what}")
        return FileRecord(
            self.whole(value.get("bytes"), f"the size of {what}"),
            self.whole(value.get("crc32"), f"the checksum of {what}", 0, 2**32 - 1),
            self.flag(value.get("sampled", False), f"the checksum kind of {what}"),
        )
