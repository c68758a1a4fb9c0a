"""The path index opened without decoding it: memory-mapped files, a hashed path dictionary, lists decoded on demand.

- `PathDictionary`: token path → list id through a sorted table of 64-bit path hashes (`path_hash.npy`,
  `path_tid.npy`, written at build time); no Python dict of every path is built when the index opens.
  Indexes built before these files existed fall back to the dict read from `paths.json.gz`.
- `PostingLists` (Zhong 2023 thesis §4.4.1's compressed lists, read on demand): postings.bin memory-mapped; a query's lists
  are decoded when it asks for them (bounds-checked decoder, postings.py), each list checked against the index's
  tables before a kernel reads it, into an arena of decoded lists bounded in bytes (MATHSCOUT_POSTINGS_CACHE_MB,
  default 512) that the kernels read in place: a query whose lists are decoded already costs no copy.
- `load_npz_member`: an array of an uncompressed .npz memory-mapped in place (np.savez stores members as is).
"""

from __future__ import annotations

import hashlib
import os
import threading
import zipfile
from pathlib import Path

import numba
import numpy as np

from mathscout.structure.paths import is_wildcard_path
from mathscout.structure.postings import DecodedPostings, get_bounded

PATH_FILES = ("path_hash.npy", "path_tid.npy")
CACHE_BYTES = int(float(os.environ.get("MATHSCOUT_POSTINGS_CACHE_MB", "512")) * 2**20)


def path_hash(path: str) -> int:
    return int.from_bytes(hashlib.blake2b(path.encode("utf-8"), digest_size=8).digest(), "little")


def write_path_table(folder: Path, paths: list[str], df: np.ndarray) -> int:
    """Write the hashed dictionary of `paths` (in list order); returns the entries of the ordinary (non-wildcard) lists."""
    hashes = np.fromiter((path_hash(p) for p in paths), dtype=np.uint64, count=len(paths))
    order = np.argsort(hashes, kind="stable")
    if len(hashes) > 1 and np.any(hashes[order][1:] == hashes[order][:-1]):
        raise ValueError("two token paths share a 64-bit hash")  # never seen; refuse rather than mix two lists
    np.save(folder / "path_hash.npy", hashes[order])
    np.save(folder / "path_tid.npy", order.astype(np.int32))
    wildcard = np.fromiter((is_wildcard_path(p) for p in paths), dtype=bool, count=len(paths))
    return int(df[~wildcard].sum())


class PathDictionary:
    """Token path → list id (a read-only mapping: `in`, `[]`, `get`, `len`)."""

    def __init__(self, hashes: np.ndarray | None, tids: np.ndarray | None, fallback: dict[str, int] | None = None):
        self._hashes, self._tids, self._dict = hashes, tids, fallback

    @classmethod
    def open(cls, folder: Path, read_json) -> PathDictionary:
        if all((folder / name).is_file() for name in PATH_FILES):
            hashes = np.load(folder / "path_hash.npy", mmap_mode="r", allow_pickle=False)
            tids = np.load(folder / "path_tid.npy", mmap_mode="r", allow_pickle=False)
            if hashes.ndim != 1 or tids.shape != hashes.shape or hashes.dtype != np.uint64 or not np.issubdtype(tids.dtype, np.integer):
                raise ValueError("the path dictionary tables are malformed")
            return cls(hashes, tids)
        return cls(None, None, {p: i for i, p in enumerate(read_json())})

    def __len__(self) -> int:
        return len(self._dict) if self._dict is not None else len(self._hashes)

    def get(self, path: str, default=None):
        if self._dict is not None:
            return self._dict.get(path, default)
        h = np.uint64(path_hash(path))
        at = int(np.searchsorted(self._hashes, h))
        if at < len(self._hashes) and self._hashes[at] == h:
            return int(self._tids[at])
        return default

    def __contains__(self, path: str) -> bool:
        return self.get(path) is not None

    def __getitem__(self, path: str) -> int:
        tid = self.get(path)
        if tid is None:
            raise KeyError(path)
        return tid

    def check(self, n_lists: int) -> None:
        """Every list id in range (ValueError otherwise)."""
        if self._dict is not None:
            if len(self._dict) != n_lists:
                raise ValueError("the posting lists and the path dictionary disagree")
            return
        if len(self._tids) != n_lists or (n_lists and (self._tids.min() < 0 or self._tids.max() >= n_lists)):
            raise ValueError("the posting lists and the path dictionary disagree")

    def wildcard_mask(self) -> np.ndarray:
        """Which lists are wildcard paths (only for indexes without `ordinary_entries` in meta.json)."""
        mask = np.zeros(len(self), dtype=bool)
        for path, tid in (self._dict or {}).items():
            mask[tid] = is_wildcard_path(path)
        return mask


def load_npz_member(path: Path, name: str) -> np.ndarray:
    """Array `name` of an .npz, memory-mapped when it is stored uncompressed (np.savez), else read."""
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(f"{name}.npy")
        if info.compress_type != zipfile.ZIP_STORED:
            with archive.open(info) as f:
                return np.lib.format.read_array(f, allow_pickle=False)
        with archive.open(info) as f:  # the member's .npy header tells shape, dtype and where the data starts
            version = np.lib.format.read_magic(f)
            read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, fortran, dtype = read_header(f)
            header = f.tell()
    with open(path, "rb") as raw:
        raw.seek(info.header_offset)
        local = raw.read(30)
        if local[:4] != b"PK\x03\x04":
            raise ValueError(f"{path.name}: bad zip member header")
        name_len, extra_len = int.from_bytes(local[26:28], "little"), int.from_bytes(local[28:30], "little")
    start = info.header_offset + 30 + name_len + extra_len + header
    count = int(np.prod(shape))
    if dtype.hasobject or start + count * dtype.itemsize > path.stat().st_size:
        raise ValueError(f"{path.name}: member {name} points past the file")
    if count == 0:
        return np.zeros(shape, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r", offset=start, shape=shape, order="F" if fortran else "C")


@numba.njit(cache=True)
def _get_at_most(buf, at, end, maximum):
    """`get_bounded` of a number that must be at most `maximum`: (value, next position), or (-1, -1) for a damaged
    or too large number, or when `at` is already -1 (an earlier read failed: failures carry through)."""
    if at < 0:
        return -1, -1
    value, at = get_bounded(buf, at, end)
    if at < 0 or value > maximum:
        return -1, -1
    return value, at


@numba.njit(cache=True)
def _decode_list(buf, at, end, n_entries, n_formulas, n_symbols, max_node, max_leaves):
    """Decode one list of `n_entries` from buf[at:end] with every read and every id bounds-checked.
    Returns ok and the list's arrays (ok = False for any damage: a short or long list, an id out of range)."""
    fid = np.empty(n_entries, dtype=np.int32)
    node = np.empty(n_entries, dtype=np.int32)
    width = np.empty(n_entries, dtype=np.int32)
    sym_start = np.empty(n_entries + 1, dtype=np.int64)
    capacity = (end - at) // 3 + 1  # a symbol group takes at least three bytes
    sym = np.empty(capacity, dtype=np.int32)
    fp = np.empty(capacity, dtype=np.int32)
    count = np.empty(capacity, dtype=np.int32)
    limit = np.int64(2**31 - 1)
    g = 0
    previous = 0
    for e in range(n_entries):
        # a failed read leaves at = -1 for the rest of the entry (and groups = -1: no group is read or stored)
        delta, at = _get_at_most(buf, at, end, n_formulas - 1 - previous)
        previous += delta
        fid[e] = previous
        node[e], at = _get_at_most(buf, at, end, max_node)
        width[e], at = _get_at_most(buf, at, end, max_leaves)
        groups, at = _get_at_most(buf, at, end, min(max_leaves, capacity - g))
        sym_start[e] = g
        for _ in range(groups):
            sym[g], at = _get_at_most(buf, at, end, n_symbols - 1)
            fp[g], at = _get_at_most(buf, at, end, limit)
            count[g], at = _get_at_most(buf, at, end, limit)
            g += 1
        if at < 0:
            return False, fid, node, width, sym_start, sym[:0], fp[:0], count[:0]
    sym_start[n_entries] = g
    return at == end, fid, node, width, sym_start, sym[:g].copy(), fp[:g].copy(), count[:g].copy()


class DamagedList(ValueError):
    """A posting list that does not decode within its bounds."""


ENTRY_BYTES, GROUP_BYTES = 20, 12  # decoded: fid, node, width (int32) and sym_start (int64); sym, fp, count (int32)


class _Arena:
    """Decoded lists laid end to end in one set of arrays, so the kernels read a query's lists where they lie
    (no copy into a per-query view). Lists are only appended; `where` maps a list id to its first entry."""

    def __init__(self, entries: int, groups: int):
        self.fid, self.node, self.width = (np.empty(entries, dtype=np.int32) for _ in range(3))
        self.sym_start = np.empty(entries + 1, dtype=np.int64)
        self.sym, self.fp, self.count = (np.empty(groups, dtype=np.int32) for _ in range(3))
        self.sym_start[0] = 0
        self.entries = self.groups = 0
        self.where: dict[int, int] = {}

    def room(self, entries: int, groups: int) -> bool:
        return self.entries + entries <= len(self.fid) and self.groups + groups <= len(self.sym)

    def put(self, tid: int, fid, node, width, sym_start, sym, fp, count) -> None:
        """Append one list (arrays as `_decode_list` gives them: sym_start local, one more than the entries)."""
        e, g, n, m = self.entries, self.groups, len(fid), len(sym)
        self.fid[e:e + n], self.node[e:e + n], self.width[e:e + n] = fid, node, width
        self.sym_start[e:e + n + 1] = sym_start + g  # sym_start[e + n] is then where the next list's groups start
        self.sym[g:g + m], self.fp[g:g + m], self.count[g:g + m] = sym, fp, count
        self.entries, self.groups = e + n, g + m
        self.where[tid] = e

    def get(self, tid: int, df: int) -> tuple:
        """List `tid` (df entries) as `_decode_list`'s arrays: views into this arena."""
        e = self.where[tid]
        g, h = int(self.sym_start[e]), int(self.sym_start[e + df])
        return (self.fid[e:e + df], self.node[e:e + df], self.width[e:e + df], self.sym_start[e:e + df + 1] - g,
                self.sym[g:h], self.fp[g:h], self.count[g:h])

    def postings(self) -> DecodedPostings:
        return DecodedPostings(self.fid, self.node, self.width, self.sym_start, self.sym, self.fp, self.count)


def _sizes(parts: dict[int, tuple]) -> tuple[int, int]:
    """Entries and symbol groups of decoded lists (`_decode_list`'s arrays)."""
    return sum(len(p[0]) for p in parts.values()), sum(len(p[4]) for p in parts.values())


class PostingLists:
    """Lists of a memory-mapped postings.bin, decoded on demand (bounds-checked) into an arena of decoded lists.

    The arena is the cache: about `cache_bytes` of decoded lists; when a query's lists do not fit beside the others,
    a new arena takes over (its lists copied from the old one, which is freed once no prepared query holds it)."""

    def __init__(self, buf: np.ndarray, byte_offsets: np.ndarray, list_start: np.ndarray, n_formulas: int, n_symbols: int,
                 max_node: int, max_leaves: int, cache_bytes: int = CACHE_BYTES, groups_per_entry: float = 2.0):
        self.buf, self.byte_offsets, self.list_start = buf, byte_offsets, list_start
        self.n_formulas, self.n_symbols, self.max_node, self.max_leaves = n_formulas, n_symbols, max_node, max_leaves
        self.cache_bytes = cache_bytes
        # arena capacity: cache_bytes of decoded lists with the index's own groups per entry (+25 % room for groups)
        self._capacity = max(1, int(cache_bytes / (ENTRY_BYTES + GROUP_BYTES * groups_per_entry)))
        self._group_capacity = max(1, int(self._capacity * groups_per_entry * 1.25))
        self._arena: _Arena | None = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.list_start) - 1

    @property
    def cached_bytes(self) -> int:
        """Bytes of decoded lists the current arena holds."""
        a = self._arena
        return 0 if a is None else a.entries * ENTRY_BYTES + a.groups * GROUP_BYTES

    def df(self, tid: int) -> int:
        return int(self.list_start[tid + 1] - self.list_start[tid])

    def _decode(self, tid: int) -> tuple:
        at, end = int(self.byte_offsets[tid]), int(self.byte_offsets[tid + 1])
        ok, *arrays = _decode_list(self.buf, np.int64(at), np.int64(end), np.int64(self.df(tid)), np.int64(self.n_formulas),
                                   np.int64(self.n_symbols), np.int64(self.max_node), np.int64(self.max_leaves))
        if not ok:
            raise DamagedList(f"posting list {tid} does not decode")
        return tuple(arrays)

    def view(self, tids: np.ndarray) -> tuple[DecodedPostings, np.ndarray, np.ndarray]:
        """The given lists in one arena, without copying lists already there: (its arrays, start and end of each
        given list in them). Lists not yet decoded are decoded (outside the lock: searches run in threads)."""
        tids = [int(t) for t in tids]
        unique = list(dict.fromkeys(tids))
        seen = self._arena
        missing = {t: self._decode(t) for t in unique if seen is None or t not in seen.where}
        with self._lock:
            arena = self._arena
            # every list of the query not in the current arena: decoded now, or (not missing) copied from the arena seen
            parts = {t: missing[t] if t in missing else seen.get(t, self.df(t))
                     for t in unique if arena is None or t not in arena.where}
            if arena is None or not arena.room(*_sizes(parts)):
                # a new arena with the whole query (the lists the old one had copied over); a query too large for the
                # cache gets a one-off arena of its own size, not kept
                if arena is not None:
                    parts.update({t: arena.get(t, self.df(t)) for t in unique if t not in parts})
                entries, groups = _sizes(parts)
                if entries <= self._capacity and groups <= self._group_capacity:
                    arena = self._arena = _Arena(self._capacity, self._group_capacity)
                else:
                    arena = _Arena(entries, groups)
            for t, p in parts.items():
                arena.put(t, *p)
            start = np.array([arena.where[t] for t in tids], dtype=np.int64)
        end = start + np.array([self.df(t) for t in tids], dtype=np.int64)
        return arena.postings(), start, end
