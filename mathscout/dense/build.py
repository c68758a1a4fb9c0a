"""Building the `dense` index component: passages → faiss Flat + HNSW, plus token vectors for `colbert`.

    <index>/dense/
      meta.json        model folder and key, backend, dimension, passages per document, counts, HNSW settings
      flat.faiss       IndexFlatIP over the passage vectors (exact search)
      hnsw.faiss       IndexHNSWFlat, inner product; thesis §5.3.2: M = 256, efConstruction = 16 (efSearch = 64 at search)
      passage_doc.npy  document ordinal of each passage (int32)
      tokens/          (when built with tokens) first-passage token vectors for late interaction:
        projection.npz PCA mean and matrix (model dim → 128), fitted on the first 50,000 token vectors
        vectors.npy    float16 (tokens, 128), L2-normalised, in document order (punctuation pieces dropped)
        offsets.npy    int64 (documents + 1): document d's tokens are vectors[offsets[d]:offsets[d + 1]]

Token vectors come from the same forward pass as the passage vectors, so `colbert` costs no second
encoding: it only trains its product quantiser and indexes them (retrievers/colbert.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from mathscout.dense.encoder import DEFAULT_BACKEND, DEFAULT_MAX_PASSAGES, EncodedBatch, Encoder, log, rate
from mathscout.dense.model import render_text
from mathscout.errors import MathScoutError
from mathscout.store import DocumentStore
from mathscout.types import Document

HNSW_M, HNSW_EF_CONSTRUCTION, HNSW_EF_SEARCH = 256, 16, 64  # thesis §5.3.2
TOKEN_DIM = 128  # ColBERT's token dimension (dense paper §3.2)
PCA_SAMPLE = 50_000
META = "meta.json"


@dataclass
class DenseSettings:
    """How a dense component is built (component options; environment variables give the defaults)."""

    model: str | None = None  # a local sentence-transformers/HF folder; None = default_model_path()
    backend: str = DEFAULT_BACKEND
    max_passages: int = DEFAULT_MAX_PASSAGES
    hnsw_m: int = HNSW_M
    hnsw_ef_construction: int = HNSW_EF_CONSTRUCTION
    hnsw_ef_search: int = HNSW_EF_SEARCH
    tokens: bool = True  # keep first-passage token vectors for the colbert component

    @classmethod
    def from_env(cls, prefix: str = "MATHSCOUT_DENSE", **overrides: Any) -> DenseSettings:
        settings = cls(**overrides)
        env = os.environ
        if (v := env.get(f"{prefix}_MODEL")) and "model" not in overrides:
            settings.model = v
        for name, kind in (("backend", str), ("max_passages", int), ("hnsw_m", int), ("hnsw_ef_construction", int),
                           ("hnsw_ef_search", int)):
            if (v := env.get(f"{prefix}_{name.upper()}")) is not None:
                try:
                    setattr(settings, name, kind(v))
                except ValueError as exc:
                    raise MathScoutError(f"{prefix}_{name.upper()}={v!r} is not a valid {kind.__name__}") from exc
        if settings.max_passages < 1:
            raise MathScoutError("the number of passages per document must be at least 1")
        return settings


def document_text(document: Document) -> str:
    """What the encoder reads for a document: its title (unless the text starts with it) and its text,
    LaTeX unified (mathscout.dense.model). A document without words still has its formulas; an empty one
    encodes as the empty text (it then scores low for every query)."""
    return document.titled(render_text(document.text, document.formulas))


def _is_punctuation(piece: str) -> bool:
    return all(not ch.isalnum() for ch in piece)


class TokenSink:
    """Collects first-passage token vectors, projected to TOKEN_DIM by a PCA fitted on the first ones seen."""

    def __init__(self, documents: int, keep: np.ndarray):
        self.per_doc: list[np.ndarray | None] = [None] * documents
        self.keep = keep  # word-piece id → keep (False for punctuation pieces, ColBERT's document filter)
        self.pending: list[tuple[int, np.ndarray]] = []
        self.pending_rows = 0
        self.mean: np.ndarray | None = None
        self.matrix: np.ndarray | None = None

    def add(self, doc: int, vectors: np.ndarray, ids: np.ndarray) -> None:
        vectors = vectors[self.keep[ids]] if len(ids) else vectors
        if self.matrix is None:
            self.pending.append((doc, vectors.astype(np.float32)))
            self.pending_rows += len(vectors)
            if self.pending_rows >= PCA_SAMPLE:
                self.fit()
            return
        self.per_doc[doc] = self.project(vectors)

    def fit(self) -> None:
        sample = np.concatenate([v for _, v in self.pending]) if self.pending else np.zeros((1, TOKEN_DIM * 3))
        self.mean = sample.mean(axis=0)
        _, _, vt = np.linalg.svd(sample - self.mean, full_matrices=False)
        self.matrix = vt[: min(TOKEN_DIM, vt.shape[0])].T.astype(np.float32)  # (dim, TOKEN_DIM)
        for doc, vectors in self.pending:
            self.per_doc[doc] = self.project(vectors)
        self.pending = []

    def project(self, vectors: np.ndarray) -> np.ndarray:
        projected = (vectors - self.mean) @ self.matrix
        projected /= np.maximum(np.linalg.norm(projected, axis=1, keepdims=True), 1e-12)
        return projected.astype(np.float16)

    def save(self, folder: Path) -> dict[str, Any]:
        if self.matrix is None:
            self.fit()
        folder.mkdir(parents=True, exist_ok=True)
        width = self.matrix.shape[1]
        counts = np.array([0 if v is None else len(v) for v in self.per_doc], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(counts)])
        vectors = np.lib.format.open_memmap(folder / "vectors.npy", mode="w+", dtype=np.float16,
                                            shape=(int(offsets[-1]), width))
        for doc, v in enumerate(self.per_doc):
            if v is not None and len(v):
                vectors[offsets[doc] : offsets[doc + 1]] = v
        vectors.flush()
        del vectors
        np.save(folder / "offsets.npy", offsets)
        np.savez(folder / "projection.npz", mean=self.mean, matrix=self.matrix)
        return {"token_vectors": int(offsets[-1]), "token_dim": width,
                "tokens_per_doc": round(float(offsets[-1]) / max(len(self.per_doc), 1), 1)}


def build_dense(store: DocumentStore, target: Path, settings: DenseSettings, label: str = "dense") -> dict[str, Any]:
    """Encode every document of `store` into `target` (see the module docstring for the files)."""
    import faiss

    started = time.perf_counter()
    encoder = Encoder(settings.model, settings.backend)
    documents = list(store.iter_documents())
    texts = [document_text(d) for d in documents]
    del documents
    pieces = encoder.pieces(texts)
    del texts
    sequences: list[list[int]] = []
    passage_doc: list[int] = []
    first_passage: list[bool] = []
    for doc, doc_pieces in enumerate(pieces):
        for n, passage in enumerate(encoder.passages(doc_pieces, settings.max_passages)):
            sequences.append(passage)
            passage_doc.append(doc)
            first_passage.append(n == 0)
    truncated = sum(1 for p in pieces if len(p) > (encoder.window - 2) * settings.max_passages)
    del pieces
    log(f"{label}: {len(passage_doc):,} passages of ≤ {encoder.window} word pieces from {store.count():,} documents "
        f"(≤ {settings.max_passages} per document; {truncated:,} documents longer than that), model {encoder.folder}, "
        f"backend {settings.backend}; prepared in {time.perf_counter() - started:.1f} s")

    sink: TokenSink | None = None
    if settings.tokens:
        vocabulary = encoder.tokenizer.convert_ids_to_tokens(list(range(len(encoder.tokenizer))))
        keep = np.array([not _is_punctuation(p.removeprefix("##")) for p in vocabulary], dtype=bool)
        sink = TokenSink(store.count(), keep)

    def on_batch(positions: np.ndarray, batch: EncodedBatch) -> None:
        if sink is None or not batch.tokens:
            return
        for p, vectors, ids in zip(positions, batch.tokens, batch.token_ids):
            if first_passage[p]:
                sink.add(passage_doc[p], vectors, ids)

    documents_total = store.count()
    encoding_started = time.perf_counter()
    bar = tqdm(total=len(sequences), desc=f"{label} encode", unit=" passages", mininterval=2.0, smoothing=0.05)

    def progress(n: int) -> None:
        bar.update(n)
        bar.set_postfix_str(f"{rate(bar.n, encoding_started) * documents_total / len(sequences):.1f} docs/s", refresh=False)

    vectors = encoder.encode_passages(sequences, (lambda p: first_passage[p]) if sink else None, progress, on_batch)
    bar.close()
    encode_seconds = time.perf_counter() - encoding_started
    docs_per_second = documents_total / max(encode_seconds, 1e-9)
    log(f"{label}: encoded {documents_total:,} documents ({len(sequences):,} passages) in {encode_seconds:.1f} s "
        f"= {docs_per_second:.1f} docs/s")

    stats: dict[str, Any] = {}
    if sink is not None:
        stats.update(sink.save(target / "tokens"))
    faiss.omp_set_num_threads(int(os.environ.get("MATHSCOUT_FAISS_THREADS", "1")))  # OpenMP barriers crawl on shared CPUs
    flat = faiss.IndexFlatIP(encoder.dimension)
    flat.add(vectors)
    faiss.write_index(flat, str(target / "flat.faiss"))
    hnsw_started = time.perf_counter()
    hnsw = faiss.IndexHNSWFlat(encoder.dimension, settings.hnsw_m, faiss.METRIC_INNER_PRODUCT)
    hnsw.hnsw.efConstruction = settings.hnsw_ef_construction
    hnsw.add(vectors)
    faiss.write_index(hnsw, str(target / "hnsw.faiss"))
    hnsw_seconds = time.perf_counter() - hnsw_started
    np.save(target / "passage_doc.npy", np.asarray(passage_doc, dtype=np.int32))
    meta = {
        **asdict(settings), "model": str(encoder.folder.resolve()), "model_key": model_fingerprint(encoder.folder),
        "dimension": encoder.dimension, "window": encoder.window, "documents": documents_total,
        "passages": len(sequences), "documents_truncated": truncated, "encode_seconds": round(encode_seconds, 1),
        "docs_per_second": round(docs_per_second, 2), "hnsw_seconds": round(hnsw_seconds, 1),
        "build_id": _new_build_id(), **stats,
    }
    (target / META).write_text(json.dumps(meta, indent=2), encoding="utf-8")
    log(f"{label}: HNSW (M = {settings.hnsw_m}, efConstruction = {settings.hnsw_ef_construction}) in {hnsw_seconds:.1f} s")
    return _manifest_entry(meta, started) | stats


def _new_build_id() -> str:
    return hashlib.sha1(f"{time.time()}|{os.getpid()}".encode()).hexdigest()[:12]


def _manifest_entry(meta: dict[str, Any], started: float) -> dict[str, Any]:
    """What the index manifest records of a dense component's build."""
    keys = ("model", "backend", "dimension", "documents", "passages", "max_passages", "docs_per_second",
            "encode_seconds", "build_id", "document_vectors_from")
    return {k: meta[k] for k in keys if k in meta} | {"seconds": round(time.perf_counter() - started, 2)}


def model_fingerprint(folder: str | Path) -> str:
    """Identifies a model folder's weights (size and mtime of its weight files, and its config)."""
    folder = Path(folder)
    files = [folder / "config.json", *sorted(folder.glob("*.safetensors")), *sorted(folder.glob("*.bin"))]
    stamp = "|".join(f"{p.name}:{p.stat().st_size}" for p in files if p.exists())
    return hashlib.sha1(stamp.encode()).hexdigest()[:12]


def read_meta(folder: Path) -> dict[str, Any]:
    try:
        return json.loads((folder / META).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise MathScoutError(f"the dense index {folder} is unreadable ({exc}): rebuild it with "
                             f"'mathscout index --index {folder.parent} --components {folder.name}'") from exc


def weights_digest(folder: str | Path) -> str:
    """A content hash of a model folder's config and weights (exact, unlike model_fingerprint)."""
    folder = Path(folder)
    digest = hashlib.sha1()
    for path in [folder / "config.json", *sorted(folder.glob("*.safetensors")), *sorted(folder.glob("*.bin"))]:
        if path.is_file():
            digest.update(path.name.encode())
            with open(path, "rb") as f:
                while chunk := f.read(1 << 22):
                    digest.update(chunk)
    return digest.hexdigest()[:16]


def reuse_document_vectors(source: Path, target: Path, settings: DenseSettings, label: str) -> dict[str, Any] | None:
    """When `settings.model` encodes documents exactly as the component in `source` did (same weights, backend,
    passages, HNSW settings: e.g. a query-side fine-tuned model, whose adapter only changes queries), link that
    component's vectors into `target` instead of encoding the collection again; None when they cannot be reused."""
    if not (source / META).is_file():
        return None
    meta = read_meta(source)
    same_settings = all(meta.get(key) == getattr(settings, key) for key in
                        ("backend", "max_passages", "hnsw_m", "hnsw_ef_construction"))
    model = Path(settings.model) if settings.model else None
    if not same_settings or model is None or not Path(meta.get("model", "")).is_dir() or not model.is_dir():
        return None
    if weights_digest(meta["model"]) != weights_digest(model):
        return None
    started = time.perf_counter()
    for name in ("flat.faiss", "hnsw.faiss", "passage_doc.npy"):
        try:
            os.link(source / name, target / name)
        except OSError:
            shutil.copyfile(source / name, target / name)
    encoding = ("docs_per_second", "encode_seconds", "hnsw_seconds")  # not this component's: nothing was encoded
    reused = {k: v for k, v in meta.items() if not k.startswith("token") and k not in encoding} | {
        "model": str(model.resolve()), "model_key": model_fingerprint(model), "tokens": False,
        "hnsw_ef_search": settings.hnsw_ef_search, "document_vectors_from": source.name, "build_id": _new_build_id()}
    (target / META).write_text(json.dumps(reused, indent=2), encoding="utf-8")
    log(f"{label}: {model} encodes documents with the same weights as the '{source.name}' component: its "
        f"{meta.get('passages', 0):,} passage vectors are reused (no re-encoding)")
    return _manifest_entry(reused, started)
