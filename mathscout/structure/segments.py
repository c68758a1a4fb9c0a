"""Segments of a path index build, flushed to disk and merged on disk (the build's memory stays bounded).

The writer (index.py) encodes its buffered entries as a *segment* whenever they pass a memory budget: a
posting file in the index's own encoding (postings.py) over the segment's formulas, and a table with one
row per non-empty list. Segments hold increasing formula ordinals, so list t of the merged index is the
concatenation of list t of every segment in order; only the first formula-id delta of each segment's part
changes (it was coded from 0, it becomes the gap to the previous segment's last id of that list). The
merge streams every segment once, in list order, and writes postings.bin byte for byte as a one-segment
build would (Zhong 2023 thesis §4.4.1's layout; one k-way pass over all segments, as Lucene's merge of sorted segments).
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np

from mathscout.progress import bar as progress_bar
from mathscout.structure.postings import encode_varbyte, get_varbyte, put_varbyte

ROW = np.dtype(
    [("tid", "<i4"), ("entries", "<i4"), ("first", "<i8"), ("last", "<i8"), ("nbytes", "<i8"), ("src", "<i8")]
)
MERGE_ROWS = 1 << 20  # table rows buffered over all segments during a merge (each reads its share at a time)
OUT_BUFFER = 64 * 2**20  # merged bytes assembled in memory before one write
COPY_PIECE = 16 * 2**20  # a list larger than OUT_BUFFER is copied in pieces of this size


@dataclass(frozen=True)
class Segment:
    """One flushed segment: its posting bytes, its list table (ROW records) and its number of symbol groups."""

    postings: Path
    table: Path
    groups: int


def write_segment(
    folder: Path,
    number: int,
    buf: np.ndarray,
    byte_offsets: np.ndarray,
    list_start: np.ndarray,
    first_fid: np.ndarray,
    last_fid: np.ndarray,
    groups: int,
) -> Segment:
    """Write an encoded segment (`encode_lists` output over all lists known so far) and its non-empty rows."""
    entries = np.diff(list_start)
    tids = np.flatnonzero(entries)
    rows = np.empty(len(tids), dtype=ROW)
    rows["tid"] = tids
    rows["entries"] = entries[tids]
    rows["first"] = first_fid[tids]
    rows["last"] = last_fid[tids]
    rows["nbytes"] = np.diff(byte_offsets)[tids]
    rows["src"] = byte_offsets[tids]
    segment = Segment(folder / f"segment-{number:05d}.bin", folder / f"segment-{number:05d}.rows", groups)
    buf.tofile(segment.postings)
    rows.tofile(segment.table)
    return segment


def varbyte_length(values: np.ndarray) -> np.ndarray:
    """Bytes of the LEB128 code of each value (≥ 0)."""
    bits = np.zeros(len(values), dtype=np.int64)
    v = values.astype(np.int64).copy()
    while np.any(v >= 128):
        big = v >= 128
        bits[big] += 1
        v[big] >>= 7
    return bits + 1


@numba.njit(cache=True)
def _scatter(out, src, src_at, nbytes, old_len, new_first, out_at):
    """Copy each row's list bytes from `src` to `out`, its first formula id re-coded as `new_first`."""
    for r in range(src_at.shape[0]):
        at = put_varbyte(out, out_at[r], new_first[r])
        start = src_at[r] + old_len[r]
        end = src_at[r] + nbytes[r]
        out[at : at + end - start] = src[start:end]


class _TableReader:
    """A segment's rows, read `per_read` at a time (never the whole table)."""

    def __init__(self, segment: Segment, per_read: int):
        self.path = segment.table
        self.per_read = per_read
        self.total = segment.table.stat().st_size // ROW.itemsize
        self.read = 0
        self.rows = np.empty(0, dtype=ROW)
        self.fill()

    def fill(self) -> None:
        if len(self.rows) < self.per_read // 2 and self.read < self.total:
            count = min(self.per_read, self.total - self.read)
            more = np.fromfile(self.path, dtype=ROW, count=count, offset=self.read * ROW.itemsize)
            self.read += count
            self.rows = np.concatenate([self.rows, more])

    @property
    def exhausted(self) -> bool:
        return not len(self.rows) and self.read >= self.total

    def take_below(self, tid_end: int) -> np.ndarray:
        n = int(np.searchsorted(self.rows["tid"], tid_end))
        taken, self.rows = self.rows[:n], self.rows[n:]
        self.fill()
        return taken


def merge_segments(
    segments: list[Segment], n_lists: int, target: Path, progress: bool = True
) -> tuple[np.ndarray, np.ndarray, int]:
    """Merge segments (in formula order) into `target` (postings.bin); returns (byte offsets, list starts, groups).
    A progress bar counts the segments' bytes merged (with its ETA)."""
    per_read = max(1024, MERGE_ROWS // max(len(segments), 1))  # the merge's buffers do not grow with the segment count
    readers = [_TableReader(s, per_read) for s in segments]
    sources = [open(s.postings, "rb") for s in segments]  # noqa: SIM115 — closed in the finally below
    out_bytes = np.zeros(n_lists, dtype=np.int64)
    out_entries = np.zeros(n_lists, dtype=np.int64)
    total = sum(s.postings.stat().st_size for s in segments)
    bar = progress_bar(
        total=total,
        desc=f"path index merge ({len(segments)} segments)",
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        file=sys.stderr,
        mininterval=2.0,
        disable=not progress,
    )
    try:
        with bar, open(target, "wb") as out:
            while not all(r.exhausted for r in readers):
                # every row with tid < tid_end is in the readers' buffers: each buffer reaches past it or holds the rest
                tid_end = min(
                    int(r.rows["tid"][-1]) + 1 if r.read < r.total else n_lists for r in readers if not r.exhausted
                )
                parts = []
                for number, reader in enumerate(readers):
                    rows = reader.take_below(tid_end)
                    if len(rows):
                        parts.append((number, rows))
                _merge_chunk(parts, sources, out, out_bytes, out_entries)
                bar.update(min(out.tell(), total) - bar.n)  # re-coded first ids: the output is a few bytes shorter
            bar.update(total - bar.n)
    finally:
        for f in sources:
            f.close()
    byte_offsets = np.zeros(n_lists + 1, dtype=np.int64)
    list_start = np.zeros(n_lists + 1, dtype=np.int64)
    np.cumsum(out_bytes, out=byte_offsets[1:])
    np.cumsum(out_entries, out=list_start[1:])
    return byte_offsets, list_start, sum(s.groups for s in segments)


def _merge_chunk(
    parts: list[tuple[int, np.ndarray]], sources, out, out_bytes: np.ndarray, out_entries: np.ndarray
) -> None:
    """Write every list of the chunk (all its rows, from every segment) in (list, segment) order."""
    if not parts:
        return
    rows = np.concatenate([p[1] for p in parts])
    seg = np.concatenate([np.full(len(p[1]), p[0], dtype=np.int64) for p in parts])
    order = np.lexsort((seg, rows["tid"]))
    rows, seg = rows[order], seg[order]
    tid = rows["tid"].astype(np.int64)
    same = np.concatenate(([False], tid[1:] == tid[:-1]))
    previous_last = np.where(same, np.concatenate(([0], rows["last"][:-1])), 0)
    new_first = rows["first"] - previous_last
    old_len = varbyte_length(rows["first"])
    size = rows["nbytes"] - old_len + varbyte_length(new_first)
    np.add.at(out_bytes, tid, size)
    np.add.at(out_entries, tid, rows["entries"].astype(np.int64))
    out_at = np.concatenate(([0], np.cumsum(size)))
    start = 0
    while start < len(rows):  # groups of whole lists of at most OUT_BUFFER bytes (a larger list alone)
        end = int(np.searchsorted(out_at, out_at[start] + OUT_BUFFER, side="right")) - 1
        end = max(end, start + 1)
        while end < len(rows) and tid[end] == tid[end - 1]:
            end += 1
        total = int(out_at[end] - out_at[start])
        if total <= OUT_BUFFER:
            buf = np.empty(total, dtype=np.uint8)
            for s in np.unique(seg[start:end]):
                mine = np.flatnonzero(seg[start:end] == s) + start
                base = int(rows["src"][mine[0]])
                length = int(rows["src"][mine[-1]] + rows["nbytes"][mine[-1]]) - base
                src = _read(sources[s], base, length)
                _scatter(
                    buf,
                    src,
                    rows["src"][mine] - base,
                    rows["nbytes"][mine],
                    old_len[mine],
                    new_first[mine],
                    out_at[mine] - out_at[start],
                )
            out.write(buf.tobytes())
        else:
            for r in range(start, end):
                _copy_row(sources[seg[r]], rows[r], int(old_len[r]), int(new_first[r]), out)
        start = end


def _read(f, at: int, length: int) -> np.ndarray:
    f.seek(at)
    data = f.read(length)
    if len(data) != length:
        raise OSError(f"segment file {f.name} is shorter than its table says")
    return np.frombuffer(data, dtype=np.uint8)


def _copy_row(f, row, old_len: int, new_first: int, out) -> None:
    """One large list part: its first id re-coded, the rest copied in COPY_PIECE pieces."""
    out.write(encode_varbyte(np.array([new_first], dtype=np.int64)).tobytes())
    at, end = int(row["src"]) + old_len, int(row["src"] + row["nbytes"])
    while at < end:
        piece = _read(f, at, min(COPY_PIECE, end - at))
        out.write(piece.tobytes())
        at += len(piece)


@numba.njit(cache=True)
def _recode_symbols(src, src_at, entries, sym_map, out):
    """Copy lists from `src` (at `src_at`, `entries` each, in the given order) to `out` end to end, every leaf symbol
    id s written as sym_map[s] and each entry's groups re-sorted by (symbol id, fingerprint) as index.py writes them
    (postings.py's entry layout); returns the bytes written and each list's new length."""
    at_out = 0
    nbytes = np.empty(src_at.shape[0], dtype=np.int64)
    group = np.empty((16, 3), dtype=np.int64)  # an entry's groups (symbol, fingerprint, count), grown when needed
    for r in range(src_at.shape[0]):
        begin = at_out
        at = src_at[r]
        for _ in range(entries[r]):
            for _ in range(3):  # formula-id delta, root-end node, width: unchanged
                value, at = get_varbyte(src, at)
                at_out = put_varbyte(out, at_out, value)
            groups, at = get_varbyte(src, at)
            at_out = put_varbyte(out, at_out, groups)
            if groups > group.shape[0]:
                group = np.empty((2 * groups, 3), dtype=np.int64)
            for g in range(groups):
                sym, at = get_varbyte(src, at)
                group[g, 0] = sym_map[sym]
                group[g, 1], at = get_varbyte(src, at)
                group[g, 2], at = get_varbyte(src, at)
            # the writer orders an entry's groups by (symbol id, fingerprint): re-sort them by the new ids (insertion)
            for g in range(1, groups):
                a, b, c = group[g, 0], group[g, 1], group[g, 2]
                h = g - 1
                while h >= 0 and (group[h, 0] > a or (group[h, 0] == a and group[h, 1] > b)):
                    group[h + 1, 0], group[h + 1, 1], group[h + 1, 2] = group[h, 0], group[h, 1], group[h, 2]
                    h -= 1
                group[h + 1, 0], group[h + 1, 1], group[h + 1, 2] = a, b, c
            for g in range(groups):
                for j in range(3):
                    at_out = put_varbyte(out, at_out, group[g, j])
        nbytes[r] = at_out - begin
    return at_out, nbytes


def renumber_segment(segment: Segment, tid_map: np.ndarray, sym_map: np.ndarray, target: Segment) -> Segment:
    """A worker's segment (its own path and symbol ids, parallel.py) in the build's global ids: rows re-keyed by
    tid_map and re-sorted, lists rewritten in the new order with symbol ids mapped (the merge reads them in order)."""
    rows = np.fromfile(segment.table, dtype=ROW)
    src = np.fromfile(segment.postings, dtype=np.uint8)
    rows["tid"] = tid_map[rows["tid"]]
    rows = rows[np.argsort(rows["tid"], kind="stable")]
    out = np.empty(len(src) + 4 * segment.groups, dtype=np.uint8)  # a symbol id grows by at most 4 bytes
    size, nbytes = _recode_symbols(
        src, rows["src"].astype(np.int64), rows["entries"].astype(np.int64), sym_map.astype(np.int64), out
    )
    del src
    rows["nbytes"] = nbytes
    rows["src"] = np.concatenate(([0], np.cumsum(nbytes)[:-1])) if len(rows) else nbytes
    out[:size].tofile(target.postings)
    rows.tofile(target.table)
    return Segment(target.postings, target.table, segment.groups)


def remove_segments(segments: list[Segment]) -> None:
    for s in segments:
        for path in (s.postings, s.table):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
