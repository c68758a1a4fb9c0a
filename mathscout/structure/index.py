"""The path index (thesis §4.2, Figure 4.2): one posting list per token path, keyed by formula ordinal.

An entry of list t for formula f and root-end node n holds n, the width |D_t^(n)| (how many of f's
paths with token path t end at n), and the leaf symbols and fingerprints of those paths grouped
(postings.py). Path weights idf_t = log(N / DF_t) (§3.1.2) take DF_t = entries of list t and N = the
entries of the ordinary lists: the wildcard paths (`*/…`, paths.py) every formula adds for `\\qvar`
queries leave the weights of ordinary paths as they would be without them. Files in the index folder:

    meta.json      counts and settings
    paths.json.gz  token path of each list, in list order (gzip: paths repeat long prefixes)
    symbols.json   leaf symbols, in id order
    lists.npz      per list: byte offset in postings.bin, first entry; total symbol groups
    postings.bin   the encoded lists
    formulas.npz   per formula ordinal: leaves (0 = not indexed) and document ordinal
"""

from __future__ import annotations

import gzip
import json
import sys
import time
from array import array
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from mathscout.errors import DamagedIndexError, IndexMissingError, MathScoutError
from mathscout.structure.parser import parse_latex
from mathscout.structure.paths import MAX_PATH_OPERATORS, is_wildcard_path, leaf_count, path_prefixes
from mathscout.structure.postings import DecodedPostings, decode_lists, encode_lists
from mathscout.structure.scoring import MAX_FORMULA_LEAVES

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
        size = sum((target / name).stat().st_size for name in _FILES)
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


class PathIndexWriter:
    """Accumulates posting entries formula by formula (in ordinal order), then writes the index folder."""

    def __init__(self, n_formulas: int):
        self.report = BuildReport()
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
        self._doc[fid] = doc
        tree = parse_latex(latex).tree
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
        self._leaves[fid] = leaves
        self.report.indexed += 1
        return None

    def _skip(self, reason: str) -> str:
        self.report.skipped[reason] += 1
        return reason

    def write(self, target: Path) -> None:
        """Sort entries into lists (stable, so each list stays in formula/node order), encode and write."""
        target.mkdir(parents=True, exist_ok=True)
        tid = np.frombuffer(self._tid, dtype=np.int32)
        order = np.argsort(tid, kind="stable")
        n_lists = len(self._paths)
        list_start = np.zeros(n_lists + 1, dtype=np.int64)
        np.cumsum(np.bincount(tid, minlength=n_lists), out=list_start[1:])
        sym_start = np.frombuffer(self._sym_start, dtype=np.int64)
        buf, byte_offsets = encode_lists(
            order,
            list_start,
            np.frombuffer(self._fid, dtype=np.int32),
            np.frombuffer(self._node, dtype=np.int32),
            np.frombuffer(self._width, dtype=np.int32),
            sym_start,
            np.frombuffer(self._sym, dtype=np.int32),
            np.frombuffer(self._fp, dtype=np.int32),
            np.frombuffer(self._count, dtype=np.int32),
        )
        buf.tofile(target / "postings.bin")
        np.savez(target / "lists.npz", byte_offsets=byte_offsets, list_start=list_start, n_groups=np.int64(len(self._sym)))
        np.savez(target / "formulas.npz", leaves=self._leaves, doc=self._doc)
        (target / "paths.json.gz").write_bytes(gzip.compress(json.dumps(list(self._paths)).encode("utf-8"), compresslevel=6))
        (target / "symbols.json").write_text(json.dumps(list(self._symbols), ensure_ascii=False), encoding="utf-8")
        self.report.entries = len(tid)
        self.report.paths = n_lists
        meta = {
            "version": FORMAT_VERSION,
            "formulas": int(self._leaves.shape[0]),
            "indexed_formulas": self.report.indexed,
            "entries": len(tid),
            "max_formula_leaves": MAX_FORMULA_LEAVES,
            "max_path_operators": MAX_PATH_OPERATORS,
            "wildcard_paths": True,
        }
        (target / "meta.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")


def build_path_index(formulas: Iterable[tuple[int, int, str]], n_formulas: int, target: Path, progress: bool = True) -> BuildReport:
    """Index (formula ordinal, document ordinal, LaTeX) triples into `target`; ordinals are < n_formulas."""
    started = time.perf_counter()
    writer = PathIndexWriter(n_formulas)
    for fid, doc, latex in tqdm(formulas, total=n_formulas, desc="path index", unit=" formulas", file=sys.stderr, mininterval=2.0, disable=not progress):
        writer.add(fid, doc, latex)
    writer.write(Path(target))
    writer.report.seconds = time.perf_counter() - started
    return writer.report


MAX_NODE_ID = 1 << 16  # pre-order node ids of a formula of at most MAX_FORMULA_LEAVES leaves stay far below this


def _check_tables(postings: DecodedPostings, n_paths: int, n_symbols: int, leaves: np.ndarray, doc: np.ndarray) -> None:
    """Every id the search kernels follow must point inside its table (ValueError otherwise)."""
    if len(postings.list_start) != n_paths + 1:
        raise ValueError("the posting lists and the path dictionary disagree")
    if leaves.ndim != 1 or doc.ndim != 1 or len(leaves) != len(doc):
        raise ValueError("the formula table is malformed")
    if not (np.issubdtype(leaves.dtype, np.integer) and np.issubdtype(doc.dtype, np.integer)):
        raise ValueError("the formula table is not integers")
    if len(doc) and (doc.min() < 0 or leaves.min() < 0):
        raise ValueError("the formula table holds negative ids")
    if len(postings.fid) and (postings.fid.min() < 0 or postings.fid.max() >= len(leaves)):
        raise ValueError("a posting names a formula the formula table does not have")
    if len(postings.sym) and (postings.sym.min() < 0 or postings.sym.max() >= n_symbols):
        raise ValueError("a posting names a symbol the symbol table does not have")
    if min(postings.node.min(initial=0), postings.width.min(initial=0), postings.count.min(initial=0)) < 0:
        raise ValueError("a posting holds a negative count")
    # the kernels size their scratch tables by these: no formula of the index can exceed them
    if leaves.max(initial=0) > MAX_FORMULA_LEAVES or postings.width.max(initial=0) > MAX_FORMULA_LEAVES:
        raise ValueError(f"a formula has more than {MAX_FORMULA_LEAVES} leaves")
    if len(postings.sym_start) > 1 and np.diff(postings.sym_start).max() > MAX_FORMULA_LEAVES:
        raise ValueError(f"a posting has more than {MAX_FORMULA_LEAVES} symbol groups")
    if postings.node.max(initial=0) > MAX_NODE_ID:
        raise ValueError("a posting names a node beyond any formula")


class PathIndex:
    """A path index opened for search: dictionary, symbols, decoded postings, path weights, formula table."""

    def __init__(self, folder: Path, meta: dict, paths: dict[str, int], symbols: dict[str, int], postings: DecodedPostings, leaves: np.ndarray, doc: np.ndarray):
        self.folder = folder
        self.meta = meta
        self.paths = paths
        self.symbols = symbols
        self.postings = postings
        self.leaves = leaves
        self.doc = doc
        df = np.diff(postings.list_start).astype(np.float64)
        wildcard = np.zeros(len(df), dtype=bool)
        for path, tid in paths.items():
            wildcard[tid] = is_wildcard_path(path)
        self.total_entries = int(df[~wildcard].sum())
        # floored just above 0: a wildcard list can be longer than all ordinary lists together in a tiny index
        self.idf = np.log(np.maximum(self.total_entries / df, 1.0 + 1e-9)) if len(df) else np.zeros(0)
        self.wildcard_paths = bool(meta.get("wildcard_paths"))

    @classmethod
    def open(cls, folder: Path | str) -> PathIndex:
        folder = Path(folder)
        missing = [name for name in _FILES if not (folder / name).is_file()]
        if missing:
            raise IndexMissingError(f"the structure index at {folder} is incomplete (missing {', '.join(missing)}); rebuild it")
        try:
            meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
            if meta.get("version") != FORMAT_VERSION:
                raise MathScoutError(f"the structure index at {folder} has format {meta.get('version')}, expected {FORMAT_VERSION}: rebuild it")
            paths = {p: i for i, p in enumerate(json.loads(gzip.decompress((folder / "paths.json.gz").read_bytes())))}
            symbols = {s: i for i, s in enumerate(json.loads((folder / "symbols.json").read_text(encoding="utf-8")))}
            lists = np.load(folder / "lists.npz", allow_pickle=False)
            formulas = np.load(folder / "formulas.npz", allow_pickle=False)
            buf = np.fromfile(folder / "postings.bin", dtype=np.uint8)
            postings = decode_lists(buf, lists["byte_offsets"], lists["list_start"], int(lists["n_groups"]))
            leaves, doc = formulas["leaves"], formulas["doc"]
            _check_tables(postings, len(paths), len(symbols), leaves, doc)
            return cls(folder, meta, paths, symbols, postings, leaves, doc)
        except MathScoutError:
            raise
        except Exception as exc:  # any damage the checks above found, or a reader's own error (zip, gzip, JSON)
            raise DamagedIndexError(f"the structure index at {folder} is damaged or unreadable ({exc}); rebuild it with "
                                    f"'mathscout index --index {folder.parent} --components structure'") from exc

    def path_idf(self, token_path: str) -> float:
        """idf of a token path (0 for a path the index has never seen: it cannot match)."""
        tid = self.paths.get(token_path)
        return float(self.idf[tid]) if tid is not None else 0.0
