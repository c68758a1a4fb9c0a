"""Learned ranking: the `ranked` mode re-orders the union of the first-stage retrievers' candidates with a
LambdaMART model (LightGBM lambdarank) trained by `mathscout train ranker` and stored with the index.

    <index>/ranker.json      RankerConfig: retrievers, depth, features, vocabularies, how it was trained
    <index>/ranker.lgb.txt   the LightGBM model (its size and CRC-32 are in ranker.json)

A query goes: each retriever of `ranker.json` → its top `depth` hits (`retrievers/candidates.py`) → one
feature row per candidate (`retrievers/features.py`) → model score → the k best. Asked for more hits than
there are candidates (a run of 1,000), the rest of the top k of the best single retriever of the training CV
(`tail_retriever`) follows the re-ordered candidates, in its order. The model folder may also be given explicitly (`--set ranker=DIR`), e.g. a model trained on other topics.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mathscout.dense.cross import has_cross_encoder
from mathscout.errors import DamagedIndexError, IndexMissingError, MathScoutError
from mathscout.index.integrity import FileRecord, record_file, verify_file
from mathscout.index.layout import IndexDir
from mathscout.index.stored import StoredFile
from mathscout.index.tuned import TunedFile
from mathscout.limits import K
from mathscout.retrievers.base import BaseRetriever, prepare_query
from mathscout.retrievers.candidates import RETRIEVERS, CandidateGenerator, Candidates
from mathscout.retrievers.features import Vocabulary, feature_matrix, feature_names
from mathscout.retrievers.registry import servable_modes
from mathscout.types import Hit, Query

CONFIG_FILE = "ranker.json"
MODEL_FILE = "ranker.lgb.txt"
TAIL = "bm25"  # the tail's fallback when the training recorded no score per retriever


def lightgbm_module():
    try:
        import lightgbm
    except ImportError as exc:
        raise MathScoutError("learned ranking needs LightGBM: pip install 'mathscout[ranking]'") from exc
    return lightgbm


@dataclass
class RankerConfig(TunedFile):
    """`ranker.json`: what the model reads and how it was obtained (like `fusion.json`)."""

    FILE = CONFIG_FILE
    LABEL = "the ranker description"

    retrievers: list[str]  # retrievers whose features the model has (absent ones stay NaN)
    used: list[str]  # those the training index could serve: the ranked mode needs exactly these
    depth: int
    features: list[str]
    vocabulary: dict[str, list[str]]  # categorical codes: {"kinds": …, "sources": …}
    model: dict[str, Any] = field(default_factory=dict)  # file, bytes, crc32
    training: dict[str, Any] = field(default_factory=dict)  # topics, qrels, folds, params, scores, importances
    cross_depth: int = 0  # candidates the index's cross-encoder reads for the `cross.*` features (0: none)

    @staticmethod
    def folder(index: IndexDir, ranker: Path | str | None = None) -> Path:
        return Path(ranker) if ranker else index.path

    @classmethod
    def remedy(cls, folder: Path) -> str:
        return f"retrain with 'mathscout train ranker --index {folder}' or delete it"

    @classmethod
    def parse(cls, file: StoredFile, data: dict[str, Any]) -> RankerConfig:
        """Known retrievers, the feature list this version computes, the model's size and checksum."""
        retrievers = [file.name(r, "a retriever", RETRIEVERS) for r in file.items(data.get("retrievers"), "retrievers")]
        vocabulary = file.mapping(data.get("vocabulary"), "vocabulary")
        model = file.mapping(data.get("model", {}), "model")
        config = cls(
            retrievers=retrievers,
            used=[file.name(r, "a used retriever", retrievers) for r in file.items(data.get("used"), "used")],
            depth=file.whole(data.get("depth"), "depth", 1, K.high),
            features=[file.text(f, "a feature") for f in file.items(data.get("features"), "features")],
            vocabulary={
                name: [file.text(v, f"a {name} code") for v in file.items(codes, name)]
                for name, codes in vocabulary.items()
            },
            model=model,
            training=file.mapping(data.get("training", {}), "training"),
            cross_depth=file.whole(data.get("cross_depth", 0), "cross_depth", 0, K.high),
        )
        file.require(
            config.features == feature_names(retrievers, config.cross_depth > 0),
            "its feature list is not the one this version computes",
        )
        if model:
            file.name(model.get("file"), "the model file", (MODEL_FILE,))
            file.record(model, "the model")
        return config

    @property
    def vocab(self) -> Vocabulary:
        return Vocabulary(list(self.vocabulary.get("kinds", [])), list(self.vocabulary.get("sources", [])))


def tail_retriever(config: RankerConfig) -> str:
    """When k exceeds the candidates, the rest of this retriever's top k follows them, in its order: the best
    single retriever of the training cross-validation (`ranker.json`), so that a run of 1,000 is never shallower
    than that retriever's own."""
    cv = config.training.get("cv", {})
    scored = [(float(cv[name]), name) for name in config.used if isinstance(cv.get(name), (int, float))]
    if scored:
        return max(scored)[1]
    return TAIL if TAIL in config.used or not config.used else config.used[0]


def save_model(booster, config: RankerConfig, folder: Path) -> Path:
    """Write the model, then ranker.json with its size and checksum (readers check both)."""
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{MODEL_FILE}.tmp"
    booster.save_model(str(tmp))
    tmp.replace(folder / MODEL_FILE)
    record = record_file(folder / MODEL_FILE)
    config.model = {"file": MODEL_FILE, "bytes": record.bytes, "crc32": record.crc32}
    return config.write(folder)


def no_ranker_message(folder: Path) -> str:
    """What to say when `folder` has no learned ranker: the file that is missing and the command that trains one."""
    return f"{folder} has no learned ranker ({CONFIG_FILE}): train one with 'mathscout train ranker --index {folder}'"


class Ranker:
    """A trained model with its configuration: candidates → scores."""

    def __init__(self, config: RankerConfig, booster):
        self.config = config
        self.booster = booster
        self.vocabulary = config.vocab

    @classmethod
    def load(cls, folder: Path) -> Ranker:
        config = RankerConfig.read(folder)
        if config is None:
            raise IndexMissingError(no_ranker_message(folder))
        path = folder / config.model.get("file", MODEL_FILE)
        rebuild = f"retrain with 'mathscout train ranker --index {folder}'"
        try:
            record = FileRecord.from_json(config.model)
        except (KeyError, TypeError, ValueError) as exc:
            raise DamagedIndexError(
                f"{CONFIG_FILE} in {folder} has no usable size and checksum of the ranker model ({exc}): {rebuild}"
            ) from exc
        verify_file(path, record, rebuild)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise DamagedIndexError(f"the ranker model {path} is unreadable ({exc}): {rebuild}") from exc
        lightgbm = lightgbm_module()
        try:
            booster = lightgbm.Booster(model_str=data.decode("utf-8"))
        except (lightgbm.basic.LightGBMError, UnicodeDecodeError) as exc:
            raise DamagedIndexError(f"the ranker model {path} is unreadable ({exc}): {rebuild}") from exc
        if booster.num_feature() != len(config.features):
            raise DamagedIndexError(
                f"the ranker model {path} has {booster.num_feature()} features, "
                f"{CONFIG_FILE} lists {len(config.features)}: {rebuild}"
            )
        return cls(config, booster)

    def features(self, candidates: Candidates, store) -> tuple[list[str], np.ndarray]:
        summaries = store.summaries(candidates.docs)
        return feature_matrix(
            candidates, summaries, self.vocabulary, self.config.retrievers, self.config.cross_depth > 0
        )

    def score(self, matrix: np.ndarray) -> np.ndarray:
        if not len(matrix):
            return np.zeros(0)
        return self.booster.predict(matrix, num_threads=1)

    def rank_candidates(self, candidates: Candidates, store, k: int) -> list[Hit]:
        """The k best candidates by model score (ties by document id), with each retriever's score."""
        docs, matrix = self.features(candidates, store)
        return ranked_hits(candidates, docs, self.score(matrix), k)


def ranked_hits(candidates: Candidates, docs: list[str], scores: np.ndarray, k: int) -> list[Hit]:
    order = sorted(range(len(docs)), key=lambda i: (-scores[i], docs[i]))[:k]
    by_run = {name: {h.doc_id: h for h in hits} for name, hits in candidates.runs.items()}
    hits = []
    for rank, i in enumerate(order, start=1):
        found = [(name, run[docs[i]]) for name, run in by_run.items() if docs[i] in run]
        hit = Hit(doc_id=docs[i], score=float(scores[i]), rank=rank, components={n: h.score for n, h in found})
        explained = max((h for _, h in found if h.snippet), key=lambda h: bool(h.formulas), default=None)
        if explained is not None:  # a retriever's explanation, matched formulas preferred (as hybrid does)
            hit.snippet, hit.formulas = explained.snippet, explained.formulas
        hits.append(hit)
    return hits


def with_tail(hits: list[Hit], tail: list[Hit], k: int, name: str = TAIL) -> list[Hit]:
    """`hits`, then the documents of `tail` (retriever `name`'s hits) they lack, in `tail`'s order and scored below
    them, up to k in all."""
    seen = {h.doc_id for h in hits}
    low = min((h.score for h in hits), default=0.0)
    extra = [h for h in tail if h.doc_id not in seen][: max(k - len(hits), 0)]
    return hits + [
        Hit(doc_id=h.doc_id, score=low - n, rank=len(hits) + n, components={name: h.score})
        for n, h in enumerate(extra, start=1)
    ]


class RankedRetriever(BaseRetriever):
    """The `ranked` mode: first-stage candidates re-ordered by the learned ranker."""

    name = "ranked"

    def __init__(self, index: IndexDir, ranker: Path | str | None = None):
        self.index = index
        self.ranker = Ranker.load(RankerConfig.folder(index, ranker))
        config = self.ranker.config
        usable = servable_modes(index, config.retrievers)
        if usable != config.used:
            raise MathScoutError(
                f"the ranker was trained with the retrievers {', '.join(config.used)} but the index "
                f"{index.path} serves {', '.join(usable) or 'none'}: retrain it with "
                f"'mathscout train ranker --index {index.path}'"
            )
        if config.cross_depth and not has_cross_encoder(index.path):
            raise IndexMissingError(
                f"the ranker reads the index's cross-encoder, which {index.path} does not have: run "
                f"'mathscout train cross-encoder --index {index.path}', or retrain the ranker with --cross-depth 0"
            )
        self.generator = CandidateGenerator(index, tuple(config.retrievers), config.depth, config.cross_depth)
        self.tail = tail_retriever(config)  # fixed by ranker.json: the retriever whose top k follows the candidates
        self.timings: dict[str, float] = {}  # seconds of the last query: each retriever, "features", "model"

    def _ranked(self, query: Query, k: int, explain: bool) -> list[Hit]:
        candidates = self.generator.generate(query, explain=explain)
        started = time.perf_counter()
        docs, matrix = self.ranker.features(candidates, self.index.store)
        scored = time.perf_counter()
        scores = self.ranker.score(matrix)
        self.timings = {
            **candidates.seconds,
            "features": scored - started,
            "model": time.perf_counter() - scored,
            "candidates": float(len(docs)),
        }
        hits = ranked_hits(candidates, docs, scores, k)
        tail = self.generator.retrievers.get(self.tail)
        if k > len(hits) and tail is not None and len(candidates.runs.get(self.tail, [])) >= self.generator.depth:
            hits = with_tail(hits, tail.batch_search([candidates.query], k)[candidates.query.id], k, self.tail)
        return hits

    def _search(self, query: Query, k: int) -> list[Hit]:
        return self._ranked(query, k, explain=True)

    def batch_search(self, queries: list[Query], k: int = 1000) -> dict[str, list[Hit]]:
        return {q.id: self._ranked(prepare_query(q), k, explain=False) for q in queries}


def has_ranker(index: IndexDir) -> bool:
    return (index.path / CONFIG_FILE).is_file()


def open_ranked(index: IndexDir, **options) -> RankedRetriever:
    return RankedRetriever(index, options.get("ranker"))
