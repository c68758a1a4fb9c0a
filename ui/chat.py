"""One chat turn: check the message, stream the assistant's work into chat messages, and build the results
panel and trace. Knows nothing about Gradio's layout; `mathscout.ui.app` wires it to components.

Each browser session keeps its own `SessionState` (a Gradio State); the only objects shared between
sessions are the read-only indexes and one `Assistant` per index (`AssistantPool`).
"""

from __future__ import annotations

import html
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from mathscout.errors import MathScoutError
from mathscout.events import AgentEvent, Answer, ToolCall
from mathscout.index.layout import IndexDir
from mathscout.markup import sanitize_answer
from mathscout.options import MODE, RERANK_DEPTH
from mathscout.tools.searching import SearchRequest, SearchResult
from mathscout.ui.cards import CardContext, link_citations, renderable_math, results_html
from mathscout.ui.indexes import IndexChoice
from mathscout.ui.inputs import check_question
from mathscout.ui.redact import PathRedactor
from mathscout.ui.trace import progress_markdown, trace_markdown

log = logging.getLogger("mathscout.ui")

MAX_TURNS_KEPT = 5  # results of this many recent questions stay in the panel (older citations then say so)
MAX_K = 50
TOKEN_UPDATE_SECONDS = 0.1  # streamed answer text reaches the browser at most this often
_INLINE_MATH = re.compile(r"\$[^$\n]+\$")
_QUOTED = re.compile(r"`([^`]+)`")
EMPTY_RESULTS = '<div class="ms-empty">Ask a question: the documents the answer is built from appear here.</div>'
EMPTY_TRACE = "_The agent's tool calls, formula rewrites and type expansions appear here after a question._"


@dataclass(frozen=True)
class Turn:
    """One answered question of a session and its result cards."""

    number: int
    question: str
    cards: str


@dataclass(frozen=True)
class SessionState:
    """Per-browser-session state (immutable: every turn returns a new one)."""

    turns: tuple[Turn, ...] = ()
    next_turn: int = 1

    def with_turn(self, question: str, cards: str) -> SessionState:
        turn = Turn(self.next_turn, question, cards)
        return replace(self, turns=(self.turns + (turn,))[-MAX_TURNS_KEPT:], next_turn=self.next_turn + 1)


def panel_html(state: SessionState | None) -> str:
    """The results panel: the latest question's cards, earlier ones folded away underneath."""
    if state is None or not state.turns:
        return EMPTY_RESULTS
    *earlier, latest = state.turns
    parts = [
        f'<div class="ms-turn"><div class="ms-turn-question">Results for: {_question_html(latest.question)}</div>'
        f"\n{latest.cards}\n</div>"
    ]
    for turn in reversed(earlier):
        parts.append(
            f'<details class="ms-turn ms-turn-earlier"><summary>Earlier: {_question_html(turn.question)}</summary>'
            f"\n{turn.cards}\n</details>"
        )
    return "\n".join(parts)


def _question_html(text: str, limit: int = 110) -> str:
    """A question as a one-line heading (long ones cut, an unpaired `$` dropped so KaTeX is not confused)."""
    text = " ".join(text.split())
    text = text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + " …"
    return html.escape(text if text.count("$") % 2 == 0 else text.replace("$", ""), quote=False)


class AssistantPool:
    """One assistant per offered index, created on first use, each following its index's rebuilds
    (`mathscout.agent.following`): a request takes `assistant(key)` once and reads everything from it."""

    def __init__(self, choices: Sequence[IndexChoice], use_llm: bool | None = None):
        self.choices = {c.key: c for c in choices}
        self.default_key = choices[0].key
        self._use_llm = use_llm
        self._followed: dict[str, Any] = {}
        self._lock = threading.Lock()

    def choice(self, key: str | None) -> IndexChoice:
        if not key:
            return self.choices[self.default_key]
        if key not in self.choices:
            raise MathScoutError(f"unknown index '{key}': choose one of {', '.join(self.choices)}")
        return self.choices[key]

    def assistant(self, key: str | None):
        """The assistant of the index's current build (its `.index` is that build's folder and store)."""
        try:
            from mathscout.agent.following import FollowedAssistant
        except ImportError as exc:
            raise MathScoutError(f"the assistant is not installed ({exc}); reinstall MathScout") from exc
        choice = self.choice(key)
        with self._lock:
            if choice.key not in self._followed:
                self._followed[choice.key] = FollowedAssistant(choice.path, use_llm=self._use_llm)
            followed = self._followed[choice.key]
        return followed.current()

    def index(self, key: str | None) -> IndexDir:
        """The current build of an index (read-only)."""
        return self.assistant(key).index


@dataclass
class TurnView:
    """What the chat shows for the turn in progress; `messages()` renders it as Gradio message dicts."""

    echo: str
    input_notices: list[str] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    agent_notices: list[str] = field(default_factory=list)
    answer: str = ""
    working_title: str = "Working…"
    done: bool = False
    linked: bool = False  # `answer` is the final, checked answer with citations linked to the cards
    public: Callable[[str], str] = str  # steps and notes as a visitor reads them (mathscout.ui.redact)

    def messages(self) -> list[dict]:
        """While working: the input notes first (said at once); when done, every note follows the answer, since
        the chat scrolls to its end and a long answer would push notes above it out of view."""
        out: list[dict] = [{"role": "user", "content": sanitize_answer(self.echo)}]
        notes_at_end = self.done and bool(self.answer)
        if self.input_notices and not notes_at_end:
            out.append({"role": "assistant", "content": _notes(self.input_notices)})
        out.append(
            {
                "role": "assistant",
                "content": progress_markdown([self.public(step) for step in self.steps]),
                "metadata": {"title": self.working_title, "status": "done" if self.done else "pending"},
            }
        )
        if self.answer:  # streamed model text is sanitised as it arrives: it may echo an injected document
            shown = self.answer if self.linked else sanitize_answer(self.answer)
            out.append({"role": "assistant", "content": renderable_math(shown)})
        notes = (self.input_notices if notes_at_end else []) + [
            _literal_math(sanitize_answer(self.public(n))) for n in self.agent_notices
        ]
        if notes:
            out.append({"role": "assistant", "content": _notes(notes)})
        return out


def _notes(notes: Sequence[str]) -> str:
    return "\n\n".join(f"**Note:** {n}" for n in notes)


def _literal_math(message: str) -> str:
    """Messages that say what to type (`write it between $…$`) show their `$…$` as code, not rendered."""
    return _INLINE_MATH.sub(lambda m: "`" + m.group(0).replace("`", "'") + "`", message)


def _step_line(call: ToolCall, finished: bool) -> str:
    if not finished:
        return f"**{call.tool}** running…"
    if call.error:
        return f"**{call.tool}** FAILED after {call.seconds:.2f} s: {call.error}"
    return f"**{call.tool}**: {call.summary or f'{call.hit_count} hits'} ({call.seconds:.2f} s)"


@dataclass
class TurnOutput:
    """One streamed update: the whole chat, the results panel, the trace and the session state."""

    chat: list[dict]
    results: str
    trace: str
    state: SessionState
    record: dict[str, Any] | None = (
        None  # a search's record (`SearchResult.to_dict()`), as the other entry points give it
    )


def run_turn(
    pool: AssistantPool,
    message: str | None,
    history: list[dict] | None,
    state: SessionState | None,
    *,
    index_key: str | None,
    mode: str,
    k: int,
    rerank: str | bool | None,
    use_llm: bool | None,
    notices: Sequence[str] = (),
) -> Iterator[TurnOutput]:
    """Answer one message, yielding updates as the assistant works; never raises. `notices` are said first (the
    server's, e.g. why the LLM does not answer); no step, note or trace names a path of the server."""
    history = list(history or [])
    state = state or SessionState()
    panel, trace = panel_html(state), EMPTY_TRACE
    checked = check_question(message)
    if checked.problem:
        yield TurnOutput(
            history + [{"role": "assistant", "content": f"**Note:** {checked.problem}"}], panel, trace, state
        )
        return
    public = PathRedactor.of_pool(pool, log_changes=False)
    view = TurnView(checked.echo, [*checked.notices, *notices], public=public)
    started = time.perf_counter()
    try:
        assistant = pool.assistant(index_key)
        k = max(1, min(MAX_K, int(k or 10)))
        yield TurnOutput(history + view.messages(), panel, trace, state)
        answer: Answer | None = None
        shown = time.perf_counter()
        for event in assistant.stream(checked.text, mode=mode or MODE.default, k=k, rerank=rerank, use_llm=use_llm):
            answer = _apply(view, event) or answer
            if event.kind == "token" and time.perf_counter() - shown < TOKEN_UPDATE_SECONDS:
                continue  # tokens are sent in batches: every update carries the whole chat to the browser
            yield TurnOutput(history + view.messages(), panel, trace, state)
            shown = time.perf_counter()
        if answer is None:
            raise MathScoutError("the assistant stopped without an answer")
    except MathScoutError as exc:
        view.agent_notices.append(str(exc))
        view.working_title, view.done = "Stopped: see the note below", True
        yield TurnOutput(history + view.messages(), panel, trace, state)
        return
    except Exception as exc:  # a crashed tool or planner must not take the page (or the server) down
        log.exception("turn failed: %r", checked.text[:200])
        view.agent_notices.append(
            f"Something went wrong while answering ({type(exc).__name__}: {str(exc)[:200]}). "
            "The page still works: ask again, or try another mode or index."
        )
        view.working_title, view.done = f"Stopped after {time.perf_counter() - started:.1f} s: see the note below", True
        yield TurnOutput(history + view.messages(), panel, trace, state)
        return
    try:
        cards = _cards(assistant.index, answer, state.next_turn)
    except Exception as exc:  # the answer still shows; only its cards are missing
        log.exception("result cards failed")
        cards = f'<div class="ms-empty">The result cards could not be built ({type(exc).__name__}).</div>'
    state = state.with_turn(checked.text, cards)
    view.answer = link_citations(answer.text, answer.hits, state.turns[-1].number)
    view.linked = True
    calls = len(answer.trace)
    view.working_title = (
        f"Searched: {calls} tool call{'s' * (calls != 1)} · {len(answer.hits)} hits · "
        f"{answer.seconds or time.perf_counter() - started:.1f} s"
    )
    view.done = True
    yield TurnOutput(history + view.messages(), panel_html(state), public(trace_markdown(answer)), state)


def search_turn(
    pool: AssistantPool,
    message: str | None,
    history: list[dict] | None,
    state: SessionState | None,
    *,
    index_key: str | None,
    mode: str,
    k: int | str,
    rerank: str | bool | None,
    rerank_depth: int | str = RERANK_DEPTH.default,
    llm: bool = False,
    notices: Sequence[str] = (),
) -> TurnOutput:
    """The page's search (its "Search" button): the one search service (`mathscout.tools.searching.run_search`, as
    the command line, the HTTP API and the Python API run it) over the chosen index, its options checked once here;
    the hits become the panel's cards, the notices notes in the chat. `llm`: whether an LLM may rerank an `auto`
    search (the server's allowance); `notices` are said first. Never raises."""
    history = list(history or [])
    state = state or SessionState()
    text = (message or "").strip()
    public = PathRedactor.of_pool(pool, log_changes=False)
    echo = [{"role": "user", "content": sanitize_answer(text)}] if text else []
    try:
        assistant = pool.assistant(index_key)
        request = SearchRequest.parse(message or "", mode or MODE.default, k, rerank, rerank_depth)
        result = assistant.run_search(request, llm=llm)
        cards = _search_cards(assistant.index, result, state.next_turn)
    except MathScoutError as exc:
        note = _notes([_literal_math(sanitize_answer(public(str(exc))))])
        return TurnOutput(
            history + echo + [{"role": "assistant", "content": note}], panel_html(state), EMPTY_TRACE, state
        )
    state = state.with_turn(text, cards)
    record = result.record
    summary = (
        f"**Search** ({record.mode}, k {record.k}{f', reranked by {record.rerank}' if record.rerank else ''}): "
        f"{len(result)} hit{'s' * (len(result) != 1)}, shown as cards under 'Results for'."
    )
    said = [_literal_math(sanitize_answer(public(n))) for n in [*notices, *record.notices]]
    chat = (
        history + echo + [{"role": "assistant", "content": "\n\n".join([summary, *([_notes(said)] if said else [])])}]
    )
    data = result.to_dict()
    data["notices"] = [*notices, *data["notices"]]  # the server's first, as GET /api/search gives them
    return TurnOutput(chat, panel_html(state), EMPTY_TRACE, state, data)


def refused_turn(message: str | None, history: list[dict] | None, state: SessionState | None, note: str) -> TurnOutput:
    """A message the page does not run (e.g. an LLM reranker this client may not use now), with the note why."""
    said = [{"role": "user", "content": sanitize_answer((message or "").strip())}]
    said.append({"role": "assistant", "content": _notes([_literal_math(sanitize_answer(note))])})
    return TurnOutput(list(history or []) + said, panel_html(state), EMPTY_TRACE, state or SessionState())


def _search_cards(index: IndexDir, result: SearchResult, turn: int) -> str:
    """A search's hit cards, their documents read from the build that answered."""
    documents = index.store.get_many([h.doc_id for h in result])
    return results_html(result, documents, CardContext(result.record.query, turn, result.record.mode))


def _apply(view: TurnView, event: AgentEvent) -> Answer | None:
    """Fold one agent event into the turn's view; the final answer is returned."""
    if event.kind == "plan":
        view.steps.append(f"Plan: {event.text}")
    elif event.kind == "tool_start" and event.call:
        view.steps.append(_step_line(event.call, finished=False))
    elif event.kind == "tool_end" and event.call:
        pending = _step_line(event.call, finished=False)
        line = _step_line(event.call, finished=True)
        if pending in view.steps:
            view.steps[len(view.steps) - 1 - view.steps[::-1].index(pending)] = line
        else:
            view.steps.append(line)
        if event.call.error:
            _note(view, f"The tool {event.call.tool} failed ({event.call.error}).")
    elif event.kind == "notice":
        _note(view, event.text)
    elif event.kind == "token":
        view.answer += event.text
    elif event.kind == "answer" and event.answer:
        for notice in event.answer.notices:
            _note(view, notice)
        return event.answer
    return None


def _note(view: TurnView, notice: str) -> None:
    """Add a note once (a tool that fails on every call is reported once; a malformed formula the page already
    pointed out is not pointed out again by the assistant)."""
    if not notice or notice in view.agent_notices:
        return
    quoted = _QUOTED.findall(notice)
    if (
        "malformed" in notice
        and quoted
        and any(q in n and "malformed" in n for q in quoted for n in view.input_notices)
    ):
        return
    view.agent_notices.append(notice)


def _cards(index: IndexDir, answer: Answer, turn: int) -> str:
    """The answer's hit cards, their documents read from the build that answered."""
    documents = index.store.get_many([h.doc_id for h in answer.hits])
    return results_html(answer.hits, documents, CardContext(answer.question, turn, answer.mode))
