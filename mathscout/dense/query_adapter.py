"""A query-side adapter: the fine-tuned half of an asymmetric bi-encoder.

Query-side fine-tuning (Lee et al. 2021, "Learning Dense Representations of Phrases at Scale", §4.3)
trains only the query tower, so the documents' vectors — the expensive part — stay valid. Here the query
tower is the base model followed by a residual linear map, q' = normalise(q + q·A), A starting at 0
(the base model exactly). A model folder holding `query_adapter.npz` next to the base model's files is
such an encoder: `Encoder.encode_queries` applies the map, documents are encoded by the base weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mathscout.errors import MathScoutError

ADAPTER_FILE = "query_adapter.npz"


@dataclass(frozen=True)
class QueryAdapter:
    """The residual map A (dim × dim) applied to pooled query embeddings."""

    matrix: np.ndarray

    @property
    def dimension(self) -> int:
        return int(self.matrix.shape[0])

    def apply(self, queries: np.ndarray) -> np.ndarray:
        """normalise(q + q·A) row by row."""
        mapped = queries + queries @ self.matrix
        return (mapped / np.maximum(np.linalg.norm(mapped, axis=1, keepdims=True), 1e-12)).astype(np.float32)

    def save(self, folder: Path) -> None:
        """Into a model folder (how it was trained is the folder's training.json)."""
        np.savez(folder / ADAPTER_FILE, matrix=self.matrix.astype(np.float32))

    @staticmethod
    def load(folder: Path, retrain: str = "mathscout train dense") -> QueryAdapter | None:
        """The folder's adapter, None when it has none; a clear error naming `retrain` (the command that trains it)
        when the file is broken."""
        path = Path(folder) / ADAPTER_FILE
        if not path.is_file():
            return None
        try:
            with np.load(path) as data:
                matrix = np.asarray(data["matrix"], dtype=np.float32)
        except (OSError, ValueError, KeyError) as exc:
            raise MathScoutError(
                f"the query adapter {path} is unreadable ({exc}): retrain it with '{retrain}' or delete the file"
            ) from exc
        if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
            raise MathScoutError(
                f"the query adapter {path} holds a {matrix.shape} array, not a square matrix: retrain it with '{retrain}'"
            )
        return QueryAdapter(matrix)
