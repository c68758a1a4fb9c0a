"""`mathscout bench` (mathscout.benchmarks): an unknown benchmark is one line naming the others; the scale
benchmark's dense stage derives vectors and measures the ANN's recall against exact search; the robust benchmark's
query costs cover every scanner and shape."""

from __future__ import annotations

import numpy as np
import pytest

from mathscout.errors import MathScoutError
from mathscout.index.layout import IndexDir
from mathscout.retrievers.registry import open_retriever
from mathscout.types import Query


def test_unknown_benchmark_lists_the_available_ones():
    from mathscout.benchmarks import run_benchmark

    with pytest.raises(MathScoutError, match=r"unknown benchmark 'nope'.*bm25"):
        run_benchmark("nope", [])


@pytest.mark.model
def test_scale_bench_dense_stage_derives_vectors_and_measures_recall_against_flat(dense_index, tmp_path):
    from mathscout.benchmarks import scale_dense

    vectors = tmp_path / "passage_vectors.f32"
    derived = scale_dense.write_derived(dense_index, 3, vectors)
    source = open_retriever(IndexDir(dense_index), "dense")
    assert derived["passages"] == 3 * source.faiss.ntotal and derived["copies"] == 3
    rows = np.fromfile(vectors, dtype=np.float32).reshape(-1, derived["dimension"])
    assert np.array_equal(rows[: source.faiss.ntotal], source.faiss.reconstruct_n(0, source.faiss.ntotal))  # copy 0
    assert (
        0.9
        < float(
            np.mean(np.sum(rows[source.faiss.ntotal : 2 * source.faiss.ntotal] * rows[: source.faiss.ntotal], axis=1))
        )
        < 0.99
    )
    built = scale_dense.build(vectors, derived["dimension"], tmp_path / "ivfpq.faiss")
    assert built["ann"] == "ivfpq" and built["bytes"] > 0
    queries = tmp_path / "queries.npy"
    np.save(queries, source.encode([Query(id="q", text="prime numbers"), Query(id="r", text=r"$\int_0^1 x^2 dx$")]))
    measured = scale_dense.query(vectors, derived["dimension"], tmp_path / "ivfpq.faiss", queries, dict)
    assert measured["recall"]["recall@10"] >= 0.9 and measured["max_score_difference_vs_flat"] < 1e-5
    assert set(measured["latency"]) == {"dense-ann@100", "dense-ann@1000", "dense-flat@1000"}


def test_robust_bench_names_the_longest_scan_of_every_scanner_and_shape():
    from mathscout.benchmarks.query_costs import longest_scans
    from mathscout.benchmarks.scanners import SCANNERS, SHAPES

    worst, path, words = longest_scans(chars=1_000)
    assert worst.scanner in SCANNERS and worst.shape in SHAPES and worst.ms >= 0
    assert path.scanner == "search path" and words.shape == "words"
