"""Formula search over the path index: exhaustive, and rank-safe dynamic pruning (Zhong 2023 thesis ch. 4).

The kernel is document-at-a-time over the query's posting lists (Zhong 2023 thesis, Alg. 4), compiled with numba:
- candidates come from the *requirement set* of lists; the others are only skipped to (lists.py's `skip_block`, which passes
  whole blocks of a list without decoding them: a query decodes only the blocks its candidates lie in);
- a candidate's structure score is the widest (path-weighted) match over query/document node pairs
  (Zhong 2023 thesis, Eq. 4.9, QRYNODEMATCH), its final score Eq. 3.16 with Alg. 2's symbol similarity;
- when the top-k threshold θ rises, query nodes whose upper bound (Zhong 2023 thesis, Eq. 4.15) is ≤ θ are dropped,
  lists no live node refers to are dropped, and the requirement set is re-chosen by the strategy:
  MaxRef (Zhong 2023 thesis §4.1.3), GBP-NUM or GBP-LEN (§4.1.4, Alg. 3 greedy solver).
Pruning never changes the top k (ids and scores) unless an initial threshold θ0 > 0 is asked for
(Zhong 2023 thesis §4.3.1, Eq. 4.17), which trades safety for speed.

In per-document mode formulas are aggregated as they stream by (a document's formulas have
consecutive ordinals): a document scores its best formula (Zhong 2023 thesis §4.2.2) and θ is the document-level one.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import numba
import numpy as np

from mathscout.errors import QueryError
from mathscout.structure.heap import push
from mathscout.structure.index import PathIndex
from mathscout.structure.lexer import LEXER
from mathscout.structure.lists import BLOCK_SHIFT, crossed_into, decode_block, skip_block, skip_in_block
from mathscout.structure.opt import Node
from mathscout.structure.parser import parse_latex
from mathscout.structure.paths import PathPrefix, has_wildcard, path_prefixes
from mathscout.structure.scoring import (
    B1,
    B2,
    ETA_ARQMATH,
    MAX_FORMULA_LEAVES,
    group_by_root,
    initial_threshold,
    length_penalty,
)

STRATEGIES = {"exhaustive": 0, "maxref": 1, "gbp-num": 2, "gbp-len": 3}
_GIVEN = 4  # score an explicit, sorted list of candidates (no heap, no pruning)
_SAFETY = 1.0 - 1e-12  # θ_s is shrunk by this factor so float rounding never prunes a candidate that ties θ
_REPLAN = 1.01  # re-plan the requirement set only when θ has grown 1 % since the last plan (Zhong 2023 thesis §4.4.2: at large k
# θ rises after nearly every candidate and re-planning would dominate)
SLACK = 1.0 + 1e-9  # estimates are inflated by this factor before a node is abandoned, for the same reason


@dataclass(frozen=True)
class FormulaHit:
    """A scored formula (or, per document, the document's best formula) and its matched root ends."""

    formula: int  # formula ordinal
    score: float
    doc: int  # document ordinal
    query_node: int  # pre-order ids of the matched subtrees' roots (paths.PathPrefix.root_end)
    doc_node: int
    width: float = 0.0  # γ of the widest common subtree (Zhong 2023 thesis, Eq. 3.4/3.5), before S_sym and P(D; η)
    tier: int = 0  # MATCH_TIERS: 2 the query occurs in the formula as written, 1 its whole structure does, 0 a part


# How much of the query a formula holds (Zhong 2023 thesis §3.1: the largest common subtree), for formula-only queries that rank by it
# first: 2 = the whole query with identical symbols (γ = the query's width and S_sym = 1, Zhong 2023 thesis Eq. 3.14: it occurs
# verbatim, up to commutativity), 1 = the whole query's structure with other symbols (α-equivalent or substituted,
# Zhong 2023 thesis §3.2.1), 0 = a smaller common subtree. Eq. 3.16 orders within a tier.
VERBATIM, WHOLE_STRUCTURE, PART = 2, 1, 0
_EXACT = 1.0 - 1e-9  # float tolerance of "equal" (one substituted leaf of 256 lowers S_sym by 6e-8)


def match_tier(query_width: float, width: float, score: float, doc_leaves: int, eta: float) -> int:
    """VERBATIM, WHOLE_STRUCTURE or PART for a formula matched with γ = `width` and S(Q, D) = `score` (Zhong 2023 thesis, Eq. 3.16)."""
    if not width >= query_width * _EXACT > 0.0:
        return PART
    symbol = score / (width * length_penalty(doc_leaves, eta))  # S_sym = S / (γ · P(D; η))
    return VERBATIM if symbol >= _EXACT else WHOLE_STRUCTURE


@dataclass
class PreparedQuery:
    """A query formula turned into the kernel's arrays (see `prepare_query`)."""

    latex: str
    tree: Node
    prefixes: list[PathPrefix]
    symbol_keys: dict[
        str, int
    ]  # the query's symbols → Zhong 2023 thesis Alg. 2 tie-breaking order (index ids, unseen symbols after them)
    index_symbols: dict[str, int]
    node_ids: np.ndarray  # query node (root-end id) of each kernel node, by decreasing upper bound
    arrays: tuple
    tids: np.ndarray  # the index's list ids of the query's lists (kernel list i = tids[i])
    ix: tuple  # the kernel's index arrays: the query's lists decoded, then the formula table
    # the largest query-node upper bound: the structure score of a perfect match of the widest subtree, in the whole
    # collection (a shard counts paths it lacks), so the same on every shard as on one index (match tiers and the
    # formula order depend on it)
    width: float = 0.0
    index: PathIndex | None = field(default=None, repr=False)  # what `release` lays the lists out again from

    def release(self) -> None:
        """Drop the blocks its searches decoded (the lists are laid out again, nothing decoded): a caller that searches
        several formulas one after another keeps one formula's blocks at a time. Searching it again decodes anew."""
        if self.index is not None and len(self.tids):
            postings, _, _ = self.index.view(self.tids)  # the same positions: the layout depends only on the lists
            self.ix = _kernel_index(self.index, postings)

    @property
    def blocks_decoded(self) -> tuple[int, int]:
        """(blocks decoded so far, blocks of its lists)."""
        decoded = self.ix[11]
        return int(decoded.sum()), len(decoded)

    @property
    def empty(self) -> bool:
        """Whether the query shares no token path with the collection (nothing can match it anywhere)."""
        return self.width <= 0.0

    @property
    def searchable(self) -> bool:
        """Whether the index searched holds one of the query's token paths (a shard may hold none of them)."""
        return len(self.node_ids) > 0

    def symbol_key(self, symbol: str) -> int:
        """The order Zhong 2023 thesis Alg. 2 breaks ties by (the kernel's), for the query's and indexed symbols alike."""
        key = self.symbol_keys.get(symbol)
        return key if key is not None else self.index_symbols[symbol]


def prepare_query(index: PathIndex, latex: str, path_weights: bool = True, lexer: int = LEXER) -> PreparedQuery:
    """Parse the query (with the lexer version that parsed the index's formulas) and lay out, for each query node m
    (root end), its lists t with w_{m,t} and symbol groups."""
    result = parse_latex(latex, lexer)
    if result.tree is None:
        raise QueryError(f"could not read the formula '{latex[:80]}' ({result.error or 'no math content'})")
    prefixes = path_prefixes(result.tree)
    if not index.wildcard_paths and has_wildcard(prefixes):
        raise QueryError(
            "this structure index has no wildcard paths, so \\qvar wildcards cannot match: rebuild it "
            "(mathscout index --index DIR --components structure)"
        )
    n_symbols = len(index.symbols)
    unseen = sorted({p.symbol for p in prefixes if p.symbol not in index.symbols})
    keys = {s: index.symbols.get(s, -1) for s in {p.symbol for p in prefixes}}
    keys.update({s: n_symbols + i for i, s in enumerate(unseen)})

    weights: dict[int, float] = {}

    def weight(tid: int) -> float:
        if not path_weights:
            return 1.0
        if tid not in weights:
            weights[tid] = float(index.list_idf(np.array([tid]))[0])
        return weights[tid]

    nodes = []
    widest = 0.0
    for m, by_t in group_by_root(prefixes).items():
        slots = [(index.paths[t], ps) for t, ps in by_t.items() if t in index.paths]
        upper = 0.0
        for t, ps in by_t.items():  # in path order, so the sum is the same float wherever the paths are held
            if t in index.paths:
                upper += len(ps) * weight(index.paths[t])
            elif index.outside_weight is not None and (outside := index.outside_weight(t)) is not None:
                upper += len(ps) * (
                    outside if path_weights else 1.0
                )  # a shard: a path only other shards hold (retrievers/shards)
        widest = max(widest, upper)  # a node only other shards hold still bounds the query's width
        if slots:
            nodes.append((-upper, m, by_t, slots, upper))
    nodes.sort(key=lambda n: (n[0], n[1]))

    list_ids: dict[int, int] = {}
    slot_list, slot_w, slot_group_start = [], [], [0]
    group_row, group_sym, group_fp, group_count = [], [], [], []
    node_slot_start, node_upper, node_leaves, node_rows = [0], [], [], []
    for _, _m, by_t, slots, upper in nodes:
        sizes = Counter(p.symbol for ps in by_t.values() for p in ps)
        rows = {s: r for r, s in enumerate(sorted(sizes, key=lambda s: (-sizes[s], keys[s])))}
        for tid, ps in slots:
            slot_list.append(list_ids.setdefault(tid, len(list_ids)))
            slot_w.append(len(ps))
            for (symbol, fingerprint), count in Counter((p.symbol, p.fingerprint) for p in ps).items():
                group_row.append(rows[symbol])
                group_sym.append(keys[symbol])
                group_fp.append(fingerprint)
                group_count.append(count)
            slot_group_start.append(len(group_row))
        node_slot_start.append(len(slot_list))
        node_upper.append(upper)
        node_leaves.append(sum(sizes.values()))
        node_rows.append(len(rows))

    tids = np.array(list(list_ids), dtype=np.int64)
    postings, list_start, list_end = index.view(
        tids
    )  # the query's lists, decoded a block at a time by the kernels (lists.py)
    list_weight = np.array([weight(t) for t in tids], dtype=np.float64)
    n_nodes, n_lists = len(nodes), len(tids)
    w_matrix = np.zeros((n_nodes, n_lists), dtype=np.float64)  # W of Zhong 2023 thesis §4.1.4: w_{m,t} · idf_t
    for i in range(n_nodes):
        for s in range(node_slot_start[i], node_slot_start[i + 1]):
            w_matrix[i, slot_list[s]] += slot_w[s] * list_weight[slot_list[s]]
    arrays = (
        list_start,
        list_end,
        list_weight,
        np.array(node_slot_start, dtype=np.int64),
        np.array(slot_list, dtype=np.int64),
        np.array(slot_w, dtype=np.int64),
        np.array(slot_group_start, dtype=np.int64),
        np.array(group_row, dtype=np.int64),
        np.array(group_sym, dtype=np.int64),
        np.array(group_fp, dtype=np.int64),
        np.array(group_count, dtype=np.int64),
        np.array(node_upper, dtype=np.float64),
        np.array(node_leaves, dtype=np.int64),
        np.array(node_rows, dtype=np.int64),
        w_matrix,
    )
    node_ids = np.array([n[1] for n in nodes], dtype=np.int64)
    return PreparedQuery(
        latex,
        result.tree,
        prefixes,
        keys,
        index.symbols,
        node_ids,
        arrays,
        tids,
        _kernel_index(index, postings),
        widest,
        index,
    )


def _kernel_index(index: PathIndex, postings) -> tuple:
    """The kernels' index arrays: the query's lists, the formula table, then what the lists' blocks decode from."""
    return (
        postings.fid,
        postings.node,
        postings.width,
        postings.sym_start,
        postings.sym,
        postings.fp,
        postings.count,
        np.asarray(index.leaves),
        np.asarray(index.doc),
        postings.buf,
        postings.blocks,
        postings.decoded,
        postings.limits,
        postings.symbol_map,
    )


def bind(index: PathIndex, queries: list[PreparedQuery]) -> tuple[tuple, list[tuple]]:
    """One set of kernel index arrays for several prepared queries (the union of their lists) and each query's
    kernel arrays re-pointed into it."""
    if len(queries) == 1:  # its own arrays (and the blocks it decoded already)
        return queries[0].ix, [queries[0].arrays]
    union = np.unique(np.concatenate([q.tids for q in queries])) if queries else np.zeros(0, np.int64)
    postings, start, end = index.view(union)
    ix = _kernel_index(index, postings)
    bound = []
    for q in queries:
        at = np.searchsorted(union, q.tids)
        bound.append((start[at], end[at]) + tuple(q.arrays[2:]))
    return ix, bound


class StructureSearcher:
    """Formula search over an opened `PathIndex`.

    eta: length penalty η of Zhong 2023 thesis Eq. 3.15 (0.3 ARQMath, 0.05 NTCIR-12); b1, b2: Alg. 2 base scores;
    path_weights: idf-weighted widths (Zhong 2023 thesis, Eq. 3.5) or plain leaf counts (Eq. 3.4); lexer: the lexer version queries are
    parsed with, the one that parsed the index's formulas (`lexer.recorded_lexer` of its manifest entry).
    """

    def __init__(
        self,
        index: PathIndex,
        eta: float = ETA_ARQMATH,
        b1: float = B1,
        b2: float = B2,
        path_weights: bool = True,
        lexer: int = LEXER,
    ):
        self.index = index
        self.eta, self.b1, self.b2, self.path_weights, self.lexer = eta, b1, b2, path_weights, lexer
        max_node = index.lists.max_node + 1  # every decoded node id is checked to be ≤ this (lists.py)
        self.scratch = (
            np.zeros(max_node, dtype=np.float64),  # accumulated width per document node
            np.zeros(max_node, dtype=np.int64),  # touched document nodes
            np.full(
                len(index.symbols) + 1, -1, dtype=np.int64
            ),  # document symbol → column of Zhong 2023 thesis Alg. 2's table
        )

    def prepare(self, latex: str) -> PreparedQuery:
        return prepare_query(self.index, latex, self.path_weights, self.lexer)

    def search(
        self,
        query: str | PreparedQuery,
        k: int = 100,
        strategy: str = "gbp-len",
        per_document: bool = False,
        initial_threshold_factor: float = 0.0,
    ) -> list[FormulaHit]:
        """Top-k formulas (or documents, by their best formula) for a query formula, best first.

        strategy: "exhaustive" (score every formula sharing a path with the query) or a pruning strategy
        "maxref" / "gbp-num" / "gbp-len". initial_threshold_factor λ0 > 0 sets θ0 of Zhong 2023 thesis Eq. 4.17 (unsafe).
        """
        if strategy not in STRATEGIES:
            raise QueryError(f"unknown pruning strategy '{strategy}' (choose from {', '.join(STRATEGIES)})")
        prepared = query if isinstance(query, PreparedQuery) else self.prepare(query)
        if not prepared.searchable or k <= 0:
            return []
        theta0 = initial_threshold(initial_threshold_factor, prepared.width, self.eta)
        with self.index.reading():
            out = _search(
                prepared.ix,
                prepared.arrays,
                self.scratch,
                np.zeros(0, np.int64),
                k,
                STRATEGIES[strategy],
                per_document,
                self.eta,
                self.b1,
                self.b2,
                theta0,
            )
        return self._hits(prepared, out)

    def score_formulas(self, query: str | PreparedQuery, formulas: np.ndarray) -> list[FormulaHit]:
        """Exact scores of the given formula ordinals (hits only for those sharing structure with the query)."""
        prepared = query if isinstance(query, PreparedQuery) else self.prepare(query)
        candidates = np.unique(np.asarray(formulas, dtype=np.int64))
        if not prepared.searchable or len(candidates) == 0:
            return []
        with self.index.reading():
            out = _search(
                prepared.ix,
                prepared.arrays,
                self.scratch,
                candidates,
                len(candidates),
                _GIVEN,
                False,
                self.eta,
                self.b1,
                self.b2,
                0.0,
            )
        return self._hits(prepared, out)

    def _hits(self, prepared: PreparedQuery, out) -> list[FormulaHit]:
        fids, scores, docs, ms, ns, ws = out
        order = np.lexsort((fids, -scores))
        leaves = self.index.leaves
        return [
            FormulaHit(
                int(fids[i]),
                float(scores[i]),
                int(docs[i]),
                int(prepared.node_ids[ms[i]]),
                int(ns[i]),
                float(ws[i]),
                match_tier(prepared.width, float(ws[i]), float(scores[i]), int(leaves[fids[i]]), self.eta),
            )
            for i in order
            if scores[i] > 0
        ]


# ---------------------------------------------------------------- kernel


@numba.njit(cache=True, inline="always")
def _penalty(leaves, eta):
    """P(D; η), Zhong 2023 thesis Eq. 3.15."""
    return 1.0 - eta + eta / math.log(1.0 + leaves)


@numba.njit(cache=True)
def _symbol_similarity(m, n_doc, cand, ix, q, pos, sym2col, table, col_sym, crossed, b1, b2):
    """Zhong 2023 thesis, Alg. 2 (MARK then CROSS) for query node m against document node n_doc; returns S'_sym (normalised)."""
    e_fid, e_node, e_sym_start, s_sym, s_fp, s_cnt, decoded = ix[0], ix[1], ix[3], ix[4], ix[5], ix[6], ix[11]
    (
        l_start,
        l_end,
        l_weight,
        n_slot_start,
        s_list,
        s_w,
        s_group_start,
        g_row,
        g_sym,
        g_fp,
        g_cnt,
        n_upper,
        n_leaves,
        n_rows,
        w_matrix,
    ) = q
    rows = n_rows[m]
    cols = 0
    for slot in range(n_slot_start[m], n_slot_start[m + 1]):
        lst = s_list[slot]
        e = pos[lst]
        end = l_end[lst]
        while e < end and e_fid[e] == cand and e_node[e] != n_doc:  # pos[lst] was skipped to cand: its block is decoded
            e += 1
            if crossed_into(decoded, e, end):
                decode_block(ix, e >> BLOCK_SHIFT)
        if e >= end or e_fid[e] != cand:
            continue
        for h in range(e_sym_start[e], e_sym_start[e + 1]):
            ds = s_sym[h]
            c = sym2col[ds]
            if c < 0:
                c = cols
                cols += 1
                sym2col[ds] = c
                col_sym[c] = ds
                crossed[c] = False
                for r in range(rows):
                    table[r, c] = 0.0
            for g in range(s_group_start[slot], s_group_start[slot + 1]):
                if g_sym[g] == ds:
                    delta = 1.0 if g_fp[g] == s_fp[h] else b1
                else:
                    delta = b2
                table[g_row[g], c] += delta * min(g_cnt[g], s_cnt[h])
    score = 0.0
    for r in range(rows):  # rows are ordered by decreasing bound-variable size
        best = 0.0
        best_c = -1
        for c in range(cols):
            if crossed[c]:
                continue
            v = table[r, c]
            if v > best or (v == best and best_c >= 0 and col_sym[c] < col_sym[best_c]):
                best = v
                best_c = c
        if best_c >= 0:
            crossed[best_c] = True
            score += best
    for c in range(cols):
        sym2col[col_sym[c]] = -1
    return score / n_leaves[m]


@numba.njit(cache=True)
def score_candidate(cand, ix, q, pos, alive, prune, theta, eta, b1, b2, acc, touched, sym2col, table, col_sym, crossed):
    """Zhong 2023 thesis, Eq. 3.16 for one candidate: widest node pair (QRYNODEMATCH of Alg. 4) times symbol factor and penalty."""
    e_fid, e_node, e_width, f_leaves, blocks, decoded = ix[0], ix[1], ix[2], ix[7], ix[10], ix[11]
    (
        l_start,
        l_end,
        l_weight,
        n_slot_start,
        s_list,
        s_w,
        s_group_start,
        g_row,
        g_sym,
        g_fp,
        g_cnt,
        n_upper,
        n_leaves,
        n_rows,
        w_matrix,
    ) = q
    if f_leaves[cand] == 0:  # not indexed (only reachable when candidates are given)
        return 0.0, -1, -1, 0.0
    penalty = _penalty(f_leaves[cand], eta)
    widest = 0.0
    best_m = -1
    best_n = -1
    for m in range(n_upper.shape[0]):  # nodes by decreasing upper bound
        if not alive[m]:
            continue
        if prune and (n_upper[m] * SLACK <= widest or n_upper[m] * SLACK * penalty <= theta):
            continue
        n_touched = 0
        node_best = 0.0
        node_best_n = -1
        leftover = n_upper[m]
        abandoned = False
        for slot in range(n_slot_start[m], n_slot_start[m + 1]):
            lst = s_list[slot]
            p = pos[lst]
            if p < l_end[lst] and (decoded[p >> BLOCK_SHIFT] == 0 or e_fid[p] < cand):  # skipTo (not there yet)
                ab = skip_block(blocks, p, l_end[lst], cand)
                if ab < 0:
                    p = l_end[lst]
                else:
                    if decoded[ab] == 0:
                        decode_block(ix, ab)
                    p = skip_in_block(e_fid, blocks, p, ab, cand)
                pos[lst] = p
            w = s_w[slot]
            weight = l_weight[lst]
            while p < l_end[lst] and e_fid[p] == cand:
                dn = e_node[p]
                if acc[dn] == 0.0:
                    touched[n_touched] = dn
                    n_touched += 1
                acc[dn] += min(w, e_width[p]) * weight
                v = acc[dn]
                if v > node_best or (v == node_best and dn < node_best_n):
                    node_best = v
                    node_best_n = dn
                p += 1
                if crossed_into(decoded, p, l_end[lst]):
                    decode_block(ix, p >> BLOCK_SHIFT)
            if prune:
                leftover -= w * weight
                estimate = (node_best + leftover) * SLACK
                if estimate <= widest or estimate * penalty <= theta:
                    abandoned = True
                    break
        for i in range(n_touched):
            acc[touched[i]] = 0.0
        if not abandoned and node_best > widest:
            widest = node_best
            best_m = m
            best_n = node_best_n
    if best_m < 0:
        return 0.0, -1, -1, 0.0
    similarity = _symbol_similarity(best_m, best_n, cand, ix, q, pos, sym2col, table, col_sym, crossed, b1, b2)
    factor = 1.0 / (1.0 + (1.0 - similarity) ** 2)  # Zhong 2023 thesis, Eq. 3.14
    return widest * factor * penalty, best_m, best_n, widest  # Zhong 2023 thesis, Eq. 3.16, and γ of the match


@numba.njit(cache=True)
def _plan(theta_s, strategy, q, alive, active, required):
    """Drop query nodes with upper bound ≤ θ_s, then split live lists into requirement/skip sets; False if no list is required."""
    (
        l_start,
        l_end,
        l_weight,
        n_slot_start,
        s_list,
        s_w,
        s_group_start,
        g_row,
        g_sym,
        g_fp,
        g_cnt,
        n_upper,
        n_leaves,
        n_rows,
        w_matrix,
    ) = q
    n_nodes, n_lists = w_matrix.shape
    for m in range(n_nodes):
        alive[m] = n_upper[m] > theta_s
    for lst in range(n_lists):
        active[lst] = False
        required[lst] = False
    for m in range(n_nodes):
        if alive[m]:
            for slot in range(n_slot_start[m], n_slot_start[m + 1]):
                active[s_list[slot]] = True
    column_max = np.zeros(n_lists)
    for lst in range(n_lists):
        for m in range(n_nodes):
            if alive[m] and w_matrix[m, lst] > column_max[lst]:
                column_max[lst] = w_matrix[m, lst]
    if strategy == 1:  # MaxRef (Zhong 2023 thesis §4.1.3): skip the lists of smallest MaxRef while their sum stays ≤ θ
        order = np.argsort(column_max, kind="mergesort")
        total = 0.0
        for lst in order:
            if not active[lst]:
                continue
            if total + column_max[lst] <= theta_s:
                total += column_max[lst]
            else:
                required[lst] = True
    else:  # GBP (Zhong 2023 thesis §4.1.4, Alg. 3): greedily keep W·x ≤ θ for the skip set x
        for lst in range(n_lists):
            if active[lst] and column_max[lst] > theta_s:
                required[lst] = True
        while True:
            worst = 0.0
            row = -1
            for m in range(n_nodes):
                if not alive[m]:
                    continue
                excess = -theta_s
                for lst in range(n_lists):
                    if active[lst] and not required[lst]:
                        excess += w_matrix[m, lst]
                if excess > worst:
                    worst = excess
                    row = m
            if row < 0:
                break
            best = -1
            for lst in range(n_lists):
                if not active[lst] or required[lst] or w_matrix[row, lst] <= 0.0:
                    continue
                if best < 0:
                    best = lst
                    continue
                cost = 1.0 if strategy == 2 else float(l_end[lst] - l_start[lst])
                best_cost = 1.0 if strategy == 2 else float(l_end[best] - l_start[best])
                if cost < best_cost or (cost == best_cost and w_matrix[row, lst] > w_matrix[row, best]):
                    best = lst
            required[best] = True
    for lst in range(n_lists):
        if required[lst]:
            return True
    return False


@numba.njit(cache=True)
def _raise_threshold(h_score, size, theta, planned, prune, top_penalty, strategy, q, alive, active, required):
    """θ after a push: the heap's minimum once it holds k; the requirement set is re-planned when θ has grown by
    _REPLAN since the last plan (a plan for a lower θ stays safe). (θ, θ of the plan, False when no list is left)."""
    if size < h_score.shape[0] or h_score[0] <= theta:
        return theta, planned, True
    theta = h_score[0]
    if not prune or theta <= planned * _REPLAN:
        return theta, planned, True
    return theta, theta, _plan(theta / top_penalty * _SAFETY, strategy, q, alive, active, required)


@numba.njit(cache=True)
def _search(ix, q, scratch, candidates, k, strategy, per_document, eta, b1, b2, theta0):
    """Zhong 2023 thesis, Alg. 4 (FORMULASEARCH) with MaxScore-style pruning; strategy 0 = exhaustive, 4 = score `candidates`."""
    e_fid, f_doc, blocks, decoded = ix[0], ix[8], ix[10], ix[11]
    acc, touched, sym2col = scratch
    l_start, l_end = q[0], q[1]
    n_rows, w_matrix = q[13], q[14]
    n_nodes, n_lists = w_matrix.shape
    max_rows = 1
    for m in range(n_nodes):
        max_rows = max(max_rows, n_rows[m])
    table = np.zeros((max_rows, MAX_FORMULA_LEAVES + 1))
    col_sym = np.zeros(MAX_FORMULA_LEAVES + 1, dtype=np.int64)
    crossed = np.zeros(MAX_FORMULA_LEAVES + 1, dtype=np.bool_)
    pos = l_start.copy()
    alive = np.ones(n_nodes, dtype=np.bool_)
    active = np.ones(n_lists, dtype=np.bool_)
    required = np.ones(n_lists, dtype=np.bool_)
    h_score = np.zeros(k)
    h_fid = np.zeros(k, dtype=np.int64)
    h_row = np.zeros(k, dtype=np.int64)  # each heap entry's row of h_doc, h_m, h_n, h_w (`heap.push`)
    h_doc = np.zeros(k, dtype=np.int64)
    h_m = np.zeros(k, dtype=np.int64)
    h_n = np.zeros(k, dtype=np.int64)
    h_w = np.zeros(k)
    size = 0

    if strategy == 4:
        for i in range(candidates.shape[0]):
            cand = candidates[i]
            score, m, n, w = score_candidate(
                cand, ix, q, pos, alive, False, 0.0, eta, b1, b2, acc, touched, sym2col, table, col_sym, crossed
            )
            h_score[i], h_fid[i], h_doc[i], h_m[i], h_n[i], h_w[i] = score, cand, f_doc[cand], m, n, w
        return h_fid, h_score, h_doc, h_m, h_n, h_w

    prune = strategy != 0
    top_penalty = (
        1.0 - eta + eta / math.log(2.0)
    )  # P(D; η) at its largest (one-leaf formula): Zhong 2023 thesis Eq. 4.15's relaxation
    theta = theta0
    planned = theta0  # θ of the current plan: a plan made for a lower θ stays safe, it just prunes less
    if prune and theta > 0.0 and not _plan(theta / top_penalty * _SAFETY, strategy, q, alive, active, required):
        return h_fid[:0], h_score[:0], h_doc[:0], h_m[:0], h_n[:0], h_w[:0]
    doc_now = -1
    doc_score = 0.0
    doc_fid = -1
    doc_m = -1
    doc_n = -1
    doc_w = 0.0
    while True:
        cand = -1
        for lst in range(n_lists):
            if required[lst] and pos[lst] < l_end[lst]:
                if (
                    decoded[pos[lst] >> BLOCK_SHIFT] == 0
                ):  # a list that just joined the requirement set may be at its start
                    decode_block(ix, pos[lst] >> BLOCK_SHIFT)
                f = e_fid[pos[lst]]
                if cand < 0 or f < cand:
                    cand = f
        if per_document and (cand < 0 or f_doc[cand] != doc_now):
            if doc_fid >= 0 and doc_score > theta:  # flush the finished document (θ = θ0 until the heap is full)
                size, row = push(h_score, h_fid, h_row, size, doc_score, doc_fid)
                h_doc[row], h_m[row], h_n[row], h_w[row] = doc_now, doc_m, doc_n, doc_w
                theta, planned, live = _raise_threshold(
                    h_score, size, theta, planned, prune, top_penalty, strategy, q, alive, active, required
                )
                if not live:
                    break
            doc_fid = -1
            doc_score = 0.0
            if cand >= 0:
                doc_now = f_doc[cand]
        if cand < 0:
            break
        bar = max(theta, doc_score) if per_document else theta  # per document, only a better formula matters
        score, m, n, w = score_candidate(
            cand, ix, q, pos, alive, prune, bar, eta, b1, b2, acc, touched, sym2col, table, col_sym, crossed
        )
        if score > 0.0:
            if per_document:
                if score > doc_score:
                    doc_score, doc_fid, doc_m, doc_n, doc_w = score, cand, m, n, w
            elif score > theta:
                size, row = push(h_score, h_fid, h_row, size, score, cand)
                h_doc[row], h_m[row], h_n[row], h_w[row] = f_doc[cand], m, n, w
                theta, planned, live = _raise_threshold(
                    h_score, size, theta, planned, prune, top_penalty, strategy, q, alive, active, required
                )
                if not live:
                    break
        for lst in range(n_lists):  # advance the requirement lists past the candidate (lists that just joined catch up)
            if required[lst]:
                p = pos[lst]
                if p < l_end[lst] and (decoded[p >> BLOCK_SHIFT] == 0 or e_fid[p] <= cand):
                    ab = skip_block(blocks, p, l_end[lst], cand + 1)
                    if ab < 0:
                        pos[lst] = l_end[lst]
                    else:
                        if decoded[ab] == 0:
                            decode_block(ix, ab)
                        pos[lst] = skip_in_block(e_fid, blocks, p, ab, cand + 1)
    rows = h_row[:size]
    return h_fid[:size], h_score[:size], h_doc[rows], h_m[rows], h_n[rows], h_w[rows]
