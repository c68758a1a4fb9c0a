"""Token-level late interaction (ColBERT-style, Zhong et al. 2022 §3.2): the `colbert` component and search mode.

Score (Zhong et al. 2022 Eq. 3):  S(q, d) = Σ_{i ∈ q} max_{j ∈ d} E_q[i] · E_d[j]

Token vectors are the encoder's last-layer token states of each document's first passage (punctuation
pieces dropped, as ColBERT does for documents), PCA-projected to 128 dimensions and L2-normalised, stored
as float16 by the `dense` component (`dense/tokens/`, written in the same encoding pass as the passage
vectors: no second pass over the collection). This component adds the candidate stage: an IVF-PQ faiss
index over every token vector (Zhong 2023 thesis §5.3.2: "quantized and clustered for efficient ANN search").

Search: each query token retrieves its `token_depth` nearest document tokens (IVF-PQ, `nprobe` lists);
the union of their documents, ordered by an approximate MaxSim from those hits, gives `candidates`
documents, which are re-scored exactly with Zhong et al. 2022 Eq. 3 over their stored float16 vectors. The model is the
off-the-shelf bi-encoder's, plus the index's trained query side when `mathscout train colbert` stored one
(mathscout.evaluation.training.colbert): a residual map of the query token vectors, t' = normalise(t + t·A), in
colbert/query_adapter.npz, described (how it was trained, its files' CRC-32) by colbert/trained.json. The search uses
it whenever the index has it; the option `trained=False` (`--set trained=false`) searches with the untrained model.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mathscout.dense.ann import set_build_threads
from mathscout.dense.build import read_meta
from mathscout.dense.model import model_input_text
from mathscout.dense.query_adapter import ADAPTER_FILE, QueryAdapter
from mathscout.errors import DamagedIndexError, IndexMissingError, MathScoutError, QueryError
from mathscout.index.components import BuildOptions
from mathscout.index.integrity import verify_folder
from mathscout.index.layout import IndexDir
from mathscout.index.stored import StoredFile
from mathscout.index.tuned import TunedFile
from mathscout.retrievers.base import BaseRetriever, RankResult
from mathscout.retrievers.dense import load_faiss, open_encoder
from mathscout.store import DocumentStore
from mathscout.types import Hit, Query

PQ_BYTES = 32  # bytes per token code (PQ32x8 on 128 dimensions)
TRAIN_SAMPLE_PER_LIST = 40
NPROBE, TOKEN_DEPTH, CANDIDATES, MAX_QUERY_TOKENS = 16, 64, 1000, 128
META = "meta.json"
TRAIN_COMMAND = "mathscout train colbert --index {index}"


def _tokens_folder(dense: Path) -> Path:
    folder = dense / "tokens"
    if not (folder / "vectors.npy").is_file():
        raise IndexMissingError(
            f"the dense component in {dense.parent} has no token vectors (it was built without "
            "them): rebuild it with the default settings, then add 'colbert'"
        )
    return folder


def lists_for(tokens: int) -> int:
    """IVF lists: ≈ 1 per 2,000 token vectors, a power of two in [16, 2048]."""
    lists = 16
    while lists < 2048 and lists * 2000 < tokens:
        lists *= 2
    return lists


@dataclass
class ColbertTraining(TunedFile):
    """`colbert/trained.json`: the trained query side stored with the index (`mathscout train colbert`): the dense
    build its token vectors come from, its files' sizes and CRC-32 (query_adapter.npz, loss.png) and how it was
    trained (settings, topics, counts, held-out curve, seconds)."""

    FILE = "colbert/trained.json"
    LABEL = "the trained colbert model's description"

    dense_build_id: str
    dimension: int
    files: dict[str, dict] = field(default_factory=dict)
    training: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def remedy(cls, folder: Path) -> str:
        return "retrain it with '" + TRAIN_COMMAND.format(index=folder.parent) + "'"

    @classmethod
    def parse(cls, file: StoredFile, data: dict[str, Any]) -> ColbertTraining:
        info = cls(
            dense_build_id=file.text(data.get("dense_build_id"), "dense_build_id"),
            dimension=file.whole(data.get("dimension"), "dimension", 1, 4096),
            files=file.mapping(data.get("files"), "files"),
            training=file.mapping(data.get("training", {}), "training"),
        )
        for relative, record in info.files.items():
            file.record(record, relative)
        file.require(ADAPTER_FILE in info.files, f"its file list has no {ADAPTER_FILE}")
        verify_folder(file.path.parent, info.files, file.remedy)
        return info


def trained_adapter(index: IndexDir, dense_build_id: str | None, dimension: int) -> QueryAdapter | None:
    """The query side `mathscout train colbert` stored with the index (None when it has none), checked: its files
    against their CRC-32, its dense build and its dimension against the index's token vectors."""
    info = ColbertTraining.read(index)
    if info is None:
        return None
    remedy = ColbertTraining.remedy(index.path / "colbert")
    if info.dense_build_id != str(dense_build_id):
        raise DamagedIndexError(
            f"the trained colbert model in {index.path / 'colbert'} was trained over another 'dense' build: {remedy}"
        )
    adapter = QueryAdapter.load(index.path / "colbert", retrain=TRAIN_COMMAND.format(index=index.path))
    if adapter is None or adapter.dimension != dimension or info.dimension != dimension:
        raise DamagedIndexError(
            f"the trained colbert model in {index.path / 'colbert'} does not fit the index's "
            f"{dimension}-dimensional token vectors: {remedy}"
        )
    return adapter


class ColbertComponent:
    """Trains IVF-PQ on a sample of the dense component's token vectors and indexes all of them."""

    name = "colbert"

    def build(self, store: DocumentStore, target: Path, options: BuildOptions) -> dict[str, Any]:
        import faiss

        set_build_threads()
        started = time.perf_counter()
        dense = store.path.parent / "dense"
        if not (dense / "meta.json").is_file():
            raise IndexMissingError(
                "the 'colbert' component needs the 'dense' component first: build '--components dense,colbert'"
            )
        dense_meta = read_meta(dense)
        folder = _tokens_folder(dense)
        vectors = np.load(folder / "vectors.npy", mmap_mode="r")
        total, width = vectors.shape
        lists = lists_for(total)
        rng = np.random.default_rng(0)
        sample_size = min(total, lists * TRAIN_SAMPLE_PER_LIST)
        sample = np.asarray(vectors[np.sort(rng.choice(total, sample_size, replace=False))], dtype=np.float32)
        m = PQ_BYTES if width % PQ_BYTES == 0 else next(d for d in (16, 8, 4, 2, 1) if width % d == 0)
        index = faiss.index_factory(width, f"IVF{lists},PQ{m}", faiss.METRIC_INNER_PRODUCT)
        # Hamming-code annealing: a minute of CPU, unused here (faiss's stubs: downcast_index gives an Index, and their
        # IndexIVFPQ lacks the attribute)
        faiss.downcast_index(index).do_polysemous_training = False  # type: ignore[attr-defined]
        index.train(sample)
        trained = time.perf_counter() - started
        for start in range(0, total, 200_000):
            index.add(np.asarray(vectors[start : start + 200_000], dtype=np.float32))
        faiss.write_index(index, str(target / "ivfpq.faiss"))
        meta = {
            "dense_build_id": dense_meta.get("build_id"),
            "tokens": int(total),
            "dim": int(width),
            "lists": lists,
            "pq_bytes": m,
            "nprobe": NPROBE,
            "train_sample": int(sample_size),
            "train_seconds": round(trained, 1),
            "seconds": round(time.perf_counter() - started, 1),
        }
        (target / META).write_text(json.dumps(meta, indent=2), encoding="utf-8")
        stored = (folder / "vectors.npy").stat().st_size + (folder / "offsets.npy").stat().st_size
        ivf = (target / "ivfpq.faiss").stat().st_size
        documents = max(store.count(), 1)
        print(
            f"colbert: {total:,} token vectors ({total / documents:.0f} per document), IVF{lists},PQ{m} trained on "
            f"{sample_size:,} in {trained:.1f} s; {(stored + ivf) / documents / 1024:.1f} KiB per document "
            f"(float16 vectors {stored / documents / 1024:.1f} + codes {ivf / documents / 1024:.1f})",
            file=sys.stderr,
        )
        return meta | {"bytes_per_doc": round((stored + ivf) / documents), "bytes": ivf}


class ColbertRetriever(BaseRetriever):
    """Per-token IVF-PQ candidates, exact MaxSim (Zhong et al. 2022, Eq. 3) re-scoring over float16 token vectors."""

    name = "colbert"

    def __init__(
        self,
        index: IndexDir,
        model: str | Path | None = None,
        nprobe: int | None = None,
        token_depth: int = TOKEN_DEPTH,
        candidates: int = CANDIDATES,
        max_query_tokens: int = MAX_QUERY_TOKENS,
        trained: bool = True,
    ):
        dense = index.component_path("dense")
        folder = index.component_path("colbert")
        self.dense_meta = read_meta(dense)
        meta = read_meta(folder)
        if meta.get("dense_build_id") != self.dense_meta.get("build_id"):
            raise IndexMissingError(
                f"the colbert index of {index.path} was built from an older 'dense' component: "
                f"rebuild it with 'mathscout index --index {index.path} --components colbert'"
            )
        tokens = _tokens_folder(dense)
        try:
            self.vectors = np.load(tokens / "vectors.npy", mmap_mode="r")
            self.offsets = np.load(tokens / "offsets.npy")
            projection = np.load(tokens / "projection.npz")
            self.mean, self.matrix = projection["mean"], projection["matrix"]
        except (OSError, ValueError, KeyError) as exc:
            raise IndexMissingError(
                f"the token vectors in {tokens} are unreadable ({exc}): rebuild with "
                f"'mathscout index --index {index.path} --components dense,colbert'"
            ) from exc
        self.faiss = load_faiss(folder / "ivfpq.faiss", index.path, "colbert")
        if self.faiss.ntotal != len(self.vectors) or self.faiss.d != self.vectors.shape[1]:
            raise IndexMissingError(
                f"the colbert index of {index.path} does not match its token vectors: rebuild "
                f"it with 'mathscout index --index {index.path} --components colbert'"
            )
        self.faiss.nprobe = int(nprobe or meta.get("nprobe", NPROBE))
        self.encoder = open_encoder(self.dense_meta, model, "dense")
        if self.encoder.dimension != self.matrix.shape[0]:
            raise MathScoutError(
                f"the dense model makes {self.encoder.dimension}-dimensional token vectors, the "
                f"colbert projection expects {self.matrix.shape[0]}"
            )
        vocabulary = self.encoder.tokenizer.convert_ids_to_tokens(list(range(len(self.encoder.tokenizer))))
        self.keep = np.array([any(ch.isalnum() for ch in p.removeprefix("##")) for p in vocabulary], dtype=bool)
        self.doc_ids = index.store.doc_ids()
        self.token_depth, self.candidates, self.max_query_tokens = token_depth, candidates, max_query_tokens
        # the index's trained query side (`mathscout train colbert`), unless trained=False asks for the base model
        self.adapter = (
            trained_adapter(index, self.dense_meta.get("build_id"), self.matrix.shape[1]) if trained else None
        )
        self._lock = threading.Lock()

    def query_vectors(self, query: Query) -> np.ndarray:
        text = model_input_text(" ".join(p for p in (query.text, f"${query.formula}$" if query.formula else "") if p))
        if not text.strip():
            raise QueryError("the query has nothing to encode: type some words and/or a formula like $x^2+1$")
        batch = self.encoder.encode_queries([text], with_tokens=True)
        tokens, ids = batch.tokens[0], batch.token_ids[0]
        kept = tokens[self.keep[ids]] if len(ids) else tokens
        if not len(kept):  # only punctuation: use every piece
            kept = tokens
        if not len(kept):
            raise QueryError("the query has no tokens to match")
        projected = (kept[: self.max_query_tokens] - self.mean) @ self.matrix
        vectors = (projected / np.maximum(np.linalg.norm(projected, axis=1, keepdims=True), 1e-12)).astype(np.float32)
        # Lee et al. 2021 §4.3 query-side fine-tuning: t' = normalise(t + t·A) when the index has a trained A
        return vectors if self.adapter is None else self.adapter.apply(vectors)

    def maxsim(self, q: np.ndarray, docs: np.ndarray) -> np.ndarray:
        """Zhong et al. 2022, Eq. 3 for each document: Σ over query tokens of the max over the document's tokens."""
        starts, ends = self.offsets[docs], self.offsets[docs + 1]
        vectors = np.concatenate([self.vectors[s:e] for s, e in zip(starts, ends)]).astype(np.float32)
        sims = q @ vectors.T  # (query tokens, candidate tokens)
        segments = np.concatenate([[0], np.cumsum(ends - starts)[:-1]])
        return np.maximum.reduceat(sims, segments, axis=1).sum(axis=0)

    def rank(self, query: Query, k: int) -> RankResult:
        docs, exact = self.rank_vectors(self.query_vectors(query), k)
        return RankResult(
            [
                Hit(doc_id=self.doc_ids[doc], score=score, rank=n, components={self.name: score})
                for n, (doc, score) in enumerate(zip(docs.tolist(), exact.tolist()), start=1)
            ]
        )

    def rank_vectors(self, q: np.ndarray, k: int, candidates: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The top `k` documents (ordinals, best first) of query token vectors `q` and their exact MaxSim: the ANN
        stage's best `candidates` (default the retriever's) re-scored by Zhong et al. 2022 Eq. 3."""
        with self._lock:
            scores, positions = self.faiss.search(q, self.token_depth)
        valid = positions >= 0
        docs = np.searchsorted(self.offsets, positions[valid], side="right") - 1
        rows = np.nonzero(valid)[0]
        # approximate MaxSim from the hits: per (query token, doc) the best hit, summed over query tokens
        best: dict[tuple[int, int], float] = {}
        for row, doc, score in zip(rows.tolist(), docs.tolist(), scores[valid].tolist()):
            if best.get((row, doc), -np.inf) < score:
                best[(row, doc)] = score
        approximate: dict[int, float] = {}
        for (_, doc), score in best.items():
            approximate[doc] = approximate.get(doc, 0.0) + score
        if not approximate:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        limit = max(candidates or self.candidates, k)
        pool = np.array(sorted(approximate, key=lambda d: -approximate[d])[:limit], dtype=np.int64)
        pool = pool[self.offsets[pool + 1] > self.offsets[pool]]
        if not len(pool):
            return pool, np.zeros(0, dtype=np.float32)
        exact = self.maxsim(q, pool)
        order = np.array(sorted(range(len(pool)), key=lambda i: (-exact[i], pool[i]))[:k], dtype=np.int64)
        return pool[order], exact[order]

    def _search(self, query: Query, k: int) -> list[Hit]:
        return self.rank(query, k).hits


def open_colbert(index: IndexDir, **options) -> ColbertRetriever:
    return ColbertRetriever(index, **options)
