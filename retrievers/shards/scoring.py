"""Shard-side retrievers: a shard scores its documents with the collection-wide statistics (stats.py).

- `GlobalBM25`: Lucene 9 BM25 (float32, one-byte length norms) from the shard's text lists with the global N, df and
  avgdl, exhaustively over the query terms' postings, so a shard's top k is exact (rank-safe with the global k).
- `ShardStructure`: the structure retriever with the global path weights (Zhong 2023 thesis, Eq. 3.11) and `GlobalBM25` as Eq. 3.18's
  text part. It hands back each query formula's document list and the BM25 list instead of fusing them, because the
  single index fuses the *global* top `depth` of each list (`StructureRetriever.fused`): the coordinator merges
  each list over the shards first and fuses after (retriever.py).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mathscout.errors import MathScoutError, QueryError
from mathscout.index.layout import IndexDir
from mathscout.latex.aliases import recorded_vocabulary
from mathscout.retrievers.bm25 import DEFAULT_B, DEFAULT_K1, BM25Retriever
from mathscout.retrievers.shards.stats import (
    load_global_df,
    outside_weights,
    read_global_statistics,
    read_global_symbols,
    text_lists_folder,
)
from mathscout.retrievers.structure import StructureRetriever, StructureSettings
from mathscout.structure.search import FormulaHit, PreparedQuery, StructureSearcher
from mathscout.structure.text_lists import TextLists
from mathscout.types import Hit, Query


def global_text_lists(shard: Path) -> TextLists:
    """The shard's text lists scoring with the collection's N, df and avgdl (Lucene's BM25 statistics)."""
    lists = TextLists.open(text_lists_folder(shard))
    if lists is None:
        raise MathScoutError(f"the shard {shard} has no text lists: rebuild the sharded index")
    stats = read_global_statistics(shard)
    lists.global_df = load_global_df(shard, "text_df", len(lists.terms))
    lists.doc_count, lists.avgdl = stats.documents, stats.avgdl
    return lists


class GlobalBM25(BM25Retriever):
    """The bm25 mode on a shard: the same query terms and weights as `BM25Retriever`, scored from the text lists
    with the global statistics (no Lucene searcher: Lucene would use the shard's own statistics)."""

    def __init__(self, index: IndexDir, k1: float = DEFAULT_K1, b: float = DEFAULT_B, math_weight: float = 1.0):
        self.store = index.store
        self.math_weight = math_weight
        self._index_path = index.path
        self._rm3 = False
        self.lists = global_text_lists(index.path)
        # the text lists' token vocabulary (`mathscout.latex.aliases`): the structure component builds them, or the
        # shard builder when there is none
        components = index.manifest.components
        self.vocabulary = recorded_vocabulary(components.get("structure") or components.get("text") or {})
        self._doc_ids: list[str] | None = None
        self.set_bm25(k1, b)

    def _apply_bm25(self) -> None:
        """Nothing to hand over: `top` reads self.k1, self.b (checked by `BM25Retriever.set_bm25`) at each query."""

    def set_rm3(self, *args, **kwargs) -> None:
        raise MathScoutError(
            "RM3 is not available on a sharded index (its feedback model would need every shard's "
            "documents); search a single index for rm3"
        )

    def idf(self, term: str) -> float:
        t = self.lists.terms.get(term)
        assert self.lists.global_df is not None  # global_text_lists reads it
        df = int(self.lists.global_df[t]) if t is not None else 0
        n = self.lists.doc_count
        return math.log(1 + (n - df + 0.5) / (df + 0.5)) if df else 0.0

    def top(self, weights: Counter[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """(shard ordinals, raw Lucene scores) of the top k, in Anserini's order: score, then document id (ties)."""
        total = np.zeros(len(self.lists.doc_len), dtype=np.float64)  # the shard's documents (doc_count is the global N)
        seen = np.zeros(len(total), dtype=bool)
        for term, weight in weights.items():
            docs, scores = self.lists.term_scores(term, weight, self.k1, self.b)
            total[docs] += scores  # one posting per document and term; Lucene sums the clauses in double …
            seen[docs] = True
        docs = np.flatnonzero(seen)
        scores = total[docs].astype(np.float32)  # … and returns a float
        if len(docs) > k:  # the k best and every document tied with the k-th
            kth = np.partition(scores, len(scores) - k)[len(scores) - k]
            keep = scores >= kth
            docs, scores = docs[keep], scores[keep]
        ids = self.doc_ids()
        order = sorted(range(len(docs)), key=lambda i: (-scores[i], ids[docs[i]]))[:k]
        return docs[order], scores[order].astype(np.float64)

    def doc_ids(self) -> list[str]:
        if self._doc_ids is None:
            self._doc_ids = self.store.doc_ids()
        return self._doc_ids

    def _rank(self, query: Query, weights: Counter[str], k: int) -> list[Hit]:
        if not weights:
            raise QueryError(f"the query {query.text[:60]!r} has no searchable words or math tokens")
        docs, scores = self.top(weights, k)  # raw scores: the coordinator rounds them as Anserini does (adjust_ties)
        return [
            Hit(doc_id=self.doc_ids()[d], score=float(s), rank=n, components={self.name: float(s)})
            for n, (d, s) in enumerate(zip(docs.tolist(), scores.tolist()), start=1)
        ]


def adjust_ties(scores: list[float]) -> list[float]:
    """Anserini's ScoreTiesAdjusterReranker, which every bm25 search of a single index goes through: each score
    rounded to 4 decimals, and a run of scores within 1e-4 of the one before lowered by 1e-6 × its position in the
    run (float arithmetic as in Java)."""
    out: list[np.float32] = []
    run = 0
    for n, score in enumerate(scores):
        value = np.float32(math.floor(float(np.float32(score)) * 10000.0 + 0.5) / 10000.0)
        if n == 0 or np.float32(out[-1] - value) > np.float32(1e-4):
            run = 0
        else:
            run += 1
            value = np.float32(value - np.float32(np.float32(1e-6) * np.float32(run)))
        out.append(value)
    return [float(v) for v in out]


@dataclass
class FormulaLists:
    """What one shard found for a structure query, before fusion: each searched formula's documents (best first,
    shard ordinals, in the order the single index fuses them), the BM25 list of Zhong 2023 thesis Eq. 3.18's text part, and which of
    the single index's final steps ranks them (`plan`): "fuse" (Zhong 2023 thesis, Eq. 3.18, `fusion.fuse_formula_lists`), "tier" (a
    lone formula by match tier, `fusion.rank_by_tier`) or "top" (a lone formula's documents by score)."""

    plan: str
    lambda_m: float
    depth: int
    by_tier: bool = False
    parts: bool = False
    formulas: list[tuple[str, list[FormulaHit]]] = field(default_factory=list)
    bm25: dict[int, float] = field(default_factory=dict)


class ShardStructure(StructureRetriever):
    """Structure search on a shard with the global path weights and BM25 and the index's Zhong 2023 thesis Eq. 3.18 setting (the
    sharded index's structure.json, sent by the coordinator); `lists` returns `FormulaLists`."""

    def __init__(self, index: IndexDir, settings: dict | None = None, **options):
        self._index_settings = StructureSettings(**settings) if settings else None
        super().__init__(index, **options)
        stats = read_global_statistics(index.path)
        self.paths.df = load_global_df(index.path, "path_df", len(self.paths.df))
        self.paths.total_entries = stats.path_entries
        self.paths.outside_weight = outside_weights(index.path, stats.path_entries)
        self._use_global_symbols(index.path)
        if self.text is not None:
            self.text = global_text_lists(index.path)
        self._captured: FormulaLists | None = None

    def stored_settings(self, index: IndexDir) -> StructureSettings | None:
        """The sharded index's setting (its shards hold no structure.json of their own)."""
        return self._index_settings

    def _use_global_symbols(self, shard: Path) -> None:
        """Symbol ids as the whole collection numbers them (Zhong 2023 thesis, Alg. 2 breaks ties by them): the query's symbols get
        global ids and every posting's symbol is mapped to its global id as its block is decoded, before the kernel reads it."""
        symbols, mapping = read_global_symbols(shard, len(self.paths.symbols))
        self.paths.lists.symbol_map = np.ascontiguousarray(mapping, dtype=np.int32)
        self.paths.symbols = symbols
        # scratch tables sized by the global symbols; queries parsed with the shard's recorded lexer
        self.searcher = StructureSearcher(self.paths, eta=self.searcher.eta, lexer=self.searcher.lexer)

    def _bm25_retriever(self):
        if self._bm25 is None:
            self._bm25 = GlobalBM25(self.index)
        return self._bm25

    def _formula_documents(self, query: PreparedQuery, k: int) -> list[FormulaHit]:
        hits = super()._formula_documents(query, max(self.depth, k))  # fusion may need the formula's global top depth
        if self._captured is not None:
            self._captured.formulas.append((query.latex, hits))
        return hits

    def fused(self, prepared, bm25, k, lambda_m, by_tier=False, parts=False):
        """Records Zhong 2023 thesis Eq. 3.18's inputs instead of fusing: the coordinator fuses the lists merged over the shards."""
        captured = self._captured
        assert captured is not None  # called by rank() within lists()
        captured.plan, captured.lambda_m = "fuse", lambda_m
        captured.by_tier, captured.parts = bool(by_tier), bool(parts)
        captured.bm25 = dict(bm25)
        self.formula_lists(prepared, k)  # recorded by _formula_documents
        return [], {}

    def _by_tier(self, scores, parts, best, k):
        """Records that a lone formula's list is ranked by match tier (the coordinator ranks the merged list)."""
        assert self._captured is not None  # called by rank() within lists()
        self._captured.plan = "tier"
        return [], best

    def lists(self, query: Query, k: int) -> FormulaLists | list[Hit]:
        """The shard's lists for `query` (or final hits on the exact heterogeneous path, whose top k merges as is)."""
        self._captured = FormulaLists("top", self.setting_for(query).lambda_m, max(self.depth, k))
        try:
            hits = self.rank(query, k).hits
            captured = self._captured
        finally:
            self._captured = None
        if self.text is not None and hits:
            return hits
        return captured
