"""What a built index's files must look like: sizes and checksums recorded at build time, checked on open.

A damaged or foreign file must give a clear error naming the file and the rebuild command, never a crash
inside a compiled kernel. Files up to FULL_CHECK_BYTES (16 MiB) are checksummed whole (zlib's CRC-32 runs at
several GB/s, but reading a file that is not in the page cache does not); larger files (postings, Lucene's
segment files, the store, dense vectors) are checked by size plus a checksum of their first and last
SAMPLE_BYTES, so opening an index reads a bounded amount whatever the collection's size (issue 17), and their
readers validate what they read structurally (bounds-checked decoders; Lucene's own footers). A file is
verified the way its record says it was checksummed, so indexes recorded with another threshold still open.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path

from mathscout.errors import DamagedIndexError

FULL_CHECK_BYTES = 16 * 2**20
SAMPLE_BYTES = 2**20
_CHUNK = 8 * 2**20


@dataclass(frozen=True)
class FileRecord:
    """A file's size and checksum (`crc32`: whole file; `crc32_sampled`: first and last SAMPLE_BYTES)."""

    bytes: int
    crc32: int
    sampled: bool = False

    def to_json(self) -> dict:
        return {"bytes": self.bytes, "crc32": self.crc32, "sampled": self.sampled}

    @classmethod
    def from_json(cls, data: dict) -> FileRecord:
        return cls(int(data["bytes"]), int(data["crc32"]), bool(data.get("sampled", False)))


def _crc(path: Path, size: int, whole: bool | None = None) -> tuple[int, bool]:
    """CRC-32 of the whole file (`whole`, by default when it is at most FULL_CHECK_BYTES) or of its ends."""
    crc = 0
    with open(path, "rb") as f:
        if whole if whole is not None else size <= FULL_CHECK_BYTES:
            while chunk := f.read(_CHUNK):
                crc = zlib.crc32(chunk, crc)
            return crc, False
        crc = zlib.crc32(f.read(SAMPLE_BYTES), crc)
        f.seek(size - SAMPLE_BYTES)
        return zlib.crc32(f.read(SAMPLE_BYTES), crc), True


def record_file(path: Path) -> FileRecord:
    size = path.stat().st_size
    crc, sampled = _crc(path, size)
    return FileRecord(size, crc, sampled)


def record_folder(folder: Path) -> dict[str, dict]:
    """Records of every file below `folder` (relative POSIX paths), for the manifest."""
    return {
        f.relative_to(folder).as_posix(): record_file(f).to_json() for f in sorted(folder.rglob("*")) if f.is_file()
    }


def verify_file(path: Path, record: FileRecord, rebuild: str) -> None:
    """Raise DamagedIndexError (naming the file and `rebuild`) unless `path` matches `record`."""
    try:
        size = path.stat().st_size
    except OSError:
        raise DamagedIndexError(f"{path} is missing; {rebuild}") from None
    if size != record.bytes:
        raise DamagedIndexError(f"{path} is damaged ({size:,} bytes, built with {record.bytes:,}); {rebuild}")
    try:
        crc, _ = _crc(path, size, whole=not record.sampled)
    except OSError as exc:
        raise DamagedIndexError(f"{path} is unreadable ({exc.strerror or exc}); {rebuild}") from None
    if crc != record.crc32:
        raise DamagedIndexError(f"{path} is damaged (checksum differs from the build's); {rebuild}")


def verify_folder(folder: Path, records: dict[str, dict], rebuild: str) -> None:
    """Check every recorded file below `folder`."""
    for relative, data in records.items():
        verify_file(folder / relative, FileRecord.from_json(data), rebuild)
