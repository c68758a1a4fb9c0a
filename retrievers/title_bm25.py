"""Title BM25: how well the question matches a document's title (for an ARQMath answer, its thread's question
title, which `mathscout.corpus.arqmath` stores as the answer's title). A ranking feature (issue 19).

Okapi BM25 as in Zhong 2023 thesis Eq. 2.2 over the title alone: the idf of each query term is the index's own BM25 idf
(Lucene's, over whole documents, `BM25Retriever.idf`), tf and the length L_d are the title's, and L_avg is the mean
title length over a sample of the index's titled documents. A document without a title has no score (NaN in
`retrievers/features.py`, never 0); an index whose store holds no title at all (the shared collection) costs nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Protocol

from mathscout.latex.tokens import query_terms
from mathscout.retrievers.bm25 import DEFAULT_B, DEFAULT_K1, BM25Retriever
from mathscout.types import Query

LENGTH_SAMPLE = 5000  # titled documents whose mean length is L_avg


class Titles(Protocol):
    """The short texts TitleScorer scores: a DocumentStore's titles, or any texts by id."""

    def titles(self, doc_ids: Iterable[str]) -> dict[str, str]: ...

    def title_sample(self, n: int) -> list[str]: ...


class TitleScorer:
    """BM25 (Zhong 2023 thesis, Eq. 2.2) of a question against the titles of documents of one index."""

    def __init__(self, store: Titles, bm25: BM25Retriever, k1: float = DEFAULT_K1, b: float = DEFAULT_B):
        self.store = store
        self.bm25 = bm25
        self.k1, self.b = k1, b
        lengths = [len(query_terms(title)) for title in store.title_sample(LENGTH_SAMPLE)]
        self.average_length = sum(lengths) / len(lengths) if lengths else 0.0  # 0: the store has no titles
        self._idf: dict[str, float] = {}

    @property
    def has_titles(self) -> bool:
        return self.average_length > 0

    def idf(self, term: str) -> float:
        if term not in self._idf:
            self._idf[term] = self.bm25.idf(term)
        return self._idf[term]

    def scores(self, query: Query, doc_ids: list[str]) -> dict[str, float]:
        """Title BM25 of each document that has a title (the others are absent)."""
        if not self.has_titles:
            return {}
        weights = self.bm25.query_weights(query)
        scores = {}
        for doc_id, title in self.store.titles(doc_ids).items():
            terms = Counter(query_terms(title))
            norm = self.k1 * (1 - self.b + self.b * sum(terms.values()) / self.average_length)
            scores[doc_id] = sum(
                weight * self.idf(term) * terms[term] / (terms[term] + norm)
                for term, weight in weights.items()
                if term in terms
            )
        return scores
