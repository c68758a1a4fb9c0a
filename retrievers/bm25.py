"""Math-aware BM25: the `bm25` index component and the `bm25` search mode.

Documents are analysed in Python (mathscout.latex.tokens: unified math tokens + Porter-stemmed words,
Zhong 2023 thesis §5.3.1) and indexed pre-tokenized with Anserini, so Lucene's analyzer never touches math tokens.
Queries are analysed the same way and sent as a weighted bag of words (one boosted clause per distinct
term, like Anserini's BagOfWordsQueryGenerator), capped below Lucene's clause limit.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from mathscout import java
from mathscout.errors import IndexMissingError, MathScoutError, QueryError
from mathscout.index.components import BuildOptions
from mathscout.index.layout import IndexDir
from mathscout.latex.aliases import LEGACY_VOCABULARY, VOCABULARY, recorded_vocabulary
from mathscout.latex.tokens import document_terms, formula_terms, is_math_term, query_terms
from mathscout.notices import notice
from mathscout.progress import bar as progress_bar
from mathscout.render import make_snippet, match_formulas
from mathscout.retrievers.base import BaseRetriever, RankResult, prepare_query
from mathscout.store import DocumentStore
from mathscout.types import Hit, Query

FIELD = "contents"
INDEX_THREADS = 2
BATCH = 500
# Lucene's in-memory buffer while indexing. Anserini's SimpleIndexer fixes it at 2,048 MB, more than the build JVM's
# capped heap (mathscout.java.BUILD_HEAP, 1 GiB) could hold at scale; with Java's default heap instead (a quarter of
# the RAM) the bm25 stage's peak grew with the collection: 823 MiB at 1x, 1,348 MiB at 40x in `bench scale`.
RAM_BUFFER_MB = 256
DEFAULT_K1, DEFAULT_B = 1.2, 0.75  # measured better than Anserini's 0.9/0.4 on the dev topics
MAX_QUERY_TERMS = 1000  # distinct terms per Lucene query; below IndexSearcher's default clause limit (1024)
EXPLAINED_HITS = 20  # hits that get a snippet and matched formulas in `search`


def query_index_terms(query: Query, vocabulary: int = LEGACY_VOCABULARY) -> list[str]:
    """The terms of a query, as documents are analysed: its text's words and math, and its formula's math."""
    terms = query_terms(query.text, vocabulary) if query.text.strip() else []
    if query.formula:
        terms += formula_terms(query.formula, vocabulary)
    return terms


def _set_ram_buffer(indexer: Any, megabytes: int) -> None:
    """Give the Lucene IndexWriter inside Anserini's SimpleIndexer (a private field) a RAM buffer of `megabytes`
    (IndexWriter's live configuration takes it while the writer is open)."""
    from jnius import JavaMethod, MetaJavaClass, cast
    from jnius.reflect import Field

    class FieldWithGet(Field, metaclass=MetaJavaClass):  # pyjnius's Field declares no `get`
        __javaclass__ = "java/lang/reflect/Field"
        get = JavaMethod("(Ljava/lang/Object;)Ljava/lang/Object;")

    field = cast(FieldWithGet, indexer.object.getClass().getDeclaredField("writer"))
    field.setAccessible(True)
    writer = cast("org.apache.lucene.index.IndexWriter", field.get(indexer.object))
    writer.getConfig().setRAMBufferSizeMB(float(megabytes))


class BM25Component:
    """Builds a Lucene index of pre-tokenized documents into the component folder."""

    name = "bm25"

    def build(self, store: DocumentStore, target: Path, options: BuildOptions) -> dict[str, Any]:
        started = time.perf_counter()
        indexer = java.lucene_index().LuceneIndexer(
            # -storeDocvectors: RM3 (set_rm3) reads the feedback documents' term vectors
            args=["-index", str(target), "-pretokenized", "-storeDocvectors", "-quiet"],
            threads=INDEX_THREADS,
        )
        _set_ram_buffer(indexer, RAM_BUFFER_MB)
        total = store.count()
        bar = progress_bar(total=total, desc="bm25", unit=" docs", file=sys.stderr, mininterval=1.0)
        docs = terms = 0
        batch: list[str] = []
        try:
            for document in store.iter_documents():
                doc_terms = document_terms(document, VOCABULARY)
                terms += len(doc_terms)
                batch.append(json.dumps({"id": document.id, FIELD: " ".join(doc_terms)}, ensure_ascii=False))
                if len(batch) == BATCH:
                    indexer.add_batch_raw(batch)
                    docs += len(batch)
                    bar.update(len(batch))
                    batch = []
            if batch:
                indexer.add_batch_raw(batch)
                docs += len(batch)
                bar.update(len(batch))
        finally:
            indexer.close()
            bar.close()
        seconds = time.perf_counter() - started
        notice(
            f"bm25: {docs:,} documents, {terms:,} terms in {seconds:.1f} s ({docs / max(seconds, 1e-9):,.0f} docs/s)"
        )
        return {
            "docs": docs,
            "terms": terms,
            "seconds": round(seconds, 2),
            "bytes": sum(f.stat().st_size for f in target.rglob("*") if f.is_file()),
            "analysis": "mathscout.latex.tokens (math tokens m_*, Porter-stemmed words)",
            "vocabulary": VOCABULARY,
        }


class BM25Retriever(BaseRetriever):
    """BM25 over the `bm25` component of an index directory."""

    name = "bm25"

    def __init__(self, index: IndexDir, k1: float = DEFAULT_K1, b: float = DEFAULT_B, math_weight: float = 1.0):
        folder = index.component_path("bm25")
        self.store = index.store
        self.math_weight = math_weight
        self.vocabulary = recorded_vocabulary(index.manifest.components.get("bm25", {}))
        try:
            with java.jni_lock:
                self._searcher = java.lucene_searcher(folder)
                directory = java.autoclass("org.apache.lucene.store.FSDirectory").open(
                    java.autoclass("java.io.File")(str(folder)).toPath()
                )
                self._reader = java.autoclass("org.apache.lucene.index.DirectoryReader").open(directory)
        except Exception as exc:  # a Java exception: the folder is not a readable Lucene index
            raise IndexMissingError(
                f"the bm25 index in {folder} is unreadable ({str(exc).splitlines()[0]}): rebuild it with "
                f"'mathscout index --index {index.path} --components bm25'"
            ) from exc
        with java.jni_lock:
            self._doc_count = max(self._reader.numDocs(), 1)
        self._term = java.autoclass("org.apache.lucene.index.Term")
        self._term_query = java.autoclass("org.apache.lucene.search.TermQuery")
        self._boost_query = java.autoclass("org.apache.lucene.search.BoostQuery")
        self._should = java.autoclass("org.apache.lucene.search.BooleanClause$Occur").SHOULD
        self._boolean_builder = java.autoclass("org.apache.lucene.search.BooleanQuery$Builder")
        self._index_path = index.path
        self._rm3 = False
        self.set_bm25(k1, b)

    def set_bm25(self, k1: float, b: float) -> None:
        """Change the BM25 parameters (k1 ≥ 0, 0 ≤ b ≤ 1)."""
        if k1 < 0 or not 0 <= b <= 1:
            raise MathScoutError(f"invalid BM25 parameters k1={k1}, b={b} (need k1 ≥ 0 and 0 ≤ b ≤ 1)")
        self.k1, self.b = float(k1), float(b)
        self._apply_bm25()

    def _apply_bm25(self) -> None:
        """Hand the checked k1, b to what scores (here Lucene's searcher)."""
        with java.jni_lock:
            self._searcher.set_bm25(self.k1, self.b)

    def set_rm3(self, fb_terms: int = 10, fb_docs: int = 10, original_query_weight: float = 0.5) -> None:
        """Expand every query with RM3 pseudo-relevance feedback (Anserini's defaults; feedback terms are
        words and numbers). Needs document vectors in the bm25 index (an index without them is refused with a rebuild hint)."""
        with java.jni_lock:
            if self._reader.numDocs() == 0 or self._reader.termVectors().get(0) is None:
                raise IndexMissingError(
                    f"RM3 needs document vectors, which the bm25 index of {self._index_path} lacks: rebuild it with "
                    f"'mathscout index --index {self._index_path} --components bm25'"
                )
            # Pre-analysed terms must reach Lucene as they are: split queries on whitespace only.
            self._searcher.set_analyzer(java.autoclass("org.apache.lucene.analysis.core.WhitespaceAnalyzer")())
            self._searcher.set_rm3(None, fb_terms, fb_docs, float(original_query_weight), False, True)
        self._rm3 = True

    def idf(self, term: str) -> float:
        """Lucene's BM25 idf of an index term (0 for terms absent from the index)."""
        with java.jni_lock:
            df = self._reader.docFreq(self._term(FIELD, term))
        return math.log(1 + (self._doc_count - df + 0.5) / (df + 0.5)) if df else 0.0

    def query_weights(self, query: Query) -> Counter[str]:
        """The weighted bag of words of a query: term counts (math tokens scaled by `math_weight`)."""
        weights: Counter[str] = Counter()
        for term in query_index_terms(query, self.vocabulary):
            # float weights: typeshed's Counter counts ints only
            weights[term] += self.math_weight if is_math_term(term) else 1.0  # type: ignore[assignment]
        if len(weights) > MAX_QUERY_TERMS:  # keep the terms that can matter most: weight × idf
            ranked = sorted(weights, key=lambda t: weights[t] * self.idf(t), reverse=True)
            weights = Counter({t: weights[t] for t in ranked[:MAX_QUERY_TERMS]})
        return weights

    def _lucene_query(self, weights: Counter[str]):
        builder = self._boolean_builder()
        for term, weight in weights.items():
            clause = self._term_query(self._term(FIELD, term))
            builder.add(self._boost_query(clause, float(weight)) if weight != 1.0 else clause, self._should)
        return builder.build()

    def rank(self, query: Query, k: int) -> RankResult:
        """The top-k hits (ids and scores only)."""
        return RankResult(self._rank(query, self.query_weights(query), k))

    def _rank(self, query: Query, weights: Counter[str], k: int) -> list[Hit]:
        if not weights:
            raise QueryError(f"the query {query.text[:60]!r} has no searchable words or math tokens")
        with java.jni_lock:
            if self._rm3:  # RM3 estimates its model from the query string: each term repeated by its weight
                text = " ".join(" ".join([term] * max(1, round(weight))) for term, weight in weights.items())
                results = self._searcher.search(text, k)
            else:
                results = self._searcher.search(self._lucene_query(weights), k)
            return [
                Hit(doc_id=r.docid, score=float(r.score), rank=n, components={self.name: float(r.score)})
                for n, r in enumerate(results, start=1)
            ]

    def _search(self, query: Query, k: int) -> list[Hit]:
        weights = self.query_weights(query)
        hits = self._rank(query, weights, k)
        return self.explain(hits, weights)

    def explain(self, hits: list[Hit], weights: Counter[str]) -> list[Hit]:
        """Add snippets and matched formulas (query terms weighted by idf) to the first EXPLAINED_HITS hits."""
        term_weights = {t: self.idf(t) for t in weights}
        documents = self.store.get_many(h.doc_id for h in hits[:EXPLAINED_HITS])
        for hit in hits[:EXPLAINED_HITS]:
            document = documents.get(hit.doc_id)
            if document is not None:
                hit.snippet = make_snippet(document, term_weights)
                hit.formulas = match_formulas(document, term_weights)
        return hits

    def batch_search(self, queries: list[Query], k: int = 1000) -> dict[str, list[Hit]]:
        """Ranked ids and scores for many queries (no snippets: runs need only the ranking)."""
        return {q.id: self.rank(prepare_query(q), k).hits for q in queries}


def open_bm25(index: IndexDir, **options) -> BM25Retriever:
    return BM25Retriever(index, **options)
