"""Type-aware retrieval (Stathopoulos & Teufel 2016): the `types` index component and the search modes
`types` (TypesExp), `types2x` (Types2X) and `rm3` (the RM3 query-expansion baseline), all over BM25.

The component detects the dictionary's types in every document, indexes each document's types as
atomic tokens in a small Lucene "delta index" (Stathopoulos & Teufel 2016 §4.3.1: a type-aware delta index beside the word index)
and trains the type embeddings (Stathopoulos & Teufel 2016 §4.1) over the same rewritten text, plus PlanetMath bodies when present.
A query's score for a document is its math-aware BM25 score plus the BM25 score of the query's types
(×2, and for TypesExp the fresh neighbour types, ×2) in the delta index.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mathscout import java
from mathscout.errors import IndexMissingError
from mathscout.index.components import BuildOptions
from mathscout.index.layout import IndexDir
from mathscout.progress import bar as progress_bar
from mathscout.retrievers.base import BaseRetriever, RankResult, prepare_query
from mathscout.retrievers.bm25 import BM25Retriever
from mathscout.settings import settings
from mathscout.store import DocumentStore
from mathscout.types import Hit, Query
from mathscout.types_expansion.detect import TypeDetector, read_terms
from mathscout.types_expansion.dictionary import SHARED_PLANETMATH
from mathscout.types_expansion.embeddings import EPOCHS, MIN_COUNT, VECTOR_SIZE, WINDOW, WORKERS, train_type_embeddings
from mathscout.types_expansion.expand import NEIGHBOURS, TYPE_BOOST, ExpandedQuery, expand_query, load_type_model

log = logging.getLogger(__name__)

TYPE_INDEX = "lucene"
FIELD = "contents"
BATCH = 500
FUSION_DEPTH = 1000  # hits taken from each of the word and type indexes before their scores are added


def planetmath_entries(configured: str | None = None) -> Path | None:
    """PlanetMath's entries.jsonl: `configured`, else $MATHSCOUT_PLANETMATH ("none": no extra text), else the shared
    data when present."""
    configured = configured or settings().planetmath
    if configured == "none":
        return None
    path = Path(configured) if configured else SHARED_PLANETMATH / "entries.jsonl"
    if path.is_dir():
        path = path / "entries.jsonl"
    return path if path.is_file() else None


def _planetmath_texts(path: Path, indexed_ids: set[str]) -> Iterator[str]:
    """Title + body of each PlanetMath entry the index does not already hold (as `pm:…:<id>`)."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if str(entry.get("id")) not in indexed_ids and entry.get("body"):
                yield f"{entry.get('title') or ''}\n{entry['body']}"


class TypesComponent:
    """Type delta index + type embeddings, built from the document store."""

    name = "types"

    def build(self, store: DocumentStore, target: Path, options: BuildOptions) -> dict[str, Any]:
        started = time.perf_counter()
        detector = TypeDetector(read_terms())
        total = store.count()
        doc_ids: list[str] = []
        indexer = java.lucene_index().LuceneIndexer(
            args=["-index", str(target / TYPE_INDEX), "-pretokenized", "-quiet"], threads=1
        )
        batch: list[str] = []
        typed_docs = 0
        extra = planetmath_entries(options.planetmath)

        def index_types(n: int, tokens: list[str]) -> None:
            nonlocal batch, typed_docs
            if n >= len(doc_ids) or not tokens:  # PlanetMath extras train the embeddings only
                return
            typed_docs += 1
            batch.append(json.dumps({"id": doc_ids[n], FIELD: " ".join(tokens)}, ensure_ascii=False))
            if len(batch) == BATCH:
                indexer.add_batch_raw(batch)
                batch = []

        def texts() -> Iterator[str]:
            for document in progress_bar(
                store.iter_documents(), total=total, desc="types", unit=" docs", file=sys.stderr, mininterval=1.0
            ):
                doc_ids.append(document.id)
                yield document.titled()
            if extra is not None:
                indexed = {d.rsplit(":", 1)[-1] for d in doc_ids if d.startswith("pm:")}
                yield from _planetmath_texts(extra, indexed)

        try:
            model, stats, train_seconds = train_type_embeddings(  # small indexes: rarer words get vectors too
                texts(), detector, target, on_types=index_types, min_count=min(MIN_COUNT, max(1, total // 100))
            )
            if batch:
                indexer.add_batch_raw(batch)
        finally:
            indexer.close()
        model.save(target)
        words_per_second = stats.tokens / max(stats.seconds, 1e-9)
        log.info(
            f"types: {stats.documents:,} texts, {stats.tokens:,} tokens, {stats.type_mentions:,} type mentions; "
            f"detection {stats.seconds:.1f} s ({words_per_second:,.0f} tokens/s); word2vec {train_seconds:.1f} s; "
            f"{len(model.types):,} of {len(detector):,} types have vectors"
        )
        return {
            "documents": len(doc_ids),
            "planetmath_extra_texts": stats.documents - len(doc_ids),
            "typed_documents": typed_docs,
            "dictionary_terms": len(detector),
            "sentences": stats.sentences,
            "tokens": stats.tokens,
            "type_mentions": stats.type_mentions,
            "types_with_vectors": len(model.types),
            "detect_seconds": round(stats.seconds, 2),
            "tokens_per_second": round(words_per_second),
            "train_seconds": round(train_seconds, 2),
            "seconds": round(time.perf_counter() - started, 2),
            "word2vec": {
                "sg": 1,
                "negative": 5,
                "window": WINDOW,
                "vector_size": VECTOR_SIZE,
                "epochs": EPOCHS,
                "workers": WORKERS,
            },
        }


class TypeIndex:
    """BM25 over the type delta index (one token per type mention)."""

    def __init__(self, folder: Path, k1: float, b: float):
        try:
            self._searcher = java.lucene_searcher(folder)
        except Exception as exc:  # a Java exception: not a readable Lucene index
            raise IndexMissingError(f"the type index in {folder} is unreadable ({str(exc).splitlines()[0]})") from exc
        with java.jni_lock:
            self._searcher.set_bm25(float(k1), float(b))
        self._term = java.autoclass("org.apache.lucene.index.Term")
        self._term_query = java.autoclass("org.apache.lucene.search.TermQuery")
        self._boost_query = java.autoclass("org.apache.lucene.search.BoostQuery")
        self._should = java.autoclass("org.apache.lucene.search.BooleanClause$Occur").SHOULD
        self._boolean_builder = java.autoclass("org.apache.lucene.search.BooleanQuery$Builder")

    def search(self, weights: dict[str, float], k: int) -> dict[str, float]:
        """Document id → score for the top-k documents of a weighted bag of type tokens."""
        with java.jni_lock:
            builder = self._boolean_builder()
            for token, weight in weights.items():
                builder.add(self._boost_query(self._term_query(self._term(FIELD, token)), float(weight)), self._should)
            return {r.docid: float(r.score) for r in self._searcher.search(builder.build(), k)}


class TypesRetriever(BaseRetriever):
    """BM25 plus type matching: TypesExp (`expand=True`) or Types2X (`expand=False`)."""

    def __init__(
        self,
        index: IndexDir,
        expand: bool = True,
        neighbours: int = NEIGHBOURS,
        boost: float = TYPE_BOOST,
        depth: int = FUSION_DEPTH,
        **bm25_options,
    ):
        self.bm25 = BM25Retriever(index, **bm25_options)
        self.model = load_type_model(index)
        self.types = TypeIndex(index.component_path("types") / TYPE_INDEX, self.bm25.k1, self.bm25.b)
        self.name = "types" if expand else "types2x"
        self.neighbours = neighbours if expand else 0
        self.boost = boost
        self.depth = depth

    def expansion(self, query: str | Query) -> ExpandedQuery:
        """What the query's types are and what expansion adds (a no-op when it has no types)."""
        text = query.text if isinstance(query, Query) else query
        return expand_query(text, self.model, self.neighbours)

    def rank(self, query: Query, k: int) -> RankResult:
        """Top-k hits: BM25 score + type score (hits from the word and type indexes, to `depth` each)."""
        expansion = self.expansion(query)
        depth = max(k, self.depth)
        words = {h.doc_id: h.score for h in self.bm25.rank(query, depth).hits}
        types = {} if expansion.is_noop else self.types.search(expansion.type_weights(self.boost), depth)
        scores = {d: words.get(d, 0.0) + types.get(d, 0.0) for d in words.keys() | types.keys()}
        best = sorted(scores, key=lambda d: (-scores[d], d))[:k]
        return RankResult(
            [
                Hit(
                    doc_id=d,
                    score=scores[d],
                    rank=n,
                    components={"bm25": words.get(d, 0.0), "types": types.get(d, 0.0)},
                )
                for n, d in enumerate(best, start=1)
            ]
        )

    def _search(self, query: Query, k: int) -> list[Hit]:
        hits = self.rank(query, k).hits
        return self.bm25.explain(hits, self.bm25.query_weights(query))

    def batch_search(self, queries: list[Query], k: int = 1000) -> dict[str, list[Hit]]:
        """Ranked ids and scores for many queries (no snippets)."""
        return {q.id: self.rank(prepare_query(q), k).hits for q in queries}


def open_types(index: IndexDir, **options) -> TypesRetriever:
    return TypesRetriever(index, expand=True, **options)


def open_types2x(index: IndexDir, **options) -> TypesRetriever:
    return TypesRetriever(index, expand=False, **options)


def open_rm3(index: IndexDir, **options) -> BM25Retriever:
    """Stathopoulos & Teufel 2016 §4.3.2: RM3 pseudo-relevance feedback, the classic query-expansion baseline (pyserini defaults: 10 terms, 10 docs, 0.5)."""
    retriever = BM25Retriever(index, **options)
    retriever.name = "rm3"
    retriever.set_rm3()
    return retriever


def main(argv: list[str] | None = None) -> None:
    """Detect types, train the type embeddings (Stathopoulos & Teufel 2016 §4.1) and (re)build an index's `types` component.

    `mathscout train types --index DIR` is the same as `mathscout index --index DIR --components types`."""
    from mathscout.retrievers.indexing import add_components

    parser = argparse.ArgumentParser(prog="mathscout train types", description=(main.__doc__ or "").splitlines()[0])
    parser.add_argument("--index", required=True, type=Path, help="an index directory (it keeps the model)")
    parser.add_argument(
        "--planetmath",
        help="PlanetMath entries.jsonl whose bodies also train the embeddings "
        "(default: $MATHSCOUT_PLANETMATH or the shared data; 'none' to skip)",
    )
    args = parser.parse_args(argv)
    stats = add_components(args.index, ["types"], BuildOptions(planetmath=args.planetmath)).components["types"]
    print(
        f"types in {args.index}: {stats['typed_documents']:,} of {stats['documents']:,} documents typed "
        f"(+{stats['planetmath_extra_texts']:,} PlanetMath texts), {stats['type_mentions']:,} type mentions; "
        f"detection {stats['tokens_per_second']:,} tokens/s; word2vec {stats['train_seconds']} s; "
        f"{stats['types_with_vectors']:,} of {stats['dictionary_terms']:,} types have vectors"
    )
