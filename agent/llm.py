"""The LLM agent: a LangChain tool-calling agent (`create_agent` over `ChatOpenAI`) that plans the searches,
calls the tools and writes a cited answer (Zhong 2023 thesis ch. 6: the LLM as "central processing unit" over
first-stage retrieval results).

Anything that goes wrong on the LLM side (HTTP errors, time-outs, rate limits, malformed tool calls, an
empty answer, a model that never stops calling tools) raises `LLMUnavailable`; the assistant then falls
back to the offline planner with a visible notice. Citations are checked against the ids the tools returned.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any, cast

from mathscout.agent.compose import check_citations
from mathscout.agent.config import LLMConfig
from mathscout.agent.prompts import load_prompt, user_prompt
from mathscout.events import AgentEvent, Answer, EventQueue, drain
from mathscout.markup import sanitize_answer
from mathscout.options import AUTO, MODE
from mathscout.question import Question
from mathscout.tools.session import ToolSession
from mathscout.types import Hit, renumbered

MAX_STEPS = 10  # model turns per question (each may call several tools)
MODE_TOOLS = {  # explicit search modes: the tools the model may use
    "structure": ["structure_search", "rewrite_formula", "rerank", "get_document"],
    "structure-rewrite": ["structure_search", "rewrite_formula", "rerank", "get_document"],
    "hybrid": ["hybrid_search", "type_expansion", "rerank", "get_document"],
}
OTHER_MODE_TOOLS = ["type_expansion", "rerank", "get_document"]


class LLMUnavailable(Exception):
    """The LLM could not produce a usable answer; `reason` is short and shown to the user."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def describe_error(exc: BaseException, config: LLMConfig) -> str:
    """A short reason for a failed LLM call: 'timeout after 2 s', 'rate limited (HTTP 429)', 'HTTP 500: …'."""
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return f"timeout after {config.timeout:g} s"
    if isinstance(exc, openai.RateLimitError):
        return "rate limited (HTTP 429)"
    if isinstance(exc, openai.APIStatusError):
        message = getattr(exc, "message", "") or str(exc)
        return f"HTTP {exc.status_code}: {' '.join(message.split())[:120]}"
    if isinstance(exc, openai.APIConnectionError):
        return f"cannot connect to {config.base_url or 'api.openai.com'}"
    name = type(exc).__name__
    if name == "GraphRecursionError":
        return f"the model did not finish within {MAX_STEPS} steps"
    return f"{name}: {' '.join(str(exc).split())[:120]}"


def _text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p.get("text", "") if isinstance(p, dict) else str(p)
            for p in content
            if not isinstance(p, dict) or p.get("type", "text") == "text"
        )
    return ""


class LLMAgent:
    """One configured endpoint; `stream` answers one question through a ToolSession."""

    def __init__(self, config: LLMConfig):
        self.config = config

    @property
    def name(self) -> str:
        return f"llm:{self.config.model}"

    def chat_model(self):
        from langchain_openai import ChatOpenAI

        # the key as a str: pydantic makes it the field's SecretStr, which is all langchain's annotation names
        return ChatOpenAI(
            model=self.config.model,
            base_url=self.config.base_url,
            api_key=self.config.key,  # type: ignore[arg-type]
            timeout=self.config.timeout,
            max_retries=self.config.max_retries,
            temperature=0,
            streaming=True,
        )

    def tools_for(self, session: ToolSession, mode: str):
        from mathscout.tools import langchain_tools

        if mode == AUTO:
            return langchain_tools(session)
        if mode in MODE_TOOLS:
            return langchain_tools(session, MODE_TOOLS[mode])
        return langchain_tools(session, OTHER_MODE_TOOLS, search_mode=mode)

    def stream(
        self,
        question: Question,
        session: ToolSession,
        events: EventQueue,
        *,
        mode: str = MODE.default,
        k: int = 10,
        rerank: bool = False,
        started: float | None = None,
    ) -> Iterator[AgentEvent]:
        """Run the agent; yields plan, tool and token events and finally the answer. Raises LLMUnavailable."""
        from langchain.agents import create_agent
        from langchain_core.messages import AIMessage, AIMessageChunk

        started = time.perf_counter() if started is None else started
        tools = self.tools_for(session, mode)
        names = [t.name for t in tools]
        prompt = user_prompt(question.text, mode, k, names)
        if rerank and "rerank" in names:
            prompt += "\nThe user asked for reranking: call rerank on the ids you found before answering."
        try:
            agent = create_agent(self.chat_model(), tools, system_prompt=load_prompt("agent_system"))
        except Exception as exc:  # e.g. a model name or URL the client rejects
            raise LLMUnavailable(describe_error(exc, self.config)) from exc
        yield AgentEvent("plan", text=f"LLM agent ({self.config.model}) plans the searches with: {', '.join(names)}")
        final: AIMessage | None = None
        notices_before = len(session.notices)
        try:
            # several stream modes: (mode, chunk) pairs, which langgraph's annotation does not tell
            stream = cast(
                Iterator[tuple[str, Any]],
                agent.stream(
                    {"messages": [{"role": "user", "content": prompt}]},
                    stream_mode=["messages", "updates"],
                    config={"recursion_limit": 2 * MAX_STEPS + 1},
                ),
            )
            for kind, chunk in stream:
                yield from drain(events)
                if kind == "messages":
                    message, metadata = chunk
                    if isinstance(message, AIMessageChunk) and metadata.get("langgraph_node") == "model":
                        piece = _text(message.content)
                        if piece:
                            yield AgentEvent("token", text=piece)
                    continue
                for update in chunk.values():
                    for message in (update or {}).get("messages", []) if isinstance(update, dict) else []:
                        if not isinstance(message, AIMessage):
                            continue
                        if message.invalid_tool_calls:
                            bad = message.invalid_tool_calls[0]
                            raise LLMUnavailable(
                                f"malformed tool call to {bad.get('name') or 'a tool'}: "
                                f"{(bad.get('error') or 'arguments are not valid JSON')[:80]}"
                            )
                        final = message
            yield from drain(events)
        except LLMUnavailable:
            raise
        except Exception as exc:
            raise LLMUnavailable(describe_error(exc, self.config)) from exc
        text = _text(final.content).strip() if final is not None else ""
        if final is None or final.tool_calls or not text:
            raise LLMUnavailable("the model returned no answer")
        if not session.trace:  # an answer must be grounded in retrieved documents
            raise LLMUnavailable("the model answered without searching")
        yield from self._answer(question, text, session, mode, k, started, notices_before)

    def _answer(
        self,
        question: Question,
        text: str,
        session: ToolSession,
        mode: str,
        k: int,
        started: float,
        notices_before: int,
    ) -> Iterator[AgentEvent]:
        known = list(session.seen) + [d for d in session.documents_read if d not in session.seen]
        text, cited, invented = check_citations(sanitize_answer(text), known)
        notices = list(session.notices)
        if invented:
            notices.append(
                f"The model cited {len(invented)} id{'s' * (len(invented) > 1)} that no tool returned "
                f"({', '.join(invented[:5])}): removed from the answer."
            )
        if not cited:
            notices.append("The model's answer cites no retrieved document: check the hits below.")
        for notice in notices[notices_before:]:
            yield AgentEvent("notice", text=notice)
        hits = self._hits(session, cited, k)
        answer = Answer(
            question=question.text,
            text=text,
            hits=hits,
            citations=cited,
            trace=list(session.trace),
            rewrites=list(session.rewrites),
            expansions=list(session.expansions),
            notices=notices,
            planner=self.name,
            mode=mode,
            seconds=time.perf_counter() - started,
        )
        yield AgentEvent("answer", answer=answer)

    @staticmethod
    def _hits(session: ToolSession, cited: list[str], k: int) -> list[Hit]:
        """The cited documents first (in citation order), then the other hits the tools returned, best rank first."""
        by_id = dict(session.seen)
        for doc_id in cited:
            if doc_id not in by_id:  # read with get_document but never returned by a search
                by_id[doc_id] = Hit(doc_id=doc_id, score=0.0)
        others = sorted((h for d, h in by_id.items() if d not in cited), key=lambda h: h.rank or 10**6)
        hits = [by_id[d] for d in cited] + others
        return renumbered(hits[: max(k, len(cited))])
