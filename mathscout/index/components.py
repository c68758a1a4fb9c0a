"""Index components: the pieces an index directory can hold besides its document store.

The retriever registry (`mathscout.retrievers.registry`, one entry per retriever) offers each retriever's
component here when it is imported; the core knows only the protocol. A component builds itself from the
document store into a fresh folder, in a process of its own (mathscout.index.builder), and returns stats
for the manifest. Build indexes through `mathscout.retrievers.indexing`, which loads the registry first.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from mathscout.errors import MathScoutError
from mathscout.extras import missing_module
from mathscout.notices import warning
from mathscout.store import DocumentStore


@dataclass(frozen=True)
class BuildOptions:
    """What a command gives the component builds besides the store (None: the settings decide)."""

    workers: int | None = None  # processes building the structure path index (`mathscout index --workers`)
    planetmath: str | None = None  # PlanetMath entries for the types component (`mathscout train types --planetmath`)
    device: str | None = None  # where the dense encoding runs (`mathscout index --device`: mathscout.dense.device)


class IndexComponent(Protocol):
    name: str

    def build(self, store: DocumentStore, target: Path, options: BuildOptions) -> dict[str, Any]:
        """Build into `target` (an empty folder); return stats (counts, seconds, bytes, settings)."""
        ...


@dataclass(frozen=True)
class ComponentSpec:
    name: str
    factory: Callable[
        [], IndexComponent
    ]  # must pickle (a module-level class or function): builds run in a child process
    description: str
    default: bool = True  # built by `mathscout index` unless --components says otherwise
    needs: str = ""  # a top-level module the build needs that an optional part installs ("" = the core's)

    def installed(self) -> bool:
        """Is the module the build needs importable (checked without importing it)?"""
        return not self.needs or importlib.util.find_spec(self.needs) is not None


_REGISTRY: dict[str, ComponentSpec] = {}


def register_component(spec: ComponentSpec) -> None:
    _REGISTRY[spec.name] = spec


def available_components() -> dict[str, ComponentSpec]:
    return dict(_REGISTRY)


def component_spec(name: str) -> ComponentSpec:
    specs = available_components()
    if name not in specs:
        raise MathScoutError(f"unknown index component '{name}' (available: {', '.join(sorted(specs))})")
    return specs[name]


def default_components() -> list[str]:
    """The components `mathscout index` builds unless told: the default ones whose optional part is installed
    (a core install without the `lucene` part builds structure alone, and says so)."""
    names = []
    for name, spec in available_components().items():
        if not spec.default:
            continue
        if spec.installed():
            names.append(name)
        else:
            warning(f"the {name} component is left out: {missing_module(spec.needs)}")
    return names
