"""Text posting lists beside the path index: the top level of the heterogeneous index (thesis §4.2.2, Fig. 4.3).

Algorithm 5 merges text and math inverted lists document-at-a-time, so it needs every text term's
postings (document ordinal, term frequency) and document lengths. They are the same terms the `bm25`
component gives Lucene (`retrievers.bm25.document_terms`), and `term_scores` reproduces Lucene 9's
BM25Similarity exactly (float32, lengths quantised by SmallFloat.intToByte4), so a document's text score
here equals its BM25 score from the foundation index (Eq. 3.18's BM25 term).

Files (in the structure component folder): `text.npz` (term_start, docs, tf, doc_len) and
`text_terms.json.gz` (the terms, in list order).
"""

from __future__ import annotations

import gzip
import json
from array import array
from collections import Counter
from pathlib import Path

import numpy as np

from mathscout.errors import DamagedIndexError, MathScoutError

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
    return byte if byte < _NUM_FREE_VALUES else min(_NUM_FREE_VALUES + _int4_to_long(byte - _NUM_FREE_VALUES), 2**31 - 1)


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

    def __init__(self, terms: dict[str, int], term_start: np.ndarray, docs: np.ndarray, tf: np.ndarray, doc_len: np.ndarray):
        self.terms = terms
        self.term_start = term_start
        self.docs = docs
        self.tf = tf
        self.doc_len = doc_len
        self.norm = np.array([encode_length(int(n)) for n in doc_len], dtype=np.uint8)
        self.doc_count = int(len(doc_len))
        self.avgdl = np.float32(float(doc_len.sum()) / max(self.doc_count, 1))

    @classmethod
    def build(cls, documents) -> TextLists:
        """From (document ordinal order) lists of index terms."""
        vocabulary: dict[str, int] = {}
        tids, docs, tfs, lengths = array("i"), array("i"), array("i"), array("i")
        for ordinal, terms in enumerate(documents):
            lengths.append(len(terms))
            for term, count in Counter(terms).items():
                tids.append(vocabulary.setdefault(term, len(vocabulary)))
                docs.append(ordinal)
                tfs.append(count)
        tid = np.frombuffer(tids, dtype=np.int32)
        order = np.argsort(tid, kind="stable")  # stable: each list stays in document order
        term_start = np.zeros(len(vocabulary) + 1, dtype=np.int64)
        np.cumsum(np.bincount(tid, minlength=len(vocabulary)), out=term_start[1:])
        return cls(vocabulary, term_start, np.frombuffer(docs, dtype=np.int32)[order].copy(),
                   np.frombuffer(tfs, dtype=np.int32)[order].copy(), np.frombuffer(lengths, dtype=np.int32).copy())

    def save(self, folder: Path) -> None:
        np.savez(folder / "text.npz", term_start=self.term_start, docs=self.docs, tf=self.tf, doc_len=self.doc_len)
        (folder / "text_terms.json.gz").write_bytes(gzip.compress(json.dumps(list(self.terms)).encode("utf-8"), compresslevel=6))

    @classmethod
    def open(cls, folder: Path) -> TextLists | None:
        """The text lists of a structure component folder, or None when it has none (older builds)."""
        if not all((folder / name).is_file() for name in TEXT_FILES):
            return None
        try:
            data = np.load(folder / "text.npz", allow_pickle=False)
            terms = {t: i for i, t in enumerate(json.loads(gzip.decompress((folder / "text_terms.json.gz").read_bytes())))}
            term_start, docs, tf, doc_len = data["term_start"], data["docs"], data["tf"], data["doc_len"]
            _check_lists(len(terms), term_start, docs, tf, doc_len)
            return cls(terms, term_start, docs, tf, doc_len)
        except MathScoutError:
            raise
        except Exception as exc:  # any damage the checks above found, or a reader's own error (zip, gzip, JSON)
            raise DamagedIndexError(f"the text lists in {folder} are damaged or unreadable ({exc}); rebuild them with "
                                    f"'mathscout index --index {folder.parent} --components structure'") from exc

    def df(self, term: str) -> int:
        t = self.terms.get(term)
        return 0 if t is None else int(self.term_start[t + 1] - self.term_start[t])

    def term_scores(self, term: str, boost: float = 1.0, k1: float = 1.2, b: float = 0.75) -> tuple[np.ndarray, np.ndarray]:
        """(document ordinals, BM25 partial scores) of one query term, as Lucene 9's BM25Similarity computes them:
        idf = ln(1 + (N − df + 0.5)/(df + 0.5)), score = w − w / (1 + tf · 1/(k1 · (1 − b + b · len/avgdl))), w = boost · idf."""
        t = self.terms.get(term)
        if t is None:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        lo, hi = self.term_start[t], self.term_start[t + 1]
        docs = self.docs[lo:hi].astype(np.int64)
        df = hi - lo
        idf = np.float32(np.log(1.0 + (self.doc_count - df + 0.5) / (df + 0.5)))
        weight = np.float32(boost) * idf
        k1f, bf = np.float32(k1), np.float32(b)
        cache = np.float32(1.0) / (k1f * ((np.float32(1.0) - bf) + bf * _LENGTH_TABLE / self.avgdl))
        freq = self.tf[lo:hi].astype(np.float32)
        scores = weight - weight / (np.float32(1.0) + freq * cache[self.norm[docs]])
        return docs, scores.astype(np.float64)


def build_text_lists(store, folder: Path) -> TextLists:
    """Text lists of every document of a store (ordinal order), saved into `folder`."""
    from retrievers.bm25 import document_terms

    lists = TextLists.build(document_terms(doc) for doc in store.iter_documents())
    lists.save(Path(folder))
    return lists
