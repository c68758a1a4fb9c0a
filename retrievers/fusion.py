"""MABOWDOR hybrid search (Zhong 2023 thesis §5.2.3–5.2.4): fusing the rankings of several retrievers, and the `hybrid` mode.

A fusion method turns each component's ranking of one query into per-document contributions and adds
them up, weighted (Zhong et al. 2022 §3.4 and Table 4; definitions as in polyfuse):

- `linear`  Σ w·minmax(s)        per-query min-max normalised scores, a missing document scores 0 (Zhong 2023 thesis, Eq. 5.20)
- `combsum` Σ w·s                raw scores, unnormalised (the widest score range dominates)
- `rrf`     Σ w/(60 + rank)      reciprocal rank fusion, k = 60
- `borda`   Σ w·(n − rank + 1)/n Borda count over each run's n hits
- `isr`     count · Σ w/rank²    inverse square rank (count = runs that hold the document)
- `log-isr` log(count + 1) · Σ w/rank²

Fusion works on run files (`fuse_runs`, evaluation as data) and on live retrievers, composed
PyTerrier-style: `(0.5 * Stage(dense) + 0.5 * Stage(structure)) % 100` is a Retriever. The `hybrid`
mode fuses the retrievers named in the index's `fusion.json` (written by `mathscout train fusion`).
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mathscout.errors import MathScoutError, QueryError
from mathscout.index.layout import IndexDir
from mathscout.index.stored import StoredFile
from mathscout.index.tuned import TunedFile
from mathscout.limits import FUSION_DEPTH
from mathscout.notices import warning
from mathscout.retrievers.base import BaseRetriever, Retriever, prepare_query
from mathscout.retrievers.registry import available_modes, open_retriever, servable_modes
from mathscout.types import Hit, Query

Ranking = dict[str, float]  # document id → score for one query, best first
DEPTH = 1000  # hits taken from each component before fusing ("merging top-1000 results individually", Zhong 2023 thesis Table 5.6)
RRF_K = 60
WEIGHTS_FILE = "fusion.json"
FALLBACK_COMPONENTS = (
    "structure",
    "dense",
    "bm25",
)  # MABOWDOR's components (Zhong 2023 thesis §5.2.3), when nothing is tuned
MAX_WEIGHT = 1000.0  # a stored weight's bound (tuned weights sum to 1; only their ratios matter)


@dataclass(frozen=True)
class FusionMethod:
    """How one run's ranking becomes contributions, and how the number of runs holding a document scales them."""

    name: str
    contributions: Callable[[np.ndarray, np.ndarray], np.ndarray]  # (scores, ranks from 1) of one run → values
    count_factor: Callable[[np.ndarray], np.ndarray] | None
    description: str


def _min_max(scores: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """Min-max normalisation per query (Zhong et al. 2022 §3.4); a run whose hits all score the same gives them 1."""
    low, high = scores.min(), scores.max()
    return np.ones_like(scores) if high == low else (scores - low) / (high - low)


METHODS = {
    m.name: m
    for m in (
        FusionMethod("linear", _min_max, None, "Σ w·minmax(score): Zhong 2023 thesis Eq. 5.20"),
        FusionMethod("combsum", lambda s, r: s, None, "Σ w·raw score (CombSUM, unnormalised)"),
        FusionMethod("rrf", lambda s, r: 1.0 / (RRF_K + r), None, f"Σ w/({RRF_K} + rank): reciprocal rank fusion"),
        FusionMethod("borda", lambda s, r: (len(r) - r + 1) / len(r), None, "Σ w·(n − rank + 1)/n: Borda count"),
        FusionMethod("isr", lambda s, r: 1.0 / r**2, lambda c: c, "count · Σ w/rank²: inverse square rank"),
        FusionMethod("log-isr", lambda s, r: 1.0 / r**2, lambda c: np.log(c + 1), "log(count + 1) · Σ w/rank²"),
    )
}


def method(name: str) -> FusionMethod:
    if name not in METHODS:
        raise MathScoutError(f"unknown fusion method '{name}' (available: {', '.join(METHODS)})")
    return METHODS[name]


@dataclass
class TopicMatrix:
    """One query's candidates (the union of the runs' hits) × runs: each run's contribution, and presence."""

    docs: list[str]
    contributions: np.ndarray  # (documents, runs)
    present: np.ndarray  # (documents, runs) bool

    @classmethod
    def build(cls, rankings: Sequence[Ranking], fusion: FusionMethod, depth: int = DEPTH) -> TopicMatrix:
        position: dict[str, int] = {}
        columns = []
        for ranking in rankings:
            ordered = sorted(ranking.items(), key=lambda item: -item[1])[:depth]  # stable: ties keep run order
            rows = np.array([position.setdefault(doc, len(position)) for doc, _ in ordered], dtype=np.int64)
            scores = np.array([score for _, score in ordered], dtype=np.float64)
            ranks = np.arange(1, len(ordered) + 1, dtype=np.float64)
            columns.append((rows, fusion.contributions(scores, ranks) if len(ordered) else scores))
        contributions = np.zeros((len(position), len(rankings)))
        present = np.zeros((len(position), len(rankings)), dtype=bool)
        for column, (rows, values) in enumerate(columns):
            contributions[rows, column] = values
            present[rows, column] = True
        return cls(list(position), contributions, present)

    def scores(self, weights: np.ndarray, fusion: FusionMethod) -> np.ndarray:
        """Fused scores for one weight vector (runs,) or many (runs, grid) → (documents,) or (documents, grid)."""
        fused = self.contributions @ weights
        if fusion.count_factor is not None:
            used = (np.asarray(weights) > 0).astype(np.float64)
            fused = fused * fusion.count_factor(self.present @ used).reshape(fused.shape[0], *([1] * (fused.ndim - 1)))
        return fused

    def ranking(self, weights: np.ndarray, fusion: FusionMethod, k: int) -> list[tuple[str, float]]:
        """The k best (doc, fused score) pairs among the documents of the runs with a positive weight,
        by score then document id (deterministic on ties)."""
        scores = self.scores(weights, fusion)
        candidates = np.flatnonzero(self.present[:, np.asarray(weights) > 0].any(axis=1))
        if len(candidates) > k:  # only the k best (and their ties at the border) need sorting
            border = np.partition(scores[candidates], len(candidates) - k)[len(candidates) - k]
            candidates = candidates[scores[candidates] >= border]
        order = sorted(candidates, key=lambda i: (-scores[i], self.docs[i]))[:k]
        return [(self.docs[i], float(scores[i])) for i in order]


def fuse(
    rankings: Sequence[Ranking], weights: Sequence[float], fusion: str = "linear", depth: int = DEPTH, k: int = DEPTH
) -> list[tuple[str, float]]:
    """Fuse one query's rankings: the top-k (doc, fused score) pairs."""
    if len(rankings) != len(weights):
        raise MathScoutError(f"{len(rankings)} rankings but {len(weights)} weights")
    chosen = method(fusion)
    return TopicMatrix.build(rankings, chosen, depth).ranking(np.asarray(weights, dtype=np.float64), chosen, k)


def fuse_runs(
    runs: Mapping[str, Mapping[str, Ranking]],
    weights: Mapping[str, float],
    fusion: str = "linear",
    depth: int = DEPTH,
    k: int = DEPTH,
) -> dict[str, list[Hit]]:
    """Fuse whole runs (`{name: {topic: ranking}}`): every topic of any run; a run missing a topic adds nothing."""
    names = list(runs)
    topics = list(dict.fromkeys(qid for run in runs.values() for qid in run))
    vector = [weights.get(name, 0.0) for name in names]
    fused: dict[str, list[Hit]] = {}
    for qid in topics:
        rankings = [runs[name].get(qid, {}) for name in names]
        hits = fuse(rankings, vector, fusion, depth, k)
        fused[qid] = [
            Hit(
                doc_id=d,
                score=s,
                rank=n,
                components={name: rankings[i][d] for i, name in enumerate(names) if d in rankings[i]},
            )
            for n, (d, s) in enumerate(hits, start=1)
        ]
    return fused


# --- live retrievers, composed ------------------------------------------------------------------------------


@dataclass
class Stage:
    """A retriever with its weight in a fusion: `0.5 * Stage(dense) + 0.5 * Stage(structure)`."""

    retriever: Retriever
    weight: float = 1.0

    def __post_init__(self):
        if not isinstance(self.retriever, Retriever):
            raise MathScoutError(
                f"a fusion adds rankings: {self.retriever!r} is no retriever (a reranker or a query "
                "stage joins a pipeline with >>)"
            )

    @property
    def name(self) -> str:
        return self.retriever.name

    def __rmul__(self, weight: float) -> Stage:
        return Stage(self.retriever, self.weight * float(weight))

    __mul__ = __rmul__

    def __add__(self, other: Stage | FusedRetriever | Retriever) -> FusedRetriever:
        return FusedRetriever([self]) + other


class FusedRetriever(BaseRetriever):
    """Runs each stage (to `depth` hits, in parallel), fuses the rankings with `fusion`, cuts at `cutoff` (`% n`).

    A stage that cannot answer a query (e.g. structure search for a query without formulas) contributes
    nothing to that query; only when no stage can answer is the query an error.
    """

    name = "hybrid"

    def __init__(
        self,
        stages: Sequence[Stage],
        fusion: str = "linear",
        depth: int = DEPTH,
        cutoff: int | None = None,
        parallel: bool = True,
    ):
        if not stages:
            raise MathScoutError("a fusion needs at least one retriever")
        names = [s.name for s in stages]
        if len(set(names)) != len(names):
            raise MathScoutError(f"a fusion cannot hold the same retriever twice ({', '.join(names)})")
        if any(s.weight < 0 for s in stages):
            raise MathScoutError("fusion weights must be non-negative")
        self.stages = list(stages)
        self.fusion = method(fusion).name
        self.depth = FUSION_DEPTH.check(depth)
        self.cutoff = cutoff
        self.parallel = parallel
        self._pool: ThreadPoolExecutor | None = None
        self.timings: dict[str, float] = {}  # seconds spent per stage (and "fusion") on the last query

    def __add__(self, other: Stage | FusedRetriever | Retriever) -> FusedRetriever:
        extra = (
            other.stages if isinstance(other, FusedRetriever) else [other if isinstance(other, Stage) else Stage(other)]
        )
        return FusedRetriever(self.stages + list(extra), self.fusion, self.depth, self.cutoff, self.parallel)

    def __mod__(self, cutoff: int) -> FusedRetriever:
        return FusedRetriever(self.stages, self.fusion, self.depth, int(cutoff), self.parallel)

    def __repr__(self) -> str:
        inner = " + ".join(f"{s.weight:g} * {s.name}" for s in self.stages)
        return f"{self.fusion}({inner})" + (f" % {self.cutoff}" if self.cutoff else "")

    @property
    def weights(self) -> dict[str, float]:
        return {s.name: s.weight for s in self.stages}

    def _run_stage(self, stage: Stage, query: Query, explain: bool) -> tuple[list[Hit], str | None, float]:
        started = time.perf_counter()
        try:
            if explain:
                hits = stage.retriever.search(query, self.depth)
            else:
                hits = stage.retriever.batch_search([query], self.depth)[query.id]
            refusal = None
        except QueryError as exc:
            hits, refusal = [], f"{stage.name}: {exc}"
        return hits, refusal, time.perf_counter() - started

    def _rankings(self, query: Query, explain: bool) -> list[list[Hit]]:
        """Each stage's hits; the stages run in parallel threads (Lucene, faiss and torch release the GIL)."""
        if self.parallel and len(self.stages) > 1:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(len(self.stages), thread_name_prefix="fusion")
            # each stage in a copy of this thread's context: what it says reaches the caller's notice collectors
            contexts = [contextvars.copy_context() for _ in self.stages]
            results = list(
                self._pool.map(
                    lambda stage, context: context.run(self._run_stage, stage, query, explain), self.stages, contexts
                )
            )
        else:
            results = [self._run_stage(stage, query, explain) for stage in self.stages]
        self.timings = {stage.name: seconds for stage, (_, _, seconds) in zip(self.stages, results)}
        rankings = [hits for hits, _, _ in results]
        refusals = [refusal for _, refusal, _ in results if refusal]
        if not any(rankings) and refusals:
            raise QueryError("no component can search this query (" + "; ".join(refusals) + ")")
        return rankings

    def _fused(self, query: Query, k: int, explain: bool) -> list[Hit]:
        rankings = self._rankings(query, explain)
        started = time.perf_counter()
        by_doc = [{h.doc_id: h for h in hits} for hits in rankings]
        limit = min(k, self.cutoff) if self.cutoff else k
        fused = fuse(
            [{h.doc_id: h.score for h in hits} for hits in rankings],
            [s.weight for s in self.stages],
            self.fusion,
            self.depth,
            limit,
        )
        hits = []
        for rank, (doc, score) in enumerate(fused, start=1):
            sources = [(stage, found[doc]) for stage, found in zip(self.stages, by_doc) if doc in found]
            hit = Hit(doc_id=doc, score=score, rank=rank, components={s.name: h.score for s, h in sources})
            explained = max((h for s, h in sources if h.snippet), key=lambda h: bool(h.formulas), default=None)
            if explained is not None:  # the explanation of a component that found it, formulas preferred
                hit.snippet, hit.formulas = explained.snippet, explained.formulas
            hits.append(hit)
        self.timings["fusion"] = time.perf_counter() - started
        return hits

    def _search(self, query: Query, k: int) -> list[Hit]:
        return self._fused(query, k, explain=True)

    def batch_search(self, queries: list[Query], k: int = 1000) -> dict[str, list[Hit]]:
        """Ranked ids and scores for many queries (no snippets)."""
        return {q.id: self._fused(prepare_query(q), k, explain=False) for q in queries}


# --- the weights stored with an index --------------------------------------------------------------------------


@dataclass
class FusionConfig(TunedFile):
    """`<index>/fusion.json`: which retrievers the hybrid mode fuses, how, and how the weights were tuned."""

    FILE = WEIGHTS_FILE
    LABEL = "the fusion weights file"

    weights: dict[str, float]  # mode name → weight
    method: str = "linear"
    depth: int = DEPTH
    tuning: dict[str, Any] = field(default_factory=dict)  # provenance: topics, qrels, measure, folds, scores

    @classmethod
    def remedy(cls, folder: Path) -> str:
        return "re-tune with 'mathscout train fusion' or delete the file"

    @classmethod
    def parse(cls, file: StoredFile, data: dict[str, Any]) -> FusionConfig:
        """Weights of modes other than hybrid itself, in 0–MAX_WEIGHT and one positive, a known method, a depth in
        FUSION_DEPTH's range."""
        fusable = set(available_modes()) - {FusedRetriever.name}  # a hybrid of itself would open itself for ever
        weights = {
            file.name(name, "a weighted mode", fusable): file.number(weight, f"the weight of {name}", 0, MAX_WEIGHT)
            for name, weight in file.mapping(data.get("weights"), "weights").items()
        }
        file.require(any(w > 0 for w in weights.values()), "no weight is positive")
        return cls(
            weights,
            file.name(data.get("method", "linear"), "method", METHODS),
            file.whole(data.get("depth", DEPTH), "depth", FUSION_DEPTH.low, FUSION_DEPTH.high),
            file.mapping(data.get("tuning", {}), "tuning"),
        )


def fallback_config(index: IndexDir) -> FusionConfig:
    """Equal weights over the MABOWDOR components the index can serve."""
    usable = servable_modes(index, FALLBACK_COMPONENTS)
    if not usable:
        raise MathScoutError(
            f"the index {index.path} has none of the components hybrid search fuses ({', '.join(FALLBACK_COMPONENTS)})"
        )
    return FusionConfig(weights={name: 1.0 / len(usable) for name in usable})


def open_hybrid(index: IndexDir, **options) -> FusedRetriever:
    """The tuned fusion stored with the index, else equal weights over its components (with a notice)."""
    config = FusionConfig.read(index)
    if config is None:
        config = fallback_config(index)
        warning(
            f"{index.path} has no tuned fusion weights ({WEIGHTS_FILE}): fusing "
            f"{', '.join(config.weights)} with equal weights; tune them with 'mathscout train fusion'"
        )
    stages = [
        Stage(open_retriever(index, name), float(weight)) for name, weight in config.weights.items() if weight > 0
    ]
    return FusedRetriever(
        stages,
        options.get("fusion", config.method),
        options.get("depth", config.depth),
        parallel=bool(options.get("parallel", True)),
    )


def describe_weights(weights: Mapping[str, float]) -> str:
    return " + ".join(f"{w:.2f}·{name}" for name, w in weights.items())
