"""`structure-rewrite`: structure search over the query formula and its SymPy-equivalent forms, fused.

Zhong 2023 thesis ch. 6 lists query rewriting as future work for structure search; this mode makes `1 + \\frac{1}{x}`
also find documents that wrote `\\frac{x+1}{x}`. Each form (the original with weight 1, every rewritten
form with `rewrite_weight`, never above a symbol-substituted match of the written form) is searched by structure
search; a formula-only query's scores are first divided by the best score the form can reach under the setting
its kind is scored by (its perfect-match score, width × P(L_Q; η), Zhong 2023 thesis Eqs. 3.15–3.16, times λ_m plus the form's best
BM25 when the setting adds BM25, Zhong 2023 thesis Eq. 3.18), so forms of different sizes and settings of any scale are comparable;
documents then rank by the best match tier any form reaches (`mathscout.structure.search.match_tier`), the formula
as written first within a tier, so a rewritten form never passes what the written form holds as well. Fusion: `max` (a document keeps its best weighted form score, ties broken by
the score of the formula as written; the fused top-k is exact from each form's top-k) or `weighted` (the weighted sum, CombSUM). Queries with words keep
structure search's Zhong 2023 thesis Eq. 3.18 BM25 term; their variants (one formula replaced by one form) fuse raw scores.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, cast, runtime_checkable

from mathscout.errors import MathScoutError, QueryError
from mathscout.index.layout import IndexDir
from mathscout.notices import notice, warning
from mathscout.render import make_snippet
from mathscout.retrievers.base import BaseRetriever, Composable, RankResult, prepare_query
from mathscout.retrievers.structure import EXPLAINED_HITS, highlight_weights, query_kind, split_query
from mathscout.rewrite import RewriteResult, equivalent_forms
from mathscout.structure.parser import parse_latex
from mathscout.structure.paths import leaf_count, path_prefixes
from mathscout.structure.scoring import B2, length_penalty, symbol_factor
from mathscout.structure.search import PART, FormulaHit
from mathscout.types import Hit, MatchedFormula, Query

log = logging.getLogger(__name__)

# A rewritten form's perfect match counts as much as a match of the formula as written with every symbol substituted
# (Zhong 2023 thesis, Eq. 3.14 at S'_sym = b2, §3.2.1 α-equivalence), never more: renamed-variable matches of what the user wrote stay
# first, and ties go to the written form (`mathscout bench rewrite` compares other weights)
REWRITE_WEIGHT = symbol_factor(B2)
MAX_REWRITTEN_FORMULAS = 3  # a query's first formulas that get rewritten (each rewrite may take `seconds`)
MIN_FORM_LEAVES = 3  # shorter forms (`1` for sin²x + cos²x) would match too many formulas to help a search
WEIGHTED_DEPTH = 100  # hits per form for `weighted` fusion
FUSIONS = ("max", "weighted")
Rewriter = Callable[..., RewriteResult]  # (latex, max_forms=, seconds=) → RewriteResult, e.g. a cached equivalent_forms
FormSearch = Callable[[Query, int], RankResult]  # (variant query, depth) → its structure ranking


@runtime_checkable
class StructureSearch(Protocol):
    """What structure-rewrite asks of the structure search it fuses: one index's `StructureRetriever` or a sharded
    index's `ShardedStructure`."""

    index: IndexDir
    store: Any
    searcher: Any  # `.lexer`, `.eta`, `.prepare(latex).width`

    def rank(self, query: Query, k: int) -> RankResult: ...

    def setting_for(self, query: Query) -> Any: ...

    def doc_ordinals(self) -> dict[str, int]: ...

    def matched_formula(self, hit: FormulaHit, query_prefixes) -> MatchedFormula: ...


@dataclass(frozen=True)
class FormulaRewrite(Composable):
    """A query stage: each formula and its SymPy-equivalent forms (`mathscout.rewrite`), fused by the structure
    search it feeds (`FormulaRewrite() >> structure` is the `structure-rewrite` mode). Options as
    `StructureRewriteRetriever`'s."""

    fusion: str = "max"
    max_forms: int = 8
    seconds: float = 2.0
    rewriter: Callable | None = None  # (latex, max_forms=, seconds=) → RewriteResult; default `equivalent_forms`
    search_form: Callable | None = None  # (variant query, depth) → RankResult; default the structure retriever's rank

    def feed(self, structure) -> StructureRewriteRetriever:
        # one index's structure search, or a sharded index's (its forms fan out to the shards like any query)
        if not isinstance(structure, StructureSearch):
            raise MathScoutError(f"a formula rewrite feeds structure search, not {structure!r}")
        return StructureRewriteRetriever(
            structure.index,
            fusion=self.fusion,
            max_forms=self.max_forms,
            seconds=self.seconds,
            structure=structure,
            rewriter=self.rewriter,
            search_form=self.search_form,
        )


@dataclass
class _Variant:
    """One query searched: the original (form 0) or the query with one formula replaced by a form."""

    query: Query
    weight: float
    rule: str  # "original" or the rewrite rule
    formula: str  # the (first) formula searched, for highlighting
    form: str = ""  # the rewritten formula ("" for the original)


@dataclass
class _Fused:
    score: float = 0.0
    tier: int = 0  # formula-only queries: the best match tier of any form (`search.match_tier`)
    written_tier: int = 0  # … of the formula as written (PART when it did not find the document)
    best: float = -1.0
    variant: int = 0
    formula_hit: FormulaHit | None = None
    parts: dict[str, float] = field(default_factory=dict)


class StructureRewriteRetriever(BaseRetriever):
    """Structure search fused over equivalent forms of the query's formulas (`mathscout.rewrite`)."""

    name = "structure-rewrite"

    def __init__(
        self,
        index: IndexDir,
        fusion: str = "max",
        rewrite_weight: float = REWRITE_WEIGHT,
        max_forms: int = 8,
        seconds: float = 2.0,
        rewriter: Rewriter | None = None,
        normalise: str = "query",
        structure: StructureSearch | None = None,
        search_form: FormSearch | None = None,
        **structure_options,
    ):
        if fusion not in FUSIONS:
            raise QueryError(f"unknown fusion '{fusion}' for structure-rewrite (choose from {', '.join(FUSIONS)})")
        if structure is None:  # the index's structure mode (a sharded index's answers from its shards)
            from mathscout.retrievers.registry import open_retriever

            # the structure mode is a StructureRetriever, or a sharded index's ShardedStructure
            structure = cast(StructureSearch, open_retriever(index, "structure", **structure_options))
        self.structure: StructureSearch = structure
        self.store = self.structure.store
        self.fusion = fusion
        self.rewrite_weight = rewrite_weight
        self.normalise = normalise
        self.max_forms = max_forms
        self.seconds = seconds
        self.rewriter = rewriter or equivalent_forms  # how each formula's forms are found (the planner traces it)
        self.search_form = search_form or self.structure.rank  # how each variant is searched (the planner traces it)
        self.last_rewrites: list[RewriteResult] = []  # what the last query was rewritten into (for tools/UI)

    # ------------------------------------------------------------------ variants
    def variants(self, query: Query) -> list[_Variant]:
        """The original query and one variant per equivalent form of each of its formulas (bounded)."""
        formulas, words = split_query(query)
        self.last_rewrites = []
        if not formulas and words and "$" in query.text:  # a formula it cannot read (`$…\\$` is an escaped dollar):
            return [_Variant(query, 1.0, "original", "")]  # nothing to rewrite, the query as structure ranks it
        if not formulas:
            raise QueryError("structure search needs a formula: write it between $…$, e.g. $x^2+y^2=z^2$")
        variants = [_Variant(query, 1.0, "original", formulas[0])]
        budget = self.max_forms
        for i, latex in enumerate(formulas[:MAX_REWRITTEN_FORMULAS]):
            if budget <= 0:
                break
            result = self.rewriter(latex, max_forms=budget, seconds=self.seconds)
            self.last_rewrites.append(result)
            for form in result.forms:
                tree = parse_latex(form.latex, self.structure.searcher.lexer).tree
                if tree is None or leaf_count(tree) < MIN_FORM_LEAVES:
                    continue
                if query.formula or (len(formulas) == 1 and not words):
                    text = Query(id=query.id, text="", formula=form.latex)
                else:
                    text = Query(id=query.id, text=_replace_formula(query.text, i, form.latex))
                variants.append(
                    _Variant(text, self.rewrite_weight, form.rule, form.latex if i == 0 else formulas[0], form.latex)
                )
            budget -= len(result.forms)
        return variants

    # ------------------------------------------------------------------ ranking
    def rank(self, query: Query, k: int) -> RankResult:
        """Top-k documents over the query's variants (fused), with each document's fused parts and the variants."""
        variants = self.variants(query)
        formula_only = query_kind(query) == "formula" and len(split_query(query)[0]) == 1
        depth = k if self.fusion == "max" else max(k, WEIGHTED_DEPTH)
        fused: dict[str, _Fused] = {}
        written_order: list[str] = []
        for n, variant in enumerate(variants):
            try:
                ranking = self.search_form(variant.query, depth)
                hits, best = ranking.hits, ranking.formulas
            except QueryError:  # a form structure search cannot use
                continue
            setting = self.structure.setting_for(variant.query)
            scale = _form_scale(self.structure, variant, hits) if formula_only else 1.0
            if scale <= 0:
                continue
            ordinals = self.structure.doc_ordinals()
            if n == 0:
                written_order = [hit.doc_id for hit in hits]
            # "parts": whole-structure matches are scored by Zhong 2023 thesis Eq. 3.16 alone, so they are normalised by its perfect score
            whole_scale = (
                _perfect_score(self.structure, variant.formula) if formula_only and setting.text == "parts" else scale
            )
            for hit in hits:
                hit_scale = whole_scale if hit.components.get("tier", PART) > PART else scale
                if formula_only and self.normalise == "document" and (fh := best.get(ordinals[hit.doc_id])) is not None:
                    # one index's path lists (StructureRetriever.paths; ShardedStructure's says a sharded index has none):
                    # not a member of the protocol, whose runtime check would read the sharded one's
                    leaves = self.structure.paths.leaves  # type: ignore[attr-defined]
                    hit_scale = hit_scale * _length_ratio(self.structure, variant.formula, int(leaves[fh.formula]))
                # capped: a document formula shorter than the query can pass the "perfect" score (Zhong 2023 thesis, Eq. 3.15)
                value = (
                    variant.weight * min(_eq_score(hit, setting) / hit_scale, 1.0)
                    if formula_only
                    else variant.weight * hit.score
                )
                entry = fused.setdefault(hit.doc_id, _Fused())
                tier = int(hit.components.get("tier", 0))
                entry.tier = max(entry.tier, tier)
                if n == 0:
                    entry.written_tier = tier
                entry.parts[f"form{n}"] = value
                if self.fusion == "max":
                    entry.score = max(entry.score, value)
                else:
                    entry.score += value
                if value > entry.best:
                    entry.best, entry.variant = value, n
                    entry.formula_hit = best.get(ordinals[hit.doc_id])
        # formula-only queries rank by the best match tier of any form, the written form first within it (rewriting
        # never passes what the formula as written holds as well); ties (e.g. two perfect matches) go to the
        # document that matches the formula as written, then keep the written form's own order (structure search
        # breaks its ties by document ordinal)
        written = {doc_id: n for n, doc_id in enumerate(written_order)}
        ranked = sorted(
            fused,
            key=lambda d: (
                -_tier_rank(fused[d]),
                -fused[d].score,
                -fused[d].parts.get("form0", 0.0),
                written.get(d, len(written)),
                d,
            ),
        )[:k]
        hits = []
        for rank, doc_id in enumerate(ranked, start=1):
            entry = fused[doc_id]
            components = {
                self.name: entry.score,
                "structure": entry.parts.get("form0", 0.0),
                "rewrite_form": float(entry.variant),
            }
            if formula_only:  # the score keeps the order when runs are sorted by it: 2 · tier + written first + value
                components["tier"] = float(entry.tier)
            score = _tier_rank(entry) + entry.score if formula_only else entry.score
            hits.append(Hit(doc_id=doc_id, score=score, rank=rank, components=components))
        return RankResult(hits, fused=fused, variants=variants)

    def _search(self, query: Query, k: int) -> list[Hit]:
        ranking = self.rank(query, k)
        hits, fused, variants = ranking.hits, ranking.fused, ranking.variants
        for result in self.last_rewrites:
            if result.notice:
                notice(f"notice: {result.notice}")
        for variant in variants[1:]:
            notice(f"rewrite: also searched ${variant.form}$ ({variant.rule})")
        formulas, words = split_query(query)
        weights = highlight_weights(formulas, words)
        explained = hits[:EXPLAINED_HITS]
        documents = self.store.get_many(h.doc_id for h in explained)
        prefixes: dict[int, list] = {}
        for hit in explained:
            document = documents.get(hit.doc_id)
            if document is None:
                continue
            hit.snippet = make_snippet(document, weights)
            entry = fused[hit.doc_id]
            if entry.formula_hit is not None:
                if entry.variant not in prefixes:
                    tree = parse_latex(variants[entry.variant].formula, self.structure.searcher.lexer).tree
                    prefixes[entry.variant] = path_prefixes(tree) if tree is not None else []
                hit.formulas = [self.structure.matched_formula(entry.formula_hit, prefixes[entry.variant])]
        return hits

    def batch_search(self, queries: list[Query], k: int = 1000) -> dict[str, list[Hit]]:
        """Ranked ids and scores for many queries (no snippets); a query without a formula gets no hits."""
        runs: dict[str, list[Hit]] = {}
        started = time.perf_counter()
        rewritten = 0
        for query in queries:
            try:
                ranking = self.rank(prepare_query(query), k)
                hits, variants = ranking.hits, ranking.variants
                rewritten += len(variants) > 1
            except QueryError as exc:
                warning(f"topic {query.id}: {exc}")
                hits = []
            runs[query.id] = hits
        log.debug(
            f"structure-rewrite: {len(queries)} queries ({rewritten} rewritten) in {time.perf_counter() - started:.1f} s"
        )
        return runs


def _tier_rank(entry: _Fused) -> int:
    """2 · the best tier of any form, + 1 when the formula as written reaches it or nothing holds the query whole (at
    PART every form's partial matches compete by value); values are in [0, 1]."""
    return 2 * entry.tier + (entry.written_tier == entry.tier)


def _eq_score(hit: Hit, setting) -> float:
    """A structure hit's Zhong 2023 thesis Eq. 3.18 score under its kind's setting (its score, unless ranked by match tier: then the
    components hold the raw parts)."""
    if "tier" not in hit.components:
        return hit.score
    math = hit.components.get("structure", 0.0)
    with_text = setting.text == "full" or (setting.text == "parts" and hit.components["tier"] == PART)
    return setting.lambda_m * math + hit.components.get("bm25", 0.0) if with_text else math


def _form_scale(structure: StructureSearch, variant: _Variant, hits: list[Hit]) -> float:
    """The best score a document can reach for one form under the setting its kind is scored by: λ_m × its perfect
    structure score + the best BM25 score among its hits when the setting adds BM25 (Zhong 2023 thesis, Eq. 3.18), else the perfect
    structure score (Zhong 2023 thesis, Eq. 3.16). Dividing by it puts every form on [0, 1] whatever the stored setting's scale."""
    perfect = _perfect_score(structure, variant.formula)
    setting = structure.setting_for(variant.query)
    bm25 = max((h.components.get("bm25", 0.0) for h in hits), default=0.0)
    return setting.lambda_m * perfect + bm25 if setting.text in ("full", "parts") and bm25 > 0 else perfect


def _length_ratio(structure: StructureSearch, latex: str, doc_leaves: int) -> float:
    """P(L_D; η) / P(L_Q; η) (Zhong 2023 thesis, Eq. 3.15): the perfect score at the document formula's length instead of the query's."""
    tree = parse_latex(latex, structure.searcher.lexer).tree
    if tree is None or doc_leaves <= 0:
        return 1.0
    eta = structure.searcher.eta
    return length_penalty(doc_leaves, eta) / length_penalty(leaf_count(tree), eta)


def _perfect_score(structure: StructureSearch, latex: str) -> float:
    """The score of a document formula identical to `latex`: widest width × S_sym = 1 × P(L; η) (Zhong 2023 thesis, Eq. 3.16)."""
    try:
        prepared = structure.searcher.prepare(latex)
    except QueryError:
        return 0.0
    return prepared.width * length_penalty(leaf_count(prepared.tree), structure.searcher.eta)


def _replace_formula(text: str, index: int, latex: str) -> str:
    """`text` with its index-th math span replaced by `$latex$`."""
    from mathscout.corpus.math_spans import find_math

    spans = [s for s in find_math(text) if s.latex.strip()]
    span = spans[index]
    return text[: span.start] + f" ${latex}$ " + text[span.end :]


def open_structure_rewrite(index: IndexDir, **options) -> StructureRewriteRetriever:
    return StructureRewriteRetriever(index, **options)
