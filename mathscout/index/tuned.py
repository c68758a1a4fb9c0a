"""A file a `mathscout train …` command fits and stores with an index (structure.json, fusion.json, ranker.json):
one way to find, read, check, version and write it.

A subclass is a dataclass naming its file (FILE), what it is in an error line (LABEL) and the newest layout it
reads (VERSION); it checks the fields of a loaded file (`parse`, with `StoredFile`'s checks) and says how a broken
file is remade (`remedy`). Written files carry `"version"`; a file without one (written before versions) is
version 1, and one from a newer MathScout is refused in one line naming it."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any, ClassVar, Self

from mathscout.index.layout import IndexDir, write_json_atomic
from mathscout.index.stored import StoredFile


class TunedFile:
    """`read(index)` (None when the index has no such file) and `write(index)`; `read_file` / `write_file` for a
    copy kept elsewhere. `index` is an IndexDir or a folder."""

    FILE: ClassVar[str]  # its name inside an index folder
    LABEL: ClassVar[str]  # what it is, in an error line ("the fusion weights file")
    VERSION: ClassVar[int] = 1  # the layout written; older ones are read too

    @classmethod
    def remedy(cls, folder: Path) -> str:
        """What to do about an unusable file in `folder` (the command that remakes it)."""
        raise NotImplementedError

    @classmethod
    def parse(cls, file: StoredFile, data: dict[str, Any]) -> Self:
        """The object of a loaded file, each field checked with `file` (a problem is its DamagedIndexError)."""
        raise NotImplementedError

    @classmethod
    def path(cls, index: IndexDir | Path) -> Path:
        return (index.path if isinstance(index, IndexDir) else Path(index)) / cls.FILE

    @classmethod
    def read(cls, index: IndexDir | Path) -> Self | None:
        path = cls.path(index)
        return cls.read_file(path) if path.is_file() else None

    @classmethod
    def read_file(cls, path: Path | str) -> Self:
        file = StoredFile(path, cls.LABEL, cls.remedy(Path(path).parent))
        data = file.load()
        version = file.whole(data.get("version", 1), "version", 1)
        file.require(
            version <= cls.VERSION,
            f"version {version}, written by a newer MathScout; this one reads up to version {cls.VERSION}",
        )
        return cls.parse(file, data)

    def write(self, index: IndexDir | Path) -> Path:
        """Store with the index (atomically)."""
        return self.write_file(self.path(index))

    def write_file(self, path: Path | str) -> Path:
        return write_json_atomic(path, {"version": self.VERSION, **asdict(self)})  # type: ignore[call-overload]
