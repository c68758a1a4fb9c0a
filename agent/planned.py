"""The one home of `auto`, the assistant's planned search as a search mode, and the one mode resolver.

`open_mode(index, mode, **options)` gives the first stage of any mode: `auto` is a `PlannedRetriever`, every other
mode the registry's retriever (`mathscout.retrievers.registry`, which lists only retrievers/'s own). The command
line, the HTTP API, the Python API (`MathScout`, through `Assistant.search`), the page and `mathscout run` all open
modes with it: the entry layer adds `AUTO_SPEC` to the registry's menu (`mathscout.ui.registry`) and hands
`open_mode` to the services that do not name the agent (`run_search` in tools/, `run_topics` in evaluation/).

`auto` runs the offline planner's searches (SymPy rewrites, structure and text search, fusion; never the LLM: runs
must be reproducible). The planner's tools pass at most `AGENT_K.high` (50) hits, so for a deeper list (e.g.
`mathscout run --k 1000`) `auto` is the index's hybrid search.
"""

from __future__ import annotations

from mathscout.errors import QueryError
from mathscout.events import EventQueue
from mathscout.index.layout import IndexDir
from mathscout.limits import AGENT_K, QUERY, K
from mathscout.options import AUTO
from mathscout.retrievers.base import BaseRetriever, Retriever
from mathscout.retrievers.registry import ModeSpec, open_retriever
from mathscout.tools.session import ToolSession
from mathscout.tools.toolbox import ToolBox
from mathscout.types import Hit, Query


class PlannedRetriever(BaseRetriever):
    """The offline planner's searches for a query, as a Retriever over a ToolBox (its retrievers, opened once)."""

    name = AUTO

    def __init__(self, toolbox: ToolBox):
        from mathscout.agent.offline import OfflinePlanner  # the planner's imports only when auto is opened
        from mathscout.rewrite.pool import default_pool

        default_pool()  # the SymPy worker starts importing now, beside the JVM and the kernels (not charged to a query)
        self.toolbox = toolbox
        self.planner = OfflinePlanner(toolbox)

    def search(self, query: str | Query, k: int = 10) -> list[Hit]:
        from mathscout.agent.plan import Plan
        from mathscout.question import read_question  # the formula parser: not for a bm25 search's start-up

        if isinstance(query, Query):
            query = query.text if query.text.strip() else f"${query.formula or ''}$"
        k = K.check(k)
        question = read_question(query, QUERY)
        if question.problem:
            raise QueryError(question.problem)
        if k > AGENT_K.high:  # deeper than the planner's tools go: the index's hybrid search
            return self.toolbox.retriever("hybrid").search(question.text, k=k)
        run = self.planner.run(
            Plan.make(self.toolbox, question, AUTO), question, ToolSession(self.toolbox), EventQueue(), k
        )
        while True:  # a search, not an answer: the tools' events are not shown
            try:
                next(run)
            except StopIteration as stop:
                return stop.value


def open_planned(index: IndexDir | ToolBox | str, **options) -> PlannedRetriever:
    """The `auto` mode over an index (or a ToolBox whose opened retrievers it shares); it takes no options."""
    if options:
        raise TypeError(f"mode auto takes no options (got {sorted(options)})")
    return PlannedRetriever(index if isinstance(index, ToolBox) else ToolBox(index))


AUTO_SPEC = ModeSpec(
    AUTO,
    open_planned,
    (),
    "the assistant's own search: SymPy rewrites, structure and text search, fused",
    "auto — the agent plans the search",
    0,
)


def open_mode(index: IndexDir | ToolBox | str, mode: str, **options) -> Retriever:
    """The first stage of `mode` (mode name + index + options): `auto` or a registry mode. Over a ToolBox the
    registry's retrievers are opened once (without options) and shared; over an index they are opened now."""
    if mode == AUTO:
        return open_planned(index, **options)
    if isinstance(index, ToolBox):
        return index.retriever(mode) if not options else open_retriever(index.index, mode, **options)
    return open_retriever(index, mode, **options)


def offered_modes(toolbox: ToolBox) -> list[str]:
    """`auto` (the planner chooses), then every registry mode the toolbox's index serves."""
    return [AUTO, *toolbox.modes()]


def menu_modes(toolbox: ToolBox) -> list[str]:
    """`auto`, then the registry modes a menu offers for the toolbox's index (`ToolBox.menu_modes`): the chat page's
    search modes, a part of `offered_modes`."""
    return [AUTO, *toolbox.menu_modes()]
