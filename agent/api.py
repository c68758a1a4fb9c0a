"""The Python API: `MathScout(index)` searches, answers questions and hands out the agent's tools.

from mathscout.agent import MathScout

scout = MathScout()                                  # the demo index, built on first use
found = scout.search("$x^2+y^2=z^2$", mode="structure", k=3)   # the hits (a list) and what the search said
for hit in found:
    print(hit.rank, hit.doc_id, round(hit.score, 3))
print(found.notices, found.to_dict()["rerank"])      # as `mathscout search --json` and GET /api/search
answer = scout.ask("How do I simplify $\\frac{t+1}{t}$?")
print(answer.text)                                   # markdown with [doc-id] citations
print([call.tool for call in answer.trace])          # the tool calls behind it
tools = scout.tools                                  # LangChain tools for your own agent
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from mathscout.agent.assistant import Assistant
from mathscout.agent.following import FollowedAssistant
from mathscout.errors import QueryError
from mathscout.events import AgentEvent, Answer
from mathscout.index.layout import IndexDir
from mathscout.options import MODE, RERANK, RERANK_DEPTH, USE_LLM, K
from mathscout.tools.searching import SearchResult, check_options
from mathscout.tools.session import ToolSession


def _text(value: object, what: str) -> str:
    """`value` when it is text, else a QueryError saying what it is (bytes are not guessed into text)."""
    if isinstance(value, str):
        return value
    hint = f": decode it first, e.g. {what}.decode('utf-8')" if isinstance(value, (bytes, bytearray)) else ""
    raise QueryError(f"the {what} must be text (str), not {type(value).__name__}{hint}")


class MathScout:
    """One index, its search modes, the assistant and its tools. `use_llm` as in `Assistant`. A rebuilt index is
    followed: each call answers from the build the folder holds when the call starts."""

    def __init__(self, index: IndexDir | Path | str | None = None, *, use_llm: bool | None = None):
        self._followed = FollowedAssistant(index, use_llm=use_llm)

    @property
    def assistant(self) -> Assistant:
        """The assistant of the index's current build."""
        return self._followed.current()

    @property
    def index(self) -> IndexDir:
        return self.assistant.index

    def modes(self) -> list[str]:
        return self.assistant.modes()

    def search(
        self,
        query: str,
        mode: str = MODE.default,
        k: int = K.default,
        rerank: str | bool | None = RERANK.default,
        rerank_depth: int = RERANK_DEPTH.default,
    ) -> SearchResult:
        """Ranked hits, a list of `Hit`, with what the search said (`.notices`, `.record`; `.to_dict()` is the JSON of
        `mathscout search --json` and GET /api/search): the one search service every entry point runs. "auto" runs
        the planner's searches (rewrites, structure and text search, fusion); any other mode is that retriever
        alone; `rerank` reorders the top `rerank_depth` hits. A bad option, or a query that is no text, is a
        MathScoutError."""
        return self.assistant.search(query, mode=mode, k=k, rerank=rerank, rerank_depth=rerank_depth)

    def ask(
        self,
        question: str,
        mode: str = MODE.default,
        k: int = K.default,
        rerank: str | bool | None = RERANK.default,
        rerank_depth: int = RERANK_DEPTH.default,
        use_llm: bool | None = USE_LLM.default,
    ) -> Answer:
        """An answer with `[doc-id]` citations (`Answer.to_dict()` for JSON). A bad option, or a question that is no
        text, is a MathScoutError."""
        check_options(k=k, rerank=rerank, rerank_depth=rerank_depth)
        return self.assistant.ask(
            _text(question, "question"), mode=mode, k=k, rerank=rerank, rerank_depth=rerank_depth, use_llm=use_llm
        )

    def stream(
        self,
        question: str,
        mode: str = MODE.default,
        k: int = K.default,
        rerank: str | bool | None = RERANK.default,
        rerank_depth: int = RERANK_DEPTH.default,
        use_llm: bool | None = USE_LLM.default,
    ) -> Iterator[AgentEvent]:
        """The same, as events (plan, tool_start/tool_end, notice, token, and finally answer)."""
        check_options(k=k, rerank=rerank, rerank_depth=rerank_depth)
        return self.assistant.stream(
            _text(question, "question"), mode=mode, k=k, rerank=rerank, rerank_depth=rerank_depth, use_llm=use_llm
        )

    def session(self) -> ToolSession:
        """A fresh tool session (its `trace` and `seen` hits record what your agent did)."""
        return ToolSession(self.assistant.toolbox)

    @property
    def tools(self):
        """The LangChain tools this index supports (typed schemas; outputs are JSON citing document ids),
        bound to one new session; e.g. `create_agent(model, scout.tools)`."""
        from mathscout.tools import langchain_tools

        return langchain_tools(self.session())
