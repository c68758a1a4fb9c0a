"""The coordinator of a sharded index: a query fans out to one Ray actor per shard, the shards' top-k lists merge
with the global k (each shard's top k holds every document of the global top k it has: rank-safe), and fusion,
reranking and the assistant run on the merged lists as on one index.

Faults: a shard actor that dies is restarted by Ray (max_restarts) and its call retried (max_task_retries); a call
that still fails is tried once more on a fresh actor. A shard that stays unreachable leaves partial results flagged
with the missing shard (`ShardedHits.missing_shards`, a notice, `missing_shards` in `--json`), never silently less.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter, defaultdict
from pathlib import Path

from mathscout.errors import MathScoutError, QueryError
from mathscout.index.layout import IndexDir
from mathscout.notices import notice
from mathscout.retrievers.shards.cluster import ACTOR_CPUS, MAX_RESTARTS, MAX_TASK_RETRIES, connect, ray_module, worker_env
from mathscout.retrievers.shards.layout import ShardSet
from mathscout.retrievers.shards.scoring import adjust_ties
from mathscout.retrievers.shards.worker import ShardHits, ShardWorker
from mathscout.structure.scoring import math_text_score
from mathscout.types import Hit, Query
from mathscout.retrievers.base import BaseRetriever, RankResult, prepare_query
from mathscout.retrievers.structure import split_query

CALL_TIMEOUT = float(os.environ.get("MATHSCOUT_SHARD_TIMEOUT", "300"))  # seconds for one call of ≤ BATCH queries
EXPLAINED_HITS = 20  # hits that get a snippet in `search` (as the single-index retrievers)
BATCH = 10  # queries per call in runs: bounded calls, so a dead shard is noticed within CALL_TIMEOUT


class ShardedHits(list):
    """A list of hits that says which shards did not answer (empty: complete)."""

    missing_shards: list[str]

    def __init__(self, hits=(), missing_shards: list[str] | None = None):
        super().__init__(hits)
        self.missing_shards = list(missing_shards or [])


class ShardPool:
    """One named actor per shard of an index (created on first use, found again by name in the same Ray namespace)."""

    _pools: dict[str, ShardPool] = {}

    def __init__(self, index: Path, shards: ShardSet):
        self.index, self.shards = index, shards
        self.key = hashlib.sha1(str(index.resolve()).encode()).hexdigest()[:12]
        self.actors = [self.actor(i) for i in range(len(shards.shards))]

    @classmethod
    def of(cls, index: IndexDir) -> ShardPool:
        connect()
        key = str(index.path.resolve())
        if key not in cls._pools:
            cls._pools[key] = cls(index.path, ShardSet.read(index.path))
        return cls._pools[key]

    def name(self, shard: int) -> str:
        return f"shard-{self.key}-{shard}"

    def actor(self, shard: int):
        ray = ray_module()
        info = self.shards.shards[shard]
        return ray.remote(ShardWorker).options(
            name=self.name(shard), get_if_exists=True, max_restarts=MAX_RESTARTS, max_task_retries=MAX_TASK_RETRIES,
            num_cpus=ACTOR_CPUS, runtime_env=worker_env(),
        ).remote(str(self.shards.folder(self.index, shard)), info.first_document)

    def describe(self, shard: int) -> str:
        return f"shard {shard + 1} of {len(self.actors)} ({self.shards.folder(self.index, shard)})"

    def rank(self, mode: str, queries: list[Query], k: int, options: dict) -> tuple[list[list[ShardHits] | None], list[int]]:
        """Every shard's answers (None for a shard that stayed unreachable) and the unreachable shards."""
        ray = ray_module()
        refs = [actor.rank.remote(mode, queries, k, options) for actor in self.actors]
        answers: list[list[ShardHits] | None] = []
        missing = []
        for shard, ref in enumerate(refs):
            try:
                answers.append(self._get(ref))
                continue
            except _unreachable() as first:
                reason = first
            try:  # once more, on the actor Ray restarted or on a new one
                self.actors[shard] = self.actor(shard)
                answers.append(self._get(self.actors[shard].rank.remote(mode, queries, k, options)))
            except _unreachable() as again:
                notice(f"notice: {self.describe(shard)} is unreachable ({_first_line(again or reason)}): partial results")
                answers.append(None)
                missing.append(shard)
        return answers, missing

    def _get(self, ref):
        ray = ray_module()
        try:
            return ray.get(ref, timeout=CALL_TIMEOUT)
        except ray.exceptions.RayTaskError as exc:  # the shard raised: a clear error of ours, or a bug
            cause = getattr(exc, "cause", None)
            if isinstance(cause, MathScoutError):
                raise cause from None
            raise

    def ping(self) -> list[int]:
        ray = ray_module()
        return ray.get([actor.ping.remote() for actor in self.actors], timeout=CALL_TIMEOUT)


def _unreachable() -> tuple[type[BaseException], ...]:
    exceptions = ray_module().exceptions
    return tuple(getattr(exceptions, name) for name in ("RayActorError", "GetTimeoutError", "ActorUnavailableError",
                                                       "ActorDiedError", "WorkerCrashedError") if hasattr(exceptions, name))


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


class ShardedRetriever(BaseRetriever):
    """A search mode over a sharded index: fan out, merge with the global k (structure: merge each formula's and the
    text part's list over the shards, then Eq. 3.18 as `StructureRetriever.fused` does on one index)."""

    def __init__(self, index: IndexDir, mode: str, **options):
        self.index, self.name, self.options = index, mode, options
        self.store = index.store
        self.pool = ShardPool.of(index)

    def _search(self, query: Query, k: int) -> ShardedHits:
        from mathscout.render import explain_hits

        hits, missing = self._rank([query], k)
        explain_hits(hits[0][:EXPLAINED_HITS], self.store, query.text)  # snippets and matched formulas, from the index's store
        return ShardedHits(hits[0], missing)

    def rank(self, query: Query, k: int) -> RankResult:
        """The top-k hits (a `ShardedHits`: it says which shards did not answer), as every retriever's `rank`."""
        return RankResult(self._search(prepare_query(query), k))

    def batch_search(self, queries: list[Query], k: int = 1000) -> dict[str, list[Hit]]:
        runs: dict[str, list[Hit]] = {}
        queries = [prepare_query(q) for q in queries]
        missing: set[int] = set()
        for start in range(0, len(queries), BATCH):
            chunk = queries[start:start + BATCH]
            hits, gone = self._rank(chunk, k, per_query_errors=True)
            missing.update(gone)
            for query, found in zip(chunk, hits):
                for rank, hit in enumerate(found, start=1):
                    hit.rank = rank
                runs[query.id] = ShardedHits(found, [self.pool.describe(s) for s in gone])
        if missing:
            notice(f"notice: partial run: {', '.join(self.pool.describe(s) for s in sorted(missing))} did not answer "
                   "some queries")
        return runs

    def _rank(self, queries: list[Query], k: int, per_query_errors: bool = False) -> tuple[list[list[Hit]], list[str]]:
        answers, missing = self.pool.rank(self.name, queries, k, self.options)
        if len(missing) == len(answers):
            raise MathScoutError(f"no shard of {self.index.path} answered: is Ray running? ({len(missing)} unreachable)")
        out = []
        for q, query in enumerate(queries):
            per_shard = [a[q] for a in answers if a is not None]
            errors = [s.error for s in per_shard if s.error]
            if len(errors) == len(per_shard):  # the query itself is unusable (every shard says so)
                if not per_query_errors:
                    raise QueryError(errors[0])
                notice(f"notice: topic {query.id}: {errors[0]}")
                out.append([])
                continue
            answered = [s for s in per_shard if not s.error]
            if any(s.lists is not None for s in answered):
                out.append(merge_structure(answered, query, k))
            elif self.name == "bm25":
                out.append(merge_bm25(answered, k))
            else:
                out.append(merge_hits(answered, k))
        return out, [self.pool.describe(s) for s in missing]


def _order(entries) -> list:
    return sorted(entries, key=lambda e: (-e[2], e[0]))  # (global ordinal, id, score, …): best first, ties by ordinal


def _bm25_top(entries, k: int) -> list[tuple[tuple, float]]:
    """BM25 as a single index answers it: the top k of raw Lucene scores, ties by document id, each entry with its
    score after Anserini's rounding (adjust_ties)."""
    top = sorted(entries, key=lambda e: (-e[2], e[1]))[:k]
    return list(zip(top, adjust_ties([e[2] for e in top])))


def merge_hits(answers: list[ShardHits], k: int) -> list[Hit]:
    """The global top k of the shards' top-k lists (scores as the shards gave them, ties by global ordinal)."""
    entries = _order(h for a in answers for h in a.hits)[:k]
    return [Hit(doc_id=doc_id, score=score, rank=n, components=components)
            for n, (_, doc_id, score, components) in enumerate(entries, start=1)]


def merge_bm25(answers: list[ShardHits], k: int) -> list[Hit]:
    """The global BM25 top k of the shards' lists (`_bm25_top`)."""
    return [Hit(doc_id=doc_id, score=score, rank=n, components={"bm25": score})
            for n, ((_, doc_id, _, _), score) in enumerate(_bm25_top((h for a in answers for h in a.hits), k), start=1)]


def merge_structure(answers: list[ShardHits], query: Query, k: int) -> list[Hit]:
    """Eq. 3.18 over the merged lists: each query formula's global top `depth` documents and BM25's (thesis §3.3,
    as `StructureRetriever.fused`), or a lone formula's global top k."""
    lists = [a.lists for a in answers if a.lists is not None]
    formulas: dict[tuple[str, int], list] = defaultdict(list)
    order: list[tuple[str, int]] = []
    for found in lists:  # the query's formulas in query order, a repeated formula once per occurrence
        seen: Counter[str] = Counter()
        for latex, entries in found["formulas"]:
            key = (latex, seen[latex])
            seen[latex] += 1
            if key not in formulas:
                order.append(key)
            formulas[key] += entries
    depth, lambda_m = lists[0]["depth"], lists[0]["lambda_m"]
    if not any(found["fused"] for found in lists) and len(formulas) == 1:
        top = _order(formulas[order[0]])[:k]
        return [Hit(doc_id=d, score=s, rank=n, components={"structure": s}) for n, (_, d, s) in enumerate(top, start=1)]
    formula_order = split_query(query)[0]  # the query's formulas in the order Eq. 3.18 sums them in
    order.sort(key=lambda key: _query_position(formula_order, key))
    math: dict[int, float] = defaultdict(float)
    ids: dict[int, str] = {}
    for key in order:
        for ordinal, doc_id, score in _order(formulas[key])[:depth]:
            math[ordinal] += score
            ids[ordinal] = doc_id
    bm25 = {}
    for (ordinal, doc_id, _), score in _bm25_top((e for found in lists for e in found["bm25"]), depth):
        bm25[ordinal] = score
        ids[ordinal] = doc_id
    scores = {d: math_text_score(math.get(d, 0.0), bm25.get(d, 0.0), lambda_m) for d in set(math) | set(bm25)}
    ranked = sorted((d for d in scores if scores[d] > 0), key=lambda d: (-scores[d], d))[:k]
    return [Hit(doc_id=ids[d], score=scores[d], rank=n, components={"structure": math.get(d, 0.0), "bm25": bm25.get(d, 0.0)})
            for n, d in enumerate(ranked, start=1)]


def _query_position(formulas: list[str], key: tuple[str, int]) -> int:
    """Where the `key[1]`-th occurrence of a formula stands among the query's formulas (the order Eq. 3.18 sums in)."""
    positions = [n for n, latex in enumerate(formulas) if latex == key[0]]
    return positions[key[1]] if key[1] < len(positions) else len(formulas)


def open_sharded(index: IndexDir, mode: str, **options):
    """The retriever of `mode` over a sharded index: ranking modes fan out to the shards; modes that combine other
    modes (hybrid, ranked, …) open as on one index, over the sharded modes they combine."""
    shards = ShardSet.read(index.path)
    from mathscout.retrievers.registry import available_modes

    spec = available_modes(planned=True)[mode]
    missing = [name for name in spec.requires if name not in shards.components]
    if missing:
        raise MathScoutError(f"the sharded index {index.path} has no '{missing[0]}' component: rebuild it with "
                             f"'mathscout index --input PATH --index {index.path} --shards {len(shards.shards)} "
                             f"--components {','.join(shards.components + missing)}'")
    if mode in COMBINING_MODES:
        return spec.open(index, **options)
    return ShardedRetriever(index, mode, **options)


COMBINING_MODES = ("hybrid", "ranked")  # fusion and learned ranking over the merged lists of other modes
