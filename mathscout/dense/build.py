"""Building the `dense` index component: passages → faiss Flat + HNSW (IVF-PQ when large), plus token vectors
for `colbert`.

    <index>/dense/
      meta.json        model folder and key, backend, dimension, passages per document, counts, HNSW settings,
                       default_search (flat, or ivfpq above ANN_ABOVE passages)
      flat.faiss       IndexFlatIP over the passage vectors (exact search)         } up to ANN_ABOVE passages
      hnsw.faiss       IndexHNSWFlat, inner product; Zhong 2023 thesis §5.3.2: M = 256, efConstruction = 16 (efSearch = 64 at search)
      passage_vectors.f32, ivfpq.faiss   above ANN_ABOVE passages (mathscout/dense/ann.py)
      passage_doc.npy  document ordinal of each passage (int32)
      tokens/          (when built with tokens) first-passage token vectors for late interaction:
        projection.npz PCA mean and matrix (model dim → 128), fitted on the first 50,000 token vectors
        vectors.npy    float16 (tokens, 128), L2-normalised, in document order (punctuation pieces dropped)
        offsets.npy    int64 (documents + 1): document d's tokens are vectors[offsets[d]:offsets[d + 1]]

Token vectors come from the same forward pass as the passage vectors, so `colbert` costs no second
encoding: it only trains its product quantiser and indexes them (retrievers/colbert.py).

Bounded memory: documents are read from the store, tokenised TOKENIZE_BATCH at a time and encoded in chunks of
`chunk_documents` (default 50,000 ≥ the shared collection, so there it is one chunk and the batches, hence the
vectors, are exactly those of a whole-collection pass; int8 dynamic quantisation scales activations per batch, so
another chunking changes vectors slightly: mean cosine > 0.99, min 0.956 in tests/mathscout/dense/test_dense.py). Each chunk's passage vectors are appended to a file and its
token vectors to a spill file as soon as they are encoded; the token spill is rewritten in document order at the
end, and the ANN index is built from the vector file. Memory grows with one chunk, not with the collection
(except 5 bytes of bookkeeping per passage and 16 per document).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, field, replace
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from mathscout.dense.ann import (
    ANN_ABOVE,
    IVFPQ,
    NPROBE,
    VECTORS,
    IvfPqSettings,
    build_hnsw,
    build_ivfpq,
    read_rows,
    set_build_threads,
)
from mathscout.dense.encoder import (
    BATCHINGS,
    DEFAULT_BATCHING,
    DEFAULT_MAX_PASSAGES,
    EncodedBatch,
    Encoder,
    default_backend,
    log,
)
from mathscout.dense.model import render_text
from mathscout.errors import MathScoutError
from mathscout.index.stored import StoredFile
from mathscout.progress import bar as progress_bar
from mathscout.settings import DenseOptions
from mathscout.store import DocumentStore
from mathscout.types import Document

HNSW_M, HNSW_EF_CONSTRUCTION, HNSW_EF_SEARCH = 256, 16, 64  # Zhong 2023 thesis §5.3.2
TOKEN_DIM = 128  # ColBERT's token dimension (Zhong et al. 2022 §3.2)
PCA_SAMPLE = 50_000
META = "meta.json"
CHUNK_DOCUMENTS = 50_000  # documents encoded per chunk (≥ the shared collection's 37,651: one chunk there)
TOKENIZE_BATCH = 1_000


@dataclass
class DenseSettings:
    """How a dense component is built (component options; the settings give the defaults)."""

    model: str | None = None  # a local sentence-transformers/HF folder; None = default_model_path()
    backend: str = field(default_factory=default_backend)
    batching: str = DEFAULT_BATCHING  # "passage": each passage encoded alone (Encoder; recorded in meta.json)
    max_passages: int = DEFAULT_MAX_PASSAGES
    hnsw_m: int = HNSW_M
    hnsw_ef_construction: int = HNSW_EF_CONSTRUCTION
    hnsw_ef_search: int = HNSW_EF_SEARCH
    tokens: bool = True  # keep first-passage token vectors for the colbert component
    chunk_documents: int = CHUNK_DOCUMENTS
    ann_above: int = ANN_ABOVE  # passages; above: IVF-PQ from disk instead of Flat + HNSW in memory
    nprobe: int = NPROBE

    @classmethod
    def configured(cls, options: DenseOptions, **overrides: Any) -> DenseSettings:
        """`options` (the settings of the component: `settings().dense` or `.dense_ft`) over the defaults;
        `overrides` win."""
        given = {name: value for name, value in asdict(options).items() if value is not None}
        settings = cls(**{**given, **overrides})
        if settings.batching not in BATCHINGS:
            raise MathScoutError(
                f"the dense batching {settings.batching!r} is unknown: choose {' or '.join(BATCHINGS)}"
            )
        return settings


def document_text(document: Document) -> str:
    """What the encoder reads for a document: its title (unless the text starts with it) and its text,
    LaTeX unified (mathscout.dense.model). A document without words still has its formulas; an empty one
    encodes as the empty text (it then scores low for every query)."""
    return document.titled(render_text(document.text, document.formulas))


def _is_punctuation(piece: str) -> bool:
    return all(not ch.isalnum() for ch in piece)


class TokenSink:
    """First-passage token vectors, projected to TOKEN_DIM by a PCA fitted on the first ones seen, appended to a
    spill file as they come (encoding order) and rewritten in document order by `save`."""

    def __init__(self, documents: int, keep: np.ndarray, folder: Path):
        self.keep = keep  # word-piece id → keep (False for punctuation pieces, ColBERT's document filter)
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.spill_path = folder / "spill.f16"
        self.spill = open(self.spill_path, "wb")  # noqa: SIM115 — written by each add(), closed by save()
        self.spilled = 0  # rows written to the spill file
        self.start = np.full(documents, -1, dtype=np.int64)  # each document's first row in the spill file
        self.count = np.zeros(documents, dtype=np.int64)
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
        self._write(doc, self.project(vectors))

    def _write(self, doc: int, projected: np.ndarray) -> None:
        self.start[doc], self.count[doc] = self.spilled, len(projected)
        projected.tofile(self.spill)
        self.spilled += len(projected)

    def fit(self) -> None:
        sample = np.concatenate([v for _, v in self.pending]) if self.pending else np.zeros((1, TOKEN_DIM * 3))
        self.mean = sample.mean(axis=0)
        _, _, vt = np.linalg.svd(sample - self.mean, full_matrices=False)
        self.matrix = vt[: min(TOKEN_DIM, vt.shape[0])].T.astype(np.float32)  # (dim, TOKEN_DIM)
        for doc, vectors in self.pending:
            self._write(doc, self.project(vectors))
        self.pending = []

    def project(self, vectors: np.ndarray) -> np.ndarray:
        projected = (vectors - self.mean) @ self.matrix
        projected /= np.maximum(np.linalg.norm(projected, axis=1, keepdims=True), 1e-12)
        return projected.astype(np.float16)

    def save(self) -> dict[str, Any]:
        """vectors.npy in document order (read back from the spill file one document at a time), offsets, projection."""
        if self.matrix is None:
            self.fit()
        assert self.mean is not None and self.matrix is not None  # fit() sets them
        self.spill.close()
        width = self.matrix.shape[1]
        offsets = np.concatenate([[0], np.cumsum(self.count)])
        row_bytes = width * 2
        with open(self.spill_path, "rb") as spill, open(self.folder / "vectors.npy", "wb") as out:
            np.lib.format.write_array_header_1_0(
                out,
                {
                    "descr": np.lib.format.dtype_to_descr(np.dtype(np.float16)),
                    "fortran_order": False,
                    "shape": (int(offsets[-1]), width),
                },
            )
            for doc in np.flatnonzero(self.count):
                spill.seek(int(self.start[doc]) * row_bytes)
                out.write(spill.read(int(self.count[doc]) * row_bytes))
        self.spill_path.unlink()
        np.save(self.folder / "offsets.npy", offsets)
        np.savez(self.folder / "projection.npz", mean=self.mean, matrix=self.matrix)
        return {
            "token_vectors": int(offsets[-1]),
            "token_dim": width,
            "tokens_per_doc": round(float(offsets[-1]) / max(len(self.count), 1), 1),
        }


@dataclass
class PassageChunk:
    """The passages of up to `chunk_documents` consecutive documents, as word-piece arrays."""

    sequences: list[np.ndarray]
    passage_doc: np.ndarray  # document ordinal of each passage
    first_passage: np.ndarray  # whether it is its document's first passage
    documents: int
    truncated: int


def passage_chunks(store: DocumentStore, encoder: Encoder, settings: DenseSettings):
    """The store's documents in order, tokenised TOKENIZE_BATCH at a time and split into passages, in chunks."""
    limit = (encoder.window - 2) * settings.max_passages
    texts = (document_text(document) for document in store.iter_documents())
    doc = 0
    while True:
        sequences: list[np.ndarray] = []
        passage_doc: list[int] = []
        first: list[bool] = []
        documents = truncated = 0
        while batch := list(islice(texts, min(TOKENIZE_BATCH, settings.chunk_documents - documents))):
            for pieces in encoder.pieces(batch):
                truncated += len(pieces) > limit
                for n, passage in enumerate(encoder.passages(pieces, settings.max_passages)):
                    sequences.append(np.asarray(passage, dtype=np.int32))
                    passage_doc.append(doc)
                    first.append(n == 0)
                doc += 1
            documents += len(batch)
        if not documents:
            return
        yield PassageChunk(
            sequences, np.asarray(passage_doc, dtype=np.int32), np.asarray(first, dtype=bool), documents, truncated
        )


def build_dense(
    store: DocumentStore, target: Path, settings: DenseSettings, label: str = "dense", device: str = "cpu"
) -> dict[str, Any]:
    """Encode every document of `store` into `target` (see the module docstring for the files) on `device` (resolved:
    mathscout.dense.device); on CUDA with torch in length-sorted batches (bf16 autocast), recorded as such, so that the
    queries are encoded by the same model on the CPU."""
    import faiss

    started = time.perf_counter()
    if device == "cuda":
        settings = replace(settings, backend="torch", batching="length")
    encoder = Encoder(settings.model, settings.backend, settings.batching, device=device)
    documents_total = store.count()
    sink: TokenSink | None = None
    if settings.tokens:
        vocabulary = encoder.tokenizer.convert_ids_to_tokens(list(range(len(encoder.tokenizer))))
        keep = np.array([not _is_punctuation(p.removeprefix("##")) for p in vocabulary], dtype=bool)
        sink = TokenSink(documents_total, keep, target / "tokens")
    log(
        f"{label}: encoding {documents_total:,} documents in chunks of ≤ {settings.chunk_documents:,} (passages of "
        f"≤ {encoder.window} word pieces, ≤ {settings.max_passages} per document), model {encoder.folder}, backend "
        f"{settings.backend}, batching {settings.batching}; vectors written to {target / VECTORS} as they are encoded"
    )
    vector_path = target / VECTORS
    passage_docs: list[np.ndarray] = []
    passages = truncated = 0
    encoding_started = time.perf_counter()
    bar = progress_bar(
        total=documents_total,
        desc=f"{label} encode",
        unit=" docs",
        mininterval=2.0,
        smoothing=0.05,
        bar_format="{l_bar}{bar}| {n:,.0f}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}{postfix}]",
    )
    with open(vector_path, "wb") as vector_file:
        for chunk in passage_chunks(store, encoder, settings):

            def on_batch(positions: np.ndarray, batch: EncodedBatch, chunk: PassageChunk = chunk) -> None:
                if sink is None or not batch.tokens:
                    return
                for p, vectors, ids in zip(positions, batch.tokens, batch.token_ids):
                    if chunk.first_passage[p]:
                        sink.add(int(chunk.passage_doc[p]), vectors, ids)

            per_passage = chunk.documents / max(len(chunk.sequences), 1)
            first = chunk.first_passage
            # the callbacks run within this iteration
            vectors = encoder.encode_passages(
                chunk.sequences,
                (lambda p: first[p]) if sink else None,  # noqa: B023
                lambda n: bar.update(n * per_passage),  # noqa: B023
                on_batch,
            )
            vectors.tofile(vector_file)  # ENOSPC here is an OSError: the builder reports the full disk
            passage_docs.append(chunk.passage_doc)
            passages += len(chunk.sequences)
            truncated += chunk.truncated
            bar.set_postfix_str(f"{passages:,} passages", refresh=False)
            del vectors, chunk
    bar.close()
    encode_seconds = time.perf_counter() - encoding_started
    docs_per_second = documents_total / max(encode_seconds, 1e-9)
    log(
        f"{label}: encoded {documents_total:,} documents ({passages:,} passages; {truncated:,} documents longer than "
        f"{settings.max_passages} passages) in {encode_seconds:.1f} s = {docs_per_second:.1f} docs/s"
    )

    stats: dict[str, Any] = {}
    if sink is not None:
        stats.update(sink.save())
    ann_started = time.perf_counter()
    if passages <= settings.ann_above:  # small: exact Flat and HNSW in memory, from one read of the vectors
        stats["default_search"] = "flat"
        set_build_threads()
        vectors = read_rows(vector_path, encoder.dimension, 0, passages)
        flat = faiss.IndexFlatIP(encoder.dimension)  # one copy of the vectors: seconds
        flat.add(vectors)
        faiss.write_index(flat, str(target / "flat.faiss"))
        del flat
        hnsw = build_hnsw(vectors, settings.hnsw_m, settings.hnsw_ef_construction, label)
        faiss.write_index(hnsw, str(target / "hnsw.faiss"))
        del hnsw, vectors
        vector_path.unlink()  # flat.faiss holds the same vectors
    else:  # large: IVF-PQ trained and filled from the file; the vectors stay on disk for exact re-scoring
        stats["default_search"] = "ivfpq"
        stats.update(
            build_ivfpq(vector_path, encoder.dimension, target / IVFPQ, IvfPqSettings(nprobe=settings.nprobe), label)
        )
    ann_seconds = time.perf_counter() - ann_started
    np.save(target / "passage_doc.npy", np.concatenate(passage_docs) if passage_docs else np.zeros(0, np.int32))
    meta = {
        **asdict(settings),
        "model": str(encoder.folder.resolve()),
        "model_key": model_fingerprint(encoder.folder),
        "device": device,
        "dimension": encoder.dimension,
        "window": encoder.window,
        "documents": documents_total,
        "passages": passages,
        "documents_truncated": truncated,
        "encode_seconds": round(encode_seconds, 1),
        "docs_per_second": round(docs_per_second, 2),
        "hnsw_seconds": round(ann_seconds, 1),
        "build_id": _new_build_id(),
        **stats,
    }
    (target / META).write_text(json.dumps(meta, indent=2), encoding="utf-8")
    log(
        f"{label}: {f'Flat + HNSW (M = {settings.hnsw_m:d}, efConstruction = {settings.hnsw_ef_construction:d})' if stats['default_search'] == 'flat' else 'IVF-PQ from disk'} "
        f"in {ann_seconds:.1f} s"
    )
    return _manifest_entry(meta, started) | stats


def _new_build_id() -> str:
    return hashlib.sha1(f"{time.time()}|{os.getpid()}".encode()).hexdigest()[:12]


def _manifest_entry(meta: dict[str, Any], started: float) -> dict[str, Any]:
    """What the index manifest records of a dense component's build."""
    keys = (
        "model",
        "backend",
        "batching",
        "dimension",
        "documents",
        "passages",
        "max_passages",
        "docs_per_second",
        "encode_seconds",
        "build_id",
        "document_vectors_from",
        "default_search",
    )
    return {k: meta[k] for k in keys if k in meta} | {"seconds": round(time.perf_counter() - started, 2)}


def model_fingerprint(folder: str | Path) -> str:
    """Identifies a model folder's weights (size and mtime of its weight files, and its config)."""
    folder = Path(folder)
    files = [folder / "config.json", *sorted(folder.glob("*.safetensors")), *sorted(folder.glob("*.bin"))]
    stamp = "|".join(f"{p.name}:{p.stat().st_size}" for p in files if p.exists())
    return hashlib.sha1(stamp.encode()).hexdigest()[:12]


def read_meta(folder: Path) -> dict[str, Any]:
    """A dense or colbert component's meta.json, read as every stored JSON file is (`StoredFile`: bounded size and
    nesting, finite numbers); a bad one is one line naming the rebuild."""
    remedy = f"rebuild it with 'mathscout index --index {folder.parent} --components {folder.name}'"
    return StoredFile(folder / META, f"the {folder.name} component's description", remedy).load()


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
    same_settings = all(
        meta.get(key) == getattr(settings, key) for key in ("backend", "max_passages", "hnsw_m", "hnsw_ef_construction")
    )
    model = Path(settings.model) if settings.model else None
    if not same_settings or model is None or not Path(meta.get("model", "")).is_dir() or not model.is_dir():
        return None
    if weights_digest(meta["model"]) != weights_digest(model):
        return None
    started = time.perf_counter()
    for name in ("flat.faiss", "hnsw.faiss", IVFPQ, VECTORS, "passage_doc.npy"):
        if not (source / name).exists():
            continue
        try:
            os.link(source / name, target / name)
        except OSError:
            shutil.copyfile(source / name, target / name)
    encoding = ("docs_per_second", "encode_seconds", "hnsw_seconds")  # not this component's: nothing was encoded
    reused = {k: v for k, v in meta.items() if not k.startswith("token") and k not in encoding} | {
        "model": str(model.resolve()),
        "model_key": model_fingerprint(model),
        "tokens": False,
        "hnsw_ef_search": settings.hnsw_ef_search,
        "document_vectors_from": source.name,
        "build_id": _new_build_id(),
        "batching": meta.get("batching", "length"),
    }  # the vectors' policy (queries are encoded by it too)
    (target / META).write_text(json.dumps(reused, indent=2), encoding="utf-8")
    log(
        f"{label}: {model} encodes documents with the same weights as the '{source.name}' component: its "
        f"{meta.get('passages', 0):,} passage vectors are reused (no re-encoding)"
    )
    return _manifest_entry(reused, started)
