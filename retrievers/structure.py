"""Approach Zero structure search: the `structure` index component and search mode (thesis ch. 3–4).

Formula hits become document hits: a document scores its best formula (§4.2.2), summed over the
query's formulas. A query that also has words adds BM25 over them (Eq. 3.18: λ_m · math + BM25) when
the index has the `bm25` component: the candidates are the union of both rankings' top documents,
and every candidate gets its exact math score; BM25 scores of documents outside BM25's top list count 0.
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from mathscout.corpus.math_spans import find_math
from mathscout.errors import QueryError
from mathscout.index.components import ComponentSpec, register_component
from mathscout.index.layout import IndexDir
from mathscout.latex.tokens import formula_terms, query_terms
from mathscout.render import make_snippet
from mathscout.store import DocumentStore
from mathscout.structure.highlight import leaf_spans, merge_spans
from mathscout.structure.index import PathIndex, build_path_index
from mathscout.structure.paths import leaf_count, path_prefixes
from mathscout.structure.scoring import ETA_ARQMATH, LAMBDA_M, formula_similarity, math_text_score
from mathscout.structure.search import FormulaHit, PreparedQuery, StructureSearcher
from mathscout.structure.parser import parse_latex
from mathscout.types import Hit, MatchedFormula, Query
from retrievers.base import BaseRetriever, prepare_query
from retrievers.registry import ModeSpec, register_mode

EXPLAINED_HITS = 20  # hits that get a snippet and their highlighted best formula in `search`
MIXED_CANDIDATES = 1000  # per ranking, for Eq. 3.18 fusion of math and words


class StructureComponent:
    """Builds the path index (`mathscout.structure.index`) of every formula in the store."""

    name = "structure"

    def build(self, store: DocumentStore, target: Path) -> dict[str, Any]:
        doc_ordinal = {doc_id: n for n, doc_id in enumerate(store.doc_ids())}
        formulas = ((ordinal, doc_ordinal[f.doc_id], f.latex) for ordinal, f in store.iter_formulas())
        report = build_path_index(formulas, store.formula_count(), target)
        stats = report.as_stats(target)
        print(
            f"structure: {report.indexed:,} of {report.formulas:,} formulas indexed in {report.seconds:.1f} s "
            f"({stats['formulas_per_second']:,.0f} formulas/s, {stats['bytes'] / 2**20:.1f} MiB); skipped: "
            + (", ".join(f"{n:,} {why}" for why, n in report.skipped.most_common()) or "none"),
            file=sys.stderr,
        )
        return stats


class StructureRetriever(BaseRetriever):
    """Documents ranked by the structure similarity of their formulas to the query's formulas."""

    name = "structure"

    def __init__(self, index: IndexDir, strategy: str = "gbp-len", eta: float = ETA_ARQMATH, lambda_m: float = LAMBDA_M, initial_threshold_factor: float = 0.0):
        self.index = index
        self.store = index.store
        self.paths = PathIndex.open(index.component_path("structure"))
        self.searcher = StructureSearcher(self.paths, eta=eta)
        self.strategy = strategy
        self.lambda_m = lambda_m
        self.initial_threshold_factor = initial_threshold_factor
        self._bm25 = None
        self._ordinals: dict[str, int] | None = None

    def rank(self, query: Query, k: int) -> tuple[list[Hit], dict[int, FormulaHit]]:
        """Top-k documents, and for each the best formula hit of the query's first formula that matched it."""
        formulas, words = _split(query)
        if not formulas:
            raise QueryError("structure search needs a formula: write it between $…$, e.g. $x^2+y^2=z^2$")
        prepared = [self.searcher.prepare(latex) for latex in formulas]
        bm25 = self._bm25_scores(words, MIXED_CANDIDATES) if words else {}
        if len(prepared) == 1 and not bm25:  # a lone formula: per-document pruned search is exact
            hits = self.searcher.search(prepared[0], k, self.strategy, per_document=True, initial_threshold_factor=self.initial_threshold_factor)
            return [self._hit(h.doc, h.score, {self.name: h.score}) for h in hits], {h.doc: h for h in hits}
        return self._fused(prepared, bm25, k)

    def _fused(self, prepared: list[PreparedQuery], bm25: dict[int, float], k: int) -> tuple[list[Hit], dict[int, FormulaHit]]:
        """Σ over query formulas of each document's best formula, plus Eq. 3.18's BM25 term, over the candidate union."""
        candidates = set(bm25)
        for query in prepared:
            candidates.update(h.doc for h in self.searcher.search(query, MIXED_CANDIDATES, self.strategy, per_document=True))
        docs = np.array(sorted(candidates), dtype=np.int64)
        formula_ids = np.flatnonzero(np.isin(self.paths.doc, docs))
        math = defaultdict(float)
        best: dict[int, FormulaHit] = {}
        for query in prepared:
            per_doc: dict[int, FormulaHit] = {}
            for hit in self.searcher.score_formulas(query, formula_ids):
                if hit.doc not in per_doc or hit.score > per_doc[hit.doc].score:
                    per_doc[hit.doc] = hit
            for doc, hit in per_doc.items():
                math[doc] += hit.score
                best.setdefault(doc, hit)
        scores = {doc: math_text_score(math.get(doc, 0.0), bm25.get(doc, 0.0), self.lambda_m) for doc in candidates}
        ranked = sorted((d for d in scores if scores[d] > 0), key=lambda d: (-scores[d], d))[:k]
        hits = [self._hit(d, scores[d], {self.name: math.get(d, 0.0), "bm25": bm25.get(d, 0.0)}) for d in ranked]
        return hits, best

    def _bm25_scores(self, words: str, k: int) -> dict[int, float]:
        if "bm25" not in self.index.components:
            return {}
        if self._bm25 is None:
            from retrievers.bm25 import BM25Retriever

            self._bm25 = BM25Retriever(self.index)
        ordinals = self._doc_ordinals()
        try:
            hits = self._bm25.rank(Query(id="words", text=words), k)
        except QueryError:  # only stop words
            return {}
        return {ordinals[h.doc_id]: h.score for h in hits if h.doc_id in ordinals}

    def _doc_ordinals(self) -> dict[str, int]:
        if self._ordinals is None:
            self._ordinals = {doc_id: n for n, doc_id in enumerate(self.store.doc_ids())}
        return self._ordinals

    def _hit(self, doc: int, score: float, components: dict[str, float]) -> Hit:
        return Hit(doc_id=self.store.doc_id_at(doc), score=score, components=components)

    def _search(self, query: Query, k: int) -> list[Hit]:
        hits, best = self.rank(query, k)
        formulas, words = _split(query)
        weights = {t: 1.0 for t in query_terms(words)} if words else {}
        for latex in formulas:
            weights.update({t: 1.0 for t in formula_terms(latex)})
        explained = hits[:EXPLAINED_HITS]
        documents = self.store.get_many(h.doc_id for h in explained)
        ordinals = self._doc_ordinals()
        query_prefixes = path_prefixes(parse_latex(formulas[0]).tree) if formulas else []
        for rank, hit in enumerate(hits, start=1):
            hit.rank = rank
        for hit in explained:
            document = documents.get(hit.doc_id)
            if document is None:
                continue
            hit.snippet = make_snippet(document, weights)
            formula_hit = best.get(ordinals[hit.doc_id])
            if formula_hit is not None:
                hit.formulas = [self._matched_formula(formula_hit, query_prefixes)]
        return hits

    def _matched_formula(self, hit: FormulaHit, query_prefixes) -> MatchedFormula:
        """The document's best formula with the operands of its widest common subtree highlighted."""
        formula = self.store.formula_at(hit.formula)
        tree = parse_latex(formula.latex).tree
        spans: list[tuple[int, int]] = []
        if tree is not None:
            match = formula_similarity(query_prefixes, path_prefixes(tree), leaf_count(tree), idf=self.paths.path_idf, eta=self.searcher.eta)
            if match is not None:
                spans = merge_spans(leaf_spans(tree, match.doc_leaves), formula.latex)
        return MatchedFormula(formula_id=formula.id, latex=formula.latex, score=hit.score, highlight=spans)

    def batch_search(self, queries: list[Query], k: int = 1000) -> dict[str, list[Hit]]:
        """Ranked ids and scores for many queries (no snippets); a query without a formula gets no hits."""
        runs: dict[str, list[Hit]] = {}
        started = time.perf_counter()
        for query in queries:
            try:
                hits, _ = self.rank(prepare_query(query), k)
            except QueryError as exc:
                print(f"notice: topic {query.id}: {exc}", file=sys.stderr)
                hits = []
            for rank, hit in enumerate(hits, start=1):
                hit.rank = rank
            runs[query.id] = hits
        print(f"structure: {len(queries)} queries in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        return runs


def _split(query: Query) -> tuple[list[str], str]:
    """The query's formulas (the topic formula, or each `$…$` in its text) and its words without the math."""
    if query.formula:
        return [query.formula], ""
    spans = find_math(query.text)
    words, last = [], 0
    for span in spans:
        words.append(query.text[last : span.start])
        last = span.end
    words.append(query.text[last:])
    return [s.latex for s in spans if s.latex.strip()], " ".join(w.strip() for w in words if w.strip())


def _open(index: IndexDir, **options) -> StructureRetriever:
    return StructureRetriever(index, **options)


register_component(ComponentSpec("structure", StructureComponent, "Approach Zero path index of formula operator trees"))
register_mode(ModeSpec("structure", _open, ("structure",), "Approach Zero structure search (formulas; + BM25 for words, Eq. 3.18)"))
