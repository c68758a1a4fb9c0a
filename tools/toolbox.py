"""The work behind the agent's tools, over one index: searches, formula rewriting, type expansion,
reranking and document look-up. Plain Python (no LangChain): the offline planner calls it directly and
`mathscout.tools.langchain_tools` wraps it for an LLM. Each call returns a `ToolOutput`: typed evidence (hits,
rewrites, expansions), a one-line summary for the trace and a compact JSON-able payload citing ids.

What a tool can do depends on the index: `ToolBox.offered()` says which tools work and why others don't.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from mathscout.errors import MathScoutError, QueryError
from mathscout.events import Expansion, Rewrite
from mathscout.index.layout import IndexDir
from mathscout.notices import collecting
from mathscout.render import explain_hits
from mathscout.retrievers import available_modes, open_retriever
from mathscout.retrievers.base import Retriever
from mathscout.retrievers.registry import servable_modes
from mathscout.tools.searching import partial_results
from mathscout.types import Document, Hit, Query, renumbered

MAX_DOCUMENT_CHARS = 3_000  # get_document returns at most this much text
MAX_DOCUMENT_FORMULAS = 20
MAX_FORMS = 4  # equivalent forms the rewrite tool returns (each one is a structure search)
REWRITE_SECONDS = 2.0
TOOL_NAMES = ("structure_search", "hybrid_search", "type_expansion", "rewrite_formula", "rerank", "get_document")


@dataclass
class ToolOutput:
    """What one tool call produced."""

    summary: str  # one line for the trace, e.g. "10 hits: 123, 456, …"
    payload: dict[str, Any]  # compact structured result for the LLM (document text only under data fields)
    hits: list[Hit] = field(default_factory=list)
    rewrites: list[Rewrite] = field(default_factory=list)
    expansions: list[Expansion] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)


def _rewrite_module():
    try:
        from mathscout import rewrite
    except ImportError:
        return None
    return rewrite if hasattr(rewrite, "equivalent_forms") else None


def _rerank_module():
    try:
        from mathscout.retrievers import rerank
    except ImportError:
        return None
    return rerank if hasattr(rerank, "open_reranker") else None


def _type_expansion_function():
    try:
        from mathscout.types_expansion.expand import type_expansion
    except ImportError:
        return None
    return type_expansion


def hit_ids_summary(hits: list[Hit], shown: int = 5) -> str:
    if not hits:
        return "0 hits"
    ids = ", ".join(h.doc_id for h in hits[:shown])
    return f"{len(hits)} hit{'s' * (len(hits) != 1)}: {ids}" + (", …" if len(hits) > shown else "")


class ToolBox:
    """The tools' implementations over one index; retrievers are opened once, on first use (thread-safe)."""

    def __init__(self, index: IndexDir | Path | str):
        self.index = index if isinstance(index, IndexDir) else IndexDir(index)
        self._retrievers: dict[str, Retriever] = {}
        self._open_notices: dict[str, list[str]] = {}
        self._rerankers: dict[tuple[str, tuple[tuple[str, Any], ...]], Any] = {}  # by kind and options
        self._lock = threading.Lock()  # guards the tables above, never held while something opens
        self._opening: dict[tuple[str, Any], threading.Lock] = {}  # one lock per retriever or reranker being opened

    def _once(self, table: dict, kind: str, key: Any, opener: Callable[[], Any]) -> Any:
        """`table[key]`, made by `opener()` on its first use. Only the callers that need that retriever or reranker wait
        while it opens (loading a model takes seconds): other sessions' searches go on meanwhile."""
        with self._lock:
            if key in table:
                return table[key]
            opening = self._opening.setdefault((kind, key), threading.Lock())
        with opening:
            with self._lock:
                if key in table:
                    return table[key]
            value = opener()
            with self._lock:
                table[key] = value
            return value

    # --- what the index offers ------------------------------------------------------------------------------

    def mode_usable(self, mode: str) -> bool:
        """True when the index has what `mode` needs (hybrid: at least one component it can fuse)."""
        if not servable_modes(self.index, [mode]):
            return False
        if mode == "ranked":
            from mathscout.retrievers.ranked import has_ranker

            return has_ranker(self.index) and self.ranker_problem() is None
        if mode == "hybrid":
            from mathscout.retrievers.fusion import FusionConfig, fallback_config

            try:
                return FusionConfig.read(self.index) is not None or bool(fallback_config(self.index).weights)
            except MathScoutError:
                return False
        return True

    def mode_problem(self, mode: str) -> str | None:
        """Why a mode of the registry that `mode_usable` refuses cannot run on this index, from its own files (a
        damaged `fusion.json` or `ranker.json`, a missing component and the command that adds it); None when nothing
        more specific than "not on this index" is known."""
        spec = available_modes().get(mode)
        for name in spec.requires if spec else ():
            try:
                self.index.component_path(name)
            except MathScoutError as exc:
                return str(exc)
        if mode == "ranked":
            from mathscout.retrievers.ranked import has_ranker, no_ranker_message

            return self.ranker_problem() if has_ranker(self.index) else no_ranker_message(self.index.path)
        if mode == "hybrid":
            from mathscout.retrievers.fusion import FusionConfig

            try:
                FusionConfig.read(self.index)
            except MathScoutError as exc:
                return str(exc)
        return None

    def ranker_problem(self) -> str | None:
        """Why the index's learned ranker (`ranker.json`) cannot be used, e.g. one trained on another feature list;
        None when it can be used or when the index has none."""
        from mathscout.retrievers.ranked import RankerConfig, has_ranker

        if not has_ranker(self.index):
            return None
        try:
            RankerConfig.read(self.index.path)
        except MathScoutError as exc:
            return str(exc)
        return None

    def cross_encoder_usable(self) -> bool:
        """True when the index has a trained cross-encoder and the libraries to run it are installed."""
        module = _rerank_module()
        return module is not None and module.cross_encoder_usable(self.index)

    def local_reranker(self) -> str:
        """What `--rerank auto` is without the LLM: the index's cross-encoder when it has one, else local embeddings."""
        return "cross" if self.cross_encoder_usable() else "embedding"

    def cross_encoder_helps(self, first_stage: str) -> bool:
        """True when the index's cross-encoder is usable and its training measured a gain over `first_stage`'s top hits
        (`mathscout.dense.cross.measured_gain`)."""
        from mathscout.dense.cross import measured_gain

        info = self._cross_encoder_info
        return info is not None and self.cross_encoder_usable() and measured_gain(info, first_stage)

    @functools.cached_property
    def _cross_encoder_info(self):
        """The description of the index's cross-encoder, read (and its files checked) once per toolbox, not per
        question; None when there is none or it is damaged (opening the reranker then says why)."""
        from mathscout.dense.cross import CrossEncoderInfo

        try:
            return CrossEncoderInfo.read(self.index.path)
        except MathScoutError:
            return None

    def modes(self) -> list[str]:
        """The search modes this index supports, in registry order."""
        return [mode for mode in available_modes() if self.mode_usable(mode)]

    def fuses_as_tuned(self) -> bool:
        """True when hybrid fuses what it was made for: the index has dense vectors or tuned fusion weights. Without
        either it fuses structure and BM25 with untuned equal weights, which is not worth choosing over BM25 (the
        measured baseline): the assistant's text search is then BM25 (`text_mode`), and menus leave hybrid out."""
        from mathscout.retrievers.fusion import FusionConfig

        try:
            return "dense" in self.index.components or FusionConfig.read(self.index) is not None
        except MathScoutError:  # damaged weights: searching hybrid says so
            return False

    def menu_modes(self) -> list[str]:
        """The modes a menu offers for this index (the chat page's): `modes()`, hybrid only when `fuses_as_tuned()`.
        Every mode of `modes()` is still accepted when named (`--mode hybrid`, the API)."""
        return [mode for mode in self.modes() if mode != "hybrid" or self.fuses_as_tuned()]

    def offered(self) -> dict[str, str | None]:
        """Tool name → None when it works on this index, else the reason it is not offered."""
        components = self.index.components
        reasons: dict[str, str | None] = {
            "structure_search": None if self.mode_usable("structure") else "the index has no structure component",
            "hybrid_search": None if self.mode_usable("hybrid") else "the index has nothing hybrid search can fuse",
            "type_expansion": None if "types" in components else "the index has no types component",
            "rewrite_formula": None if _rewrite_module() else "formula rewriting (mathscout.rewrite) is not installed",
            "rerank": None if _rerank_module() else "rerankers (retrievers.rerank) are not installed",
            "get_document": None,
        }
        if reasons["type_expansion"] is None and _type_expansion_function() is None:
            reasons["type_expansion"] = "type expansion (mathscout.types_expansion) is not installed"
        return reasons

    def available(self) -> list[str]:
        return [name for name, reason in self.offered().items() if reason is None]

    def text_mode(self) -> str | None:
        """The best word-level retriever of the index: its learned ranker when it has one (`mathscout train
        ranker`), else MABOWDOR fusion when it has dense vectors or tuned weights, else BM25 (the measured
        baseline; TypesExp only when there is no BM25)."""
        if self.mode_usable("ranked"):
            return "ranked"
        if self.mode_usable("hybrid") and self.fuses_as_tuned():
            return "hybrid"
        for mode in ("bm25", "dense", "types"):
            if self.mode_usable(mode):
                return mode
        return None

    # --- retrievers -----------------------------------------------------------------------------------------

    def retriever(self, mode: str) -> Retriever:
        """The retriever of `mode`, opened once; the notices said while opening become `open_notices(mode)`."""

        def opener() -> Retriever:
            with collecting() as said:
                retriever = open_retriever(self.index, mode)
            self._open_notices[mode] = [line.removeprefix("notice: ").strip() for line in said]
            return retriever

        return self._once(self._retrievers, "retriever", mode, opener)

    def open_notices(self, mode: str) -> list[str]:
        return list(self._open_notices.get(mode, []))

    def _search(self, mode: str, query: Query, k: int, explain_query: str) -> ToolOutput:
        """A search tool's output: the top-k hits of `mode` for `query`, explained (snippets, matched formulas), with
        the notices of opening its retriever and of a sharded index's missing shards (partial results)."""
        found = self.retriever(mode).search(query, k=k)
        hits = renumbered([replace(h) for h in found])
        documents = explain_hits(hits, self.index.store, explain_query)  # snippets/formulas the retriever left out
        return ToolOutput(
            hit_ids_summary(hits),
            {"hits": [hit_payload(h, documents) for h in hits]},
            hits=hits,
            notices=self.open_notices(mode) + partial_results(found),
        )

    def structure_search(self, formula: str, k: int = 10, words: str = "") -> ToolOutput:
        """Approach Zero structure search for one formula (Zhong 2023 thesis ch. 3), plus words by Eq. 3.18 when given."""
        text = f"{words} ${formula}$".strip() if words else ""
        query = Query(id="tool", text=text) if words else Query(id="tool", text="", formula=formula)
        return self._search("structure", query, k, f"{words} ${formula}$".strip())

    def hybrid_search(self, query: str, k: int = 10) -> ToolOutput:
        """MABOWDOR hybrid search (Zhong 2023 thesis §5.2.3): the index's tuned fusion, else equal weights."""
        return self._search("hybrid", Query(id="tool", text=query), k, query)

    def search(self, query: str, mode: str, k: int = 10) -> ToolOutput:
        """Any search mode the index supports (the planner's explicit modes and its text retriever)."""
        if not self.mode_usable(mode):
            raise MathScoutError(f"the index cannot serve the '{mode}' mode (modes: {', '.join(self.modes())})")
        return self._search(mode, Query(id="tool", text=query), k, query)

    def type_expansion(self, text: str) -> ToolOutput:
        """Mathematical types in the text and their nearest types (Stathopoulos & Teufel 2016 §4.3.1)."""
        expand = _type_expansion_function()
        if expand is None:
            raise MathScoutError("type expansion is not installed")
        result = expand(text, self.index)
        expansions = list(result)
        payload = {
            "types": [
                {"type": e.type, "related": [{"type": t, "cosine": round(c, 3)} for t, c in e.related]}
                for e in expansions
            ]
        }
        if not expansions:
            payload["message"] = result.summary
        return ToolOutput(result.summary, payload, expansions=expansions)

    def rewrite_formula(self, latex: str, max_forms: int = MAX_FORMS) -> ToolOutput:
        """Equivalent forms of a formula (SymPy, bounded in time and memory; REWRITE's `equivalent_forms`)."""
        module = _rewrite_module()
        if module is None:
            raise MathScoutError("formula rewriting is not installed")
        result = module.equivalent_forms(latex, max_forms=max_forms, seconds=REWRITE_SECONDS)
        rewrites = [Rewrite(latex, form.latex, form.rule) for form in result.forms]
        payload: dict[str, Any] = {
            "original": latex,
            "forms": [{"latex": r.rewritten, "rule": r.rule} for r in rewrites],
        }
        if result.notice:
            payload["message"] = result.notice
        summary = f"{len(rewrites)} equivalent form{'s' * (len(rewrites) != 1)}"
        if rewrites:
            summary += ": " + ", ".join(f"{r.rewritten} ({r.rule})" for r in rewrites[:3])
        elif result.notice:
            summary += f" ({result.notice})"
        return ToolOutput(summary, payload, rewrites=rewrites, notices=[result.notice] if result.notice else [])

    def reranker(self, kind: str = "auto", **options):
        """A reranker of `mathscout.retrievers.rerank` (opened once per kind and options), reading passages from the store."""
        module = _rerank_module()
        if module is None:
            raise MathScoutError("rerankers are not installed")
        key = (kind, tuple(sorted(options.items())))
        return self._once(
            self._rerankers,
            "reranker",
            key,
            lambda: module.open_reranker(kind, store=self.index.store, index=self.index, **options),
        )

    def rerank(self, query: str, hits: list[Hit], kind: str = "auto", **options) -> ToolOutput:
        """The hits reordered by a reranker (local embeddings, or an LLM/OpenAI embeddings when configured);
        when the reranker fails it keeps the first-stage order and says so."""
        reranker = self.reranker(kind, **options)
        reranked = renumbered([replace(h) for h in reranker.rerank(query, [replace(h) for h in hits], k=len(hits))])
        documents = self.index.store.get_many(h.doc_id for h in reranked)
        name = getattr(reranker, "name", kind)
        notice = getattr(reranker, "last_notice", None)
        payload = {"reranker": name, "hits": [hit_payload(h, documents) for h in reranked]}
        return ToolOutput(
            f"{name}: " + hit_ids_summary(reranked), payload, hits=reranked, notices=[notice] if notice else []
        )

    def document(self, doc_id: str) -> Document | None:
        return self.index.store.get(doc_id)

    def get_document(self, doc_id: str) -> ToolOutput:
        """One document's title, text (cut at MAX_DOCUMENT_CHARS) and formulas."""
        document = self.document(doc_id)
        if document is None:
            raise QueryError(f"no document with id '{doc_id}' in this index: use an id a search tool returned")
        text = document.text
        payload = {
            "id": document.id,
            "title": document.title,
            "text": text[:MAX_DOCUMENT_CHARS],
            "truncated": len(text) > MAX_DOCUMENT_CHARS,
            "formulas": [f.latex for f in document.formulas[:MAX_DOCUMENT_FORMULAS]],
        }
        return ToolOutput(f"{document.id}: {len(text):,} characters, {len(document.formulas)} formulas", payload)


def hit_payload(hit: Hit, documents: dict[str, Document]) -> dict[str, Any]:
    """A hit for the LLM: id, rank, score, title, matched formulas and the passage (title/passage are data)."""
    document = documents.get(hit.doc_id)
    return {
        "id": hit.doc_id,
        "rank": hit.rank,
        "score": round(float(hit.score), 4),
        "title": document.title if document else "",
        "matched_formulas": [f.latex for f in hit.formulas[:3]],
        "passage": hit.snippet,
    }
