"""The path index opened without decoding it: memory-mapped files, a hashed path dictionary, lists decoded on demand.

- `PathDictionary`: token path → list id through a sorted table of 64-bit path hashes (`path_hash.npy`,
  `path_tid.npy`, written at build time); no Python dict of every path is built when the index opens.
  Indexes built before these files existed fall back to the dict read from `paths.json.gz`.
- `PostingLists` (thesis §4.4.1's compressed lists, read on demand): postings.bin memory-mapped; a query's lists
  are decoded when it asks for them (bounds-checked decoder, postings.py), each list checked against the index's
  tables before a kernel reads it, and kept in an LRU cache of decoded lists bounded in bytes
  (MATHSCOUT_POSTINGS_CACHE_MB, default 512).
- `load_npz_member`: an array of an uncompressed .npz memory-mapped in place (np.savez stores members as is).
"""

from __future__ import annotations

import hashlib
import os
import threading
import zipfile
from collections import OrderedDict
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


class PostingLists:
    """Lists of a memory-mapped postings.bin, decoded on demand (bounds-checked) and cached."""

    def __init__(self, buf: np.ndarray, byte_offsets: np.ndarray, list_start: np.ndarray, n_formulas: int, n_symbols: int,
                 max_node: int, max_leaves: int, cache_bytes: int = CACHE_BYTES):
        self.buf, self.byte_offsets, self.list_start = buf, byte_offsets, list_start
        self.n_formulas, self.n_symbols, self.max_node, self.max_leaves = n_formulas, n_symbols, max_node, max_leaves
        self.cache_bytes = cache_bytes
        self._cache: OrderedDict[int, tuple] = OrderedDict()
        self._cached = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.list_start) - 1

    def df(self, tid: int) -> int:
        return int(self.list_start[tid + 1] - self.list_start[tid])

    def decode(self, tid: int) -> tuple:
        """(fid, node, width, sym_start, sym, fp, count) of list `tid`."""
        with self._lock:  # searches may run in several threads (the chat page)
            hit = self._cache.get(tid)
            if hit is not None:
                self._cache.move_to_end(tid)
                return hit
        at, end = int(self.byte_offsets[tid]), int(self.byte_offsets[tid + 1])
        ok, *arrays = _decode_list(self.buf, np.int64(at), np.int64(end), np.int64(self.df(tid)), np.int64(self.n_formulas),
                                   np.int64(self.n_symbols), np.int64(self.max_node), np.int64(self.max_leaves))
        if not ok:
            raise DamagedList(f"posting list {tid} does not decode")
        arrays = tuple(arrays)
        size = sum(a.nbytes for a in arrays)
        with self._lock:
            if size <= self.cache_bytes and tid not in self._cache:
                self._cache[tid] = arrays
                self._cached += size
                while self._cached > self.cache_bytes:
                    _, old = self._cache.popitem(last=False)
                    self._cached -= sum(a.nbytes for a in old)
        return arrays

    def view(self, tids: np.ndarray) -> tuple[DecodedPostings, np.ndarray, np.ndarray]:
        """The given lists decoded and concatenated: (postings, start and end of each given list in them)."""
        parts = [self.decode(int(t)) for t in tids]
        sizes = np.array([len(p[0]) for p in parts], dtype=np.int64)
        start = np.zeros(len(parts) + 1, dtype=np.int64)
        np.cumsum(sizes, out=start[1:])
        if not parts:
            z32, z64 = np.zeros(0, np.int32), np.zeros(1, np.int64)
            return DecodedPostings(z64, z32, z32, z32, z64, z32, z32, z32), start[:-1], start[1:]
        group_base = np.cumsum([0] + [len(p[4]) for p in parts[:-1]])
        sym_start = np.concatenate([p[3][:-1] + base for p, base in zip(parts, group_base)] + [np.array([group_base[-1] + len(parts[-1][4])])])
        postings = DecodedPostings(
            start, *(np.concatenate([p[i] for p in parts]) for i in range(3)), sym_start.astype(np.int64),
            *(np.concatenate([p[i] for p in parts]) for i in range(4, 7)))
        return postings, start[:-1], start[1:]
