"""The path index opened without decoding it: memory-mapped files, a hashed path dictionary, lists decoded on demand.

- `PathDictionary`: token path → list id through a sorted table of 64-bit path hashes (`path_hash.npy`,
  `path_tid.npy`, written at build time); no Python dict of every path is built when the index opens.
  Indexes built before these files existed fall back to the dict read from `paths.json.gz`.
- `BlockTable` (skipping inside compressed lists, Zhong 2023 thesis §4.4.1's skip lists: a list is read a block at a time): every
  list is cut into blocks of BLOCK entries; per block, where its bytes start, the formula id its deltas start from,
  its last formula id and its first symbol group (`blocks.npz`, written by the build; an index built before it gets
  it scanned once when it opens).
- `PostingLists`: postings.bin memory-mapped; `view` lays a query's lists out in arrays the kernels read (nothing
  decoded yet), and the kernels decode a block the first time they read inside it (`decode_block`, every read and id
  bounds-checked against the block table); `skip_block` passes over whole blocks by their last formula id without
  decoding them, so a query decodes only the blocks where its candidates lie.
- `load_npz_member`: an array of an uncompressed .npz memory-mapped in place (np.savez stores members as is).
- `save_json_gz` / `load_json_gz`: a JSON value gzipped without a timestamp (the same bytes every build).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import threading
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np

from mathscout.notices import notice
from mathscout.structure.paths import is_wildcard_path
from mathscout.structure.postings import BlockedPostings, get_bounded

PATH_FILES = ("path_hash.npy", "path_tid.npy")
BLOCK_FILE = "blocks.npz"
BLOCK_SHIFT = 7
BLOCK = 1 << BLOCK_SHIFT  # entries per block (Lucene and PISA skip over blocks of 128 postings)
BLOCK_MASK = BLOCK - 1
SCAN_BYTES = 64 * 2**20  # postings read at a time when a block table is made


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
            if (
                hashes.ndim != 1
                or tids.shape != hashes.shape
                or hashes.dtype != np.uint64
                or not np.issubdtype(tids.dtype, np.integer)
            ):
                raise ValueError("the path dictionary tables are malformed")
            return cls(hashes, tids)
        return cls(None, None, {p: i for i, p in enumerate(read_json())})

    def __len__(self) -> int:
        if self._dict is not None:
            return len(self._dict)
        assert self._hashes is not None  # the tables when there is no dictionary
        return len(self._hashes)

    def get(self, path: str, default=None):
        if self._dict is not None:
            return self._dict.get(path, default)
        hashes, tids = self._hashes, self._tids
        assert hashes is not None and tids is not None  # the tables when there is no dictionary
        h = np.uint64(path_hash(path))
        at = int(np.searchsorted(hashes, h))
        if at < len(hashes) and hashes[at] == h:
            return int(tids[at])
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
        tids = self._tids
        assert tids is not None  # the tables when there is no dictionary
        if len(tids) != n_lists or (n_lists and (tids.min() < 0 or tids.max() >= n_lists)):
            raise ValueError("the posting lists and the path dictionary disagree")

    def wildcard_mask(self) -> np.ndarray:
        """Which lists are wildcard paths (only for indexes without `ordinary_entries` in meta.json)."""
        mask = np.zeros(len(self), dtype=bool)
        for path, tid in (self._dict or {}).items():
            mask[tid] = is_wildcard_path(path)
        return mask


def save_json_gz(path: Path, value) -> None:
    """`value` as gzipped JSON, without a gzip timestamp: a rebuild writes the same bytes."""
    path.write_bytes(gzip.compress(json.dumps(value).encode("utf-8"), compresslevel=6, mtime=0))


def load_json_gz(path: Path):
    return json.loads(gzip.decompress(path.read_bytes()))


def load_npz_member(path: Path, name: str) -> np.ndarray:
    """Array `name` of an .npz, memory-mapped when it is stored uncompressed (np.savez), else read."""
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(f"{name}.npy")
        if info.compress_type != zipfile.ZIP_STORED:
            with archive.open(info) as f:
                return np.lib.format.read_array(f, allow_pickle=False)
        with archive.open(info) as f:  # the member's .npy header tells shape, dtype and where the data starts
            version = np.lib.format.read_magic(f)
            read_header = (
                np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            )
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


@numba.njit(cache=True, inline="always")
def _entry_head(buf, at, end, max_delta, max_node, max_width, max_groups):
    """An entry's formula-id delta, root-end node, width and number of symbol groups (postings.py's layout), each
    bounded: (delta, node, width, groups, next position); position -1 when a read failed (see `_get_at_most`)."""
    delta, at = _get_at_most(buf, at, end, max_delta)
    node, at = _get_at_most(buf, at, end, max_node)
    width, at = _get_at_most(buf, at, end, max_width)
    groups, at = _get_at_most(buf, at, end, max_groups)
    return delta, node, width, groups, at


@numba.njit(cache=True, inline="always")
def _skip_groups(buf, at, end, groups):
    """The position after an entry's `groups` symbol groups (three numbers each), read without keeping them."""
    for _ in range(3 * groups):
        _, at = _get_at_most(buf, at, end, 2**31 - 1)
    return at


class DamagedList(ValueError):
    """A posting list (or its block table) that does not decode within its bounds."""


# ---------------------------------------------------------------- block table


@numba.njit(cache=True)
def _scan_blocks(buf, byte_offsets, list_start, n_blocks, shift):
    """Walk every list once and note where each block of 2**shift entries starts: (ok, byte (+ end), base, last,
    group (+ total)). ok = False when a list does not decode within its bytes."""
    byte = np.empty(n_blocks + 1, dtype=np.int64)
    base = np.empty(n_blocks, dtype=np.int32)
    last = np.empty(n_blocks, dtype=np.int32)
    group = np.empty(n_blocks + 1, dtype=np.int64)
    mask = (1 << shift) - 1
    b = 0
    g = 0
    for t in range(list_start.shape[0] - 1):
        at, end = byte_offsets[t], byte_offsets[t + 1]
        previous = 0
        for i in range(list_start[t + 1] - list_start[t]):
            if i & mask == 0:
                if i > 0:
                    last[b - 1] = previous
                if b >= n_blocks:
                    return False, byte, base, last, group
                byte[b], base[b], group[b] = at, previous, g
                b += 1
            delta, _, _, groups, at = _entry_head(buf, at, end, 2**31 - 1 - previous, 2**31 - 1, 2**31 - 1, 2**31 - 1)
            previous += delta
            at = _skip_groups(buf, at, end, groups)
            if at < 0:
                return False, byte, base, last, group
            g += groups
        if list_start[t + 1] > list_start[t]:
            last[b - 1] = previous
        if at != end:
            return False, byte, base, last, group
    byte[b], group[b] = byte_offsets[-1], g
    return b == n_blocks, byte, base, last, group


def first_blocks(list_start: np.ndarray) -> np.ndarray:
    """The block number each list starts at (one more than the lists: the last is the number of blocks)."""
    lengths: np.ndarray = np.diff(np.asarray(list_start, dtype=np.int64))  # numpy's stubs: a timedelta64 array
    counts = (lengths + BLOCK - 1) >> BLOCK_SHIFT
    return np.concatenate(([0], np.cumsum(counts))).astype(np.int64)


@dataclass(frozen=True)
class BlockTable:
    """Where each block of BLOCK entries of every list starts (Zhong 2023 thesis §4.4.1: skip lists over compressed lists).

    Block b of the file: bytes byte[b]:byte[b + 1] of postings.bin, formula-id deltas counted from base[b] (the
    formula id before it), last formula id last[b] (what a skip compares with, without decoding), symbol groups
    group[b]:group[b + 1] of the whole file. List t holds blocks first[t]:first[t + 1]."""

    first: np.ndarray
    byte: np.ndarray
    base: np.ndarray
    last: np.ndarray
    group: np.ndarray

    @classmethod
    def scan(
        cls, postings: Path, byte_offsets: np.ndarray, list_start: np.ndarray, n_groups: int, piece: int = SCAN_BYTES
    ) -> BlockTable:
        """The table of a postings file, by one pass over it, read `piece` bytes of whole lists at a time (a list longer
        than that alone): memory stays bounded, no page of the file stays mapped. DamagedList when a list does not
        decode within its bytes."""
        byte_offsets = np.asarray(byte_offsets, dtype=np.int64)
        list_start = np.asarray(list_start, dtype=np.int64)
        first = first_blocks(list_start)
        n, n_lists = int(first[-1]), len(list_start) - 1
        byte, group = np.empty(n + 1, dtype=np.int64), np.empty(n + 1, dtype=np.int64)
        base, last = np.empty(n, dtype=np.int32), np.empty(n, dtype=np.int32)
        t, g = 0, 0
        with open(postings, "rb") as f:
            while t < n_lists:
                u = min(n_lists, max(t + 1, int(np.searchsorted(byte_offsets, byte_offsets[t] + piece, "right")) - 1))
                lo, hi = int(byte_offsets[t]), int(byte_offsets[u])
                f.seek(lo)
                chunk = np.fromfile(f, dtype=np.uint8, count=hi - lo)
                b0, b1 = int(first[t]), int(first[u])
                ok, c_byte, c_base, c_last, c_group = _scan_blocks(
                    chunk,
                    byte_offsets[t : u + 1] - lo,
                    list_start[t : u + 1] - list_start[t],
                    np.int64(b1 - b0),
                    BLOCK_SHIFT,
                )
                if not ok or len(chunk) != hi - lo:
                    raise DamagedList("a posting list does not decode within its bytes")
                byte[b0:b1], base[b0:b1], last[b0:b1] = c_byte[:-1] + lo, c_base, c_last
                group[b0:b1] = c_group[:-1] + g
                g += int(c_group[-1])
                t = u
        byte[n], group[n] = byte_offsets[-1], g
        if g != n_groups:
            raise DamagedList("a posting list does not decode within its bytes")
        return cls(first, byte, base, last, group)

    def write(self, folder: Path) -> None:
        """blocks.npz in `folder`, whole or not at all (written beside it, then renamed)."""
        name = folder / f".blocks-{os.getpid()}-{threading.get_ident()}.npz"  # created as any file of the index (umask)
        try:
            with open(name, "xb") as f:
                np.savez(f, block=np.int64(BLOCK), byte=self.byte, base=self.base, last=self.last, group=self.group)
                f.flush()
                os.fsync(f.fileno())
            os.replace(name, folder / BLOCK_FILE)
        except BaseException:
            Path(name).unlink(missing_ok=True)
            raise

    @classmethod
    def read(cls, folder: Path, list_start: np.ndarray) -> BlockTable | None:
        """The table written with the index (memory-mapped), or None when the index has none (built before it)."""
        path = folder / BLOCK_FILE
        if not path.is_file():
            return None
        first = first_blocks(list_start)
        with np.load(path, allow_pickle=False) as archive:
            block = int(archive["block"])
        if block != BLOCK:
            return None  # another block size: scanned again
        table = cls(first, *(load_npz_member(path, name) for name in ("byte", "base", "last", "group")))
        n = int(first[-1])
        if (
            table.byte.shape != (n + 1,)
            or table.group.shape != (n + 1,)
            or table.base.shape != (n,)
            or table.last.shape != (n,)
        ):
            raise ValueError("the block table does not fit the posting lists")
        return table

    @classmethod
    def open(cls, folder: Path, byte_offsets: np.ndarray, list_start: np.ndarray, n_groups: int) -> BlockTable:
        """The index's table; an index built without one gets it scanned now and written beside it when it can be."""
        table = cls.read(folder, list_start)
        if table is not None:
            return table
        started = time.perf_counter()
        notice(
            f"structure index {folder}: indexing the blocks of its posting lists (once; an index built before "
            "block skipping)"
        )
        table = cls.scan(folder / "postings.bin", byte_offsets, list_start, n_groups)
        try:
            table.write(folder)
        except OSError as exc:  # a read-only index: the table stays in memory
            notice(f"structure index {folder}: could not keep the block table ({exc}); it is scanned again next time")
        notice(f"structure index {folder}: {len(table.last):,} blocks in {time.perf_counter() - started:.1f} s")
        return table


# ---------------------------------------------------------------- reading blocks inside the kernels
# The kernels' index tuple `ix` (search.py): 0-6 the query's entry and group arrays (BlockedPostings), 7 leaves and
# 8 document of each formula, 9 postings.bin, 10 the query's blocks (columns B_*), 11 decoded flag of each, 12 limits,
# 13 the id each of the index's symbols is searched by (a shard's symbols get the collection's ids).
B_BYTE, B_END, B_BASE, B_LAST, B_GROUP, B_GROUP_END, B_ENTRIES = range(7)


@numba.njit(cache=True)
def decode_block(ix, ab):
    """Decode the query's block `ab` into its entry and group arrays, every read and every id checked against the block
    table and the index's limits (DamagedList otherwise)."""
    fid, node, width, sym_start, sym, fp, count = ix[0], ix[1], ix[2], ix[3], ix[4], ix[5], ix[6]
    buf, blocks, decoded, limits, symbol_map = ix[9], ix[10], ix[11], ix[12], ix[13]
    at, end, previous, last = blocks[ab, B_BYTE], blocks[ab, B_END], blocks[ab, B_BASE], blocks[ab, B_LAST]
    g, g_end, n = blocks[ab, B_GROUP], blocks[ab, B_GROUP_END], blocks[ab, B_ENTRIES]
    n_symbols, max_node, max_leaves = limits[1], limits[2], limits[3]
    e = ab << BLOCK_SHIFT
    for i in range(n):
        delta, node[e + i], width[e + i], groups, at = _entry_head(
            buf, at, end, last - previous, max_node, max_leaves, min(max_leaves, g_end - g)
        )
        previous += delta
        fid[e + i] = previous
        sym_start[e + i] = g
        for _ in range(groups):
            symbol, at = _get_at_most(buf, at, end, n_symbols - 1)
            sym[g] = symbol_map[max(symbol, 0)]
            fp[g], at = _get_at_most(buf, at, end, 2**31 - 1)
            count[g], at = _get_at_most(buf, at, end, 2**31 - 1)
            g += 1
        if at < 0:
            raise DamagedList("a posting block does not decode")
    if at != end or g != g_end or previous != last:
        raise DamagedList("a posting block does not match its block table")
    sym_start[e + n] = g  # the end of the last entry's groups (the next block's first entry starts there too)
    decoded[ab] = 1


@numba.njit(cache=True, inline="always")
def crossed_into(decoded, p, end):
    """Whether moving on to position p (one past the last entry read) enters a block not yet decoded: then the caller
    decodes it (`decode_block(ix, p >> BLOCK_SHIFT)`). The index tuple stays out of this test: handing it on costs a
    reference count per array, too much for a test made at every entry."""
    return p < end and p & BLOCK_MASK == 0 and decoded[p >> BLOCK_SHIFT] == 0


@numba.njit(cache=True, inline="always")
def skip_block(blocks, pos, end, target):
    """Zhong 2023 thesis Alg. 4's skipTo, first half: the block where the first entry ≥ target of positions [pos, end) lies,
    or -1 when there is none. Whole blocks whose last formula id is below target are passed by the block table,
    without decoding them (galloping, then binary search over the list's blocks)."""
    if pos >= end:
        return -1
    ab = pos >> BLOCK_SHIFT
    if blocks[ab, B_LAST] >= target:
        return ab
    final = (end - 1) >> BLOCK_SHIFT
    if blocks[final, B_LAST] < target:
        return -1
    low, high, stride = ab, ab + 1, 1  # invariant: last[low] < target ≤ last[high] once high is found
    while high < final and blocks[high, B_LAST] < target:
        low = high
        stride *= 2
        high = min(low + stride, final)
    while low + 1 < high:
        mid = (low + high) // 2
        if blocks[mid, B_LAST] < target:
            low = mid
        else:
            high = mid
    return high


@numba.njit(cache=True, inline="always")
def skip_in_block(fid, blocks, pos, ab, target):
    """skipTo's second half, in decoded block `ab` (whose last id is ≥ target): the first position ≥ pos in it whose
    formula id is ≥ target (galloping, then binary search)."""
    low = max(pos, ab << BLOCK_SHIFT)
    if fid[low] >= target:
        return low
    block_end = (ab << BLOCK_SHIFT) + blocks[ab, B_ENTRIES]
    stride = 1
    high = low + 1
    while high < block_end and fid[high] < target:
        low = high
        stride *= 2
        high = low + stride
    if high >= block_end:
        high = block_end - 1
    while low + 1 < high:  # invariant: fid[low] < target ≤ fid[high]
        mid = (low + high) // 2
        if fid[mid] < target:
            low = mid
        else:
            high = mid
    return high


@numba.njit(cache=True)
def mark_formulas(ix, start, end, mask):
    """mask[f] = True for every formula id of positions [start, end) (one list of the query), read straight from the
    postings without storing the entries: a reader that needs only a whole list's formulas (the heterogeneous search's
    document iterator) leaves the query's arrays to the blocks its kernel reaches. Bounds-checked as `decode_block`."""
    buf, blocks, limits = ix[9], ix[10], ix[12]
    if end <= start:
        return
    for ab in range(start >> BLOCK_SHIFT, ((end - 1) >> BLOCK_SHIFT) + 1):
        at, stop, previous, last = blocks[ab, B_BYTE], blocks[ab, B_END], blocks[ab, B_BASE], blocks[ab, B_LAST]
        for _ in range(blocks[ab, B_ENTRIES]):
            delta, _, _, groups, at = _entry_head(buf, at, stop, last - previous, limits[2], limits[3], limits[3])
            previous += delta
            at = _skip_groups(buf, at, stop, groups)
            if at < 0:
                raise DamagedList("a posting block does not decode")
            mask[previous] = True
        if at != stop or previous != last:
            raise DamagedList("a posting block does not match its block table")


class PostingLists:
    """Lists of a memory-mapped postings.bin, read a block at a time by the kernels (see the module's docstring)."""

    def __init__(
        self,
        buf: np.ndarray,
        byte_offsets: np.ndarray,
        list_start: np.ndarray,
        blocks: BlockTable,
        n_formulas: int,
        n_symbols: int,
        max_node: int,
        max_leaves: int,
    ):
        self.buf, self.byte_offsets, self.list_start, self.blocks = buf, byte_offsets, list_start, blocks
        self.n_formulas, self.n_symbols, self.max_node, self.max_leaves = n_formulas, n_symbols, max_node, max_leaves
        self.limits = np.array([n_formulas, n_symbols, max_node, max_leaves], dtype=np.int64)
        self.symbol_map = np.arange(n_symbols, dtype=np.int32)  # the id a decoded symbol gets (a shard: its global id)

    def __len__(self) -> int:
        return len(self.list_start) - 1

    def df(self, tid: int) -> int:
        return int(self.list_start[tid + 1] - self.list_start[tid])

    def view(self, tids: np.ndarray) -> tuple[BlockedPostings, np.ndarray, np.ndarray]:
        """The given lists laid out for the kernels, nothing decoded yet: (their arrays, start and end of each given list
        in them). Each list starts at a multiple of BLOCK, so a position's block is position >> BLOCK_SHIFT; the arrays
        are allocated untouched (only the blocks the kernels decode take memory)."""
        tids = np.asarray(tids, dtype=np.int64)
        unique, inverse = np.unique(tids, return_inverse=True)
        table = self.blocks
        b0, b1 = table.first[unique], table.first[unique + 1]
        nb = b1 - b0
        at = np.concatenate(([0], np.cumsum(nb))).astype(np.int64)  # the query's first block of each list
        n = int(at[-1])
        owner = np.repeat(np.arange(len(unique)), nb)  # which of the lists each block belongs to
        within = np.arange(n) - at[:-1][owner]  # each block's number within its list
        gb = b0[owner] + within  # the file's block number of each of the query's blocks
        df = self.list_start[unique + 1] - self.list_start[unique]
        groups = table.group[b1] - table.group[b0]
        g_at = np.concatenate(([0], np.cumsum(groups))).astype(np.int64)
        blocks = np.empty((n, 7), dtype=np.int64, order="F")  # column by column: a skip reads only the B_LAST column
        blocks[:, B_BYTE], blocks[:, B_END] = table.byte[gb], table.byte[gb + 1]
        blocks[:, B_BASE], blocks[:, B_LAST] = table.base[gb], table.last[gb]
        blocks[:, B_GROUP] = g_at[:-1][owner] + table.group[gb] - table.group[b0][owner]
        blocks[:, B_GROUP_END] = blocks[:, B_GROUP] + table.group[gb + 1] - table.group[gb]
        blocks[:, B_ENTRIES] = np.minimum(BLOCK, df[owner] - (within << BLOCK_SHIFT))
        self._check(unique, blocks, at, df)
        capacity = n << BLOCK_SHIFT
        sym, fp, count = (np.empty(int(g_at[-1]), dtype=np.int32) for _ in range(3))
        postings = BlockedPostings(
            np.empty(capacity, dtype=np.int32),
            np.empty(capacity, dtype=np.int32),
            np.empty(capacity, dtype=np.int32),
            np.empty(capacity + 1, dtype=np.int64),
            sym,
            fp,
            count,
            self.buf,
            blocks,
            np.zeros(n, dtype=np.uint8),
            self.limits,
            self.symbol_map,
        )
        start = at[:-1] << BLOCK_SHIFT
        return postings, start[inverse], (start + df)[inverse]

    def _check(self, tids: np.ndarray, blocks: np.ndarray, at: np.ndarray, df: np.ndarray) -> None:
        """The query's rows of the block table must describe its lists before a kernel reads through them."""
        first, later = at[:-1][df > 0], np.ones(len(blocks), dtype=bool)
        later[first] = False
        size = blocks[:, B_END] - blocks[:, B_BYTE]
        ok = (
            np.all(blocks[first, B_BYTE] == self.byte_offsets[tids[df > 0]])
            and np.all(blocks[at[1:][df > 0] - 1, B_END] == self.byte_offsets[tids[df > 0] + 1])
            and np.all(blocks[first, B_BASE] == 0)
            and np.all(blocks[1:, B_BASE][later[1:]] == blocks[:-1, B_LAST][later[1:]])
            and np.all(blocks[:, B_LAST] >= blocks[:, B_BASE])
            and np.all(blocks[:, B_LAST] < self.n_formulas)
            and np.all(blocks[:, B_ENTRIES] >= 1)
            and np.all(size >= 4 * blocks[:, B_ENTRIES])
            and np.all(blocks[:, B_GROUP_END] >= blocks[:, B_GROUP])
            and np.all(3 * (blocks[:, B_GROUP_END] - blocks[:, B_GROUP]) <= size)
        )
        if not ok:
            raise DamagedList("the block table does not describe the posting lists")
