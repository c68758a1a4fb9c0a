"""The trained colbert document side searched three ways (issue 34): the cost per query of each, on the same questions
and candidates, over an index `mathscout train colbert` trained on both sides.

    python -m mathscout.benchmarks.colbert_documents --index DIR --topics T [--queries 200]

Per question (its trained query token vectors): the candidate stage over the untrained and over the mapped IVF-PQ,
then the exact MaxSim re-scoring of up to 1,000 candidates (the documents the mapped stage's hits name) three ways:
(a) from stored mapped tokens, timed as the untrained model's re-scoring (it reads the same float16 layout), (b) B
applied to each candidate token for each query, d' = normalise(d + d·B), (c) what the search does: the query tokens
mapped once, q + q·Bᵀ, each similarity divided by its token's stored norm ‖d + d·B‖ ((b) and (c) checked equal).
Prints medians and means in ms and the load.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from mathscout.dense.query_adapter import QueryAdapter
from mathscout.errors import MathScoutError
from mathscout.evaluation.topics import load_topics
from mathscout.index.layout import IndexDir
from mathscout.retrievers.base import prepare_query
from mathscout.retrievers.colbert import ColbertRetriever


def mapped_maxsim(retriever: ColbertRetriever, q: np.ndarray, docs: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """(b): Zhong et al. 2022 Eq. 3 over normalise(d + d·B) of each candidate token, mapped for this query."""
    starts, ends = retriever.offsets[docs], retriever.offsets[docs + 1]
    vectors = np.concatenate([retriever.vectors[s:e] for s, e in zip(starts, ends)]).astype(np.float32)
    vectors = QueryAdapter(matrix).apply(vectors)  # the same residual map as the query side's
    segments = np.concatenate([[0], np.cumsum(ends - starts)[:-1]])
    return np.maximum.reduceat(q @ vectors.T, segments, axis=1).sum(axis=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, required=True, help="an index with a colbert model trained on both sides")
    parser.add_argument("--topics", type=Path, required=True)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    index = IndexDir(args.index)
    model, base = ColbertRetriever(index), ColbertRetriever(index, trained=False)
    if model.documents is None:
        raise MathScoutError(
            f"{args.index} has no trained document side: 'mathscout train colbert --index {args.index}'"
        )
    times: dict[str, list[float]] = {
        k: [] for k in ("candidates, untrained IVF-PQ", "candidates, mapped IVF-PQ", "(a)", "(b)", "(c)")
    }
    tokens = []

    def timed(name: str, call, *arguments):
        started = time.perf_counter()
        result = call(*arguments)
        times[name].append(time.perf_counter() - started)
        return result

    for topic in load_topics(args.topics)[: args.queries]:
        q = model.query_vectors(prepare_query(topic))
        timed("candidates, untrained IVF-PQ", base.faiss.search, q, base.token_depth)
        _, positions = timed("candidates, mapped IVF-PQ", model.faiss.search, q, model.token_depth)
        docs = np.unique(np.searchsorted(model.offsets, positions[positions >= 0], side="right") - 1)[:1000]
        docs = docs[model.offsets[docs + 1] > model.offsets[docs]]
        timed("(a)", base.maxsim, q, docs)
        mapped = timed("(b)", mapped_maxsim, model, q, docs, model.documents.matrix)
        folded = timed("(c)", model.maxsim, q, docs)
        assert np.allclose(mapped, folded, atol=1e-3), float(np.abs(mapped - folded).max())
        tokens.append(int((model.offsets[docs + 1] - model.offsets[docs]).sum()))
    print(
        f"{len(tokens)} questions, {np.median(tokens):,.0f} candidate tokens per question (median), "
        f"load {os.getloadavg()[0]:.1f}"
    )
    for name, values in times.items():
        print(f"  {name}: {np.median(values) * 1000:.1f} ms median, {np.mean(values) * 1000:.1f} ms mean")


if __name__ == "__main__":
    main()
