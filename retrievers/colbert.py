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
off-the-shelf bi-encoder's, plus the index's trained model when `mathscout train colbert` stored one
(mathscout.evaluation.training.colbert; mathscout.retrievers.colbert_model): residual maps of the query token vectors,
t' = normalise(t + t·A), and of the documents' token vectors, d' = normalise(d + d·B) (applied at scoring time, with
the candidate stage rebuilt over the mapped vectors; an index trained on the query side only has no B), described (how
it was trained, its files' CRC-32) by colbert/trained.json. The search uses it whenever the index has it; the option
`trained=False` (`--set trained=false`) searches with the untrained model.
"""

from __future__ import annotations

import copy
import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from mathscout.dense.build import read_meta
from mathscout.dense.model import model_input_text
from mathscout.errors import DamagedIndexError, IndexMissingError, MathScoutError, QueryError
from mathscout.index.arrays import load_array, load_arrays
from mathscout.index.components import BuildOptions
from mathscout.index.layout import IndexDir
from mathscout.retrievers.base import BaseRetriever, RankResult
from mathscout.retrievers.colbert_model import ColbertTraining, DocumentMap, build_token_ivfpq, trained_model
from mathscout.retrievers.dense import load_faiss, open_encoder
from mathscout.store import DocumentStore
from mathscout.types import Hit, Query

log = logging.getLogger(__name__)

NPROBE, TOKEN_DEPTH, CANDIDATES, MAX_QUERY_TOKENS = 16, 64, 1000, 128
META = "meta.json"


def _tokens_folder(dense: Path) -> Path:
    folder = dense / "tokens"
    if not (folder / "vectors.npy").is_file():
        raise IndexMissingError(
            f"the dense component in {dense.parent} has no token vectors (it was built without "
            "them): rebuild it with the default settings, then add 'colbert'"
        )
    return folder


class ColbertComponent:
    """Trains IVF-PQ on a sample of the dense component's token vectors and indexes all of them."""

    name = "colbert"

    def build(self, store: DocumentStore, target: Path, options: BuildOptions) -> dict[str, Any]:
        import faiss

        started = time.perf_counter()
        dense = store.path.parent / "dense"
        if not (dense / "meta.json").is_file():
            raise IndexMissingError(
                "the 'colbert' component needs the 'dense' component first: build '--components dense,colbert'"
            )
        dense_meta = read_meta(dense)
        folder = _tokens_folder(dense)
        vectors = load_array(folder / "vectors.npy", mmap=True)
        total, width = vectors.shape
        index, built = build_token_ivfpq(vectors)
        faiss.write_index(index, str(target / "ivfpq.faiss"))
        meta = {
            "dense_build_id": dense_meta.get("build_id"),
            "tokens": int(total),
            "dim": int(width),
            "lists": built["lists"],
            "pq_bytes": built["pq_bytes"],
            "nprobe": NPROBE,
            "train_sample": built["train_sample"],
            "train_seconds": built["train_seconds"],
            "seconds": round(time.perf_counter() - started, 1),
        }
        (target / META).write_text(json.dumps(meta, indent=2), encoding="utf-8")
        stored = (folder / "vectors.npy").stat().st_size + (folder / "offsets.npy").stat().st_size
        ivf = (target / "ivfpq.faiss").stat().st_size
        documents = max(store.count(), 1)
        log.info(
            f"colbert: {total:,} token vectors ({total / documents:.0f} per document), IVF{meta['lists']},"
            f"PQ{meta['pq_bytes']} trained on {meta['train_sample']:,} in {meta['train_seconds']:.1f} s; "
            f"{(stored + ivf) / documents / 1024:.1f} KiB per document (float16 vectors "
            f"{stored / documents / 1024:.1f} + codes {ivf / documents / 1024:.1f})"
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
            self.vectors = load_array(tokens / "vectors.npy", mmap=True)
            self.offsets = load_array(tokens / "offsets.npy")
            self.mean, self.matrix = load_arrays(tokens / "projection.npz", "mean", "matrix")
        except (OSError, ValueError, KeyError) as exc:
            raise IndexMissingError(
                f"the token vectors in {tokens} are unreadable ({exc}): rebuild with "
                f"'mathscout index --index {index.path} --components dense,colbert'"
            ) from exc
        # the index's trained model (`mathscout train colbert`), unless trained=False asks for the base model
        model_files = trained_model(index, self.dense_meta.get("build_id"), self.vectors) if trained else None
        self.adapter = model_files.query if model_files is not None else None
        self.documents: DocumentMap | None = model_files.documents if model_files is not None else None
        if model_files is not None and model_files.ivfpq is not None:  # the candidate stage over the mapped vectors
            self.faiss = load_faiss(model_files.ivfpq, index.path, "colbert")
            remedy = ColbertTraining.remedy(folder)
        else:
            self.faiss = load_faiss(folder / "ivfpq.faiss", index.path, "colbert")
            remedy = f"rebuild it with 'mathscout index --index {index.path} --components colbert'"
        if self.faiss.ntotal != len(self.vectors) or self.faiss.d != self.vectors.shape[1]:
            error = IndexMissingError if self.documents is None else DamagedIndexError
            raise error(f"the colbert index of {index.path} does not match its token vectors: {remedy}")
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
        if self.documents is None:
            sims = q @ vectors.T  # (query tokens, candidate tokens)
        else:  # the trained d' = normalise(d + d·B) at scoring time: (q + q·Bᵀ)·d / ‖d + d·B‖
            norms = np.concatenate([self.documents.norms[s:e] for s, e in zip(starts, ends)])
            sims = self.documents.queries(q) @ vectors.T
            sims /= norms
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

    def with_documents(self, documents: DocumentMap | None, candidates: Any = None) -> ColbertRetriever:
        """This search with another document side (None: the untrained documents) and candidate stage (a faiss index
        over the mapped vectors; None: this one's), for the trainer's held-out figures."""
        other = copy.copy(self)
        other.documents, other._lock = documents, threading.Lock()
        if candidates is not None:
            candidates.nprobe = self.faiss.nprobe
            other.faiss = candidates
        return other

    def _search(self, query: Query, k: int) -> list[Hit]:
        return self.rank(query, k).hits


def open_colbert(index: IndexDir, **options) -> ColbertRetriever:
    return ColbertRetriever(index, **options)
