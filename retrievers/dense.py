"""Dense passage retrieval (DPR-style bi-encoder, Zhong et al. 2022 §3.1, Zhong 2023 thesis §5.2.2): the `dense` and
`dense-ft` index components and search modes.

A query is encoded by the model the index was built with (or `model=` / $MATHSCOUT_DENSE_MODEL, which
must have the same dimension), its nearest passages are found by inner product in faiss (exact `flat`
by default, or `hnsw` with efSearch = 64, Zhong 2023 thesis §5.3.2; above ANN_ABOVE passages the component has instead
`ivfpq`, IVF-PQ over the vectors on disk with exact re-scoring: mathscout/dense/ann.py), and each document
scores the max over its passages. `dense-ft` is the same over a second component encoded by a fine-tuned model
(`mathscout train dense`; folder $MATHSCOUT_DENSE_FT_MODEL, default MATHSCOUT_HOME/models/dense-ft).
"""

from __future__ import annotations

import threading
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from mathscout.config import home
from mathscout.dense.ann import REFINE, VECTORS, IvfPqSearch, exact_order, open_vectors
from mathscout.dense.build import DenseSettings, build_dense, model_fingerprint, read_meta, reuse_document_vectors
from mathscout.dense.device import resolve_device
from mathscout.dense.encoder import Encoder
from mathscout.dense.model import model_input_text
from mathscout.errors import IndexMissingError, MathScoutError, QueryError
from mathscout.index.arrays import load_array
from mathscout.index.components import BuildOptions
from mathscout.index.layout import IndexDir
from mathscout.limits import EF_SEARCH, PASSAGES, Limit
from mathscout.notices import warning
from mathscout.retrievers.base import BaseRetriever, RankResult, prepare_query
from mathscout.settings import settings
from mathscout.store import DocumentStore
from mathscout.types import Hit, Query

SEARCH_KINDS = ("flat", "hnsw", "ivfpq")
NPROBE = Limit("nprobe", 1, 65_536, "IVF lists probed per query")


def fine_tuned_model_path() -> Path:
    """Where `mathscout train dense` puts its model by default, or $MATHSCOUT_DENSE_FT_MODEL."""
    return Path(settings().dense_ft.model or home() / "models" / "dense-ft")


class DenseComponent:
    """Encodes every document into passage vectors (faiss Flat + HNSW) and, for `dense`, token vectors."""

    def __init__(self, name: str = "dense"):
        self.name = name

    def build_settings(self) -> DenseSettings:
        if self.name == "dense-ft":
            return DenseSettings.configured(settings().dense_ft, tokens=False, model=str(fine_tuned_model_path()))
        return DenseSettings.configured(settings().dense)

    def build(self, store: DocumentStore, target: Path, options: BuildOptions) -> dict[str, Any]:
        settings = self.build_settings()
        if self.name == "dense-ft":  # a query-side fine-tuned model encodes documents as `dense` did
            reused = reuse_document_vectors(target.parent / "dense", target, settings, self.name)
            if reused is not None:
                return reused
        return build_dense(store, target, settings, label=self.name, device=resolve_device(options.device))


def load_faiss(path: Path, index_path: Path, component: str):
    """A faiss index file; a clear error naming the rebuild command when it is missing or corrupted."""
    import faiss

    try:
        return faiss.read_index(str(path))
    except RuntimeError as exc:
        raise IndexMissingError(
            f"the faiss index {path} is unreadable or corrupted: rebuild it with "
            f"'mathscout index --index {index_path} --components {component}'"
        ) from exc


def open_encoder(meta: dict[str, Any], model: str | Path | None, component: str) -> Encoder:
    """The query encoder: `model`, else $MATHSCOUT_DENSE_MODEL (for `dense`), else the index's model;
    its dimension must be the index's."""
    env = settings().dense.model if component == "dense" else None
    folder = Path(model or env or meta["model"])
    encoder = Encoder(
        folder, meta.get("backend", "onnx-int8"), meta.get("batching", "length")
    )  # as its vectors were made
    if encoder.dimension != int(meta["dimension"]):
        raise MathScoutError(
            f"the dense model {folder} makes {encoder.dimension}-dimensional vectors but the "
            f"'{component}' index holds {meta['dimension']}-dimensional ones: search with the model it "
            f"was built with ({meta['model']}) or rebuild the component"
        )
    if model_fingerprint(folder) != meta.get("model_key", model_fingerprint(folder)):
        warning(
            f"the dense model {folder} is not the one the '{component}' index was built with "
            f"({meta['model']}); scores may be off"
        )
    return encoder


def query_vectors(encoder: Encoder, queries: list[Query]) -> np.ndarray:
    """The queries' pooled vectors (words and formula as the model reads them); a query with nothing to encode is
    one clear error."""
    texts = []
    for query in queries:
        text = model_input_text(" ".join(p for p in (query.text, f"${query.formula}$" if query.formula else "") if p))
        if not text.strip():
            raise QueryError("the query has nothing to encode: type some words and/or a formula like $x^2+1$")
        texts.append(text)
    return encoder.encode_queries(texts).pooled


class DenseRetriever(BaseRetriever):
    """Passage-level dense retrieval, max-pooled to documents."""

    def __init__(
        self,
        index: IndexDir,
        component: str = "dense",
        search: str | None = None,
        model: str | Path | None = None,
        ef_search: int | None = None,
        passages: int | None = None,
        nprobe: int | None = None,
    ):
        folder = index.component_path(component)
        self.meta = read_meta(folder)
        search = search or self.meta.get("default_search", "flat")  # flat, or ivfpq for a large component
        if search not in SEARCH_KINDS:
            raise MathScoutError(f"unknown dense search '{search}' (available: {', '.join(SEARCH_KINDS)})")
        ef_search = None if ef_search is None else EF_SEARCH.check(ef_search)
        passages = None if passages is None else PASSAGES.check(passages)
        nprobe = None if nprobe is None else NPROBE.check(nprobe)
        self.name, self._model = component, model
        if model or (component == "dense" and settings().dense.model):
            self.encoder  # noqa: B018 — another model than the one the vectors were made with: checked now, at open
        kinds = ["ivfpq"] if self.meta.get("default_search") == "ivfpq" else ["flat", "hnsw"]
        if search not in kinds:
            raise MathScoutError(
                f"the '{component}' component of {index.path} has no '{search}' search "
                f"({self.meta.get('passages', 0):,} passages; it has {', '.join(kinds)})"
            )
        self.faiss = load_faiss(folder / f"{search}.faiss", index.path, component)
        if self.faiss.d != int(self.meta["dimension"]):  # the model's dimension is the meta's (open_encoder checks it)
            raise MathScoutError(
                f"the faiss index {folder / (search + '.faiss')} holds {self.faiss.d}-dimensional "
                f"vectors, the model {self.meta['dimension']}: rebuild the '{component}' component"
            )
        if search == "hnsw":
            self.faiss.hnsw.efSearch = int(ef_search or self.meta.get("hnsw_ef_search", 64))
        try:
            self.passage_doc = load_array(folder / "passage_doc.npy")
            vectors = open_vectors(folder / VECTORS, self.faiss.d) if search == "ivfpq" else None
        except (OSError, ValueError) as exc:
            raise IndexMissingError(
                f"the dense index {folder} is incomplete ({exc}): rebuild it with "
                f"'mathscout index --index {index.path} --components {component}'"
            ) from exc
        if vectors is not None:
            self.faiss = IvfPqSearch(
                self.faiss,
                vectors,
                self.passage_doc,
                nprobe or self.meta.get("nprobe", 32),
                self.meta.get("refine", REFINE),
            )
        if len(self.passage_doc) != self.faiss.ntotal:
            raise IndexMissingError(
                f"the dense index {folder} is inconsistent ({self.faiss.ntotal} vectors, "
                f"{len(self.passage_doc)} passages): rebuild the '{component}' component"
            )
        self.doc_ids = index.store.doc_ids()
        self.max_passages = int(self.meta.get("max_passages", 1))
        if passages is not None and int(passages) < self.max_passages:  # search fewer passages per document (flat)
            self._keep_first_passages(int(passages), search)
        self._lock = threading.Lock()

    def passage_vectors(self) -> np.ndarray:
        """Every passage vector (memory-mapped from disk for an IVF-PQ component)."""
        if isinstance(self.faiss, IvfPqSearch):
            return self.faiss.vectors
        return self.faiss.reconstruct_n(0, self.faiss.ntotal)

    def _keep_first_passages(self, passages: int, search: str) -> None:
        import faiss

        if search != "flat" or passages < 1:
            raise MathScoutError("passages=N (fewer passages per document) needs the flat search and N ≥ 1")
        starts = np.concatenate([[True], self.passage_doc[1:] != self.passage_doc[:-1]])
        ordinal = np.arange(len(self.passage_doc)) - np.maximum.accumulate(np.where(starts, np.arange(len(starts)), 0))
        kept = np.flatnonzero(ordinal < passages)
        flat = faiss.IndexFlatIP(self.faiss.d)
        flat.add(self.faiss.reconstruct_n(0, self.faiss.ntotal)[kept])
        self.faiss, self.passage_doc, self.max_passages = flat, self.passage_doc[kept], passages

    @cached_property
    def encoder(self) -> Encoder:
        """The query encoder, loaded on the first query: a process that only searches vectors it is given (a shard
        actor under `ShardedDense`, `vector_equality`) never loads the model."""
        return open_encoder(self.meta, self._model, self.name)

    def encode(self, queries: list[Query]) -> np.ndarray:
        return query_vectors(self.encoder, queries)

    def rank(self, query: Query, k: int) -> RankResult:
        """The top-k documents (each by its best passage)."""
        return RankResult(self.rank_vectors(self.encode([query]), k)[0])

    def rank_vectors(self, vectors: np.ndarray, k: int) -> list[list[Hit]]:
        """The top-k documents for each of a batch of query vectors."""
        depth = min(self.faiss.ntotal, max(k, 1) * self.max_passages + 16)
        with self._lock:  # faiss indexes are not safe for concurrent searches that change efSearch; keep it simple
            scores, positions = self.faiss.search(np.ascontiguousarray(vectors, dtype=np.float32), depth)
        results = []
        rescore = not isinstance(self.faiss, IvfPqSearch)  # (IVF-PQ re-scores its candidates itself)
        for query, row_scores, row_positions in zip(vectors, scores, positions):
            if rescore:
                found = row_positions[row_positions >= 0]
                row_scores, row_positions = exact_order(query, found, self.faiss.reconstruct_batch(found))
            ranked = best_documents(row_scores, row_positions, self.passage_doc, k)
            results.append(
                [
                    Hit(doc_id=self.doc_ids[doc], score=score, rank=n, components={self.name: score})
                    for n, (doc, score) in enumerate(ranked, start=1)
                ]
            )
        return results

    def _search(self, query: Query, k: int) -> list[Hit]:
        return self.rank(query, k).hits

    def batch_search(self, queries: list[Query], k: int = 1000) -> dict[str, list[Hit]]:
        prepared = [prepare_query(q) for q in queries]
        hits: dict[str, list[Hit]] = {}
        for start in range(0, len(prepared), 32):
            chunk = prepared[start : start + 32]
            for query, ranked in zip(chunk, self.rank_vectors(self.encode(chunk), k)):
                hits[query.id] = ranked
        return hits


def best_documents(
    scores: np.ndarray, positions: np.ndarray, passage_doc: np.ndarray, k: int
) -> list[tuple[int, float]]:
    """One query's passage hits (best first) → its k best documents, each scored by its best passage."""
    best: dict[int, float] = {}
    for score, position in zip(scores, positions):
        if position < 0:
            continue
        doc = int(passage_doc[position])
        if doc not in best:  # passages come best first: the first one of a document is its max
            best[doc] = float(score)
    return sorted(best.items(), key=lambda item: (-item[1], item[0]))[:k]


def dense_component() -> DenseComponent:
    return DenseComponent("dense")


def dense_ft_component() -> DenseComponent:
    return DenseComponent("dense-ft")


def open_dense(index: IndexDir, **options) -> DenseRetriever:
    return DenseRetriever(index, "dense", **options)


def open_dense_ft(index: IndexDir, **options) -> DenseRetriever:
    return DenseRetriever(index, "dense-ft", **options)
