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


# the module that registers each built-in mode: opening one mode imports only its module (a bm25 search
# never loads numba, scipy or the dense code); listing the modes imports them all
BUILTIN_MODES = {
    "bm25": "retrievers.bm25", "structure": "retrievers.structure", "types": "retrievers.types",
    "types2x": "retrievers.types", "rm3": "retrievers.types", "hybrid": "retrievers.fusion",
    "splade": "retrievers.splade", "dense": "retrievers.dense", "dense-ft": "retrievers.dense",
    "colbert": "retrievers.colbert", "scm": "retrievers.soft_cosine", "structure-rewrite": "retrievers.rewrite",
    "ranked": "retrievers.ranked",
}


def _load_builtin(mode: str | None = None) -> None:
    """Import the module of `mode` (None: of every built-in mode), which registers it."""
    import importlib

    modules = [BUILTIN_MODES[mode]] if mode in BUILTIN_MODES else dict.fromkeys(BUILTIN_MODES.values())
    for module in modules:
        importlib.import_module(module)


def available_modes() -> dict[str, ModeSpec]:
    """Every registered mode: the built-in ones in their module order, then any registered by others."""
    _load_builtin()
    order = {module: n for n, module in enumerate(dict.fromkeys(BUILTIN_MODES.values()))}
    ranked = sorted(_MODES.values(), key=lambda spec: order.get(BUILTIN_MODES.get(spec.name, ""), len(order)))
    return {spec.name: spec for spec in ranked}


def open_retriever(index: IndexDir | str, mode: str, **options) -> Retriever:
    """The retriever for `mode` over `index`; clear errors for unknown modes or missing components."""
    _load_builtin(mode)
    if mode not in _MODES:
        modes = available_modes()
        raise MathScoutError(f"unknown search mode '{mode}' (available: {', '.join(sorted(modes))})")
    index = index if isinstance(index, IndexDir) else IndexDir(index)
    from mathscout.shards.layout import is_sharded

    if is_sharded(index.path):  # a sharded index (issue 18): the shards' Ray actors answer
        from mathscout.shards.retriever import open_sharded

        return open_sharded(index, mode, **options)
    spec = _MODES[mode]
    for name in spec.requires:
        index.component_path(name)
    return spec.open(index, **options)
