"""Search modes (`--mode bm25|structure|dense|hybrid|…`): each maps an index directory to a Retriever.

Later issues add modes by calling `register_mode` in their retriever module and listing that module in
`_load_builtin`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mathscout.errors import MathScoutError
from mathscout.index.layout import IndexDir
from retrievers.base import Retriever


@dataclass(frozen=True)
class ModeSpec:
    name: str
    open: Callable[..., Retriever]  # (IndexDir, **options) -> Retriever
    requires: tuple[str, ...]  # index components the mode needs
    description: str


_MODES: dict[str, ModeSpec] = {}


def register_mode(spec: ModeSpec) -> None:
    _MODES[spec.name] = spec


def _load_builtin() -> None:
    import retrievers.bm25  # noqa: F401
    import retrievers.structure  # noqa: F401
    import retrievers.types  # noqa: F401
    import retrievers.fusion  # noqa: F401
    import retrievers.splade  # noqa: F401
    import retrievers.dense  # noqa: F401
    import retrievers.colbert  # noqa: F401
    import retrievers.soft_cosine  # noqa: F401
    import retrievers.rewrite  # noqa: F401
    import retrievers.ranked  # noqa: F401


def available_modes() -> dict[str, ModeSpec]:
    _load_builtin()
    return dict(_MODES)


def open_retriever(index: IndexDir | str, mode: str, **options) -> Retriever:
    """The retriever for `mode` over `index`; clear errors for unknown modes or missing components."""
    modes = available_modes()
    if mode not in modes:
        raise MathScoutError(f"unknown search mode '{mode}' (available: {', '.join(sorted(modes))})")
    index = index if isinstance(index, IndexDir) else IndexDir(index)
    spec = modes[mode]
    for name in spec.requires:
        index.component_path(name)
    return spec.open(index, **options)
