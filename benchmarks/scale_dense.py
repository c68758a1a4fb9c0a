"""Dense cost curves for `mathscout bench scale --dense-from INDEX`: ANN build from disk, open, query, recall.

Encoding the F× collections would take ~F hours here, so (as issue 17 allows) the F× passage vectors are DERIVED
from an index's real `dense` vectors: copy 0 is those vectors, copy c ≥ 1 is each of them plus seeded Gaussian
noise, renormalised (cosine ≈ 0.96 to its source: a stand-in for the variant documents' own encodings, which
would differ more and less evenly), as many copies as F × `--dense-passages` (the 1× passage count; default the
source's own). The source's encoding throughput is reported from its meta.json.

Per factor, in fresh processes (peak RSS = ru_maxrss of that process): the derived vectors are written block
by block to a raw file; IVF-PQ is trained and filled from it (mathscout/dense/ann.py); then the query process
opens it (IVF-PQ codes + the memory-mapped file), times ANN search (IVF-PQ + exact re-scoring, max over passages)
at k = 100 and 1,000 over dev topic query vectors encoded once, and measures recall@k of the documents against
exact search (faiss Flat over the same vectors, built in that process only as the reference).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

NOISE = 0.3  # ‖noise‖ ≈ 0.3 for a unit vector: cosine ≈ 1/√(1 + 0.09) ≈ 0.96
BLOCK = 65_536


def source_vectors(index: Path) -> tuple[np.ndarray, np.ndarray, dict]:
    """The 1× component's passage vectors (float32), passage → document ordinal, and its meta."""
    from mathscout.dense.ann import VECTORS, open_vectors
    from mathscout.dense.build import read_meta

    folder = index / "dense"
    meta = read_meta(folder)
    passage_doc = np.load(folder / "passage_doc.npy", allow_pickle=False)
    if (folder / VECTORS).exists():
        return np.asarray(open_vectors(folder / VECTORS, int(meta["dimension"]))), passage_doc, meta
    import faiss

    flat = faiss.read_index(str(folder / "flat.faiss"))
    return flat.reconstruct_n(0, flat.ntotal), passage_doc, meta


def write_derived(index: Path, factor: int, out: Path, passages_1x: int | None = None) -> dict:
    """factor × `passages_1x` (default: the source's own count) passage vectors → raw float32 file `out`, as
    copies of the source vectors (copy 0 unchanged, copy c ≥ 1 perturbed with seed c); passage → document."""
    vectors, passage_doc, meta = source_vectors(index)
    documents = int(passage_doc.max()) + 1 if len(passage_doc) else 0
    wanted = factor * (passages_1x or len(vectors))
    copies = -(-wanted // max(len(vectors), 1))
    tmp = out.with_suffix(".tmp")
    written = 0
    with open(tmp, "wb") as f:
        for copy in range(copies):
            rng = np.random.default_rng(copy)
            for start in range(0, len(vectors), BLOCK):
                block = vectors[start : min(len(vectors), start + BLOCK, start + wanted - written)]
                if not len(block):
                    break
                if copy:
                    noise = rng.standard_normal(block.shape, dtype=np.float32) * (NOISE / np.sqrt(block.shape[1]))
                    block = block + noise
                    block /= np.linalg.norm(block, axis=1, keepdims=True)
                np.ascontiguousarray(block, dtype=np.float32).tofile(f)
                written += len(block)
    tmp.replace(out)
    docs = np.concatenate([passage_doc + copy * documents for copy in range(copies)])[:wanted].astype(np.int32)
    np.save(out.with_name(out.stem + ".passage_doc.npy"), docs)
    return {
        "passages": len(docs),
        "documents": int(docs.max()) + 1 if len(docs) else 0,
        "dimension": int(vectors.shape[1]),
        "source_passages": len(vectors),
        "source_documents": documents,
        "copies": copies,
        "encode_docs_per_second_source": meta.get("docs_per_second"),
        "encode_seconds_source": meta.get("encode_seconds"),
        "source": str(index / "dense"),
    }


def query_vectors(index: Path, topics_path: Path, n: int, out: Path) -> int:
    """Encode the first n dev topics with the 1× component's model (once; reused at every factor)."""
    from mathscout.evaluation.topics import load_topics
    from mathscout.index.layout import IndexDir
    from mathscout.retrievers.dense import DenseRetriever

    retriever = DenseRetriever(IndexDir(index), "dense")
    topics = load_topics(topics_path)[:n]
    np.save(out, retriever.encode(topics))
    return len(topics)


def build(vectors: Path, dimension: int, target: Path) -> dict:
    from mathscout.dense.ann import IvfPqSettings, build_ivfpq

    started = time.perf_counter()
    stats = build_ivfpq(vectors, dimension, target, IvfPqSettings(), label="scale")
    return {"seconds": time.perf_counter() - started, "bytes": target.stat().st_size, **stats}


def query(vectors_path: Path, dimension: int, ivfpq: Path, queries_path: Path, rss) -> dict:
    """Open, ANN latency at k = 100 and 1,000, recall@k against exact search."""
    import faiss

    from mathscout.benchmarks.scale import percentiles
    from mathscout.dense.ann import IvfPqSearch, open_vectors, read_rows, vector_rows
    from mathscout.retrievers.dense import best_documents

    faiss.omp_set_num_threads(1)
    queries = np.load(queries_path, allow_pickle=False)
    passage_doc = np.load(vectors_path.with_name(vectors_path.stem + ".passage_doc.npy"), allow_pickle=False)
    out: dict = {"rss_start": rss()}
    started = time.perf_counter()
    searcher = IvfPqSearch(faiss.read_index(str(ivfpq)), open_vectors(vectors_path, dimension), passage_doc)
    out["open_s"] = time.perf_counter() - started
    out["rss_open"] = rss()
    max_passages = int(np.bincount(passage_doc).max())
    results: dict[int, list[list[tuple[int, float]]]] = {}
    out["latency"] = {}
    searcher.search(queries[:2], 10)  # warm-up
    for k in (100, 1000):
        depth = k * max_passages + 16
        times, ranked = [], []
        for q in queries:
            t0 = time.perf_counter()
            scores, positions = searcher.search(q[None, :], depth)
            ranked.append(best_documents(scores[0], positions[0], passage_doc, k))
            times.append(time.perf_counter() - t0)
        out["latency"][f"dense-ann@{k}"] = percentiles(times)
        results[k] = ranked
    out["rss_queries"] = rss()
    flat = faiss.IndexFlatIP(dimension)  # the exact reference (this process only)
    rows = vector_rows(vectors_path, dimension)
    for start in range(0, rows, BLOCK):
        flat.add(read_rows(vectors_path, dimension, start, min(rows, start + BLOCK)))
    times = []
    exact: dict[int, list[list[tuple[int, float]]]] = {100: [], 1000: []}
    for q in queries:
        t0 = time.perf_counter()
        scores, positions = flat.search(q[None, :], 1000 * max_passages + 16)
        times.append(time.perf_counter() - t0)
        for k in exact:
            exact[k].append(best_documents(scores[0], positions[0], passage_doc, k))
    out["latency"]["dense-flat@1000"] = percentiles(times)
    recall, score_gap = {}, 0.0
    for k in (100, 1000):
        for cut in (10, 100) if k == 100 else (1000,):
            shared = [
                len({d for d, _ in ann[:cut]} & {d for d, _ in ex[:cut]}) / max(1, min(cut, len(ex)))
                for ann, ex in zip(results[k], exact[k])
            ]
            recall[f"recall@{cut}"] = float(np.mean(shared))
        for ann, ex in zip(results[k], exact[k]):
            truth = dict(ex)
            score_gap = max([score_gap, *(abs(s - truth[d]) for d, s in ann if d in truth)])
    out["recall"] = recall
    out["max_score_difference_vs_flat"] = score_gap
    return out


def summary_line(factor: int, result: dict) -> str:
    q = result.get("query", {})
    lat = q.get("latency", {})
    return (
        f"{factor}× dense (derived vectors): {result['passages']:,} passages, IVF-PQ build {result['build']['seconds']:.1f} s "
        f"peak {result['build']['peak_mib']:.0f} MiB, open {q.get('open_s', float('nan')):.2f} s, "
        + ", ".join(f"{name} p50/p95 {v['p50_ms']:.1f}/{v['p95_ms']:.1f} ms" for name, v in lat.items())
        + ", "
        + ", ".join(f"{k} {v:.3f}" for k, v in q.get("recall", {}).items())
    )
