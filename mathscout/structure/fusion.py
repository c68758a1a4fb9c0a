"""Zhong 2023 thesis, Eq. 3.18 over the formulas' and the text part's ranked lists, and the match-tier order of formula-only queries:
one function for the structure mode on one index (`StructureRetriever.fused`) and for the coordinator of a sharded
index (`retrievers/shards/retriever.py`), which fuses the lists it merged over the shards."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from mathscout.structure.scoring import fuse_math_text
from mathscout.structure.search import PART, FormulaHit


@dataclass(frozen=True)
class FusedHit:
    """A document (ordinal) with its fused score and the parts a hit shows (Σ formulas, BM25, tier)."""

    doc: int
    score: float
    components: dict[str, float]


def fuse_formula_lists(
    lists: Sequence[Sequence[FormulaHit]],
    bm25: Mapping[int, float],
    k: int,
    lambda_m: float,
    by_tier: bool = False,
    parts: bool = False,
    name: str = "structure",
) -> tuple[list[FusedHit], dict[int, FormulaHit]]:
    """Eq. 3.18 (Zhong 2023 thesis §3.3) over the union of each formula's list (its top `depth` documents, best first) and BM25's:
    λ_m · Σ_formulas best formula score + BM25, a list counting 0 outside it; `by_tier`: documents by their first
    listed formula's match tier first (`search.match_tier`; outside every list: PART); `parts`: BM25 is added for
    PART documents only (KindSetting.text "parts"). Returns the top k and each document's first formula hit."""
    best: dict[int, FormulaHit] = {}
    for hits in lists:
        for hit in hits:
            best.setdefault(hit.doc, hit)
    whole = (
        [doc for doc, hit in best.items() if hit.tier > PART] if parts else ()
    )  # whole-structure matches: Zhong 2023 thesis Eq. 3.16 alone
    math, scores = fuse_math_text([[(hit.doc, hit.score) for hit in hits] for hits in lists], bm25, lambda_m, whole)

    def components(d: int) -> dict[str, float]:
        return {name: math.get(d, 0.0), "bm25": bm25.get(d, 0.0)}

    if by_tier:
        return rank_by_tier(scores, {d: components(d) for d in scores}, best, k), best
    ranked = sorted(scores, key=lambda d: (-scores[d], d))[:k]  # components of the k kept only, not of every candidate
    return [FusedHit(d, scores[d], components(d)) for d in ranked], best


def rank_by_tier(
    scores: Mapping[int, float], components: Mapping[int, dict[str, float]], best: Mapping[int, FormulaHit], k: int
) -> list[FusedHit]:
    """A formula-only query's top k by match tier (`search.match_tier`: the query as written, its whole structure, a
    part), then by score. A hit's score is its tier + its score / the best score (so runs sorted by score keep the
    order); its components keep the raw scores and the tier."""
    if not scores:
        return []
    tiers = {d: best[d].tier if d in best else PART for d in scores}
    top = max(scores.values())
    ranked = sorted(scores, key=lambda d: (-tiers[d], -scores[d], d))[:k]
    return [FusedHit(d, tiers[d] + scores[d] / top, {**components[d], "tier": float(tiers[d])}) for d in ranked]
