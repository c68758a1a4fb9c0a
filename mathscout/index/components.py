"""Index components: the pieces an index directory can hold besides its document store.

Each retrieval issue registers its component here (bm25 in the foundation; structure, dense, … later).
A component builds itself from the document store into a fresh folder and returns stats for the manifest.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from mathscout.errors import MathScoutError
from mathscout.store import DocumentStore


class IndexComponent(Protocol):
    name: str

    def build(self, store: DocumentStore, target: Path) -> dict[str, Any]:
        """Build into `target` (an empty folder); return stats (counts, seconds, bytes, settings)."""
        ...


@dataclass(frozen=True)
class ComponentSpec:
    name: str
    factory: Callable[[], IndexComponent]
    description: str
    default: bool = True  # built by `mathscout index` unless --components says otherwise


_REGISTRY: dict[str, ComponentSpec] = {}


def register_component(spec: ComponentSpec) -> None:
    _REGISTRY[spec.name] = spec


def _load_builtin() -> None:
    # Importing the modules registers their components.
    import mathscout.retrievers.bm25  # noqa: F401
    import mathscout.retrievers.structure  # noqa: F401
    import mathscout.retrievers.types  # noqa: F401
    import mathscout.retrievers.splade  # noqa: F401
    import mathscout.retrievers.dense  # noqa: F401
    import mathscout.retrievers.colbert  # noqa: F401
    import mathscout.retrievers.soft_cosine  # noqa: F401


def available_components() -> dict[str, ComponentSpec]:
    _load_builtin()
    return dict(_REGISTRY)


def component(name: str) -> IndexComponent:
    specs = available_components()
    if name not in specs:
        raise MathScoutError(f"unknown index component '{name}' (available: {', '.join(sorted(specs))})")
    return specs[name].factory()


def default_components() -> list[str]:
    return [n for n, s in available_components().items() if s.default]
