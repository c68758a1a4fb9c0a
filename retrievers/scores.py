"""What a hit's number means (each retriever's score meaning is its entry's `score` in the retriever registry)."""

from __future__ import annotations

import math

from mathscout.retrievers.registry import score_meanings
from mathscout.types import Hit


def explain_score(hit: Hit) -> str:
    """What the hit's number is: a retriever's raw score, Zhong 2023 thesis Eq. 3.18's structure + BM25, or a normalised fusion."""
    parts = dict(hit.components)
    if not parts:
        return f"score {hit.score:.3g}"
    listed = ", ".join(f"{name} {value:.3g}" for name, value in parts.items())
    if "rerank" in parts:
        first = ", ".join(f"{name} {value:.3g}" for name, value in parts.items() if name != "rerank")
        return f"rerank {hit.score:.3g} = the reranker's score of the top hits (first stage: {first or 'none'})"
    if "tier" in parts:  # formula-only structure search (retrievers.structure._by_tier)
        return (
            f"ranked by match tier, then score {hit.score:.3g} (tier 2: holds the formula as written, 1: its whole "
            f"structure, 0: a part; {listed})"
        )
    if len(parts) == 1:
        ((name, value),) = parts.items()
        if math.isclose(value, hit.score, rel_tol=1e-6, abs_tol=1e-9):
            return f"{name} {hit.score:.3g} = {score_meanings().get(name, name + ' score')}"
        return f"normalised {hit.score:.3g} (1 = the best hit) of {listed}"
    if set(parts) == {"structure", "bm25"} and hit.score > 1.0:  # fusions below are normalised to [0, 1]
        return f"math + text {hit.score:.3g} = λ_m × structure + BM25 (Zhong 2023 thesis Eq. 3.18; {listed})"
    return (
        f"fused {hit.score:.3g} = weighted sum of normalised scores (1 = best; Zhong 2023 thesis Eq. 5.20) of {listed}"
    )


def describe_hits(hits: list[Hit]) -> list[Hit]:
    """The hits with `explanation` set (what each score means); the same list."""
    for hit in hits:
        hit.explanation = explain_score(hit)
    return hits
