"""Text posting lists beside the path index: the top level of the heterogeneous index (Zhong 2023 thesis §4.2.2, Fig. 4.3).

Zhong 2023 thesis, Algorithm 5 merges text and math inverted lists document-at-a-time, so it needs every text term's
postings (document ordinal, term frequency) and document lengths. They are the same terms the `bm25`
component gives Lucene (`mathscout.retrievers.bm25.document_terms`), and `term_scores` reproduces Lucene 9's
BM25Similarity exactly (float32, lengths quantised by SmallFloat.intToByte4), so a document's text score
here equals its BM25 score from the foundation index (Zhong 2023 thesis, Eq. 3.18's BM25 term).

Files (in the structure component folder): `text.npz` (term_start, docs, tf, doc_len) and
`text_terms.json.gz` (the terms, in list order).
"""

from __future__ import annotations

import sys
import zipfile
from array import array
from collections import Counter
from pathlib import Path

import numpy as np

from mathscout.errors import DamagedIndexError, MathScoutError
from mathscout.progress import bar as progress_bar
from mathscout.settings import settings
from mathscout.structure.lists import load_json_gz, load_npz_member, save_json_gz

TEXT_FILES = ("text.npz", "text_terms.json.gz")


def _long_to_int4(i: int) -> int:
    """Lucene SmallFloat.longToInt4: 4 significant bits and a shift."""
    bits = i.bit_length()
    if bits < 4:
        return i
    shift = bits - 4
    return ((i >> shift) & 0x07) | ((shift + 1) << 3)


def _int4_to_long(i: int) -> int:
    bits, shift = i & 0x07, (i >> 3) - 1
    return bits if shift == -1 else (bits | 0x08) << shift


_NUM_FREE_VALUES = 255 - _long_to_int4(2**31 - 1)


def encode_length(length: int) -> int:
    """Lucene SmallFloat.intToByte4 (the one-byte norm BM25 stores for a document length)."""
    return length if length < _NUM_FREE_VALUES else _NUM_FREE_VALUES + _long_to_int4(length - _NUM_FREE_VALUES)


def decode_length(byte: int) -> int:
    """Lucene SmallFloat.byte4ToInt: the length BM25 scores with."""
    return (
        byte if byte < _NUM_FREE_VALUES else min(_NUM_FREE_VALUES + _int4_to_long(byte - _NUM_FREE_VALUES), 2**31 - 1)
    )


_LENGTH_TABLE = np.array([decode_length(i) for i in range(256)], dtype=np.float32)


def _check_lists(n_terms: int, term_start: np.ndarray, docs: np.ndarray, tf: np.ndarray, doc_len: np.ndarray) -> None:
    """Every offset and document ordinal must point inside its table (ValueError otherwise)."""
    if any(a.ndim != 1 or not np.issubdtype(a.dtype, np.integer) for a in (term_start, docs, tf, doc_len)):
        raise ValueError("the text lists are not integer tables")
    if len(term_start) != n_terms + 1 or term_start[0] != 0 or np.any(np.diff(term_start) < 0):
        raise ValueError("the term offsets are malformed")
    if term_start[-1] != len(docs) or len(docs) != len(tf):
        raise ValueError("the term offsets and postings disagree")
    if len(docs) and (docs.min() < 0 or docs.max() >= len(doc_len)):
        raise ValueError("a posting names a document the length table does not have")
    if len(doc_len) and doc_len.min() < 0:
        raise ValueError("negative document lengths")


class TextLists:
    """Per-term postings (document ordinal, tf) and document lengths, with Lucene-exact BM25 partial scores."""

    def __init__(
        self, terms: dict[str, int], term_start: np.ndarray, docs: np.ndarray, tf: np.ndarray, doc_len: np.ndarray
    ):
        self.terms = terms
        self.term_start = term_start
        self.docs = docs
        self.tf = tf
        self.doc_len = doc_len
        self.norm = encode_lengths(doc_len)
        self.doc_count = len(doc_len)
        self.avgdl = np.float32(float(doc_len.sum()) / max(self.doc_count, 1))
        self.global_df: np.ndarray | None = None  # a shard's collection-wide df per term (retrievers/shards/stats.py)

    @classmethod
    def build(cls, documents, segment_postings: int | None = None, folder: Path | None = None) -> TextLists:
        """From (document ordinal order) lists of index terms; with `folder`, postings are flushed there as sorted
        segments every `segment_postings` and merged on disk into text.npz (memory-mapped back)."""
        builder = _TextListsBuilder(segment_postings or settings().text_segment_postings, folder)
        for terms in documents:
            builder.add(terms)
        return builder.finish()

    def save(self, folder: Path) -> None:
        np.savez(folder / "text.npz", term_start=self.term_start, docs=self.docs, tf=self.tf, doc_len=self.doc_len)
        save_json_gz(folder / "text_terms.json.gz", list(self.terms))

    @classmethod
    def open(cls, folder: Path) -> TextLists | None:
        """The text lists of a structure component folder, or None when it has none (older builds)."""
        if not all((folder / name).is_file() for name in TEXT_FILES):
            return None
        try:
            data = np.load(folder / "text.npz", allow_pickle=False)
            terms = {t: i for i, t in enumerate(load_json_gz(folder / "text_terms.json.gz"))}
            term_start, doc_len = data["term_start"], data["doc_len"]
            docs, tf = load_npz_member(folder / "text.npz", "docs"), load_npz_member(folder / "text.npz", "tf")
            _check_lists(len(terms), term_start, docs, tf, doc_len)
            return cls(terms, term_start, docs, tf, doc_len)
        except MathScoutError:
            raise
        except Exception as exc:  # any damage the checks above found, or a reader's own error (zip, gzip, JSON)
            raise DamagedIndexError(
                f"the text lists in {folder} are damaged or unreadable ({exc}); rebuild them with "
                f"'mathscout index --index {folder.parent} --components structure'"
            ) from exc

    def df(self, term: str) -> int:
        t = self.terms.get(term)
        return 0 if t is None else int(self.term_start[t + 1] - self.term_start[t])

    def term_scores(
        self, term: str, boost: float = 1.0, k1: float = 1.2, b: float = 0.75
    ) -> tuple[np.ndarray, np.ndarray]:
        """(document ordinals, BM25 partial scores) of one query term, as Lucene 9's BM25Similarity computes them:
        idf = ln(1 + (N − df + 0.5)/(df + 0.5)), score = w − w / (1 + tf · 1/(k1 · (1 − b + b · len/avgdl))), w = boost · idf."""
        t = self.terms.get(term)
        if t is None:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        lo, hi = self.term_start[t], self.term_start[t + 1]
        docs = self.docs[lo:hi].astype(np.int64)
        df = hi - lo if self.global_df is None else int(self.global_df[t])
        idf = np.float32(np.log(1.0 + (self.doc_count - df + 0.5) / (df + 0.5)))
        weight = np.float32(boost) * idf
        k1f, bf = np.float32(k1), np.float32(b)
        cache = np.float32(1.0) / (k1f * ((np.float32(1.0) - bf) + bf * _LENGTH_TABLE / self.avgdl))
        freq = self.tf[lo:hi].astype(np.float32)
        scores = weight - weight / (np.float32(1.0) + freq * cache[self.norm[docs]])
        return docs, scores.astype(np.float64)


def build_text_lists(store, folder: Path, segment_postings: int | None = None, vocabulary: int = 1) -> TextLists:
    """Text lists of every document of a store (ordinal order) in a BM25 token `vocabulary`
    (`mathscout.latex.aliases`), saved into `folder` (built in segments); progress bars for the documents and for
    the merge of the segments, each with its ETA."""
    from mathscout.latex.tokens import document_terms

    documents = progress_bar(
        store.iter_documents(), total=store.count(), desc="text lists", unit=" docs", file=sys.stderr, mininterval=2.0
    )  # closes itself when the documents run out, before the merge's bar
    return TextLists.build((document_terms(doc, vocabulary) for doc in documents), segment_postings, Path(folder))


def encode_lengths(doc_len: np.ndarray) -> np.ndarray:
    """`encode_length` of every length, vectorised (frexp gives the exact bit length of an integer < 2**53)."""
    n = np.asarray(doc_len, dtype=np.int64)
    out = n.copy()
    big = n >= _NUM_FREE_VALUES
    i = n[big] - _NUM_FREE_VALUES
    bits = np.frexp(i.astype(np.float64))[1].astype(np.int64)
    shift = np.maximum(bits - 4, 0)
    int4 = np.where(bits < 4, i, ((i >> shift) & 0x07) | ((shift + 1) << 3))
    out[big] = _NUM_FREE_VALUES + int4
    return out.astype(np.uint8)


class _TextListsBuilder:
    """Postings buffered in arrays, flushed as term-sorted segments, merged term by term into text.npz (Zhong 2023 thesis §4.2.2's
    text level built like the path index: memory bounded by `segment_postings`, not by the collection)."""

    def __init__(self, segment_postings: int, folder: Path | None):
        self.segment_postings, self.folder = segment_postings, folder
        self.vocabulary: dict[str, int] = {}
        self.lengths = array("i")
        self.segments: list[
            tuple[Path, np.ndarray]
        ] = []  # (file of (doc, tf) int32 pairs in term order, counts per term)
        self._reset()

    def _reset(self) -> None:
        self.tids, self.docs, self.tfs = array("i"), array("i"), array("i")

    def add(self, terms) -> None:
        ordinal = len(self.lengths)
        self.lengths.append(len(terms))
        for term, count in Counter(terms).items():
            self.tids.append(self.vocabulary.setdefault(term, len(self.vocabulary)))
            self.docs.append(ordinal)
            self.tfs.append(count)
        if self.folder is not None and len(self.tids) >= self.segment_postings:
            self._flush()

    def _sorted(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        tid = np.frombuffer(self.tids, dtype=np.int32)
        order = np.argsort(tid, kind="stable")  # stable: each list stays in document order
        counts = np.bincount(tid, minlength=len(self.vocabulary)).astype(np.int64)
        return counts, np.frombuffer(self.docs, dtype=np.int32)[order], np.frombuffer(self.tfs, dtype=np.int32)[order]

    def _flush(self) -> None:
        counts, docs, tf = self._sorted()
        assert self.folder is not None  # only a build into a folder writes segments
        path = self.folder / f".text-segment-{len(self.segments):05d}"
        np.stack([docs, tf], axis=1).astype(np.int32).tofile(path)
        self.segments.append((path, counts))
        self._reset()

    def finish(self) -> TextLists:
        doc_len = np.frombuffer(self.lengths, dtype=np.int32).copy()
        if not self.segments:
            counts, docs, tf = self._sorted()
            term_start = np.zeros(len(self.vocabulary) + 1, dtype=np.int64)
            np.cumsum(counts, out=term_start[1:])
            lists = TextLists(self.vocabulary, term_start, docs.copy(), tf.copy(), doc_len)
            if self.folder is not None:
                lists.save(self.folder)
            return lists
        if len(self.tids):
            self._flush()
        folder = self.folder
        assert folder is not None  # only a build into a folder writes segments
        n_terms = len(self.vocabulary)
        counts = np.zeros((len(self.segments), n_terms), dtype=np.int32)
        for s, (_, c) in enumerate(self.segments):
            counts[s, : len(c)] = c
        term_start = np.zeros(n_terms + 1, dtype=np.int64)
        np.cumsum(counts.sum(axis=0), out=term_start[1:])
        _write_merged(folder / "text.npz", self.segments, counts, term_start, doc_len)
        for path, _ in self.segments:
            path.unlink()
        save_json_gz(folder / "text_terms.json.gz", list(self.vocabulary))
        npz = folder / "text.npz"
        return TextLists(self.vocabulary, term_start, load_npz_member(npz, "docs"), load_npz_member(npz, "tf"), doc_len)


def _write_merged(
    path: Path, segments: list[tuple[Path, np.ndarray]], counts: np.ndarray, term_start: np.ndarray, doc_len: np.ndarray
) -> None:
    """text.npz with `docs` and `tf` merged from the segments a chunk of terms at a time (np.savez's layout: one
    uncompressed .npy member per array), so neither array is ever whole in memory. Each segment is read once: a
    chunk's `docs` go to their member, its `tf` to a spool file copied into the `tf` member after it."""
    n_terms = counts.shape[1]
    seg_start = np.zeros((len(segments), n_terms + 1), dtype=np.int64)
    np.cumsum(counts, axis=1, out=seg_start[:, 1:])
    total = int(term_start[-1])
    chunks, t, postings = [], 0, settings().text_segment_postings
    while t < n_terms:  # term ranges of about MATHSCOUT_TEXT_SEGMENT_POSTINGS postings (a longer list alone)
        end = int(np.searchsorted(term_start, term_start[t] + postings, side="right")) - 1
        end = min(max(end, t + 1), n_terms)
        chunks.append((t, end))
        t = end
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype(np.int32)), "fortran_order": False, "shape": (total,)}
    spool = path.parent / ".text-tf-merge"
    bar = progress_bar(
        total=2 * total,
        desc=f"text lists merge ({len(segments)} segments)",
        unit=" values",
        unit_scale=True,
        file=sys.stderr,
        mininterval=2.0,
    )
    try:
        with bar, zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
            for name, array_ in (("term_start", term_start), ("doc_len", doc_len)):
                with archive.open(f"{name}.npy", "w", force_zip64=True) as f:
                    np.lib.format.write_array(f, array_, allow_pickle=False)
            with archive.open("docs.npy", "w", force_zip64=True) as docs_file, open(spool, "wb") as tf_file:
                np.lib.format.write_array_header_1_0(docs_file, header)
                for a, b in chunks:
                    pairs = _merged_chunk(segments, counts, seg_start, term_start, a, b)
                    docs_file.write(np.ascontiguousarray(pairs[:, 0]).tobytes())
                    tf_file.write(np.ascontiguousarray(pairs[:, 1]).tobytes())
                    bar.update(len(pairs))
            with archive.open("tf.npy", "w", force_zip64=True) as tf_member, open(spool, "rb") as tf_file:
                np.lib.format.write_array_header_1_0(tf_member, header)
                while block := tf_file.read(1 << 24):
                    tf_member.write(block)
                    bar.update(len(block) // 4)
    finally:
        spool.unlink(missing_ok=True)


def _merged_chunk(
    segments: list[tuple[Path, np.ndarray]],
    counts: np.ndarray,
    seg_start: np.ndarray,
    term_start: np.ndarray,
    a: int,
    b: int,
) -> np.ndarray:
    """The (doc, tf) postings of terms [a, b) in term order, each term's list in segment (= document) order."""
    out = np.empty((int(term_start[b] - term_start[a]), 2), dtype=np.int32)
    base = term_start[a]
    placed = np.zeros(b - a, dtype=np.int64)  # postings of each term already placed (earlier segments)
    for s, (seg_path, _) in enumerate(segments):
        lo, hi = int(seg_start[s, a]), int(seg_start[s, b])
        if hi == lo:
            continue
        part = np.fromfile(seg_path, dtype=np.int32, count=2 * (hi - lo), offset=8 * lo).reshape(-1, 2)
        sizes = counts[s, a:b]
        dest_term = term_start[a:b] - base + placed
        dest = np.repeat(dest_term, sizes) + (np.arange(hi - lo) - np.repeat(seg_start[s, a:b] - lo, sizes))
        out[dest] = part
        placed += sizes
    return out
