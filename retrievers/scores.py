"""What a hit's number means (each retriever's score meaning is its entry's `score` in the retriever registry)."""

from __future__ import annotations

import math

from mathscout.retrievers.registry import available_modes, score_meanings
from mathscout.types import Hit


def explain_score(hit: Hit) -> str:
    """What the hit's number is, as `FIGURES = MEANING` (a terminal says the meaning once: mathscout.render.score_legend): a
    retriever's raw score, Zhong 2023 thesis Eq. 3.18's structure + BM25, or a normalised fusion."""
    parts = dict(hit.components)
    if not parts:
        return f"score {hit.score:.3g}"
    # the retrievers' scores; bookkeeping components (a rewrite's form number, the match tier) are said in words
    modes = available_modes()
    listed = ", ".join(f"{name} {value:.3g}" for name, value in parts.items() if name in modes)
    if "rerank" in parts:
        first = ", ".join(f"{name} {value:.3g}" for name, value in parts.items() if name != "rerank")
        return f"rerank {hit.score:.3g} (first stage: {first or 'none'}) = the reranker's score of the top hits"
    if "tier" in parts:  # formula-only structure search (retrievers.structure._by_tier)
        return (
            f"tier {parts['tier']:.0f}, score {hit.score:.3g} ({listed}) = ranked by match tier, then score (tier 2: "
            "holds the formula as written, 1: its whole structure, 0: a part)"
        )
    if len(parts) == 1:
        ((name, value),) = parts.items()
        if math.isclose(value, hit.score, rel_tol=1e-6, abs_tol=1e-9):
            return f"{name} {hit.score:.3g} = {score_meanings().get(name, name + ' score')}"
        return f"normalised {hit.score:.3g} ({listed}) = the score over the best hit's (1 = the best hit)"
    if set(parts) == {"structure", "bm25"} and hit.score > 1.0:  # fusions below are normalised to [0, 1]
        return f"math + text {hit.score:.3g} ({listed}) = λ_m × structure + BM25 (Zhong 2023 thesis Eq. 3.18)"
    return (
        f"fused {hit.score:.3g} ({listed}) = weighted sum of normalised scores (1 = best; Zhong 2023 thesis Eq. 5.20)"
    )


def describe_hits(hits: list[Hit]) -> list[Hit]:
    """The hits with `explanation` set (what each score means); the same list."""
    for hit in hits:
        hit.explanation = explain_score(hit)
    return hits
