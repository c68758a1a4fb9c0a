"""What the assistant reports while it works and when it is done (shared by the CLI, the API and the UI).

`Assistant.stream(question, …)` yields `AgentEvent`s in order; the last one has kind "answer" and carries
the `Answer`. `Assistant.ask(…)` returns that `Answer` directly.
"""

from __future__ import annotations

import queue
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from mathscout.options import MODE
from mathscout.types import Hit

EventKind = Literal["plan", "tool_start", "tool_end", "token", "notice", "answer"]


@dataclass
class ToolCall:
    """One tool invocation in the trace: which tool, its arguments, what came back and how long it took."""

    tool: str
    arguments: dict[str, Any]
    summary: str = ""  # one line, e.g. "10 hits: 123, 456, …" or "3 equivalent forms"
    hit_count: int = 0
    seconds: float = 0.0
    error: str | None = None  # the tool failed; the agent carried on without it


@dataclass
class Rewrite:
    """An equivalent form of a query formula that was searched too (SymPy rewriting)."""

    original: str
    rewritten: str
    rule: str  # e.g. "together", "expand", "trig identity"


@dataclass
class Expansion:
    """A mathematical type detected in the query and the related types it was expanded with."""

    type: str
    related: list[tuple[str, float]] = field(default_factory=list)  # (type, cosine similarity)


@dataclass
class Answer:
    """The final answer: markdown text with `$…$` math and `[doc-id]` citations, and the evidence behind it."""

    question: str
    text: str
    hits: list[Hit] = field(default_factory=list)  # the ranked hits the answer cites from, best first
    citations: list[str] = field(default_factory=list)  # doc ids cited in `text`, in order of first use
    trace: list[ToolCall] = field(default_factory=list)
    rewrites: list[Rewrite] = field(default_factory=list)
    expansions: list[Expansion] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)  # e.g. "LLM unavailable (timeout): offline planner used"
    planner: str = "offline"  # "offline" or "llm:<model>"
    mode: str = MODE.default
    seconds: float = 0.0
    k: int = 10  # hits asked for (after the assistant's cap)
    rerank: str | None = None  # the reranker used, if any
    rerank_depth: int = 10
    index: str = ""  # the index folder answered from

    def to_dict(self) -> dict[str, Any]:
        """The answer as the schema gives it (`mathscout.schema.AnswerRecord`)."""
        from mathscout.schema import answer_record

        return answer_record(self).to_dict()


@dataclass
class AgentEvent:
    """One streamed step. `text` is a token chunk (kind "token") or a human-readable line (others)."""

    kind: EventKind
    text: str = ""
    call: ToolCall | None = None  # set for tool_start / tool_end
    answer: Answer | None = None  # set for the final "answer" event


EventQueue = queue.Queue  # AgentEvents as the tools emit them (from any thread), passed on by the assistant's stream


def drain(events: EventQueue) -> Iterator[AgentEvent]:
    """The events queued so far, in order, without waiting for more."""
    while True:
        try:
            yield events.get_nowait()
        except queue.Empty:
            return
