"""Compact posting lists for the path index: delta-coded formula ids, variable-byte integers (Zhong 2023 thesis §4.4.1).

One posting list per token path; its entries are sorted by (formula id, root-end node) and each is

    formula-id delta, root-end node, width |D_t^(n)|, number of symbol groups,
    then per group: leaf symbol id, fingerprint, number of paths

where a *symbol group* counts the paths of the entry that share leaf symbol and fingerprint. All
integers are unsigned LEB128 (7 bits a byte). A query's lists are decoded when it needs them (lists.py, every
read bounds-checked) a block at a time into flat numpy arrays (`BlockedPostings`) that the search kernel reads in place.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from mathscout.structure import compile_notice  # noqa: F401  (says so when the kernels compile)


@dataclass(frozen=True)
class BlockedPostings:
    """A query's posting lists laid out for the kernels (lists.py's `PostingLists.view`): entry and group arrays that
    the kernels fill a block at a time, and what they decode the blocks from.

    Entry e's symbol groups are `sym_start[e]:sym_start[e + 1]` of the `sym_*` arrays.
    """

    fid: np.ndarray  # int32 formula ordinal
    node: np.ndarray  # int32 root-end node (pre-order id in the formula's tree)
    width: np.ndarray  # int32 paths of this token path under the node
    sym_start: np.ndarray  # int64, one more than the entries
    sym: np.ndarray  # int32 leaf symbol id
    fp: np.ndarray  # int32 fingerprint
    count: np.ndarray  # int32 paths with this symbol and fingerprint
    buf: np.ndarray  # uint8 postings.bin (memory-mapped)
    blocks: np.ndarray  # int64 rows of the query's blocks (lists.py: B_BYTE … B_ENTRIES)
    decoded: np.ndarray  # uint8 per block: 1 once decoded
    limits: np.ndarray  # int64 formulas, symbols, largest node id, largest width of the index
    symbol_map: np.ndarray  # int32 the id each symbol of the index is searched by (lists.py)


@numba.njit(cache=True)
def put_varbyte(buf, at, value):
    """Write `value` (≥ 0) as LEB128 at buf[at]; returns the position after it."""
    while value >= 128:
        buf[at] = (value & 127) | 128
        value >>= 7
        at += 1
    buf[at] = value
    return at + 1


@numba.njit(cache=True)
def get_varbyte(buf, at):
    """Read one LEB128 number at buf[at] (`put_varbyte`'s): (value, the position after it)."""
    value: int | np.int64 = 0  # an int64 under numba
    shift = 0
    while True:
        byte = buf[at]
        at += 1
        value |= (np.int64(byte) & 127) << shift
        if byte < 128:
            return value, at
        shift += 7


@numba.njit(cache=True)
def encode_varbyte(values):
    """Unsigned integers → LEB128 bytes."""
    buf = np.empty(values.shape[0] * 10, dtype=np.uint8)
    at = 0
    for v in values:
        at = put_varbyte(buf, at, np.int64(v))
    return buf[:at].copy()


@numba.njit(cache=True)
def decode_varbyte(buf, n):
    """The first n LEB128 integers of `buf`."""
    out = np.empty(n, dtype=np.int64)
    at = 0
    for i in range(n):
        out[i], at = get_varbyte(buf, at)
    return out


@numba.njit(cache=True)
def encode_lists(order, list_start, fid, node, width, sym_start, sym, fp, count):
    """Encode entries `order[list_start[i]:list_start[i+1]]` as list i; returns (bytes, byte offset of each list)."""
    n_lists = list_start.shape[0] - 1
    capacity = order.shape[0] * 20 + (sym.shape[0] * 15) + 16
    buf = np.empty(capacity, dtype=np.uint8)
    offsets = np.empty(n_lists + 1, dtype=np.int64)
    at = 0
    for i in range(n_lists):
        offsets[i] = at
        previous = 0
        for j in range(list_start[i], list_start[i + 1]):
            e = order[j]
            at = put_varbyte(buf, at, np.int64(fid[e]) - previous)
            previous = fid[e]
            at = put_varbyte(buf, at, np.int64(node[e]))
            at = put_varbyte(buf, at, np.int64(width[e]))
            at = put_varbyte(buf, at, np.int64(sym_start[e + 1] - sym_start[e]))
            for g in range(sym_start[e], sym_start[e + 1]):
                at = put_varbyte(buf, at, np.int64(sym[g]))
                at = put_varbyte(buf, at, np.int64(fp[g]))
                at = put_varbyte(buf, at, np.int64(count[g]))
    offsets[n_lists] = at
    return buf[:at].copy(), offsets


@numba.njit(cache=True)
def get_bounded(buf, at, end):
    """`get_varbyte` that never reads at or past `end`: (value, next position), or (-1, -1) for a damaged number."""
    value: int | np.int64 = 0
    shift = 0
    while at < end and shift <= 56:
        byte = buf[at]
        at += 1
        value |= (np.int64(byte) & 127) << shift
        if byte < 128:
            return value, at
        shift += 7
    return -1, -1


class DamagedPostings(ValueError):
    """The posting arrays do not describe a well-formed posting file."""


def check_layout(buf: np.ndarray, byte_offsets: np.ndarray, list_start: np.ndarray, n_groups: int) -> None:
    """The list tables must be monotone and inside the buffer before any kernel reads through them."""
    if byte_offsets.ndim != 1 or list_start.ndim != 1 or len(byte_offsets) != len(list_start) or len(list_start) < 1:
        raise DamagedPostings("list tables of different lengths")
    if not (np.issubdtype(byte_offsets.dtype, np.integer) and np.issubdtype(list_start.dtype, np.integer)):
        raise DamagedPostings("list tables are not integers")
    if (
        list_start[0] != 0
        or byte_offsets[0] != 0
        or np.any(np.diff(list_start) < 0)
        or np.any(np.diff(byte_offsets) < 0)
    ):
        raise DamagedPostings("list tables are not increasing")
    if byte_offsets[-1] > len(buf) or n_groups < 0 or list_start[-1] > len(buf) or n_groups > len(buf):
        raise DamagedPostings("list tables point past the posting file")
