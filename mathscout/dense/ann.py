"""Approximate nearest-neighbour search for large dense components, built from the vectors on disk.

Small components keep exact faiss Flat (and HNSW) in memory (mathscout/dense/build.py). Above
`ANN_ABOVE` passages (documented in docs/scale.md) the component holds instead:

    passage_vectors.f32   the passage vectors, raw float32 rows (shape in meta.json), written as encoded
    ivfpq.faiss           faiss IVF-PQ (inverted file over a coarse k-means quantiser + product-quantised
                          codes; Jégou et al. 2011: the "quantized and clustered" ANN of the thesis's ColBERT
                          candidate filter, Zhong 2023 thesis §5.3.2 Inference, whose single-vector runs use Flat and HNSW), trained
                          on a sample read from disk and filled block by block from the file

A search probes `nprobe` lists (more when the depth asks for it: enough lists to hold `SCAN` × the candidates on
average) for `refine` × the wanted depth of candidates by their PQ codes, adds the other passages of their
documents and re-scores them all exactly from the memory-mapped vectors (inner product, as Flat does), so a
document found scores exactly what Flat gives it (its best passage): ANN only loses documents, never changes scores.
Memory: the codes (m bytes + an 8-byte id per passage) and the coarse centroids; the vectors stay on disk.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mathscout.errors import MathScoutError
from mathscout.progress import bar as progress_bar
from mathscout.settings import settings

VECTORS = "passage_vectors.f32"
IVFPQ = "ivfpq.faiss"
ANN_ABOVE = 250_000  # passages (≈ 5× the shared collection's 50,636; Flat would hold 366 MiB of float32 in RAM)
PQ_M, PQ_BITS = 48, 8  # 48 sub-vectors of 8 dimensions for 384-d MiniLM vectors: 48 bytes per passage
NPROBE, REFINE, SCAN = 32, 4, 4
TRAIN_SAMPLE = 50_000
BLOCK_ROWS = 65_536
HNSW_BLOCK_ROWS = 8_192  # vectors per HNSW add: a progress step (the graph is then built block by block)


@dataclass(frozen=True)
class IvfPqSettings:
    """How an IVF-PQ index is built and searched (nlist None = a power of two near √passages)."""

    nlist: int | None = None
    m: int = PQ_M
    nbits: int = PQ_BITS
    nprobe: int = NPROBE
    refine: int = REFINE
    train_sample: int = TRAIN_SAMPLE


def coarse_lists(passages: int) -> int:
    """≈ √passages inverted lists, as a power of two in [16, 65,536] (faiss suggests 4–16·√n; fewer lists train
    faster on 2 cores, and the search probes as many lists as its depth needs)."""
    return int(min(65_536, max(16, 2 ** round(math.log2(math.sqrt(max(passages, 1)))))))


def vector_rows(path: Path, dimension: int) -> int:
    size = path.stat().st_size
    if size % (4 * dimension):
        raise MathScoutError(
            f"{path} is not a whole number of {dimension}-dimensional float32 rows: rebuild the component"
        )
    return size // (4 * dimension)


def read_rows(path: Path, dimension: int, start: int, stop: int) -> np.ndarray:
    """Rows [start, stop) of a raw float32 vector file, read (not mapped: the pages do not stay in this process)."""
    count = max(0, stop - start) * dimension
    rows = np.fromfile(path, dtype=np.float32, count=count, offset=start * dimension * 4)
    return rows.reshape(-1, dimension)


def open_vectors(path: Path, dimension: int) -> np.memmap:
    """The vector file memory-mapped read-only (for re-scoring candidates)."""
    return np.memmap(path, dtype=np.float32, mode="r", shape=(vector_rows(path, dimension), dimension))


def _training_sample(path: Path, dimension: int, rows: int, wanted: int) -> np.ndarray:
    """Every (rows // wanted)-th row, read block by block (deterministic)."""
    step = max(1, rows // max(wanted, 1))
    parts = []
    for start in range(0, rows, BLOCK_ROWS):
        block = read_rows(path, dimension, start, min(rows, start + BLOCK_ROWS))
        first = (-start) % step
        parts.append(block[first::step].copy())  # a copy: a view would keep every block (the whole file) alive
    return np.ascontiguousarray(np.concatenate(parts)[:wanted])


def set_build_threads() -> None:
    """faiss builds on MATHSCOUT_FAISS_THREADS threads, default 1 (OpenMP barriers crawl on shared CPUs)."""
    import faiss

    faiss.omp_set_num_threads(settings().faiss_threads)


def build_ivfpq(
    path: Path, dimension: int, target: Path, settings: IvfPqSettings, label: str = "dense"
) -> dict[str, Any]:
    """Train and fill an IVF-PQ index from the vector file at `path`; write it to `target`."""
    import faiss

    set_build_threads()
    started = time.perf_counter()
    rows = vector_rows(path, dimension)
    nlist = settings.nlist or coarse_lists(rows)
    if dimension % settings.m:
        raise MathScoutError(
            f"IVF-PQ needs a sub-vector count dividing the dimension {dimension} (got m = {settings.m})"
        )
    sample = _training_sample(path, dimension, rows, max(settings.train_sample, 39 * nlist))
    nlist = min(nlist, len(sample))  # k-means needs at least one point per centroid (tiny components only)
    nbits = min(settings.nbits, max(1, int(math.log2(max(len(sample), 2)))))
    quantizer = faiss.IndexFlatIP(dimension)
    index = faiss.IndexIVFPQ(quantizer, dimension, nlist, settings.m, nbits, faiss.METRIC_INNER_PRODUCT)
    bar = progress_bar(
        total=rows, desc=f"{label} IVF-PQ train + add", unit=" passages", file=sys.stderr, mininterval=2.0
    )
    index.train(sample)
    train_seconds = time.perf_counter() - started
    del sample
    for start in range(0, rows, BLOCK_ROWS):
        block = read_rows(path, dimension, start, min(rows, start + BLOCK_ROWS))
        index.add(block)
        bar.update(len(block))
    bar.close()
    faiss.write_index(index, str(target))
    return {
        "ann": "ivfpq",
        "ivf_lists": nlist,
        "pq_m": settings.m,
        "pq_bits": nbits,
        "nprobe": settings.nprobe,
        "refine": settings.refine,
        "ivf_train_seconds": round(train_seconds, 1),
        "ann_seconds": round(time.perf_counter() - started, 1),
    }


def build_hnsw(vectors: np.ndarray, m: int, ef_construction: int, label: str = "dense"):
    """faiss HNSW (Malkov & Yashunin 2018; the thesis's single-vector ANN, §5.3.2) over `vectors`, inner product,
    added HNSW_BLOCK_ROWS at a time under a progress bar with its ETA. faiss inserts each add's vectors level by level
    in a seeded order, so a block-by-block graph differs from a one-add graph (docs/scale.md gives its recall)."""
    import faiss

    index = faiss.IndexHNSWFlat(vectors.shape[1], m, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = ef_construction
    with progress_bar(
        total=len(vectors), desc=f"{label} HNSW (M = {m})", unit=" passages", file=sys.stderr, mininterval=2.0
    ) as bar:
        for start in range(0, len(vectors), HNSW_BLOCK_ROWS):
            block = vectors[start : start + HNSW_BLOCK_ROWS]
            index.add(block)
            bar.update(len(block))
    return index


def exact_scores(rows: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Inner products of passage vectors `rows` with `query` that do not depend on what else is searched: float64
    products summed row by row (numpy's pairwise sum depends only on the row), rounded to float32. With more than one
    thread faiss scores a lone query and a large batch by code paths that sum in another order: a query searched
    alone (`search`, a shard in the benchmark) and in a run's batch differed in the last bit and swapped near ties."""
    return (np.asarray(rows, dtype=np.float64) * np.asarray(query, dtype=np.float64)).sum(axis=1).astype(np.float32)


def exact_order(query: np.ndarray, found: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Passages `found` (with their vectors `rows`) scored by `exact_scores`, best first, ties by position."""
    exact = exact_scores(rows, query)
    order = np.lexsort((found, -exact))
    return exact[order], found[order]


class IvfPqSearch:
    """IVF-PQ candidates re-scored exactly from the memory-mapped vectors; faiss-like `search(queries, depth)`."""

    def __init__(self, index, vectors: np.memmap, passage_doc: np.ndarray, nprobe: int = NPROBE, refine: int = REFINE):
        if index.ntotal != len(vectors) or index.d != vectors.shape[1]:
            raise MathScoutError(
                f"the IVF-PQ index ({index.ntotal} × {index.d}) does not match its vector file "
                f"({len(vectors)} × {vectors.shape[1]}): rebuild the component"
            )
        self.index, self.vectors, self.refine = index, vectors, max(1, int(refine))
        self.nprobe = int(nprobe)
        self.ntotal, self.d = int(index.ntotal), int(index.d)
        if len(passage_doc) != self.ntotal or np.any(np.diff(passage_doc) < 0):
            raise MathScoutError("the passages of the IVF-PQ index are not in document order: rebuild the component")
        self.passage_doc = passage_doc
        self.doc_start = np.searchsorted(passage_doc, np.arange(int(passage_doc[-1]) + 2 if len(passage_doc) else 1))

    def search(self, queries: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
        import faiss

        queries = np.ascontiguousarray(queries, dtype=np.float32)
        wanted = min(self.ntotal, depth * self.refine)
        lists = self.index.nlist
        probe = min(lists, max(self.nprobe, math.ceil(SCAN * wanted * lists / max(self.ntotal, 1))))
        params = faiss.SearchParametersIVF()
        params.nprobe = probe
        _, candidates = self.index.search(queries, wanted, params=params)
        scores = np.full((len(queries), depth), -np.inf, dtype=np.float32)
        positions = np.full((len(queries), depth), -1, dtype=np.int64)
        for row, (query, found) in enumerate(zip(queries, candidates)):
            found = self._with_document_passages(found[found >= 0])
            exact, best = exact_order(query, found, self.vectors[found])
            scores[row, : min(depth, len(best))], positions[row, : min(depth, len(best))] = exact[:depth], best[:depth]
        return scores, positions

    def _with_document_passages(self, found: np.ndarray) -> np.ndarray:
        """Every passage of the documents found (sorted): a document then scores its exact best passage, as in Flat."""
        docs = np.unique(self.passage_doc[found])
        starts, ends = self.doc_start[docs], self.doc_start[docs + 1]
        lengths = ends - starts
        return np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths) + np.arange(lengths.sum())
