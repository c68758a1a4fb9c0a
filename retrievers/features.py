"""The features a learned ranker sees for one (question, candidate document) pair: one table, one function.

Missing is never zero: a value that does not exist is NaN, which LightGBM treats as missing (it learns
which side of each split missing values go), and a flag says why it is missing.

| feature | group | what it is |
|---|---|---|
| `R.score` | retriever R | R's score of the document (NaN: R did not return it, or the index has no R) |
| `R.rank` | retriever R | its rank in R's list, 1 = best (NaN as above) |
| `R.score_max` | retriever R | score / the best score R gave for this query |
| `R.zscore` | retriever R | (score − mean) / standard deviation of R's scores for this query |
| `R.found` | retriever R | 1: R returned the document; 0: R answered the query without it; NaN: R is not in the index or could not search the query |
| `structure.math` | question–document | the math part of Zhong 2023 thesis Eq. 3.18: Σ over query formulas of the document's best formula score |
| `structure.words` | question–document | the text part of Zhong 2023 thesis Eq. 3.18: BM25 of the question's words without the math |
| `structure.coverage` | question–document | structure.math / the score of a perfect match: how much of the query formulas the best matches cover |
| `rewrite.equivalent` | question–document | 1: the document's best structure match came from a SymPy-equivalent form of a query formula, not the formula as written; 0: it did not (or no form was found); NaN: the question has no formula (`retrievers/equivalence.py`) |
| `rewrite.tier` | question–document | that rewritten match's tier (2 verbatim, 1 whole structure, 0 part; NaN when `rewrite.equivalent` is not 1) |
| `rewrite.score` | question–document | that rewritten match's score in structure-rewrite (NaN when `rewrite.equivalent` is not 1) |
| `title.bm25` | question–document | BM25 (Zhong 2023 thesis Eq. 2.2) of the question against the document's title, for an ARQMath answer its thread's question title (`retrievers/title_bm25.py`; NaN: the document has no title, as in the whole shared collection) |
| `found_by` | question–document | how many retrievers returned the document |
| `q.formulas` | question | formulas in the question |
| `q.math_share` | question | share of the question's index terms that are math tokens |
| `q.terms` | question | index terms in the question (its length) |
| `q.kind` | question | the planner's question kind (formula, text, mixed), categorical |
| `q.rewrites` | question | SymPy-equivalent forms searched for its formulas (at most 4; NaN: no formula) |
| `d.kind` | document | answer, encyclopedia, statement…, categorical (NaN: unknown or not in the training vocabulary) |
| `d.source` | document | where the document comes from (its `source` metadata), categorical |
| `d.votes` | document | vote score (NaN when the source has none) |
| `d.accepted` | document | 1 accepted answer, 0 not accepted (NaN when unknown) |
| `d.length` | document | characters of text |
| `d.formulas` | document | formulas in the document |
| `cross.score`, `cross.rank`, `cross.score_max`, `cross.zscore`, `cross.found` | question–document | only in a ranker trained with `--cross-depth N` (`ranker.json`'s `cross_depth`): the index's trained cross-encoder's logit of the question and the document read together (`mathscout train cross-encoder`), over the N candidates the runs agree on most (reciprocal rank fusion), as the per-retriever columns are (`cross.found` 0: a candidate outside those N) |

R ranges over `mathscout.retrievers.candidates.RETRIEVERS` (bm25, structure, dense, dense-ft, colbert, types): the
ColBERT score is its MaxSim, the types score its type-expanded BM25. Not a feature: a separate type-overlap
count (the types retriever's score is one). The rewrite features describe the candidates only: a document that
only a rewritten form finds, outside every retriever's top hits, is not added.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from mathscout.retrievers.candidates import RETRIEVERS, Candidates
from mathscout.store import DocumentSummary

NAN = float("nan")
PER_RETRIEVER = ("score", "rank", "score_max", "zscore", "found")
QUESTION_KINDS = ("formula", "text", "mixed", "empty")
CATEGORICAL = ("q.kind", "d.kind", "d.source")
MAX_CATEGORIES = 50  # most frequent values kept per categorical document feature


SHARED = [
    "structure.math",
    "structure.words",
    "structure.coverage",
    "rewrite.equivalent",
    "rewrite.tier",
    "rewrite.score",
    "title.bm25",
    "found_by",
    "q.formulas",
    "q.math_share",
    "q.terms",
    "q.kind",
    "q.rewrites",
    "d.kind",
    "d.source",
    "d.votes",
    "d.accepted",
    "d.length",
    "d.formulas",
]  # the columns after the retrievers'
COLUMN = {name: n for n, name in enumerate(SHARED)}
CROSS = "cross"  # the cross-encoder's columns' prefix


def feature_names(retrievers: Iterable[str] = RETRIEVERS, cross: bool = False) -> list[str]:
    """Every feature, in the order of the matrix columns (the cross-encoder's last, when the ranker reads it)."""
    names = [f"{r}.{part}" for r in retrievers for part in PER_RETRIEVER]
    return names + SHARED + ([f"{CROSS}.{part}" for part in PER_RETRIEVER] if cross else [])


FEATURES = feature_names()


@dataclass
class Vocabulary:
    """Codes of the categorical document features, learned from the training candidates (unseen → NaN)."""

    kinds: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)

    @classmethod
    def learn(cls, summaries: Iterable[DocumentSummary]) -> Vocabulary:
        kinds: Counter[str] = Counter()
        sources: Counter[str] = Counter()
        for summary in summaries:
            kinds[str(summary.metadata.get("kind"))] += 1
            sources[str(summary.metadata.get("source"))] += 1
        keep = lambda counts: sorted(v for v, _ in counts.most_common(MAX_CATEGORIES) if v != "None")  # noqa: E731
        return cls(keep(kinds), keep(sources))

    def code(self, values: list[str], value) -> float:
        return float(values.index(value)) if value in values else NAN


def _run_columns(hits, docs: list[str]) -> np.ndarray:
    """(documents, PER_RETRIEVER) for one retriever's hits; every column NaN when the run is empty."""
    out = np.full((len(docs), len(PER_RETRIEVER)), NAN)
    if not hits:
        return out
    scores = np.array([h.score for h in hits], dtype=np.float64)
    top, mean, spread = scores.max(), scores.mean(), scores.std()
    position = {h.doc_id: (n, h.score) for n, h in enumerate(hits, start=1)}
    for row, doc in enumerate(docs):
        found = position.get(doc)
        if found is None:
            out[row, 4] = 0.0
            continue
        rank, score = found
        out[row] = (score, rank, score / top if top > 0 else NAN, (score - mean) / spread if spread > 0 else 0.0, 1.0)
    return out


def _optional(value) -> float:
    if value is None or isinstance(value, str):
        return NAN
    number = float(value)
    return number if math.isfinite(number) else NAN


def feature_matrix(
    candidates: Candidates,
    summaries: Mapping[str, DocumentSummary],
    vocabulary: Vocabulary,
    retrievers: Iterable[str] = RETRIEVERS,
    cross: bool = False,
) -> tuple[list[str], np.ndarray]:
    """(documents, matrix) for one query's candidates: a row per document, a column per `feature_names(retrievers,
    cross)`."""
    retrievers = list(retrievers)
    docs = candidates.docs
    blocks = [_run_columns(candidates.runs.get(name, []), docs) for name in retrievers]
    structure = {h.doc_id: h for h in candidates.runs.get("structure", [])}
    stats = candidates.stats
    rewrites = candidates.rewrites
    forms = rewrites.forms if rewrites is not None else None
    searched = forms is not None  # NaN without a formula (or not computed)
    titles = candidates.titles or {}
    rows = np.full((len(docs), len(SHARED)), NAN)
    rows[
        :, [COLUMN["q.formulas"], COLUMN["q.math_share"], COLUMN["q.terms"], COLUMN["q.kind"], COLUMN["q.rewrites"]]
    ] = (
        stats.formulas,
        stats.math_share,
        stats.terms,
        float(QUESTION_KINDS.index(stats.kind)) if stats.kind in QUESTION_KINDS else NAN,
        float(forms) if forms is not None else NAN,
    )
    document = [COLUMN[n] for n in ("d.kind", "d.source", "d.votes", "d.accepted", "d.length", "d.formulas")]
    for row, doc in enumerate(docs):
        out = rows[row]
        hit = structure.get(doc)
        if hit is not None:
            math_part = hit.components.get("structure", NAN)
            out[COLUMN["structure.math"]] = math_part
            out[COLUMN["structure.words"]] = hit.components.get("bm25", NAN)
            if stats.perfect_structure:
                out[COLUMN["structure.coverage"]] = math_part / stats.perfect_structure
        if searched and rewrites is not None:
            match = rewrites.matches.get(doc)
            out[COLUMN["rewrite.equivalent"]] = float(match is not None)
            if match is not None:
                out[COLUMN["rewrite.tier"]], out[COLUMN["rewrite.score"]] = match.tier, match.score
        out[COLUMN["title.bm25"]] = titles.get(doc, NAN)
        summary = summaries.get(doc)
        if summary is not None:
            meta = summary.metadata
            accepted = meta.get("accepted")
            out[document] = (
                vocabulary.code(vocabulary.kinds, str(meta.get("kind"))),
                vocabulary.code(vocabulary.sources, str(meta.get("source"))),
                _optional(meta.get("score")),
                NAN if accepted is None else float(bool(accepted)),
                float(summary.length),
                float(summary.formulas),
            )
    matrix = np.hstack([*blocks, rows]) if blocks else rows
    found = matrix[:, [len(PER_RETRIEVER) * i + 4 for i in range(len(retrievers))]]
    matrix[:, len(retrievers) * len(PER_RETRIEVER) + COLUMN["found_by"]] = np.nansum(found, axis=1)
    if cross:  # the cross-encoder's logits as one more run (all NaN when they were not computed)
        matrix = np.hstack([matrix, _run_columns(candidates.cross or [], docs)])
    return docs, matrix
