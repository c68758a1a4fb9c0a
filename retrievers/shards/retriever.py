"""The coordinator of a sharded index: a query fans out to one Ray actor per shard, the shards' top-k lists merge
with the global k (each shard's top k holds every document of the global top k it has: rank-safe), and fusion,
reranking and the assistant run on the merged lists as on one index.

Faults: a shard actor that dies is restarted by Ray (max_restarts) and its call retried (max_task_retries); a call
that still fails is tried once more on a fresh actor. A shard that stays unreachable leaves partial results flagged
with the missing shard (`ShardedHits.missing_shards`, a notice, `missing_shards` in `--json`), never silently less.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import ClassVar

from mathscout.errors import MathScoutError, QueryError
from mathscout.index.layout import IndexDir
from mathscout.notices import warning
from mathscout.retrievers.base import BaseRetriever, RankResult, prepare_query
from mathscout.retrievers.shards.cluster import MAX_RESTARTS, MAX_TASK_RETRIES, connect, ray_module, worker_env
from mathscout.retrievers.shards.layout import ShardSet
from mathscout.retrievers.shards.scoring import adjust_ties
from mathscout.retrievers.shards.worker import ShardHits, ShardWorker
from mathscout.retrievers.structure import KindSetting, StructureRetriever, StructureSettings, query_kind
from mathscout.settings import settings
from mathscout.structure.fusion import FusedHit, fuse_formula_lists, rank_by_tier
from mathscout.structure.lexer import LEGACY_LEXER
from mathscout.structure.parser import parse_latex
from mathscout.structure.scoring import ETA_ARQMATH
from mathscout.structure.search import FormulaHit
from mathscout.types import Hit, Query

EXPLAINED_HITS = 20  # hits that get a snippet in `search` (as the single-index retrievers)
DENSE_MODES = ("dense", "dense-ft")  # encoded once at the coordinator (ShardedDense)
BATCH = 10  # queries per call in runs: bounded calls, so a dead shard is noticed within MATHSCOUT_SHARD_TIMEOUT


class ShardedHits(list):
    """A list of hits that says which shards did not answer (empty: complete)."""

    missing_shards: list[str]

    def __init__(self, hits=(), missing_shards: list[str] | None = None):
        super().__init__(hits)
        self.missing_shards = list(missing_shards or [])


class ShardPool:
    """One named actor per shard of an index (created on first use, found again by name in the same Ray namespace)."""

    _pools: ClassVar[dict[str, ShardPool]] = {}

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
        return (
            ray.remote(ShardWorker)
            .options(
                name=self.name(shard),
                get_if_exists=True,
                max_restarts=MAX_RESTARTS,
                max_task_retries=MAX_TASK_RETRIES,
                num_cpus=settings().shard_cpus,
                runtime_env=worker_env(),
            )
            .remote(str(self.shards.folder(self.index, shard)), info.first_document, info.first_formula)
        )

    def describe(self, shard: int) -> str:
        return f"shard {shard + 1} of {len(self.actors)} ({self.shards.folder(self.index, shard)})"

    def rank(
        self, mode: str, queries: list[Query], k: int, options: dict, vectors: list | None = None
    ) -> tuple[list[list[ShardHits] | None], list[int]]:
        """Every shard's answers (None for a shard that stayed unreachable) and the unreachable shards."""
        refs = [actor.rank.remote(mode, queries, k, options, vectors) for actor in self.actors]
        answers: list[list[ShardHits] | None] = []
        missing = []
        for shard, ref in enumerate(refs):
            try:
                answers.append(self._get(ref))
                continue
            except _unreachable() as first:
                reason = first
            try:  # once more, on the actor Ray restarted or on a new one
                answers.append(self._retry(shard, lambda actor: actor.rank.remote(mode, queries, k, options, vectors)))
            except _unreachable() as again:
                warning(f"{self.describe(shard)} is unreachable ({_first_line(again or reason)}): partial results")
                answers.append(None)
                missing.append(shard)
        return answers, missing

    def _retry(self, shard: int, call, attempts: int = 3):
        """`call` on the shard's actor as Ray restarted it, or on a new one. A dead actor's name is released a moment
        after its death: until then the name still gives the dead actor, so a call that fails at once is tried again."""
        ray = ray_module()
        for attempt in range(attempts):
            self.actors[shard] = self.actor(shard)
            try:
                return self._get(call(self.actors[shard]))
            except ray.exceptions.ActorDiedError:
                if attempt == attempts - 1:
                    raise
                time.sleep(0.5 * (attempt + 1))

    def _get(self, ref):
        ray = ray_module()
        try:
            return ray.get(ref, timeout=settings().shard_timeout)
        except ray.exceptions.RayTaskError as exc:  # the shard raised: a clear error of ours, or a bug
            cause = getattr(exc, "cause", None)
            if isinstance(cause, MathScoutError):
                raise cause from None
            raise

    def ask(self, method: str, *args):
        """One answer of `method` from the first shard that gives one (a question every shard answers alike)."""
        error: BaseException | None = None
        for actor in self.actors:
            try:
                return self._get(getattr(actor, method).remote(*args))
            except _unreachable() as exc:
                error = exc
        raise MathScoutError(f"no shard of {self.index} answered ({_first_line(error)}): is Ray running?")

    def each(self, method: str, *args) -> list:
        """Every shard's answer of `method`, in shard order (a shard that does not answer raises)."""
        return ray_module().get(
            [getattr(actor, method).remote(*args) for actor in self.actors], timeout=settings().shard_timeout
        )

    def ping(self) -> list[int]:
        return self.each("ping")


def _unreachable() -> tuple[type[BaseException], ...]:
    exceptions = ray_module().exceptions
    return tuple(
        getattr(exceptions, name)
        for name in (
            "RayActorError",
            "GetTimeoutError",
            "ActorUnavailableError",
            "ActorDiedError",
            "WorkerCrashedError",
        )
        if hasattr(exceptions, name)
    )


def _first_line(exc: BaseException | None) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


class ShardedRetriever(BaseRetriever):
    """A search mode over a sharded index: fan out, merge with the global k (structure: merge each formula's and the
    text part's list over the shards, then Zhong 2023 thesis Eq. 3.18 as `StructureRetriever.fused` does on one index)."""

    def __init__(self, index: IndexDir, mode: str, **options):
        self.index, self.name, self.options = index, mode, options
        self.store = index.store
        self.pool = ShardPool.of(index)

    def _search(self, query: Query, k: int) -> ShardedHits:
        from mathscout.render import explain_hits

        found, missing = self._rank([query], k)
        hits = found[0][0]
        explain_hits(
            hits[:EXPLAINED_HITS], self.store, query.text
        )  # snippets and matched formulas, from the index's store
        return ShardedHits(hits, missing)

    def rank(self, query: Query, k: int) -> RankResult:
        """The merged top k (`ShardedHits`, flagged when a shard did not answer) and, for structure, each document's
        first formula hit by global ordinal (as `StructureRetriever.rank`)."""
        found, missing = self._rank([prepare_query(query)], k)
        return RankResult(ShardedHits(found[0][0], missing), formulas=found[0][1])

    def batch_search(self, queries: list[Query], k: int = 1000) -> dict[str, list[Hit]]:
        runs: dict[str, list[Hit]] = {}
        queries = [prepare_query(q) for q in queries]
        missing: set[str] = set()
        for start in range(0, len(queries), BATCH):
            chunk = queries[start : start + BATCH]
            found, gone = self._rank(chunk, k, per_query_errors=True)
            missing.update(gone)
            for query, (hits, _) in zip(chunk, found):
                runs[query.id] = ShardedHits(hits, gone)
        if missing:
            warning(f"partial run: {', '.join(sorted(missing))} did not answer some queries")
        return runs

    def _rank(
        self, queries: list[Query], k: int, per_query_errors: bool = False
    ) -> tuple[list[tuple[list[Hit], dict]], list[str]]:
        """Each query's merged hits and formula hits (structure), and the shards that did not answer."""
        answers, missing = self.pool.rank(self.name, queries, k, self.options, self.query_vectors(queries))
        if len(missing) == len(answers):
            raise MathScoutError(
                f"no shard of {self.index.path} answered: is Ray running? ({len(missing)} unreachable)"
            )
        out: list[tuple[list[Hit], dict]] = []
        for q, query in enumerate(queries):
            per_shard = [a[q] for a in answers if a is not None]
            errors = [s.error for s in per_shard if s.error]
            if len(errors) == len(per_shard):  # the query itself is unusable (every shard says so)
                if not per_query_errors:
                    raise QueryError(errors[0])
                warning(f"topic {query.id}: {errors[0]}")
                out.append(([], {}))
                continue
            answered = [s for s in per_shard if not s.error]
            if any(s.lists is not None for s in answered):
                out.append(merge_structure(answered, k))
            elif self.name == "bm25":
                out.append((merge_bm25(answered, k), {}))
            else:
                out.append((merge_hits(answered, k), {}))
        return out, [self.pool.describe(s) for s in missing]

    def query_vectors(self, queries: list[Query]) -> list | None:
        """What the shards search instead of the queries' text (None: the text; ShardedDense: vectors)."""
        return None


class ShardedDense(ShardedRetriever):
    """A dense mode over shards: each query is encoded once, here, with the model the shards' vectors were made with
    (one build: the same component meta in every shard), and every shard searches that vector."""

    def __init__(self, index: IndexDir, mode: str, **options):
        from mathscout.dense.build import read_meta
        from mathscout.retrievers.dense import open_encoder

        super().__init__(index, mode, **options)
        first = IndexDir(self.pool.shards.folder(index.path, 0))
        self.encoder = open_encoder(read_meta(first.component_path(mode)), options.get("model"), mode)

    def query_vectors(self, queries: list[Query]) -> list:
        """Each query's vector, or None when it has nothing to encode (the shards then give its clear error)."""
        from mathscout.retrievers.dense import query_vectors

        vectors = []
        for query in queries:  # one at a time: a bad query leaves the others' vectors
            try:
                vectors.append(query_vectors(self.encoder, [prepare_query(query)])[0])
            except QueryError:
                vectors.append(None)
        return vectors


class ShardedStructure(ShardedRetriever):
    """The structure mode over a sharded index, with what the modes built on it ask of a structure retriever
    (`ranked`'s features: `perfect_score`; `structure-rewrite`: `rank` with formula hits, `setting_for`,
    `doc_ordinals`, `searcher.prepare(latex).width`). The index's Zhong 2023 thesis Eq. 3.18 setting (its structure.json) is read here
    and sent with every call, so each shard scores with it."""

    def __init__(self, index: IndexDir, mode: str = "structure", **options):
        settings = StructureSettings.read(index)  # a clear error when unusable, as on one index
        if settings is not None:
            options = {**options, "settings": asdict(settings)}
        super().__init__(index, mode, **options)
        self._facts: dict | None = None
        self.searcher = _RemoteSearcher(self)
        self._ordinals: dict[str, int] | None = None

    def facts(self, queries: Sequence[Query] = (), formulas: Sequence[str] = ()) -> dict:
        return self.pool.ask("structure_facts", self.options, list(queries), list(formulas))

    @property
    def shard_facts(self) -> dict:
        """What every shard answers alike, asked once: the Zhong 2023 thesis Eq. 3.18 settings and the lexer version."""
        if self._facts is None:
            self._facts = self.facts()
        return self._facts

    @property
    def kind_settings(self) -> dict[str, KindSetting]:
        return {kind: KindSetting(**fields) for kind, fields in self.shard_facts["kinds"].items()}

    def setting_for(self, query: Query) -> KindSetting:
        """The Zhong 2023 thesis Eq. 3.18 setting of the query's kind (`structure.query_kind`), as every shard scores it."""
        return self.kind_settings[query_kind(query)]

    def perfect_score(self, query: Query) -> float | None:
        """As `StructureRetriever.perfect_score` (every shard computes it alike: the widths are collection-wide)."""
        return self.facts([prepare_query(query)])["perfect"][0]

    # global document ordinals (the sharded index's own store holds every document), the keys of `rank`'s formula hits
    doc_ordinals = StructureRetriever.doc_ordinals

    # the document's best formula (global formula ordinal) with its widest common subtree highlighted, found with
    # unweighted paths: the path weights live in the shards
    matched_formula = StructureRetriever.matched_formula
    highlight_idf = None

    @property
    def paths(self):
        raise MathScoutError(
            "per-document length normalisation (normalise=document) needs a single index's structure "
            "lists; use normalise=query on a sharded index"
        )


class _RemoteSearcher:
    """`StructureSearcher.prepare(latex).width`, `.eta` and `.lexer` answered by the shards (structure-rewrite's perfect
    scores)."""

    def __init__(self, retriever: ShardedStructure):
        self.retriever = retriever
        self.eta = float(retriever.options.get("eta", ETA_ARQMATH))

    @property
    def lexer(self) -> int:
        """The lexer version the shards parse formulas with (`mathscout.structure.lexer.recorded_lexer`)."""
        return int(self.retriever.shard_facts.get("lexer", LEGACY_LEXER))

    def prepare(self, latex: str) -> _PreparedFormula:
        width = self.retriever.facts(formulas=[latex])["widths"][0]
        result = parse_latex(latex, self.lexer)
        if width is None or result.tree is None:
            raise QueryError(f"the formula '{latex[:80]}' cannot be searched")
        return _PreparedFormula(latex, result.tree, width)


@dataclass(frozen=True)
class _PreparedFormula:
    latex: str
    tree: object
    width: float


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
    return [
        Hit(doc_id=doc_id, score=score, rank=n, components=components)
        for n, (_, doc_id, score, components) in enumerate(entries, start=1)
    ]


def merge_bm25(answers: list[ShardHits], k: int) -> list[Hit]:
    """The global BM25 top k of the shards' lists (`_bm25_top`)."""
    return [
        Hit(doc_id=doc_id, score=score, rank=n, components={"bm25": score})
        for n, ((_, doc_id, _, _), score) in enumerate(_bm25_top((h for a in answers for h in a.hits), k), start=1)
    ]


def merge_structure(answers: list[ShardHits], k: int) -> tuple[list[Hit], dict[int, FormulaHit]]:
    """The single index's last step over the lists merged across the shards: each query formula's global top `depth`
    documents and BM25's, then the step the shards took (`FormulaLists.plan`): Zhong 2023 thesis Eq. 3.18 (`fuse_formula_lists`, with
    match tiers and "parts" when the query's setting has them), a lone formula by match tier (`rank_by_tier`), or a
    lone formula's top k. Every shard lists the same formulas in the same order (their widths are collection-wide)."""
    lists = [a.lists for a in answers if a.lists is not None]
    first = lists[0]
    latex = [f for f, _ in first["formulas"]]
    if any([f for f, _ in found["formulas"]] != latex or found["plan"] != first["plan"] for found in lists):
        raise MathScoutError("the shards prepared a structure query differently: rebuild the sharded index")
    depth = first["depth"]
    ids: dict[int, str] = {}
    merged: list[list[FormulaHit]] = []
    for n in range(len(latex)):
        entries = _order(e for found in lists for e in found["formulas"][n][1])[:depth]
        merged.append(
            [FormulaHit(formula, score, ordinal, 0, 0, 0.0, tier) for ordinal, _, score, tier, formula in entries]
        )
        ids.update((e[0], e[1]) for e in entries)
    if first["plan"] == "top":
        best = {h.doc: h for h in merged[0][:k]} if merged else {}
        fused = [FusedHit(d, h.score, {"structure": h.score}) for d, h in best.items()]
    elif first["plan"] == "tier":
        best = {h.doc: h for h in merged[0]}
        fused = rank_by_tier(
            {d: h.score for d, h in best.items()}, {d: {"structure": h.score} for d, h in best.items()}, best, k
        )
    else:
        bm25 = {}
        for (ordinal, doc_id, _), score in _bm25_top((e for found in lists for e in found["bm25"]), depth):
            bm25[ordinal] = score
            ids[ordinal] = doc_id
        fused, best = fuse_formula_lists(merged, bm25, k, first["lambda_m"], first["by_tier"], first["parts"])
    return [
        Hit(doc_id=ids[h.doc], score=h.score, rank=n, components=h.components) for n, h in enumerate(fused, start=1)
    ], best


def open_sharded(index: IndexDir, mode: str, **options):
    """The retriever of `mode` over a sharded index: ranking modes fan out to the shards; modes that combine other
    modes (`registry.combining_modes`: hybrid, structure-rewrite, ranked) open as on one index, over the
    sharded modes they combine."""
    shards = ShardSet.read(index.path)
    from mathscout.retrievers.registry import available_modes, combining_modes

    spec = available_modes()[mode]
    missing = [name for name in spec.requires if name not in shards.components]
    if missing:
        raise MathScoutError(
            f"the sharded index {index.path} has no '{missing[0]}' component: rebuild it with "
            f"'mathscout index --input PATH --index {index.path} --shards {len(shards.shards)} "
            f"--components {','.join(shards.components + missing)}'"
        )
    if mode in combining_modes():
        return spec.open(index, **options)
    if mode == "structure":
        return ShardedStructure(index, **options)
    if mode in DENSE_MODES:
        return ShardedDense(index, mode, **options)
    return ShardedRetriever(index, mode, **options)
