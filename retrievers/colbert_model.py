"""The colbert model's trained parts (`mathscout train colbert`, issue 34), stored with the index in colbert/, and the
IVF-PQ candidate stage over token vectors (built by the component, rebuilt by the training over the mapped vectors).

- Query side: t' = normalise(t + t·A) over the query token vectors (query_adapter.npz; Lee et al. 2021 §4.3).
- Document side (an index trained before it has none): d' = normalise(d + d·B) over the dense component's stored
  128-d token vectors (document_adapter.npz), B trained jointly with A. B is applied at scoring time, not stored
  mapped: q·d' = (q + q·Bᵀ)·d / ‖d + d·B‖, so the exact re-scoring (Zhong et al. 2022 Eq. 3) reads the same float16
  vectors as the untrained model, maps the query tokens once and divides each candidate token's similarity by its
  norm, stored per token (document_norms.npy, float32, read into memory: 13.9 MB on the full index). Measured by
  mathscout.benchmarks.colbert_documents on the full index (200 dev questions, ~113,000 candidate tokens each; median
  per query): re-scoring this way 56 ms, from stored mapped tokens 58 ms (890 MB more of float16 on disk), mapping the
  candidates' tokens per query 99 ms (docs/results.md, issue 34). The IVF-PQ candidate stage is rebuilt over the
  mapped vectors (document_ivfpq.faiss, beside the untrained model's colbert/ivfpq.faiss, which `--set trained=false`
  still searches).
- trained.json (ColbertTraining): how it was trained and its files' sizes and CRC-32, written last (until it is, the
  search uses the untrained model).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mathscout.dense.ann import set_build_threads
from mathscout.dense.query_adapter import ADAPTER_FILE, DOCUMENT_ADAPTER_FILE, QueryAdapter
from mathscout.errors import DamagedIndexError
from mathscout.index.arrays import load_array
from mathscout.index.integrity import verify_folder
from mathscout.index.layout import IndexDir
from mathscout.index.stored import StoredFile
from mathscout.index.tuned import TunedFile

PQ_BYTES = 32  # bytes per token code (PQ32x8 on 128 dimensions)
TRAIN_SAMPLE_PER_LIST = 40
BLOCK = 200_000  # token vectors mapped or added at a time
TRAIN_COMMAND = "mathscout train colbert --index {index}"
DOCUMENT_NORMS = "document_norms.npy"
DOCUMENT_IVFPQ = "document_ivfpq.faiss"
DOCUMENT_FILES = (DOCUMENT_ADAPTER_FILE, DOCUMENT_NORMS, DOCUMENT_IVFPQ)


def lists_for(tokens: int) -> int:
    """IVF lists: ≈ 1 per 2,000 token vectors, a power of two in [16, 2048]."""
    lists = 16
    while lists < 2048 and lists * 2000 < tokens:
        lists *= 2
    return lists


def build_token_ivfpq(vectors: np.ndarray, transform: Callable[[np.ndarray], np.ndarray] | None = None):
    """IVF-PQ (inner product) over every row of `vectors` (float16, memory-mapped) as float32 through `transform`
    (None: as stored), trained on a seeded sample: (the faiss index, its settings and seconds)."""
    import faiss

    set_build_threads()
    started = time.perf_counter()
    total, width = vectors.shape

    def rows(selection) -> np.ndarray:
        block = np.asarray(vectors[selection], dtype=np.float32)
        return block if transform is None else transform(block)

    lists = lists_for(total)
    sample_size = min(total, lists * TRAIN_SAMPLE_PER_LIST)
    sample = rows(np.sort(np.random.default_rng(0).choice(total, sample_size, replace=False)))
    m = PQ_BYTES if width % PQ_BYTES == 0 else next(d for d in (16, 8, 4, 2, 1) if width % d == 0)
    index = faiss.index_factory(width, f"IVF{lists},PQ{m}", faiss.METRIC_INNER_PRODUCT)
    # Hamming-code annealing: a minute of CPU, unused here (faiss's stubs: downcast_index gives an Index, and their
    # IndexIVFPQ lacks the attribute)
    faiss.downcast_index(index).do_polysemous_training = False  # type: ignore[attr-defined]
    index.train(sample)
    trained = time.perf_counter() - started
    for start in range(0, total, BLOCK):
        index.add(rows(slice(start, start + BLOCK)))
    settings = {"lists": lists, "pq_bytes": m, "train_sample": int(sample_size), "train_seconds": round(trained, 1)}
    return index, settings | {"seconds": round(time.perf_counter() - started, 1)}


@dataclass(frozen=True)
class DocumentMap:
    """The document side d' = normalise(d + d·B) of every stored token vector d, as the search applies it: query
    tokens mapped once (`queries`: q + q·Bᵀ), a similarity to stored token j divided by `norms[j]` = ‖d_j + d_j·B‖."""

    matrix: np.ndarray  # B
    norms: np.ndarray  # float32, one per stored token

    @classmethod
    def of(cls, matrix: np.ndarray, vectors: np.ndarray) -> DocumentMap:
        """B's map of `vectors` (float16 token vectors), its norms computed block by block."""
        matrix = np.asarray(matrix, dtype=np.float32)
        norms = np.empty(len(vectors), dtype=np.float32)
        for start in range(0, len(vectors), BLOCK):
            block = np.asarray(vectors[start : start + BLOCK], dtype=np.float32)
            norms[start : start + BLOCK] = np.linalg.norm(block + block @ matrix, axis=1)
        return cls(matrix, np.maximum(norms, 1e-12))

    def queries(self, q: np.ndarray) -> np.ndarray:
        """q + q·Bᵀ: (q + q·Bᵀ)·d = q·(d + d·B)."""
        return (q + q @ self.matrix.T).astype(np.float32)

    def apply(self, tokens: np.ndarray) -> np.ndarray:
        """d' = normalise(d + d·B) of float32 token vectors."""
        return QueryAdapter(self.matrix).apply(tokens)


def build_document_side(vectors: np.ndarray, matrix: np.ndarray, folder: Path) -> DocumentMap:
    """The document side B stored in `folder` (its adapter, token norms and the IVF-PQ over the mapped vectors), each
    file written beside and renamed; a file already there is kept (a resumed training's B is the same)."""
    folder.mkdir(parents=True, exist_ok=True)
    if (folder / DOCUMENT_NORMS).is_file():
        documents = DocumentMap(np.asarray(matrix, dtype=np.float32), load_array(folder / DOCUMENT_NORMS))
    else:
        documents = DocumentMap.of(matrix, vectors)

    def write_norms(path: Path) -> None:
        with open(path, "wb") as f:
            np.save(f, documents.norms)

    def write_ivfpq(path: Path) -> None:
        import faiss

        faiss.write_index(build_token_ivfpq(vectors, documents.apply)[0], str(path))

    _write_once(
        folder / DOCUMENT_ADAPTER_FILE, lambda path: QueryAdapter(documents.matrix).save(path.parent, path.name)
    )
    _write_once(folder / DOCUMENT_NORMS, write_norms)
    _write_once(folder / DOCUMENT_IVFPQ, write_ivfpq)
    return documents


def _write_once(path: Path, write: Callable[[Path], None]) -> None:
    """`write(tmp)` beside `path`, renamed into place, unless `path` is already there."""
    if not path.is_file():
        tmp = path.with_name("tmp." + path.name)
        write(tmp)
        tmp.replace(path)


@dataclass
class ColbertTraining(TunedFile):
    """`colbert/trained.json`: the trained model stored with the index (`mathscout train colbert`): the dense build
    its token vectors come from, its files' sizes and CRC-32 (query_adapter.npz, loss.png, and for the document side
    DOCUMENT_FILES) and how it was trained (settings, topics, counts, held-out curve, seconds). Version 2: the
    document side (a MathScout before it would search with the query side alone)."""

    FILE = "colbert/trained.json"
    LABEL = "the trained colbert model's description"
    VERSION = 2

    dense_build_id: str
    dimension: int
    files: dict[str, dict] = field(default_factory=dict)
    training: dict[str, Any] = field(default_factory=dict)

    @property
    def document_side(self) -> bool:
        return DOCUMENT_ADAPTER_FILE in self.files

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
        listed = [name for name in DOCUMENT_FILES if name in info.files]
        file.require(
            len(listed) in (0, len(DOCUMENT_FILES)),
            f"its file list has {', '.join(listed)} but not all of {', '.join(DOCUMENT_FILES)}",
        )
        verify_folder(file.path.parent, info.files, file.remedy)
        return info


@dataclass(frozen=True)
class TrainedColbert:
    """The stored model: its query side, and its document side with the candidate stage over the mapped vectors
    (None, None for a model trained on the query side only)."""

    query: QueryAdapter
    documents: DocumentMap | None = None
    ivfpq: Path | None = None


def trained_model(index: IndexDir, dense_build_id: str | None, vectors: np.ndarray) -> TrainedColbert | None:
    """The model `mathscout train colbert` stored with the index (None when it has none), checked: its files against
    their CRC-32, its dense build and its sizes against the index's token vectors `vectors`."""
    info = ColbertTraining.read(index)
    if info is None:
        return None
    folder = index.path / "colbert"
    remedy = ColbertTraining.remedy(folder)
    if info.dense_build_id != str(dense_build_id):
        raise DamagedIndexError(
            f"the trained colbert model in {folder} was trained over another 'dense' build: {remedy}"
        )
    retrain = TRAIN_COMMAND.format(index=index.path)
    dimension = vectors.shape[1]

    def misfit() -> DamagedIndexError:
        return DamagedIndexError(
            f"the trained colbert model in {folder} does not fit the index's {dimension}-dimensional token vectors: "
            f"{remedy}"
        )

    adapter = QueryAdapter.load(folder, retrain=retrain)
    if adapter is None or adapter.dimension != dimension or info.dimension != dimension:
        raise misfit()
    if not info.document_side:
        return TrainedColbert(adapter)
    matrix = QueryAdapter.load(folder, retrain=retrain, name=DOCUMENT_ADAPTER_FILE)
    try:
        norms = load_array(folder / DOCUMENT_NORMS)  # in memory (4 bytes a token): sliced 1,000 times a query
    except (OSError, ValueError) as exc:
        raise DamagedIndexError(f"{folder / DOCUMENT_NORMS} is unreadable ({exc}): {remedy}") from exc
    if matrix is None or matrix.dimension != dimension or norms.shape != (len(vectors),):
        raise misfit()
    return TrainedColbert(adapter, DocumentMap(matrix.matrix, norms), folder / DOCUMENT_IVFPQ)
