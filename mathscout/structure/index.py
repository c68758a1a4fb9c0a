"""The path index (Zhong 2023 thesis §4.2, Figure 4.2): one posting list per token path, keyed by formula ordinal.

An entry of list t for formula f and root-end node n holds n, the width |D_t^(n)| (how many of f's
paths with token path t end at n), and the leaf symbols and fingerprints of those paths grouped
(postings.py). Path weights idf_t = log(N / DF_t) (Zhong 2023 thesis §3.1.2) take DF_t = entries of list t and N = the
entries of the ordinary lists: the wildcard paths (`*/…`, paths.py) every formula adds for `\\qvar`
queries leave the weights of ordinary paths as they would be without them. Files in the index folder:

    meta.json      counts and settings
    paths.json.gz  token path of each list, in list order (gzip: paths repeat long prefixes)
    path_hash.npy  64-bit hashes of the token paths, sorted, and path_tid.npy their list ids (lists.py: the
                   dictionary opens without building a dict; indexes without them read paths.json.gz)
    symbols.json   leaf symbols, in id order
    lists.npz      per list: byte offset in postings.bin, first entry; total symbol groups
    postings.bin   the encoded lists (memory-mapped at search time, read a block at a time)
    blocks.npz     per block of 128 entries of a list: byte offset, the formula ids it spans, first symbol group
                   (lists.py: skipping passes whole blocks without decoding them)
    formulas.npz   per formula ordinal: leaves (0 = not indexed) and document ordinal (memory-mapped)

The build buffers entries up to MATHSCOUT_SEGMENT_MB (96) and flushes them as segments merged on disk at the end
(segments.py), so its memory does not grow with the collection; the files are the same bytes either way.
"""

from __future__ import annotations

import json
import sys
import time
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mathscout.errors import DamagedIndexError, IndexMissingError, MathScoutError
from mathscout.progress import bar as progress_bar
from mathscout.settings import settings
from mathscout.structure.lexer import LEXER
from mathscout.structure.lists import (
    BLOCK_FILE,
    PATH_FILES,
    BlockTable,
    DamagedList,
    PathDictionary,
    PostingLists,
    load_json_gz,
    load_npz_member,
    save_json_gz,
    write_path_table,
)
from mathscout.structure.parser import parse_latex
from mathscout.structure.paths import MAX_PATH_OPERATORS, leaf_count, path_prefixes
from mathscout.structure.postings import BlockedPostings, check_layout, encode_lists
from mathscout.structure.scoring import MAX_FORMULA_LEAVES, floored_path_idf
from mathscout.structure.segments import Segment, merge_segments, remove_segments, write_segment

FORMAT_VERSION = 1
_FILES = ("meta.json", "paths.json.gz", "symbols.json", "lists.npz", "postings.bin", "formulas.npz")


@dataclass
class BuildReport:
    """What a build indexed and skipped (skip reasons with counts)."""

    formulas: int = 0
    indexed: int = 0
    entries: int = 0
    paths: int = 0
    skipped: Counter = field(default_factory=Counter)
    seconds: float = 0.0

    def as_stats(self, target: Path) -> dict[str, Any]:
        size = sum(
            (target / name).stat().st_size for name in _FILES + PATH_FILES + (BLOCK_FILE,) if (target / name).exists()
        )
        return {
            "formulas": self.formulas,
            "indexed_formulas": self.indexed,
            "posting_entries": self.entries,
            "token_paths": self.paths,
            "skipped": dict(self.skipped),
            "seconds": round(self.seconds, 2),
            "formulas_per_second": round(self.formulas / max(self.seconds, 1e-9), 1),
            "bytes": size,
        }


def default_segment_bytes() -> int:
    """Path-index entries buffered per segment: MATHSCOUT_SEGMENT_MB as bytes."""
    return int(settings().segment_mb * 2**20)


class PathIndexWriter:
    """Accumulates posting entries formula by formula (in ordinal order), then writes the index folder."""

    def __init__(
        self,
        n_formulas: int,
        target: Path,
        segment_bytes: int | None = None,
        progress: bool = True,
        first: int = 0,
        segment_folder: Path | None = None,
    ):
        """`first`: the ordinal of the first formula (a worker of a parallel build indexes n_formulas from there,
        parallel.py); segments go to `segment_folder` (default: target/.segments)."""
        self.report = BuildReport()
        self.progress = progress
        self.target = Path(target)
        self.segment_bytes = segment_bytes or default_segment_bytes()
        self.first = first
        self.segment_folder = Path(segment_folder) if segment_folder is not None else self.target / ".segments"
        self._segments: list[Segment] = []
        self._groups = 0
        self._paths: dict[str, int] = {}
        self._symbols: dict[str, int] = {}
        self._leaves = np.zeros(n_formulas, dtype=np.uint16)
        self._doc = np.full(n_formulas, -1, dtype=np.int32)
        self._tid, self._fid, self._node, self._width = array("i"), array("i"), array("i"), array("i")
        self._sym_start = array("q", [0])
        self._sym, self._fp, self._count = array("i"), array("i"), array("i")

    def add(self, fid: int, doc: int, latex: str) -> str | None:
        """Index one formula; returns why it was skipped, or None."""
        self.report.formulas += 1
        self._doc[fid - self.first] = doc
        tree = parse_latex(latex, LEXER).tree  # the lexer new builds use (recorded in the component's manifest entry)
        if tree is None:
            return self._skip("does not parse")
        leaves = leaf_count(tree)
        if leaves > MAX_FORMULA_LEAVES:
            return self._skip(f"more than {MAX_FORMULA_LEAVES} operands")
        prefixes = path_prefixes(tree, MAX_PATH_OPERATORS, wildcard_paths=True)
        if not prefixes:
            return self._skip("a single symbol (no operator)")
        groups: dict[tuple[int, int], Counter] = {}
        for p in prefixes:
            tid = self._paths.setdefault(p.token_path, len(self._paths))
            sid = self._symbols.setdefault(p.symbol, len(self._symbols))
            groups.setdefault((p.root_end, tid), Counter())[(sid, p.fingerprint)] += 1
        for (node, tid), symbol_groups in sorted(groups.items()):
            self._tid.append(tid)
            self._fid.append(fid)
            self._node.append(node)
            self._width.append(sum(symbol_groups.values()))
            for (sid, fingerprint), count in sorted(symbol_groups.items()):
                self._sym.append(sid)
                self._fp.append(fingerprint)
                self._count.append(count)
            self._sym_start.append(len(self._sym))
        self._leaves[fid - self.first] = leaves
        self.report.indexed += 1
        if self._buffered_bytes() >= self.segment_bytes:
            self._flush_segment()
        return None

    def _skip(self, reason: str) -> str:
        self.report.skipped[reason] += 1
        return reason

    def _buffered_bytes(self) -> int:
        return 24 * len(self._tid) + 12 * len(self._sym)

    def _encode(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The buffered entries as lists over every path known so far: (bytes, byte offsets, list starts, first and
        last formula id of each list)."""
        tid = np.frombuffer(self._tid, dtype=np.int32)
        fid = np.frombuffer(self._fid, dtype=np.int32)
        order = np.argsort(tid, kind="stable")  # stable: each list stays in formula/node order
        n_lists = len(self._paths)
        list_start = np.zeros(n_lists + 1, dtype=np.int64)
        np.cumsum(np.bincount(tid, minlength=n_lists), out=list_start[1:])
        buf, byte_offsets = encode_lists(
            order,
            list_start,
            fid,
            np.frombuffer(self._node, dtype=np.int32),
            np.frombuffer(self._width, dtype=np.int32),
            np.frombuffer(self._sym_start, dtype=np.int64),
            np.frombuffer(self._sym, dtype=np.int32),
            np.frombuffer(self._fp, dtype=np.int32),
            np.frombuffer(self._count, dtype=np.int32),
        )
        nonempty = list_start[1:] > list_start[:-1]
        first = np.zeros(n_lists, dtype=np.int64)
        last = np.zeros(n_lists, dtype=np.int64)
        first[nonempty] = fid[order[list_start[:-1][nonempty]]]
        last[nonempty] = fid[order[list_start[1:][nonempty] - 1]]
        return buf, byte_offsets, list_start, first, last

    def _reset_buffers(self) -> None:
        self.report.entries += len(self._tid)
        self._groups += len(self._sym)
        self._tid, self._fid, self._node, self._width = array("i"), array("i"), array("i"), array("i")
        self._sym_start = array("q", [0])
        self._sym, self._fp, self._count = array("i"), array("i"), array("i")

    def _flush_segment(self) -> None:
        """Write the buffered entries as a segment and empty the buffers (bounded build memory)."""
        folder = self.segment_folder
        folder.mkdir(parents=True, exist_ok=True)
        buf, byte_offsets, list_start, first, last = self._encode()
        self._segments.append(
            write_segment(folder, len(self._segments), buf, byte_offsets, list_start, first, last, len(self._sym))
        )
        del buf
        self._reset_buffers()

    def write(self, target: Path) -> None:
        """Sort entries into lists (stable, so each list stays in formula/node order), encode and write; a build
        that flushed segments merges them on disk (segments.py) into the same bytes."""
        target.mkdir(parents=True, exist_ok=True)
        if self._segments:
            if len(self._tid):
                self._flush_segment()
            byte_offsets, list_start, n_groups = merge_segments(
                self._segments, len(self._paths), target / "postings.bin", self.progress
            )
            remove_segments(self._segments)
            self.segment_folder.rmdir()
        else:
            buf, byte_offsets, list_start, _, _ = self._encode()
            buf.tofile(target / "postings.bin")
            del buf
            self._reset_buffers()
            n_groups = self._groups
        write_index_tables(
            target,
            byte_offsets,
            list_start,
            n_groups,
            self._leaves,
            self._doc,
            list(self._paths),
            list(self._symbols),
            self.report,
            {"segments": len(self._segments)},
        )

    def finish_part(self) -> IndexPart:
        """A worker's share of a parallel build (parallel.py): what is buffered flushed as a last segment, its
        dictionaries and formula table written into its segment folder."""
        if len(self._tid):
            self._flush_segment()
        folder = self.segment_folder
        folder.mkdir(parents=True, exist_ok=True)
        part = IndexPart(list(self._segments), folder / "paths.json", folder / "symbols.json", folder / "formulas.npz")
        part.paths_file.write_text(json.dumps(list(self._paths)), encoding="utf-8")
        part.symbols_file.write_text(json.dumps(list(self._symbols), ensure_ascii=False), encoding="utf-8")
        np.savez(part.table_file, leaves=self._leaves, doc=self._doc)
        return part


@dataclass
class IndexPart:
    """What `PathIndexWriter.finish_part` leaves on disk: segments, the part's own path and symbol dictionaries (in
    order of first appearance) and its formula table (leaves, doc)."""

    segments: list[Segment]
    paths_file: Path
    symbols_file: Path
    table_file: Path


def write_index_tables(
    target: Path,
    byte_offsets: np.ndarray,
    list_start: np.ndarray,
    n_groups: int,
    leaves: np.ndarray,
    doc: np.ndarray,
    paths: list[str],
    symbols: list[str],
    report: BuildReport,
    extra: dict,
) -> None:
    """Everything of the index folder but postings.bin (written first): list and formula tables, dictionaries, meta."""
    np.savez(target / "lists.npz", byte_offsets=byte_offsets, list_start=list_start, n_groups=np.int64(n_groups))
    BlockTable.scan(target / "postings.bin", byte_offsets, list_start, n_groups).write(target)
    np.savez(target / "formulas.npz", leaves=leaves, doc=doc)
    save_json_gz(target / "paths.json.gz", paths)
    ordinary = write_path_table(target, paths, np.diff(list_start))
    (target / "symbols.json").write_text(json.dumps(symbols, ensure_ascii=False), encoding="utf-8")
    report.paths = len(paths)
    meta = {
        "version": FORMAT_VERSION,
        "formulas": int(leaves.shape[0]),
        "indexed_formulas": report.indexed,
        "entries": report.entries,
        "ordinary_entries": ordinary,
        "max_formula_leaves": MAX_FORMULA_LEAVES,
        "max_path_operators": MAX_PATH_OPERATORS,
        "wildcard_paths": True,
        **extra,
    }
    (target / "meta.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")


def build_path_index(
    formulas: Iterable[tuple[int, int, str]],
    n_formulas: int,
    target: Path,
    progress: bool = True,
    segment_bytes: int | None = None,
) -> BuildReport:
    """Index (formula ordinal, document ordinal, LaTeX) triples into `target`; ordinals are < n_formulas.
    Entries are flushed as a segment whenever they pass `segment_bytes` and the segments merged at the end."""
    started = time.perf_counter()
    writer = PathIndexWriter(n_formulas, Path(target), segment_bytes, progress)
    for fid, doc, latex in progress_bar(
        formulas,
        total=n_formulas,
        desc="path index",
        unit=" formulas",
        file=sys.stderr,
        mininterval=2.0,
        disable=not progress,
    ):
        writer.add(fid, doc, latex)
    writer.write(Path(target))
    writer.report.seconds = time.perf_counter() - started
    return writer.report


MAX_NODE_ID = 1 << 16  # pre-order node ids of a formula of at most MAX_FORMULA_LEAVES leaves stay far below this


def _check_tables(lists: PostingLists, paths: PathDictionary, leaves: np.ndarray, doc: np.ndarray) -> None:
    """Every id the search kernels follow must point inside its table (ValueError otherwise); the postings
    themselves are checked list by list as they are decoded (lists.py)."""
    paths.check(len(lists))
    if leaves.ndim != 1 or doc.ndim != 1 or len(leaves) != len(doc):
        raise ValueError("the formula table is malformed")
    if not (np.issubdtype(leaves.dtype, np.integer) and np.issubdtype(doc.dtype, np.integer)):
        raise ValueError("the formula table is not integers")
    if len(doc) and (doc.min() < 0 or leaves.min() < 0):
        raise ValueError("the formula table holds negative ids")
    # the kernels size their scratch tables by these: no formula of the index can exceed them
    if leaves.max(initial=0) > MAX_FORMULA_LEAVES:
        raise ValueError(f"a formula has more than {MAX_FORMULA_LEAVES} leaves")


class PathIndex:
    """A path index opened for search: hashed path dictionary, symbols, memory-mapped postings decoded per list on
    demand (lists.py), path weights, formula table (memory-mapped)."""

    def __init__(
        self,
        folder: Path,
        meta: dict,
        paths: PathDictionary,
        symbols: dict[str, int],
        lists: PostingLists,
        leaves: np.ndarray,
        doc: np.ndarray,
    ):
        self.folder = folder
        self.meta = meta
        self.paths = paths
        self.symbols = symbols
        self.lists = lists
        self.leaves = leaves
        self.doc = doc
        self.df = np.diff(lists.list_start)
        if "ordinary_entries" in meta:
            self.total_entries = int(meta["ordinary_entries"])
        else:  # indexes built before meta.json recorded it
            self.total_entries = int(self.df[~paths.wildcard_mask()].sum())
        self.wildcard_paths = bool(meta.get("wildcard_paths"))
        # a shard of a sharded index: idf_t of a token path that only other shards hold (it still bounds a query node)
        self.outside_weight: Callable[[str], float | None] | None = None

    def list_idf(self, tids: np.ndarray) -> np.ndarray:
        """idf_t = log(N / DF_t) of lists (Zhong 2023 thesis, Eq. 3.11, floored)."""
        return floored_path_idf(self.total_entries, self.df[np.asarray(tids, dtype=np.int64)])

    def view(self, tids: np.ndarray) -> tuple[BlockedPostings, np.ndarray, np.ndarray]:
        """Lists `tids` laid out for the kernels (see PostingLists.view); a damaged block table raises DamagedIndexError."""
        with self.reading():
            return self.lists.view(tids)

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Around anything that reads the lists (laying them out, the kernels decoding their blocks): a damaged list
        becomes a DamagedIndexError that names postings.bin and the rebuild command."""
        try:
            yield
        except DamagedList as exc:
            raise DamagedIndexError(
                f"the structure index at {self.folder} is damaged ({exc} in postings.bin); rebuild it with "
                f"'mathscout index --index {self.folder.parent} --components structure'"
            ) from None

    @classmethod
    def open(cls, folder: Path | str) -> PathIndex:
        folder = Path(folder)
        missing = [name for name in _FILES if not (folder / name).is_file()]
        if missing:
            raise IndexMissingError(
                f"the structure index at {folder} is incomplete (missing {', '.join(missing)}); rebuild it"
            )
        try:
            meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
            if meta.get("version") != FORMAT_VERSION:
                raise MathScoutError(
                    f"the structure index at {folder} has format {meta.get('version')}, expected {FORMAT_VERSION}: rebuild it"
                )
            paths = PathDictionary.open(folder, lambda: load_json_gz(folder / "paths.json.gz"))
            symbols = {s: i for i, s in enumerate(json.loads((folder / "symbols.json").read_text(encoding="utf-8")))}
            lists = np.load(folder / "lists.npz", allow_pickle=False)
            byte_offsets, list_start = lists["byte_offsets"], lists["list_start"]
            leaves, doc = (
                load_npz_member(folder / "formulas.npz", "leaves"),
                load_npz_member(folder / "formulas.npz", "doc"),
            )
            size = (folder / "postings.bin").stat().st_size
            buf = np.memmap(folder / "postings.bin", dtype=np.uint8, mode="r") if size else np.zeros(0, dtype=np.uint8)
            byte_offsets = (
                np.ascontiguousarray(byte_offsets, dtype=np.int64)
                if np.issubdtype(byte_offsets.dtype, np.integer)
                else byte_offsets
            )
            list_start = (
                np.ascontiguousarray(list_start, dtype=np.int64)
                if np.issubdtype(list_start.dtype, np.integer)
                else list_start
            )
            n_groups = int(lists["n_groups"])
            check_layout(buf, byte_offsets, list_start, n_groups)
            blocks = BlockTable.open(folder, byte_offsets, list_start, n_groups)
            postings = PostingLists(
                buf, byte_offsets, list_start, blocks, len(leaves), len(symbols), MAX_NODE_ID, MAX_FORMULA_LEAVES
            )
            _check_tables(postings, paths, leaves, doc)
            return cls(folder, meta, paths, symbols, postings, leaves, doc)
        except MathScoutError:
            raise
        except Exception as exc:  # any damage the checks above found, or a reader's own error (zip, gzip, JSON)
            raise DamagedIndexError(
                f"the structure index at {folder} is damaged or unreadable ({exc}); rebuild it with "
                f"'mathscout index --index {folder.parent} --components structure'"
            ) from exc

    def path_idf(self, token_path: str) -> float:
        """idf of a token path (0 for a path the index has never seen: it cannot match)."""
        tid = self.paths.get(token_path)
        return float(self.list_idf(np.array([tid]))[0]) if tid is not None else 0.0
