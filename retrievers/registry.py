"""The one table of retrievers/'s own retrievers: each entry carries its index component and its search modes
(with their labels). The command line, the chat page, the agent's tools and the index builder all read it; adding
a retriever is adding an entry here (and the module it names).

Code is named, not imported: `"module:attribute"` targets are imported on first use, so a bm25 search never
loads numba, scipy or the dense code, and listing the modes imports nothing. Targets name retrievers/ or the
layers below it only (tests/codebase/test_layers.py checks them): the entry layer adds what lives above, the agent's
`auto` mode and the trainers (`mathscout.ui.registry`).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mathscout.errors import MathScoutError
from mathscout.index.components import ComponentSpec, register_component
from mathscout.index.layout import IndexDir
from mathscout.retrievers.base import Retriever


def resolve(target: str) -> Any:
    """The object a `"module:attribute"` target names (imported now)."""
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)


@dataclass(frozen=True)
class ModeSpec:
    """A search mode: `open(index, **options)` gives its Retriever (`opener`: a "module:function" target or a
    callable); `requires`: the index components it needs; `label`: its name on the page (a short word, a dash,
    what it does); `menu`: its place in the page's menu (lower first)."""

    name: str
    opener: str | Callable[..., Retriever]
    requires: tuple[str, ...]
    description: str
    label: str = ""
    menu: int = 100

    def open(self, index: IndexDir, **options) -> Retriever:
        opener = resolve(self.opener) if isinstance(self.opener, str) else self.opener
        return opener(index, **options)


@dataclass(frozen=True)
class RetrieverEntry:
    """One retriever: its index component (`component` names a factory of `mathscout.index.components.
    IndexComponent`, None when it reads other retrievers' components) and its modes."""

    name: str
    component: str | None
    component_description: str = ""
    default: bool = False  # built by `mathscout index` unless --components says otherwise
    modes: tuple[ModeSpec, ...] = ()
    score: str = ""  # what the retriever's raw score means (shown beside a hit's number)
    needs: str = ""  # the top-level module its component's build needs that an optional part installs


R = "mathscout.retrievers."
RETRIEVERS: tuple[RetrieverEntry, ...] = (
    RetrieverEntry(
        "bm25",
        R + "bm25:BM25Component",
        "math-aware BM25 (Lucene, pre-tokenized math + words)",
        default=True,
        needs="pyserini",
        modes=(
            ModeSpec(
                "bm25",
                R + "bm25:open_bm25",
                ("bm25",),
                "math-aware BM25 over words and unified LaTeX tokens",
                "text — math-aware BM25",
                7,
            ),
        ),
        score="Okapi BM25, words + math tokens",
    ),
    RetrieverEntry(
        "structure",
        R + "structure:StructureComponent",
        "Approach Zero path index of formula operator trees",
        default=True,
        modes=(
            ModeSpec(
                "structure",
                R + "structure:open_structure",
                ("structure",),
                "Approach Zero structure search (formulas; + BM25 for words, Zhong 2023 thesis Eq. 3.18)",
                "structure — formula trees (Approach Zero)",
                1,
            ),
        ),
        score="matched-subtree similarity × path idf (Zhong 2023 thesis Eqs. 3.5, 3.15)",
    ),
    RetrieverEntry(
        "types",
        R + "types:TypesComponent",
        "mathematical types: type delta index + type embeddings (word2vec)",
        modes=(
            ModeSpec(
                "types",
                R + "types:open_types",
                ("bm25", "types"),
                "TypesExp: BM25 + query types ×2 + their 5 nearest types (type embeddings)",
                "types — BM25 + type expansion",
                9,
            ),
            ModeSpec(
                "types2x",
                R + "types:open_types2x",
                ("bm25", "types"),
                "Types2X: BM25 + query types ×2",
                "types2x — BM25 + query types",
                10,
            ),
            ModeSpec(
                "rm3",
                R + "types:open_rm3",
                ("bm25",),
                "BM25 with RM3 pseudo-relevance feedback",
                "rm3 — BM25 + feedback",
                11,
            ),
        ),
        score="BM25 of expanded type terms",
    ),
    RetrieverEntry(
        "hybrid",
        None,
        modes=(
            ModeSpec(
                "hybrid",
                R + "fusion:open_hybrid",
                (),
                "MABOWDOR: fusion of structure, dense and BM25 with the weights tuned for the index "
                "(mathscout train fusion)",
                "hybrid — structure + dense + text, fused",
                3,
            ),
        ),
    ),
    RetrieverEntry(
        "splade",
        R + "splade:SpladeComponent",
        "learned sparse (SPLADE) impact index from a local checkpoint ($MATHSCOUT_SPLADE_MODEL)",
        modes=(
            ModeSpec(
                "splade",
                R + "splade:open_splade",
                ("splade",),
                "learned sparse retrieval (SPLADE impact search; local checkpoint)",
                "splade — learned sparse",
                13,
            ),
        ),
        score="learned sparse dot product",
    ),
    RetrieverEntry(
        "dense",
        R + "dense:dense_component",
        "bi-encoder passage vectors (faiss Flat + HNSW) and token vectors, "
        "model $MATHSCOUT_DENSE_MODEL or all-MiniLM-L6-v2",
        modes=(
            ModeSpec(
                "dense",
                R + "dense:open_dense",
                ("dense",),
                "dense passage retrieval (bi-encoder, max over passages)",
                "dense — embeddings",
                4,
            ),
        ),
        score="embedding cosine",
    ),
    RetrieverEntry(
        "dense-ft",
        R + "dense:dense_ft_component",
        "passage vectors from the fine-tuned bi-encoder "
        "($MATHSCOUT_DENSE_FT_MODEL, default MATHSCOUT_HOME/models/dense-ft)",
        modes=(
            ModeSpec(
                "dense-ft",
                R + "dense:open_dense_ft",
                ("dense-ft",),
                "dense retrieval with the fine-tuned bi-encoder",
                "dense-ft — embeddings, fine-tuned queries",
                5,
            ),
        ),
        score="embedding cosine, fine-tuned queries",
    ),
    RetrieverEntry(
        "colbert",
        R + "colbert:ColbertComponent",
        "late interaction: IVF-PQ over the dense component's token vectors (build after 'dense')",
        modes=(
            ModeSpec(
                "colbert",
                R + "colbert:open_colbert",
                ("dense", "colbert"),
                "ColBERT-style late interaction: per-token candidates, exact MaxSim (Zhong et al. 2022 Eq. 3)",
                "colbert — late interaction over token vectors",
                6,
            ),
        ),
        score="late interaction, sum of token maxima",
    ),
    RetrieverEntry(
        "scm",
        R + "soft_cosine:SoftCosineComponent",
        "soft vector space model: BM25 vectors + word2vec term similarities",
        modes=(
            ModeSpec(
                "scm",
                R + "soft_cosine:open_scm",
                ("scm",),
                "soft cosine: BM25 whose terms also match similar terms (word2vec)",
                "scm — BM25 + soft term matching",
                12,
            ),
        ),
        score="soft cosine over BM25 vectors",
    ),
    RetrieverEntry(
        "structure-rewrite",
        None,
        modes=(
            ModeSpec(
                "structure-rewrite",
                R + "rewrite:open_structure_rewrite",
                ("structure",),
                "structure search over the query formula and its SymPy-equivalent forms, fused (max)",
                "structure + rewrites — formula trees and SymPy-equivalent forms",
                8,
            ),
        ),
    ),
    RetrieverEntry(
        "ranked",
        None,
        modes=(
            ModeSpec(
                "ranked",
                R + "ranked:open_ranked",
                (),
                "learned ranking (LambdaMART) of the first-stage retrievers' candidates (mathscout train ranker)",
                "ranked — learned ranking of every retriever's candidates (LambdaMART)",
                2,
            ),
        ),
    ),
)


def _register_components() -> None:
    """Offer every entry's component to the core index builder (mathscout.index.components); the factory is
    imported only when the component is built."""
    for entry in RETRIEVERS:
        if entry.component:
            register_component(
                ComponentSpec(
                    entry.name, _factory(entry.component), entry.component_description, entry.default, entry.needs
                )
            )


def _factory(target: str) -> Callable[[], Any]:
    return functools.partial(_make, target)  # a partial of a module-level function pickles (builds run in a child)


def _make(target: str) -> Any:
    return resolve(target)()


_register_components()


def available_modes() -> dict[str, ModeSpec]:
    """Every mode, in table order."""
    return {spec.name: spec for entry in RETRIEVERS for spec in entry.modes}


def combining_modes() -> set[str]:
    """Modes of entries without an index component of their own (hybrid, structure-rewrite, ranked): they open
    other modes and combine their answers (on a sharded index they run at the coordinator, over the sharded modes)."""
    return {spec.name for entry in RETRIEVERS if entry.component is None for spec in entry.modes}


def servable_modes(index: IndexDir, names: Iterable[str]) -> list[str]:
    """The modes of `names` (in their order) whose index components `index` holds."""
    modes, components = available_modes(), set(index.components)
    return [name for name in names if name in modes and set(modes[name].requires) <= components]


def score_meanings() -> dict[str, str]:
    """Retriever name → what its raw score means."""
    return {entry.name: entry.score for entry in RETRIEVERS if entry.score}


def open_retriever(index: IndexDir | Path | str, mode: str, **options) -> Retriever:
    """The retriever for `mode` over `index`; clear errors for unknown modes or missing components."""
    modes = available_modes()
    if mode not in modes:
        raise MathScoutError(f"unknown search mode '{mode}' (available: {', '.join(sorted(modes))})")
    index = index if isinstance(index, IndexDir) else IndexDir(index)
    from mathscout.retrievers.shards.layout import is_sharded

    if is_sharded(index.path):  # a sharded index (issue 18): the shards' Ray actors answer
        from mathscout.retrievers.shards.retriever import open_sharded

        return open_sharded(index, mode, **options)
    spec = modes[mode]
    for name in spec.requires:
        index.component_path(name)
    return spec.open(index, **options)
