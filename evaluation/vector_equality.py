"""Are a sharded index's passage vectors the single index's? `python -m mathscout.evaluation.vector_equality SINGLE SHARDED
[--component dense]`

The shards' vectors, in shard order, against the single index's: byte-identical or not, how many passages differ and
by how much, and whether every passage belongs to the same (global) document. Prints one dict; exit 0 when identical.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mathscout.evaluation.run_equality import print_verdict
from mathscout.index.layout import IndexDir


@dataclass
class VectorComparison:
    passages: int  # the single index's
    shard_passages: list[int]
    byte_identical: bool
    passages_differing: int  # -1 when the counts differ
    max_difference: float
    same_documents: bool  # each passage belongs to the same global document ordinal


def _component(index: Path, component: str):
    from mathscout.retrievers.dense import DenseRetriever

    return DenseRetriever(IndexDir(index), component)


def compare_vectors(single: Path, sharded: Path, component: str = "dense") -> VectorComparison:
    from mathscout.retrievers.shards.layout import ShardSet

    one = _component(single, component)
    shards = ShardSet.read(sharded)
    parts = [_component(shards.folder(sharded, n), component) for n in range(len(shards.shards))]
    mine = np.asarray(one.passage_vectors())
    theirs = np.concatenate([np.asarray(p.passage_vectors()) for p in parts])
    documents = np.concatenate([p.passage_doc + info.first_document for p, info in zip(parts, shards.shards)])
    same_shape = mine.shape == theirs.shape
    gap = np.abs(mine - theirs).max(axis=1) if same_shape else None
    return VectorComparison(
        passages=len(mine),
        shard_passages=[len(p.passage_doc) for p in parts],
        byte_identical=same_shape and mine.tobytes() == theirs.tobytes(),
        passages_differing=int((gap > 0).sum()) if gap is not None else -1,
        max_difference=float(gap.max()) if gap is not None and len(gap) else 0.0,
        same_documents=same_shape and np.array_equal(one.passage_doc, documents),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("single", type=Path)
    parser.add_argument("sharded", type=Path)
    parser.add_argument("--component", default="dense", help="dense or dense-ft")
    args = parser.parse_args(argv)
    return print_verdict(
        lambda: compare_vectors(args.single, args.sharded, args.component),
        lambda result: result.byte_identical and result.same_documents,
    )


if __name__ == "__main__":
    sys.exit(main())
