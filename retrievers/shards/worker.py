"""The Ray actor that holds one shard open and answers ranked lists with global document ordinals.

bm25 and structure score with the global statistics (scoring.py); every other mode that ranks documents by itself
(dense, dense-ft, colbert, splade, scm, types, …) is the shard's own retriever, whose top k merges as is (dense
reads no collection statistics).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

from mathscout.errors import MathScoutError, QueryError
from mathscout.types import Query


@dataclass
class ShardHits:
    """One query's answer from one shard: (global ordinal, doc id, score, components) best first, or structure's
    per-formula lists before fusion, or the one-line error the query raised on this shard."""

    hits: list[tuple[int, str, float, dict]] = field(default_factory=list)
    lists: dict | None = None  # FormulaLists as plain data, global ordinals
    error: str = ""


class ShardWorker:
    """One shard's retrievers, opened on first use."""

    def __init__(self, folder: str, first_document: int, first_formula: int = 0):
        from mathscout.index.layout import IndexDir

        self.folder, self.offset, self.formula_offset = folder, first_document, first_formula
        self.index = IndexDir(folder)
        self.retrievers: dict[tuple, object] = {}

    def ping(self) -> int:
        return os.getpid()

    def _retriever(self, mode: str, options: dict):
        key = (mode, json.dumps(options, sort_keys=True, default=str))  # options hold the index's structure setting
        if key not in self.retrievers:
            if mode == "bm25":
                from mathscout.retrievers.shards.scoring import GlobalBM25

                self.retrievers[key] = GlobalBM25(self.index, **options)
            elif mode == "structure":
                from mathscout.retrievers.shards.scoring import ShardStructure

                self.retrievers[key] = ShardStructure(self.index, **options)
            else:
                from mathscout.retrievers.registry import open_retriever

                self.retrievers[key] = open_retriever(self.index, mode, **options)
        return self.retrievers[key]

    def rank(
        self, mode: str, queries: list[Query], k: int, options: dict | None = None, vectors: list | None = None
    ) -> list[ShardHits]:
        """Each query's ranked list on this shard (global ordinals). `vectors`: the dense modes' query vectors, encoded
        once by the coordinator (None for a query this shard should encode itself)."""
        from mathscout.retrievers.base import prepare_query

        retriever = self._retriever(mode, dict(options or {}))
        out = []
        for n, query in enumerate(queries):
            try:
                vector = vectors[n] if vectors is not None else None
                if vector is not None:
                    out.append(self._hits(retriever.rank_vectors(vector[None, :], k)[0]))
                else:
                    out.append(self._rank_one(mode, retriever, prepare_query(query), k))
            except (QueryError, MathScoutError) as exc:
                out.append(ShardHits(error=str(exc)))
        return out

    def _hits(self, hits) -> ShardHits:
        ordinals = self.ordinals
        return ShardHits([(self.offset + ordinals[h.doc_id], h.doc_id, h.score, dict(h.components)) for h in hits])

    def _rank_one(self, mode: str, retriever, query: Query, k: int) -> ShardHits:
        if mode == "bm25":
            weights = retriever.query_weights(query)
            if not weights:
                retriever.rank(query, k)  # raises the clear error of a query without terms
            docs, scores = retriever.top(weights, k)
            ids = retriever.doc_ids()  # the retriever's own copy (it names its hits by them)
            return ShardHits(
                [(self.offset + d, ids[d], s, {"bm25": s}) for d, s in zip(docs.tolist(), scores.tolist())]
            )
        if mode == "structure":
            found = retriever.lists(query, k)
            ordinals = retriever.doc_ordinals()
            if isinstance(found, list):
                return ShardHits([(self.offset + ordinals[h.doc_id], h.doc_id, h.score, h.components) for h in found])
            ids = self.doc_ids
            return ShardHits(
                lists={
                    "plan": found.plan,
                    "lambda_m": found.lambda_m,
                    "depth": found.depth,
                    "by_tier": found.by_tier,
                    "parts": found.parts,
                    "formulas": [
                        (
                            latex,
                            [
                                (self.offset + h.doc, ids[h.doc], h.score, h.tier, self.formula_offset + h.formula)
                                for h in hits
                            ],
                        )
                        for latex, hits in found.formulas
                    ],
                    "bm25": [(self.offset + d, ids[d], s) for d, s in found.bm25.items()],
                }
            )
        return self._hits(retriever.batch_search([query], k)[query.id])

    def structure_facts(self, options: dict, queries: Sequence[Query] = (), formulas: Sequence[str] = ()) -> dict:
        """What the coordinator's structure retriever asks of one shard (the same on every shard: global weights):
        the Zhong 2023 thesis Eq. 3.18 setting of each query kind, each query's perfect score (`perfect_score`), each formula's
        width (None when unreadable or matching nothing) and the lexer version the shard parses formulas with."""
        from dataclasses import asdict

        retriever = self._retriever("structure", dict(options or {}))
        widths = []
        for latex in formulas:
            try:
                prepared = retriever.searcher.prepare(latex)
                widths.append(None if prepared.empty else prepared.width)
            except QueryError:
                widths.append(None)
        return {
            "kinds": {kind: asdict(setting) for kind, setting in retriever.kind_settings.items()},
            "perfect": [retriever.perfect_score(q) for q in queries],
            "widths": widths,
            "lexer": retriever.searcher.lexer,
        }

    def formula_documents(self, options: dict, latex: str, k: int, exhaustive: bool = False) -> list[tuple[int, float]]:
        """A formula's top k documents on this shard as the structure mode searches them (its pruning strategy, Zhong 2023 thesis Alg. 4
        with the global path weights, Zhong 2023 thesis §4.1), or by exhaustive search: (global document ordinal, score); empty for
        an unreadable formula. Comparing the two is the shard's rank-safety check."""
        retriever = self._retriever("structure", dict(options or {}))
        try:
            prepared = retriever.searcher.prepare(latex)
        except QueryError:
            return []
        if prepared.empty or not prepared.searchable:  # nothing on this shard can match it
            return []
        hits = retriever.searcher.search(
            prepared,
            k,
            "exhaustive" if exhaustive else retriever.strategy,
            per_document=True,
            initial_threshold_factor=0.0 if exhaustive else retriever.initial_threshold_factor,
        )
        return [(self.offset + h.doc, h.score) for h in hits]

    def usage(self) -> dict:
        """This actor's process: pid, peak and current RSS (MiB) and CPU seconds so far."""
        from mathscout.usage import process_usage

        usage = process_usage()
        return {
            "pid": os.getpid(),
            "peak_rss_mib": round(usage.peak_mib, 1),
            "rss_mib": round(usage.rss_mib, 1),
            "cpu_seconds": round(usage.cpu_seconds, 1),
        }

    @cached_property
    def doc_ids(self) -> list[str]:
        """The shard's document ids by shard ordinal."""
        return self.index.store.doc_ids()

    @cached_property
    def ordinals(self) -> dict[str, int]:
        return {doc_id: n for n, doc_id in enumerate(self.doc_ids)}
