"""Dense encoding policies compared on the same real documents (issue 18): throughput and whether a passage's vector
depends on the passages encoded with it.

    python -m mathscout.benchmarks.dense_batching --index DIR [--documents 500]

Encodes the first N documents' passages (as the dense component splits them) with the `length` batching (length-sorted
batches of ≤ 64) and the `passage` batching (each passage alone), twice each in turn, printing docs/s and the load;
then the cosine between the two policies' vectors and whether `passage` vectors are the same in another order.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from mathscout.dense.build import DenseSettings, passage_chunks
from mathscout.dense.encoder import Encoder
from mathscout.index.layout import IndexDir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, required=True, help="an index whose store holds the documents")
    parser.add_argument("--documents", type=int, default=500)
    args = parser.parse_args()
    store = IndexDir(args.index).store
    encoders = {name: Encoder(batching=name) for name in ("length", "passage")}
    first = encoders["length"]
    # the first chunk of the build's own splitting: the first N documents' passages (≤ DEFAULT_MAX_PASSAGES each)
    chunk = next(passage_chunks(store, first, DenseSettings(chunk_documents=args.documents)))
    documents, sequences = chunk.documents, chunk.sequences
    print(f"{documents} documents, {len(sequences)} passages, backend {first.backend}", flush=True)
    first.encode_passages(sequences[:20])  # warm
    vectors = {}
    for name in ("length", "passage", "length", "passage"):
        started = time.perf_counter()
        vectors[name] = encoders[name].encode_passages(sequences)
        seconds = time.perf_counter() - started
        print(f"{name}: {seconds:.1f} s, {documents / seconds:.2f} docs/s, load {os.getloadavg()[0]:.1f}", flush=True)
    cosine = (vectors["length"] * vectors["passage"]).sum(axis=1)
    print(f"length vs passage cosine: mean {cosine.mean():.4f}, min {cosine.min():.4f}")
    reversed_order = encoders["passage"].encode_passages(sequences[::-1])[::-1]
    print(f"passage vectors the same in reverse order: {np.array_equal(reversed_order, vectors['passage'])}")


if __name__ == "__main__":
    main()
