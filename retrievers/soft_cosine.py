"""Soft vector space model (Novotný & Štefánik 2022, "Soft Vector Space Modeling"): the `scm` index component
and the `scm` search mode, a sparse retriever whose terms can match similar terms.

The vector space is BM25's (Lucene BM25 document weights, binary query weights, the paper's "Lucene BM25 as the
vector space") over the math-aware BM25 terms (stemmed words, unified LaTeX tokens and token pairs, in the token
vocabulary of `mathscout.latex.aliases` that the component's manifest entry records: new builds use the current one,
a component recording none was built in vocabulary 1, and queries are analysed in the recorded one). A term similarity
matrix S changes the basis: score(x, y) = xᵀ S y with each vector keeping its L2 norm ('maintain', Novotný 2018).
S = (1 − α)·I + α·S_sem:

- S_sem comes from word2vec trained on the collection's terms, input and output vectors averaged ("Token
  Similarity"), the 100 most similar terms per term, symmetric and strictly diagonally dominant (the greedy
  algorithm of Novotný 2018 §3, as gensim's SparseTermSimilarityMatrix implements it);
- the dictionary keeps terms in at least 2 documents, the 100,000 most frequent ("Token Similarity");
- α = 0 is BM25 itself; the paper interpolates its semantic matrix with a lexical (edit-distance) one, which
  here is the identity (math tokens are unified already, so their spelling carries no more similarity).
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
from scipy import sparse

from mathscout.errors import IndexMissingError, MathScoutError, QueryError
from mathscout.index.arrays import load_arrays, reading
from mathscout.index.components import BuildOptions
from mathscout.index.layout import IndexDir, write_json_atomic
from mathscout.index.stored import StoredFile
from mathscout.latex.aliases import VOCABULARY, recorded_vocabulary
from mathscout.latex.tokens import document_terms
from mathscout.progress import bar as progress_bar
from mathscout.render import make_snippet, match_formulas
from mathscout.retrievers.base import BaseRetriever, RankResult, prepare_query
from mathscout.retrievers.bm25 import DEFAULT_B, DEFAULT_K1, EXPLAINED_HITS, query_index_terms
from mathscout.store import DocumentStore
from mathscout.types import Hit, Query
from mathscout.types_expansion.embeddings import train_word2vec

log = logging.getLogger(__name__)

TERMS, DOCUMENTS, SIMILARITY, NORMS = "terms.json", "documents.npz", "similarity.npz", "norms.npz"
MIN_DOCUMENTS, MAX_TERMS = 2, 100_000  # "removing all tokens that occurred less than twice … 100,000 most frequent"
NEIGHBOURS = 100  # "we considered only the 100 most similar tokens for each token"
DEFAULT_ALPHA = 0.6  # the paper's tuned α for joint text + LaTeX word2vec matrices (post-competition table)
VECTOR_SIZE, EPOCHS = 200, 5


@dataclass(frozen=True)
class SoftSpace:
    """The stored model: term ids, BM25 document vectors, S_sem, and each document's ‖y‖² and yᵀ S_sem y."""

    term_ids: dict[str, int]
    documents: sparse.csr_matrix  # (documents, terms) Lucene BM25 weights
    similarity: sparse.csr_matrix  # (terms, terms) S_sem, unit diagonal
    squared_norms: np.ndarray  # ‖y‖²
    soft_norms: np.ndarray  # yᵀ S_sem y
    _factors: dict[float, np.ndarray] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def load(cls, folder: Path) -> SoftSpace:
        remedy = f"rebuild it with 'mathscout index --index {folder.parent} --components scm'"
        terms = StoredFile(folder / TERMS, "the scm component's terms", remedy)
        term_ids = terms.load()
        for term, n in term_ids.items():
            terms.whole(n, f"the id of {term[:40]!r}", 0, len(term_ids) - 1)
        try:
            # the build saves csr matrices (scipy-stubs type what load_npz reads as any sparse container)
            with reading():  # scipy reads through numpy without pickles; a bad file is one UnreadableArray
                documents = cast(sparse.csr_matrix, sparse.load_npz(folder / DOCUMENTS)).tocsr()
                similarity = cast(sparse.csr_matrix, sparse.load_npz(folder / SIMILARITY)).tocsr()
            squared, soft = load_arrays(folder / NORMS, "squared", "soft")
        except (OSError, ValueError, KeyError) as exc:
            raise IndexMissingError(
                f"the scm component in {folder} is unreadable ({exc}): rebuild it with "
                f"'mathscout index --index {folder.parent} --components scm'"
            ) from exc
        if not (
            documents.shape[1] == similarity.shape[0] == similarity.shape[1] == len(term_ids)
            and len(squared) == len(soft) == documents.shape[0]
        ):
            raise IndexMissingError(
                f"the scm component in {folder} is inconsistent (its files disagree in size): "
                f"rebuild it with 'mathscout index --index {folder.parent} --components scm'"
            )
        return cls(term_ids, documents, similarity, squared, soft)

    def scores(self, term_ids: list[int], alpha: float) -> np.ndarray:
        """Every document's score for a binary query over these term ids: xᵀ S_α y, norms maintained."""
        x = np.zeros(len(self.term_ids), dtype=np.float32)
        x[term_ids] = 1.0
        soft_x = self.similarity[term_ids].sum(axis=0).A1  # x S_sem (x is binary)
        expanded = (1 - alpha) * x + alpha * soft_x  # x S_α
        query_norm = np.sqrt(len(term_ids) / max(float(expanded @ x), 1e-12))  # ‖x‖ / √(xᵀ S_α x)
        return (self.documents @ expanded) * self.document_factor(alpha) * query_norm

    def document_factor(self, alpha: float) -> np.ndarray:
        """‖y‖ / √(yᵀ S_α y) of every document (the same for every query: computed once per α)."""
        if alpha not in self._factors:
            document_soft = (1 - alpha) * self.squared_norms + alpha * self.soft_norms  # yᵀ S_α y
            self._factors[alpha] = np.sqrt(self.squared_norms / np.maximum(document_soft, 1e-12))
        return self._factors[alpha]


class SoftCosineComponent:
    """Trains word2vec on the documents' terms, builds S_sem and the BM25 document vectors."""

    name = "scm"

    def build(self, store: DocumentStore, target: Path, options: BuildOptions) -> dict[str, Any]:
        from gensim.corpora import Dictionary
        from gensim.matutils import corpus2csc
        from gensim.models import LuceneBM25Model, TfidfModel
        from gensim.models.keyedvectors import KeyedVectors
        from gensim.similarities import SparseTermSimilarityMatrix, WordEmbeddingSimilarityIndex

        started = time.perf_counter()
        sentences = target / "sentences.txt"
        texts: list[list[str]] = []
        with open(sentences, "w", encoding="utf-8") as out:
            for document in progress_bar(
                store.iter_documents(),
                total=store.count(),
                desc="scm terms",
                unit=" docs",
                file=sys.stderr,
                mininterval=1.0,
            ):
                terms = document_terms(document, VOCABULARY)
                texts.append(terms)
                out.write(" ".join(terms) + "\n")
        if not any(texts):
            raise MathScoutError("the scm component needs documents with words or formulas; these have none")
        dictionary = Dictionary(texts)
        dictionary.filter_extremes(no_below=MIN_DOCUMENTS, no_above=1.0, keep_n=MAX_TERMS)
        if len(dictionary) == 0:
            raise MathScoutError("too little text for the scm component: no term occurs in two documents")
        corpus = [dictionary.doc2bow(terms) for terms in texts]
        del texts

        trained = time.perf_counter()
        model = train_word2vec(sentences, min_count=1, vector_size=VECTOR_SIZE, epochs=EPOCHS)
        sentences.unlink()
        words = [w for w in dictionary.token2id if w in model.wv.key_to_index]
        rows = [model.wv.key_to_index[w] for w in words]
        vectors = KeyedVectors(VECTOR_SIZE)
        vectors.add_vectors(words, (model.wv.vectors[rows] + model.syn1neg[rows]) / 2)  # input + output, averaged
        train_seconds = time.perf_counter() - trained

        built = time.perf_counter()
        tfidf = TfidfModel(dictionary=dictionary)
        similarity = SparseTermSimilarityMatrix(
            WordEmbeddingSimilarityIndex(vectors),
            dictionary,
            tfidf,
            symmetric=True,
            dominant=True,
            nonzero_limit=NEIGHBOURS,
        ).matrix
        similarity = sparse.csr_matrix(similarity, dtype=np.float32)
        matrix_seconds = time.perf_counter() - built

        bm25 = LuceneBM25Model(dictionary=dictionary, k1=DEFAULT_K1, b=DEFAULT_B)
        documents = corpus2csc(
            bm25[corpus], num_terms=len(dictionary), num_docs=len(corpus), dtype=np.float32
        ).T.tocsr()
        documents.sort_indices()
        squared = np.asarray(documents.multiply(documents).sum(axis=1)).ravel()
        soft = np.asarray((documents @ similarity).multiply(documents).sum(axis=1)).ravel()

        write_json_atomic(target / TERMS, dictionary.token2id)
        sparse.save_npz(target / DOCUMENTS, documents)
        sparse.save_npz(target / SIMILARITY, similarity)
        np.savez(target / NORMS, squared=squared, soft=soft)
        seconds = time.perf_counter() - started
        log.info(
            f"scm: {documents.shape[0]:,} documents, {len(dictionary):,} terms, {similarity.nnz:,} term "
            f"similarities; word2vec {train_seconds:.0f} s, matrix {matrix_seconds:.0f} s, {seconds:.0f} s in all"
        )
        return {
            "docs": documents.shape[0],
            "terms": len(dictionary),
            "terms_with_vectors": len(words),
            "similarities": int(similarity.nnz),
            "word2vec_seconds": round(train_seconds, 2),
            "matrix_seconds": round(matrix_seconds, 2),
            "seconds": round(seconds, 2),
            "bytes": sum(f.stat().st_size for f in target.iterdir() if f.is_file()),
            "vocabulary": VOCABULARY,  # the terms' BM25 token vocabulary (`mathscout.latex.aliases`)
            "settings": {
                "min_documents": MIN_DOCUMENTS,
                "max_terms": MAX_TERMS,
                "neighbours": NEIGHBOURS,
                "vector_size": VECTOR_SIZE,
                "epochs": EPOCHS,
                "k1": DEFAULT_K1,
                "b": DEFAULT_B,
            },
        }


class SoftCosineRetriever(BaseRetriever):
    """The soft vector space model over the `scm` component; `alpha` mixes identity (0, BM25) and S_sem (1)."""

    name = "scm"

    def __init__(self, index: IndexDir, alpha: float = DEFAULT_ALPHA):
        alpha = float(alpha)
        if not 0 <= alpha <= 1:
            raise MathScoutError(f"alpha must be between 0 and 1, got {alpha}")
        self.alpha = alpha
        self.space = SoftSpace.load(index.component_path("scm"))
        self.vocabulary = recorded_vocabulary(index.manifest.components.get("scm", {}))  # as its terms were analysed
        self.store = index.store
        self.doc_ids = self.store.doc_ids()
        if len(self.doc_ids) != self.space.documents.shape[0]:
            raise IndexMissingError(
                f"the scm component of {index.path} holds {self.space.documents.shape[0]:,} "
                f"documents but the index {len(self.doc_ids):,}: rebuild it with "
                f"'mathscout index --index {index.path} --components scm'"
            )

    def known_terms(self, query: Query) -> dict[str, int]:
        """The query's distinct terms that the component knows (term → id), analysed as BM25 analyses them."""
        known = {
            t: self.space.term_ids[t] for t in query_index_terms(query, self.vocabulary) if t in self.space.term_ids
        }
        if not known:
            raise QueryError(f"none of the terms of {query.text[:60]!r} occurs in two documents of this index")
        return known

    def rank(self, query: Query, k: int, known: dict[str, int] | None = None) -> RankResult:
        known = known if known is not None else self.known_terms(query)
        scores = self.space.scores(sorted(known.values()), self.alpha)
        candidates = np.flatnonzero(scores > 0)
        if len(candidates) > k:
            candidates = candidates[np.argpartition(-scores[candidates], k - 1)[:k]]
        order = sorted(candidates, key=lambda i: (-scores[i], self.doc_ids[i]))
        return RankResult(
            [
                Hit(doc_id=self.doc_ids[i], score=float(scores[i]), rank=n, components={self.name: float(scores[i])})
                for n, i in enumerate(order, start=1)
            ]
        )

    def _search(self, query: Query, k: int) -> list[Hit]:
        """Hits with snippets and matched formulas for the first EXPLAINED_HITS (query terms weighted alike)."""
        known = self.known_terms(query)
        hits = self.rank(query, k, known).hits
        weights = dict.fromkeys(known, 1.0)
        documents = self.store.get_many(h.doc_id for h in hits[:EXPLAINED_HITS])
        for hit in hits[:EXPLAINED_HITS]:
            if hit.doc_id in documents:
                hit.snippet = make_snippet(documents[hit.doc_id], weights)
                hit.formulas = match_formulas(documents[hit.doc_id], weights)
        return hits

    def batch_search(self, queries: list[Query], k: int = 1000) -> dict[str, list[Hit]]:
        return {q.id: self.rank(prepare_query(q), k).hits for q in queries}


def open_scm(index: IndexDir, **options) -> SoftCosineRetriever:
    return SoftCosineRetriever(index, **options)
