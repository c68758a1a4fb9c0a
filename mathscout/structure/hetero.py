"""Heterogeneous math + text search with MaxScore pruning: Zhong 2023 thesis, Algorithm 5 (§4.2.2, §4.3.2).

Document-level iterators, one per query keyword: a text term (its postings with BM25 partial scores,
`text_lists.TextLists`) or a query formula (the documents owning a formula on any of its path lists; a
document's score is λ_m × its best formula's Zhong 2023 thesis Eq. 3.16 score, computed by the formula kernel of
`search.py` as Zhong 2023 thesis Alg. 5 line 28's subroutine). Iterators are sorted by upper bound u (text: the list's
largest partial score; math: λ_m · u(w) of Zhong 2023 thesis Eq. 4.15 with w the widest query node and P at its largest),
a[i] = Σ_{j ≥ i} u[j], and the requirement set is the iterators before the pivot (a[i] > θ). A math
keyword's formula threshold is θ_i = (θ − score − (a[i] − u[i])) / λ_m (line 27), passed to the kernel,
which abandons formulas that cannot reach it. The result is the exact top k of Zhong 2023 thesis Eq. 3.18,
S_all = λ_m · Σ_formulas S(Q_f, D) + BM25(Q_text, D), ties broken by the lower document ordinal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np
from numba.typed import List

from mathscout.structure.heap import push
from mathscout.structure.lists import mark_formulas
from mathscout.structure.search import (
    MAX_FORMULA_LEAVES,
    SLACK,
    PreparedQuery,
    StructureSearcher,
    bind,
    score_candidate,
)

TEXT, MATH = 0, 1


@dataclass(frozen=True)
class KeywordList:
    """A document-level iterator: sorted document ordinals and, for text keywords, their partial scores."""

    kind: int  # TEXT or MATH
    docs: np.ndarray
    scores: np.ndarray | None = None  # TEXT only
    query: PreparedQuery | None = None  # MATH only
    formulas: np.ndarray | None = None  # MATH only: the formulas on any of the query's path lists, sorted

    @property
    def text_scores(self) -> np.ndarray:
        """A TEXT keyword's partial scores."""
        assert self.scores is not None, "a formula keyword has no text scores"
        return self.scores

    @property
    def math_query(self) -> PreparedQuery:
        """A MATH keyword's query formula."""
        assert self.query is not None, "a text keyword has no query formula"
        return self.query


def math_keyword(searcher: StructureSearcher, query: PreparedQuery) -> KeywordList:
    """The document-level iterator of a query formula: the formulas sharing a token path with it, and their documents."""
    list_start, list_end = query.arrays[0], query.arrays[1]
    if not len(list_start):
        empty = np.zeros(0, dtype=np.int64)
        return KeywordList(MATH, empty, query=query, formulas=empty)
    mask = np.zeros(len(searcher.index.doc), dtype=np.bool_)
    with searcher.index.reading():
        for s, e in zip(list_start, list_end):
            mark_formulas(query.ix, s, e, mask)  # every formula of the list, read without decoding the list into memory
    formulas = np.flatnonzero(mask).astype(np.int64)
    owners = searcher.index.doc[formulas].astype(np.int64)  # non-decreasing: a document's formulas are consecutive
    docs = owners[np.concatenate(([True], owners[1:] != owners[:-1]))] if len(owners) else owners
    return KeywordList(MATH, docs, query=query, formulas=formulas)


def math_upper_bound(query: PreparedQuery, eta: float, lambda_m: float) -> float:
    """λ_m · u(w) (Zhong 2023 thesis, Eq. 4.15 relaxed to S_sym ≤ 1 and the largest P(D; η), at a one-leaf formula)."""
    return lambda_m * query.width * (1.0 - eta + eta / math.log(2.0))


def heterogeneous_search(
    searcher: StructureSearcher,
    keywords: list[KeywordList],
    k: int,
    lambda_m: float,
    formula_first: np.ndarray,
    prune: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k (document ordinals, scores) of Zhong 2023 thesis Eq. 3.18 by Alg. 5; `prune=False` scores every candidate fully."""
    keywords = [kw for kw in keywords if len(kw.docs)]
    if not keywords or k <= 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    uppers = []
    for kw in keywords:
        if kw.kind == TEXT:
            uppers.append(float(kw.text_scores.max()))
        else:
            uppers.append(math_upper_bound(kw.math_query, searcher.eta, lambda_m))
    order = sorted(range(len(keywords)), key=lambda i: (-uppers[i], i))  # line 3: by upper bound, descending
    keywords = [keywords[i] for i in order]
    u = np.array([uppers[i] for i in order], dtype=np.float64)
    starts = np.zeros(len(keywords) + 1, dtype=np.int64)
    starts[1:] = np.cumsum([len(kw.docs) for kw in keywords])
    docs = np.concatenate([kw.docs.astype(np.int64) for kw in keywords])
    scores = np.concatenate([kw.scores if kw.kind == TEXT else np.zeros(len(kw.docs)) for kw in keywords])
    kinds = np.array([kw.kind for kw in keywords], dtype=np.int64)
    math_of = np.full(len(keywords), -1, dtype=np.int64)
    queries, cursors, alive, formulas = List(), List(), List(), List()
    max_rows = 1
    ix, bound = bind(searcher.index, [kw.math_query for kw in keywords if kw.kind == MATH])
    for i, kw in enumerate(keywords):
        if kw.kind == MATH:
            math_of[i] = len(queries)
            arrays = bound[len(queries)]
            queries.append(arrays)
            cursors.append(arrays[0].copy())
            query = kw.math_query
            alive.append(np.ones(len(query.node_ids), dtype=np.bool_))
            formulas.append(kw.formulas)
            max_rows = max(max_rows, int(query.arrays[13].max()) if len(query.node_ids) else 1)
    if not len(queries):  # no formula keyword matched a path: plain BM25 over the text keywords
        return _text_only(docs, scores, starts, k)
    with searcher.index.reading():
        out_docs, out_scores = _hetero(
            ix,
            queries,
            cursors,
            alive,
            formulas,
            searcher.scratch,
            max_rows,
            formula_first,
            docs,
            scores,
            starts,
            kinds,
            math_of,
            u,
            k,
            lambda_m,
            searcher.eta,
            searcher.b1,
            searcher.b2,
            prune,
        )
    ranked = np.lexsort((out_docs, -out_scores))
    return out_docs[ranked], out_scores[ranked]


def _text_only(docs: np.ndarray, scores: np.ndarray, starts: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-k of text keywords alone (no formula matched anything): plain sums."""
    total: dict[int, float] = {}
    for d, s in zip(docs.tolist(), scores.tolist()):
        total[d] = total.get(d, 0.0) + s
    ranked = sorted(total, key=lambda d: (-total[d], d))[:k]
    return np.array(ranked, dtype=np.int64), np.array([total[d] for d in ranked])


def exhaustive_scores(
    searcher: StructureSearcher, keywords: list[KeywordList], lambda_m: float, n_docs: int
) -> np.ndarray:
    """Zhong 2023 thesis, Eq. 3.18 for every document, without any pruning (the reference for rank-safety tests)."""
    total = np.zeros(n_docs)
    for kw in keywords:
        if kw.kind == TEXT:
            np.add.at(total, kw.docs, kw.text_scores)
            continue
        formulas = np.flatnonzero(np.isin(searcher.index.doc, kw.docs))
        best = np.zeros(n_docs)
        for hit in searcher.score_formulas(kw.math_query, formulas):
            best[hit.doc] = max(best[hit.doc], hit.score)
        total += lambda_m * best
    return total


@numba.njit(cache=True)
def _doc_math_score(
    doc,
    theta_i,
    prune,
    formula_first,
    formulas,
    fpos,
    ix,
    q,
    pos,
    alive,
    eta,
    b1,
    b2,
    acc,
    touched,
    sym2col,
    table,
    col_sym,
    crossed,
):
    """Line 28: the highest formula score of a document (Zhong 2023 thesis, Alg. 4 as a subroutine, pruned by θ_i when prune) over
    the document's formulas that share a token path with the query (`formulas`, read from cursor fpos[0])."""
    best = 0.0
    i = fpos[0]
    while i < formulas.shape[0] and formulas[i] < formula_first[doc]:
        i += 1
    while i < formulas.shape[0] and formulas[i] < formula_first[doc + 1]:
        f = formulas[i]
        i += 1
        floor = max(theta_i, best) if prune else 0.0
        s, _m, _n, _ = score_candidate(
            f,
            ix,
            q,
            pos,
            alive,
            prune and floor > 0.0,
            floor,
            eta,
            b1,
            b2,
            acc,
            touched,
            sym2col,
            table,
            col_sym,
            crossed,
        )
        if s > best:
            best = s
    fpos[0] = i
    return best


@numba.njit(cache=True)
def _pivot(a, theta):
    """The last iterator whose suffix bound a[i] exceeds θ (the requirement set is 0..pivot)."""
    p = -1
    for i in range(a.shape[0]):
        if a[i] > theta:
            p = i
    return p


@numba.njit(cache=True)
def _hetero(
    ix,
    queries,
    cursors,
    alive,
    formulas,
    scratch,
    max_rows,
    formula_first,
    docs,
    scores,
    starts,
    kinds,
    math_of,
    u,
    k,
    lambda_m,
    eta,
    b1,
    b2,
    prune,
):
    """HETEROGENEOUSMAXSCORE (Zhong 2023 thesis, Alg. 5) over document-level iterators sorted by decreasing upper bound."""
    acc, touched, sym2col = scratch
    table = np.zeros((max_rows, MAX_FORMULA_LEAVES + 1))
    col_sym = np.zeros(MAX_FORMULA_LEAVES + 1, dtype=np.int64)
    crossed = np.zeros(MAX_FORMULA_LEAVES + 1, dtype=np.bool_)
    n = u.shape[0]
    a = np.zeros(n + 1)  # line 6: a[i] = Σ_{j ≥ i} u[j]
    for i in range(n - 1, -1, -1):
        a[i] = a[i + 1] + u[i]
    pos = starts[:-1].copy()
    fpos = np.zeros((len(formulas), 1), dtype=np.int64)  # cursor into each math keyword's formula list
    h_score = np.zeros(k)
    h_doc = np.zeros(k, dtype=np.int64)
    h_row = np.zeros(k, dtype=np.int64)  # `heap.push`'s rows (a document carries nothing else)
    size = 0
    theta = 0.0
    pivot = n - 1
    while True:
        cand = -1  # line 9: the smallest document among the requirement set's iterators
        for i in range(pivot + 1):
            if pos[i] < starts[i + 1]:
                d = docs[pos[i]]
                if cand < 0 or d < cand:
                    cand = d
        if cand < 0:
            break
        score = 0.0
        complete = True
        for i in range(n):
            if prune and size == k and score + a[i] * SLACK <= theta:  # line 14: cannot make the top k
                complete = False
                break
            if i > pivot:  # line 17: skip in a non-requirement iterator (binary search)
                lo, hi = pos[i], starts[i + 1]
                while lo < hi:
                    mid = (lo + hi) // 2
                    if docs[mid] < cand:
                        lo = mid + 1
                    else:
                        hi = mid
                pos[i] = lo
            if pos[i] >= starts[i + 1] or docs[pos[i]] != cand:
                continue
            if kinds[i] == 0:  # line 25: text keyword
                score += scores[pos[i]]
            else:  # lines 27–30: math keyword
                theta_i = (theta - score - (a[i] - u[i])) / lambda_m if size == k else 0.0
                j = math_of[i]
                m = _doc_math_score(
                    cand,
                    theta_i,
                    prune,
                    formula_first,
                    formulas[j],
                    fpos[j],
                    ix,
                    queries[j],
                    cursors[j],
                    alive[j],
                    eta,
                    b1,
                    b2,
                    acc,
                    touched,
                    sym2col,
                    table,
                    col_sym,
                    crossed,
                )
                score += lambda_m * m
        if complete and score > 0.0 and (size < k or score > theta):  # line 31
            size, _ = push(h_score, h_doc, h_row, size, score, cand)
            if size == k:
                theta = h_score[0]
                if prune:
                    pivot = _pivot(a[:n], theta)
                    if pivot < 0:
                        break
        for i in range(pivot + 1):  # line 36: advance the requirement set past the candidate
            if pos[i] < starts[i + 1] and docs[pos[i]] == cand:
                pos[i] += 1
    return h_doc[:size].copy(), h_score[:size].copy()
