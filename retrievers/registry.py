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

from mathscout.errors import MathScoutError, did_you_mean
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


def unknown_mode(mode: str, modes: list[str], scope: str = "") -> str:
    """The one message for a search mode that is not among `modes` (`scope`: where, e.g. " for this index"), with the
    closest one when it looks mistyped."""
    return f"unknown search mode '{mode}'{scope}{did_you_mean(mode, modes)} (modes: {', '.join(modes)})"


def open_retriever(index: IndexDir | Path | str, mode: str, **options) -> Retriever:
    """The retriever for `mode` over `index`; clear errors for unknown modes or missing components."""
    modes = available_modes()
    if mode not in modes:
        raise MathScoutError(unknown_mode(mode, sorted(modes)))
    index = index if isinstance(index, IndexDir) else IndexDir(index)
    from mathscout.retrievers.shards.layout import is_sharded

    if is_sharded(index.path):  # a sharded index (issue 18): the shards' Ray actors answer
        from mathscout.retrievers.shards.retriever import open_sharded

        return open_sharded(index, mode, **options)
    spec = modes[mode]
    for name in spec.requires:
        index.component_path(name)
    return spec.open(index, **options)


# ---- rerankers: one table, from which the choices, their validation, the help and the page's menu are made --------


@dataclass(frozen=True)
class RerankerEntry:
    """One reranker: `opener(index=…, store=…, **options)` gives it (a "module:function" target); `needs`: what it
    needs, in words; `score`: what its score (`components["rerank"]`) means; `aliases`: other spellings `--rerank`
    accepts; `label`: its name in the page's menu; `llm`: it calls the LLM's endpoint (a server counts it against
    the LLM's allowance, `mathscout.ui.llm_allowance`)."""

    name: str
    opener: str
    description: str
    needs: str
    score: str
    aliases: tuple[str, ...] = ()
    label: str = ""
    llm: bool = False

    def open(self, index=None, store=None, **options):
        return resolve(self.opener)(index=index, store=store, **options)


AUTO_RERANK = "auto"  # not a reranker: the rule `auto_reranker` applies (the same for every search and question)
AUTO_RERANK_MEANING = (
    "the LLM's listwise reranker when an LLM is configured and this client may use it, else the index's trained "
    "cross-encoder when it has one, else local embeddings"
)
NO_RERANK = ("", "none", "off", "no", "false")
LLM_ENDPOINT = "an LLM endpoint (OPENAI_API_KEY or OPENAI_BASE_URL, or [llm] in the config file)"
RERANKERS: tuple[RerankerEntry, ...] = (
    RerankerEntry(
        "embedding",
        R + "rerank:open_embedding",
        "cosine of local all-MiniLM-L6-v2 embeddings (Rohatgi et al. 2020 §2.2)",
        needs="the dense extra (sentence-transformers); runs offline",
        score="embedding cosine of query and passage",
        label="embedding — local embeddings",
    ),
    RerankerEntry(
        "openai-embedding",
        R + "rerank:open_openai_embedding",
        "cosine of embeddings from an OpenAI-compatible /v1/embeddings endpoint",
        needs=LLM_ENDPOINT,
        score="embedding cosine of query and passage (the endpoint's model)",
        aliases=("openai",),
        label="openai-embedding — the endpoint's embeddings",
        llm=True,
    ),
    RerankerEntry(
        "llm",
        R + "rerank:open_llm",
        "a chat model sorts the passages (listwise, Zhong 2023 thesis ch. 6 prompt)",
        needs=LLM_ENDPOINT,
        score="position in the model's order (higher is better)",
        aliases=("llm-listwise",),
        label="llm — the LLM sorts the passages",
        llm=True,
    ),
    RerankerEntry(
        "cross",
        R + "rerank:open_cross",
        "the index's trained cross-encoder reads question and passage together (mathscout train cross-encoder)",
        needs="a trained cross-encoder in the index and the dense extra",
        score="cross-encoder logit interpolated with the first-stage score (weight tuned per first stage)",
        aliases=("cross-encoder",),
        label="cross — the index's cross-encoder",
    ),
)


def reranker_kinds() -> tuple[str, ...]:
    """Every value `--rerank` names, `auto` first (aliases aside)."""
    return (AUTO_RERANK, *(entry.name for entry in RERANKERS))


def llm_rerankers() -> frozenset[str]:
    """The rerankers that call the LLM's endpoint."""
    return frozenset(entry.name for entry in RERANKERS if entry.llm)


def reranker_entry(kind: str) -> RerankerEntry:
    """The entry of a reranker's name or alias, else MathScoutError naming the choices."""
    for entry in RERANKERS:
        if kind == entry.name or kind in entry.aliases:
            return entry
    raise _unknown_reranker(kind, kind)


def _unknown_reranker(shown: object, typed: str) -> MathScoutError:
    """The one error for a reranker name no entry has: `shown` as the user gave it, `typed` as it was looked up."""
    kinds = reranker_kinds()
    return MathScoutError(
        f"unknown reranker {shown!r}{did_you_mean(typed, kinds)} (choose from {', '.join(kinds)}, or none)"
    )


def rerank_kind(value: object) -> str | None:
    """A `rerank` value as every entry point reads it: None for no reranking (None, False, "none", "off"), "auto"
    for True, else a reranker's name (an alias read as its name); anything else is a MathScoutError naming the
    choices."""
    if value is None or value is False:
        return None
    if value is True:
        return AUTO_RERANK
    text = str(value).strip().lower()
    if text in NO_RERANK:
        return None
    if text == AUTO_RERANK:
        return text
    try:
        return reranker_entry(text).name
    except MathScoutError:
        raise _unknown_reranker(value, text) from None


def rerank_argument(text: str) -> str | None:
    """argparse `type=` for --rerank."""
    import argparse

    try:
        return rerank_kind(text)
    except MathScoutError as exc:
        hint = "; write --rerank auto before a query" if " " in text.strip() or "$" in text else ""
        raise argparse.ArgumentTypeError(f"{exc}{hint}") from None


def rerank_help() -> str:
    """What `rerank` may be, in words (the command line's --help, the HTTP API's description)."""
    kinds = "; ".join(f"{entry.name} ({entry.description}; needs {entry.needs})" for entry in RERANKERS)
    return f"rerank the top hits: {AUTO_RERANK} ({AUTO_RERANK_MEANING}); {kinds}; or none"


def rerank_choices() -> list[tuple[str, str]]:
    """The page's reranker menu: (label, value), no reranking first."""
    return [
        ("none — the first stage's order", "none"),
        (f"{AUTO_RERANK} — the best reranker available", AUTO_RERANK),
        *((entry.label or entry.name, entry.name) for entry in RERANKERS),
    ]


def reranker_score_meanings() -> dict[str, str]:
    """Reranker name → what its score means."""
    return {entry.name: entry.score for entry in RERANKERS}
