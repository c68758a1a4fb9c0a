"""Approach Zero's formula similarity, one function per formula of the thesis (Zhong 2023, ch. 3–4).

These are the reference implementations, written over path prefixes (`paths.path_prefixes`) of two
trees. The search kernel (`search.py`) computes the same quantities over posting lists; tests check
that both agree. Conventions used by both:
- ties between matched node pairs go to the query node with the larger upper bound, then the lower
  query node id, then the lower document node id;
- Zhong 2023 thesis Alg. 2 visits query bound variables by decreasing size, ties by `symbol_key`, and a row takes the
  document symbol with the highest mark, ties by `symbol_key`.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mathscout.structure.paths import PathPrefix

# Zhong 2023 thesis §3.3.1 parameters
B1 = 0.94  # Zhong 2023 thesis, Alg. 2: operand symbol matches, fingerprint differs
B2 = 0.90  # Zhong 2023 thesis, Alg. 2: structure-only match
ETA_ARQMATH = 0.3  # Zhong 2023 thesis, Eq. 3.15 length penalty, ARQMath setting
ETA_NTCIR = 0.05  # Zhong 2023 thesis, Eq. 3.15, NTCIR-12 setting
ALPHA = 0.4  # Zhong 2023 thesis, Eq. 3.3 operator vs operand weight
BETAS = (0.9, 0.06, 0.04)  # Zhong 2023 thesis, Eq. 3.3 weights of the 1st, 2nd, 3rd widest trees
LAMBDA_M = 2.5  # Zhong 2023 thesis, Eq. 3.18 math path weight
MIN_SYMBOL_FACTOR = 0.5  # Zhong 2023 thesis, Eq. 3.14 at S'_sym = 0 (the lower bound used by Eq. 4.16/4.17)
MAX_FORMULA_LEAVES = 256  # longest formula the index holds (used by the lower bound l of Zhong 2023 thesis Eq. 4.16)

SymbolKey = Callable[[str], Any]

# {root-end node id: {token path: [prefixes]}}
NodePaths = dict[int, dict[str, list[PathPrefix]]]


def group_by_root(prefixes: Iterable[PathPrefix]) -> NodePaths:
    """Prefixes grouped by root-end node, then token path: Q_t^(m) of Zhong 2023 thesis Eqs. 4.1–4.6."""
    grouped: NodePaths = defaultdict(lambda: defaultdict(list))
    for p in prefixes:
        grouped[p.root_end][p.token_path].append(p)
    return {m: dict(by_path) for m, by_path in grouped.items()}


def path_idf(total_paths: int, path_frequency: int) -> float:
    """Path weight idf_t = log(N / DF_t), N = all paths in the index (Zhong 2023 thesis §3.1.2, Eq. 3.11)."""
    return math.log(total_paths / path_frequency)


def floored_path_idf(total_paths: int, path_frequency):
    """Zhong 2023 thesis, Eq. 3.11 as the index computes it (vectorised over DF_t), floored just above 0: a wildcard list can be longer
    than all ordinary lists together in a tiny index."""
    return np.log(np.maximum(total_paths / np.asarray(path_frequency, dtype=np.float64), 1.0 + 1e-9))


def node_pair_width(
    query: Mapping[str, int], doc: Mapping[str, int], idf: Callable[[str], float] | None = None
) -> float:
    """ν(G^(m,n)) = Σ_t min(|Q_t^(m)|, |D_t^(n)|) (Zhong 2023 thesis, Eq. 4.9), each path weighted by idf_t when given (Eq. 3.5)."""
    total = 0.0
    for t, q_count in query.items():
        d_count = doc.get(t, 0)
        if d_count:
            total += min(q_count, d_count) * (idf(t) if idf else 1.0)
    return total


def node_upper_bound(query: Mapping[str, int], idf: Callable[[str], float] | None = None) -> float:
    """Σ_t w_{m,t} with w_{m,t} = |Q_t^(m)| (× idf_t): the best width a query node can reach (Zhong 2023 thesis §4.1.2)."""
    return sum(count * (idf(t) if idf else 1.0) for t, count in query.items())


@dataclass(frozen=True)
class NodeMatch:
    """The widest common subtree found: its (path-weighted) width and the query/document root ends."""

    width: float
    query_node: int
    doc_node: int


def widest_match(query: NodePaths, doc: NodePaths, idf: Callable[[str], float] | None = None) -> NodeMatch | None:
    """w* = max over node pairs (m, n) of Zhong 2023 thesis Eq. 4.9 (Eq. 4.7; path-weighted: Eq. 3.5). None when nothing matches."""
    q_counts = {m: {t: len(ps) for t, ps in by_t.items()} for m, by_t in query.items()}
    d_counts = {n: {t: len(ps) for t, ps in by_t.items()} for n, by_t in doc.items()}
    order = sorted(q_counts, key=lambda m: (-node_upper_bound(q_counts[m], idf), m))
    best: NodeMatch | None = None
    for m in order:
        for n in sorted(d_counts):
            width = node_pair_width(q_counts[m], d_counts[n], idf)
            if width > 0 and (best is None or width > best.width):
                best = NodeMatch(width, m, n)
    return best


def mark_delta(
    q_symbol: str, q_fingerprint: int, d_symbol: str, d_fingerprint: int, b1: float = B1, b2: float = B2
) -> float:
    """Zhong 2023 thesis, Alg. 2 line 4: δ = 1 for a complete match (symbol and fingerprint), b1 if only the operands match, else b2."""
    if q_symbol == d_symbol:
        return 1.0 if q_fingerprint == d_fingerprint else b1
    return b2


def mark(
    partitions: Iterable[tuple[Sequence[PathPrefix], Sequence[PathPrefix]]], b1: float = B1, b2: float = B2
) -> dict[str, dict[str, float]]:
    """MARK of Zhong 2023 thesis Alg. 2 over the structurally matched paths, one (query paths, document paths) pair per token path.

    Within a token-path partition every query path may pair with every document path (the partition is a
    complete bipartite graph, Zhong 2023 thesis §4.1.2); paths sharing symbol and fingerprint are counted together, so a cell
    adds δ · min(query count, document count) and a query symbol never collects more than its own paths.
    """
    bound_scores: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for q_paths, d_paths in partitions:
        q_groups = Counter((p.symbol, p.fingerprint) for p in q_paths)
        d_groups = Counter((p.symbol, p.fingerprint) for p in d_paths)
        for (qs, qf), qc in q_groups.items():
            for (ds, df), dc in d_groups.items():
                bound_scores[qs][ds] += mark_delta(qs, qf, ds, df, b1, b2) * min(qc, dc)
    return bound_scores


def cross(
    bound_scores: Mapping[str, Mapping[str, float]], query_sizes: Mapping[str, int], symbol_key: SymbolKey = str
) -> float:
    """CROSS of Zhong 2023 thesis Alg. 2: query bound variables in decreasing size greedily take their best uncrossed document symbol."""
    score = 0.0
    crossed: set[str] = set()
    for qs in sorted(query_sizes, key=lambda s: (-query_sizes[s], symbol_key(s))):
        best_score, best_symbol = 0.0, None
        for ds in sorted(bound_scores.get(qs, {}), key=symbol_key):
            if ds not in crossed and bound_scores[qs][ds] > best_score:
                best_score, best_symbol = bound_scores[qs][ds], ds
        if best_symbol is not None:
            crossed.add(best_symbol)
            score += best_score
    return score


def mark_and_cross(
    query: Mapping[str, Sequence[PathPrefix]],
    doc: Mapping[str, Sequence[PathPrefix]],
    b1: float = B1,
    b2: float = B2,
    symbol_key: SymbolKey = str,
) -> float:
    """Zhong 2023 thesis, Alg. 2 for a matched node pair: unnormalised symbol similarity of query paths under m and document paths under n."""
    partitions = [(q_paths, doc[t]) for t, q_paths in query.items() if t in doc]
    sizes = Counter(p.symbol for q_paths in query.values() for p in q_paths)
    return cross(mark(partitions, b1, b2), sizes, symbol_key)


def symbol_factor(normalised_similarity: float) -> float:
    """S_sym = 1 / (1 + (1 − S'_sym)²), Zhong 2023 thesis Eq. 3.14."""
    return 1.0 / (1.0 + (1.0 - normalised_similarity) ** 2)


def length_penalty(doc_leaves: float, eta: float) -> float:
    """P(D; η) = 1 − η + η / log(1 + L_D), Zhong 2023 thesis Eq. 3.15 (L_D = leaves of the document formula)."""
    return 1.0 - eta + eta / math.log(1.0 + doc_leaves)


def overall_score(structure: float, symbol: float, penalty: float) -> float:
    """S(Q, D) = γ(π*) · S_sym · P(D; η), Zhong 2023 thesis Eq. 3.16."""
    return structure * symbol * penalty


def score_upper_bound(structure: float, eta: float, min_doc_leaves: float) -> float:
    """u(w) = w · max S_sym · P(D; η) with S_sym ≤ 1 and L_D ≥ min_doc_leaves (Zhong 2023 thesis, Eq. 4.15 takes L_D ≥ w*)."""
    return structure * length_penalty(max(min_doc_leaves, 1.0), eta)


def score_lower_bound(structure: float, eta: float) -> float:
    """l = γ · min S_sym · P(D; η) at the longest formula (Zhong 2023 thesis, Eq. 4.16's l(Q))."""
    return structure * MIN_SYMBOL_FACTOR * length_penalty(MAX_FORMULA_LEAVES, eta)


def initial_threshold(factor: float, query_width: float, eta: float) -> float:
    """θ0 = l(λ0 · width of the query), Zhong 2023 thesis Eq. 4.17 (unsafe when > 0)."""
    return score_lower_bound(factor * query_width, eta) if factor > 0 else 0.0


def math_text_score(math_score: float, text_score: float, lambda_m: float = LAMBDA_M) -> float:
    """S_all = λ_m · S(Q_math, D_math) + BM25⁺(Q_text, D_text), Zhong 2023 thesis Eq. 3.18."""
    return lambda_m * math_score + text_score


def fuse_math_text(
    formula_lists: Iterable[Iterable[tuple[Any, float]]],
    text: Mapping[Any, float],
    lambda_m: float,
    structure_alone: Iterable[Any] = (),
) -> tuple[dict[Any, float], dict[Any, float]]:
    """Zhong 2023 thesis, Eq. 3.18 over the union of ranked lists: each formula's (document, score) list and the text part's scores,
    a list counting 0 for a document outside it. Documents in `structure_alone` score Σ_formulas alone (Zhong 2023 thesis, Eq. 3.16;
    KindSetting.text "parts"). Returns (Σ_formulas score of each listed document, the positive fused scores); the
    structure mode (`StructureRetriever.fused`) and its tuning on dumped lists (`structure_tuning.fuse`) both rank by it."""
    math: dict[Any, float] = defaultdict(float)
    for hits in formula_lists:
        for doc, score in hits:
            math[doc] += score
    scores = {doc: math_text_score(math.get(doc, 0.0), text.get(doc, 0.0), lambda_m) for doc in set(math) | set(text)}
    scores.update({doc: math[doc] for doc in structure_alone})
    return math, {doc: s for doc, s in scores.items() if s > 0}


@dataclass(frozen=True)
class FormulaMatch:
    """Single-tree similarity of two formulas (Zhong 2023 thesis, Eq. 3.16) and what matched, for explanation and highlighting."""

    score: float
    width: float
    symbol: float  # S_sym of Zhong 2023 thesis Eq. 3.14
    penalty: float
    query_node: int
    doc_node: int
    doc_leaves: frozenset[int]  # positions of the document leaves under the matched subtree's paths


def formula_similarity(
    query: Sequence[PathPrefix],
    doc: Sequence[PathPrefix],
    doc_length: int,
    idf: Callable[[str], float] | None = None,
    eta: float = ETA_ARQMATH,
    b1: float = B1,
    b2: float = B2,
    symbol_key: SymbolKey = str,
) -> FormulaMatch | None:
    """Zhong 2023 thesis, Eq. 3.16 with the (path-weighted) widest common subtree as γ (Eq. 3.4/3.5) and Alg. 2 as symbol score."""
    q_nodes, d_nodes = group_by_root(query), group_by_root(doc)
    best = widest_match(q_nodes, d_nodes, idf)
    if best is None:
        return None
    q_paths, d_paths = q_nodes[best.query_node], d_nodes[best.doc_node]
    query_leaves = sum(len(ps) for ps in q_paths.values())
    normalised = mark_and_cross(q_paths, d_paths, b1, b2, symbol_key) / query_leaves
    sym = symbol_factor(normalised)
    penalty = length_penalty(doc_length, eta)
    matched = frozenset(leaf for t, ps in d_paths.items() if t in q_paths for p in ps for leaf in p.covered)
    return FormulaMatch(
        overall_score(best.width, sym, penalty), best.width, sym, penalty, best.query_node, best.doc_node, matched
    )


# ---- multi-tree matching (Zhong 2023 thesis §3.1.4, Alg. 1) ----


@dataclass
class TreeMatch:
    """One common subtree of Zhong 2023 thesis Alg. 1: matched operands (leaves) and visible operators."""

    leaves: int
    operators: int = 0
    query_leaves: set[int] = field(default_factory=set)
    doc_leaves: set[int] = field(default_factory=set)


@dataclass(frozen=True)
class _PairMatch:
    query_node: int
    doc_node: int
    query_subtree: frozenset[int]  # all leaves of the subtrees, for the disjointness test
    doc_subtree: frozenset[int]
    query_matched: frozenset[int]  # leaves of the maximum matching path sets ℓ(S_q^m), ℓ(S_d^m)
    doc_matched: frozenset[int]


def _maximum_matching(
    q_paths: Mapping[str, list[PathPrefix]], d_paths: Mapping[str, list[PathPrefix]]
) -> tuple[set[int], set[int]]:
    """A maximum matching of two path sets, partition by partition; equal symbols are paired first."""
    q_leaves: set[int] = set()
    d_leaves: set[int] = set()
    for t, qs in q_paths.items():
        ds = list(d_paths.get(t, ()))
        if not ds:
            continue
        rest = []
        for q in qs:
            same = next((d for d in ds if d.symbol == q.symbol), None)
            if same is None:
                rest.append(q)
            else:
                ds.remove(same)
                q_leaves.update(q.covered)
                d_leaves.update(same.covered)
        for q, d in zip(rest, ds):
            q_leaves.update(q.covered)
            d_leaves.update(d.covered)
    return q_leaves, d_leaves


def multi_tree_match(query: Sequence[PathPrefix], doc: Sequence[PathPrefix], max_trees: int = 3) -> list[TreeMatch]:
    """Zhong 2023 thesis, Alg. 1: OPERANDMATCH greedily takes the widest disjoint matches, OPERATORMATCH counts the operators joining them.

    Root ends are never abstract nodes (`paths.is_abstract`), so every operator counted is visible.
    """
    q_nodes, d_nodes = group_by_root(query), group_by_root(doc)
    q_subtree = {
        m: frozenset(leaf for ps in by_t.values() for p in ps for leaf in p.covered) for m, by_t in q_nodes.items()
    }
    d_subtree = {
        n: frozenset(leaf for ps in by_t.values() for p in ps for leaf in p.covered) for n, by_t in d_nodes.items()
    }
    pairs: list[_PairMatch] = []
    for m in sorted(q_nodes):
        for n in sorted(d_nodes):
            q_leaves, d_leaves = _maximum_matching(q_nodes[m], d_nodes[n])
            if q_leaves:
                pairs.append(_PairMatch(m, n, q_subtree[m], d_subtree[n], frozenset(q_leaves), frozenset(d_leaves)))
    pairs.sort(key=lambda p: (-len(p.query_matched), p.query_node, p.doc_node))  # widest first

    # OPERANDMATCH
    trees: list[TreeMatch] = []
    q_excluded: set[int] = set()
    d_excluded: set[int] = set()
    for _ in range(max_trees):
        best = next((p for p in pairs if not (p.query_subtree & q_excluded) and not (p.doc_subtree & d_excluded)), None)
        if best is None:
            break
        trees.append(TreeMatch(len(best.query_matched), 0, set(best.query_matched), set(best.doc_matched)))
        q_excluded |= best.query_matched
        d_excluded |= best.doc_matched

    # OPERATORMATCH
    q_mapped: set[int] = set()
    d_mapped: set[int] = set()
    for p in pairs:
        for tree in trees:
            if p.query_matched & tree.query_leaves and p.doc_matched & tree.doc_leaves:
                if p.query_node not in q_mapped and p.doc_node not in d_mapped:
                    q_mapped.add(p.query_node)
                    d_mapped.add(p.doc_node)
                    tree.operators += 1
                break
    return trees


def multi_tree_similarity(trees: Sequence[TreeMatch], alpha: float = ALPHA, betas: Sequence[float] = BETAS) -> float:
    """γ(π) = Σ_i β_i (α · internals_i + (1 − α) · leaves_i), Zhong 2023 thesis Eq. 3.3, trees widest first."""
    return sum(beta * (alpha * t.operators + (1 - alpha) * t.leaves) for beta, t in zip(betas, trees))


def multi_tree_formula_similarity(
    query: Sequence[PathPrefix],
    doc: Sequence[PathPrefix],
    doc_length: int,
    idf: Callable[[str], float] | None = None,
    eta: float = ETA_ARQMATH,
    alpha: float = ALPHA,
    betas: Sequence[float] = BETAS,
    b1: float = B1,
    b2: float = B2,
) -> float:
    """Zhong 2023 thesis, Eq. 3.16 with γ(π*) the multi-tree similarity of Eq. 3.3 (Alg. 1, up to len(betas) trees) and S_sym of the
    widest match (Zhong 2023 thesis, Alg. 2, Eq. 3.14): the thesis' NTCIR-12 setting (§3.3.1), 0 when nothing matches."""
    single = formula_similarity(query, doc, doc_length, idf, eta, b1, b2)
    if single is None:
        return 0.0
    gamma = multi_tree_similarity(multi_tree_match(query, doc, max_trees=len(betas)), alpha, betas)
    return overall_score(gamma, single.symbol, single.penalty)
