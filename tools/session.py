"""One question's use of the tools: validated arguments, a call budget, timings, the trace, and every hit seen.

Both planners go through a `ToolSession`, so the trace (`ToolCall`s), the evidence (hits, rewrites, type
expansions) and the limits are the same whether an LLM or the offline planner chose the calls. A failing
tool never raises out of a session: its `ToolCall.error` says what went wrong and the planner carries on; a damaged
index file (one the user must rebuild) is also a notice, so a search that does not show its trace still says so.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import ValidationError

from mathscout.errors import DamagedIndexError, MathScoutError
from mathscout.events import AgentEvent, Expansion, Rewrite, ToolCall
from mathscout.notices import notice
from mathscout.options import RERANK_DEPTH
from mathscout.tools.schemas import (
    SCHEMAS,
    GetDocumentArgs,
    RerankArgs,
    RewriteFormulaArgs,
    SearchArgs,
    StructureSearchArgs,
    TypeExpansionArgs,
)
from mathscout.tools.toolbox import ToolBox, ToolOutput
from mathscout.types import Hit

MAX_CALLS = 16  # tool calls one question may make (an LLM looping on tools stops here)
MAX_DOCUMENT_CALLS = 5  # get_document calls one question may make


def validation_message(exc: ValidationError) -> str:
    """`k: Input should be less than or equal to 50; …` (one line)."""
    parts = []
    for error in exc.errors()[:3]:
        where = ".".join(str(p) for p in error.get("loc", ())) or "arguments"
        parts.append(f"{where}: {error.get('msg', 'invalid')}")
    return "invalid arguments (" + "; ".join(parts) + ")"


@dataclass
class ToolSession:
    """The tool calls of one question. `emit` (optional) receives tool_start/tool_end events as they happen."""

    toolbox: ToolBox
    emit: Callable[[AgentEvent], None] | None = None
    rerank_kind: str = "auto"
    rerank_options: dict[str, Any] = field(default_factory=dict)  # e.g. the LLM endpoint for "llm"
    rerank_depth: int = RERANK_DEPTH.default  # first-stage hits a reranker reorders
    max_calls: int = MAX_CALLS
    max_document_calls: int = MAX_DOCUMENT_CALLS
    trace: list[ToolCall] = field(default_factory=list)
    seen: dict[str, Hit] = field(default_factory=dict)  # every hit any tool returned (its best rank kept)
    documents_read: list[str] = field(default_factory=list)
    rewrites: list[Rewrite] = field(default_factory=list)
    expansions: list[Expansion] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)

    def start(self, tool: str, arguments: dict[str, Any]) -> ToolCall:
        """A new call in the trace (not run yet)."""
        call = ToolCall(tool, dict(arguments))
        self.trace.append(call)
        if self.emit:
            self.emit(AgentEvent("tool_start", text=tool, call=call))
        return call

    def finish(self, call: ToolCall, work: Callable[[], ToolOutput] | None = None) -> ToolOutput | None:
        """Validate and run a started call (its tool's work, or `work` when a composed search does it); None (and
        `call.error`) when it could not run."""
        started = time.perf_counter()
        output = None
        try:
            self._allowed(call.tool)
            output = self._run(call.tool, call.arguments) if work is None else work()
        except ValidationError as exc:
            call.error = validation_message(exc)
        except MathScoutError as exc:
            call.error = str(exc)
            if isinstance(exc, DamagedIndexError):
                notice(f"notice: {call.tool} skipped: {exc}")
        except Exception as exc:  # noqa: BLE001 — a broken component must not end the answer
            call.error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else 'failed'}"
        call.seconds = time.perf_counter() - started
        if output is not None:
            call.summary, call.hit_count = output.summary, len(output.hits)
            self._collect(output)
        if self.emit:
            self.emit(AgentEvent("tool_end", text=call.tool, call=call))
        return output

    def call(self, tool: str, **arguments: Any) -> tuple[ToolCall, ToolOutput | None]:
        call = self.start(tool, arguments)
        return call, self.finish(call)

    def run(self, tool: str, arguments: dict[str, Any], work: Callable[[], ToolOutput]) -> ToolOutput | None:
        """A traced call whose work is done by `work` (a stage of the planner's composed search): the same trace,
        budget, error handling and evidence as `call`."""
        return self.finish(self.start(tool, arguments), work)

    def _allowed(self, tool: str) -> None:
        """Raise when `tool` is unknown, not offered by the index, or over the call budget."""
        if tool not in SCHEMAS:
            raise MathScoutError(f"unknown tool '{tool}'")
        offered = self.toolbox.offered()
        if tool in offered and offered[tool] is not None:
            raise MathScoutError(f"{tool} is not available: {offered[tool]}")
        if len(self.trace) > self.max_calls:
            raise MathScoutError(f"tool budget of {self.max_calls} calls used up: answer with the evidence found")

    def _run(self, tool: str, raw: dict[str, Any]) -> ToolOutput:
        schema = SCHEMAS[tool]
        extra = {k: v for k, v in raw.items() if k == "mode"} if tool == "search" else {}
        args = schema.model_validate({k: v for k, v in raw.items() if k not in extra})
        box = self.toolbox
        # each tool's arguments are its schema's (SCHEMAS)
        if tool == "structure_search":
            assert isinstance(args, StructureSearchArgs)
            return box.structure_search(args.formula, args.k, args.words)
        if tool == "hybrid_search":
            assert isinstance(args, SearchArgs)
            return box.hybrid_search(args.query, args.k)
        if tool == "search":
            assert isinstance(args, SearchArgs)
            return box.search(args.query, str(extra.get("mode", "bm25")), args.k)
        if tool == "type_expansion":
            assert isinstance(args, TypeExpansionArgs)
            return box.type_expansion(args.text)
        if tool == "rewrite_formula":
            assert isinstance(args, RewriteFormulaArgs)
            return box.rewrite_formula(args.latex)
        if tool == "rerank":
            assert isinstance(args, RerankArgs)
            return box.rerank(args.query, self._hits_for(args.hit_ids), self.rerank_kind, **self.rerank_options)
        assert isinstance(args, GetDocumentArgs)
        if len(self.documents_read) >= self.max_document_calls:
            raise MathScoutError(
                f"at most {self.max_document_calls} documents can be read per question: "
                "answer from the passages the searches returned"
            )
        output = box.get_document(args.id)
        self.documents_read.append(args.id)
        return output

    def _hits_for(self, ids: list[str]) -> list[Hit]:
        """Hits for ids a search returned; ids never seen are looked up, unknown ones refused."""
        hits, unknown = [], []
        for doc_id in ids:
            if doc_id in self.seen:
                hits.append(replace(self.seen[doc_id]))
            elif self.toolbox.document(doc_id) is not None:
                hits.append(Hit(doc_id=doc_id, score=0.0))
            else:
                unknown.append(doc_id)
        if unknown:
            raise MathScoutError(f"unknown document id{'s' * (len(unknown) > 1)}: {', '.join(unknown[:5])}")
        return hits

    def _collect(self, output: ToolOutput) -> None:
        for hit in output.hits:
            kept = self.seen.get(hit.doc_id)
            if kept is None or (hit.snippet and not kept.snippet) or (hit.formulas and not kept.formulas):
                self.seen[hit.doc_id] = replace(hit)
        self.rewrites += [r for r in output.rewrites if r not in self.rewrites]
        self.expansions += [e for e in output.expansions if e not in self.expansions]
        self.notices += [n for n in output.notices if n and n not in self.notices]
