"""A query-side adapter: the fine-tuned half of an asymmetric bi-encoder.

Query-side fine-tuning (Lee et al. 2021, "Learning Dense Representations of Phrases at Scale", §4.3)
trains only the query tower, so the documents' vectors — the expensive part — stay valid. Here the query
tower is the base model followed by a residual linear map, q' = normalise(q + q·A), A starting at 0
(the base model exactly). A model folder holding `query_adapter.npz` next to the base model's files is
such an encoder: `Encoder.encode_queries` applies the map, documents are encoded by the base weights. The trained
colbert model also maps its documents' token vectors the same way, d' = normalise(d + d·B) (`document_adapter.npz`,
mathscout.retrievers.colbert_model).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mathscout.errors import MathScoutError
from mathscout.index.arrays import load_arrays

ADAPTER_FILE = "query_adapter.npz"
DOCUMENT_ADAPTER_FILE = "document_adapter.npz"  # the colbert model's document side


@dataclass(frozen=True)
class QueryAdapter:
    """The residual map A (dim × dim) applied to pooled query embeddings (or to token vectors)."""

    matrix: np.ndarray

    @property
    def dimension(self) -> int:
        return int(self.matrix.shape[0])

    def apply(self, queries: np.ndarray) -> np.ndarray:
        """normalise(q + q·A) row by row."""
        mapped = queries + queries @ self.matrix
        return (mapped / np.maximum(np.linalg.norm(mapped, axis=1, keepdims=True), 1e-12)).astype(np.float32)

    def save(self, folder: Path, name: str = ADAPTER_FILE) -> None:
        """Into a model folder (how it was trained is the folder's training.json)."""
        np.savez(folder / name, matrix=self.matrix.astype(np.float32))

    @staticmethod
    def load(folder: Path, retrain: str = "mathscout train dense", name: str = ADAPTER_FILE) -> QueryAdapter | None:
        """The folder's adapter (the file `name`), None when it has none; a clear error naming `retrain` (the command
        that trains it) when the file is broken."""
        path = Path(folder) / name
        what = "query adapter" if name == ADAPTER_FILE else "adapter"
        if not path.is_file():
            return None
        try:
            (stored,) = load_arrays(path, "matrix")
            matrix = np.asarray(stored, dtype=np.float32)
        except (OSError, ValueError) as exc:
            raise MathScoutError(
                f"the {what} {path} is unreadable ({exc}): retrain it with '{retrain}' or delete the file"
            ) from exc
        if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
            raise MathScoutError(
                f"the {what} {path} holds a {matrix.shape} array, not a square matrix: retrain it with '{retrain}'"
            )
        return QueryAdapter(matrix)
