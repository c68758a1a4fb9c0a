"""The assistant's own search as a search mode: `auto` (registered in `mathscout.retrievers.registry`), so that
`mathscout run --mode auto` evaluates exactly what the assistant retrieves (the offline planner: SymPy rewrites,
structure and text search, fusion; above the assistant's k of 50, the index's hybrid search)."""

from __future__ import annotations

from mathscout.agent.assistant import Assistant
from mathscout.index.layout import IndexDir
from mathscout.limits import K
from mathscout.retrievers.base import BaseRetriever
from mathscout.types import Hit, Query


class PlannedRetriever(BaseRetriever):
    """`Assistant.search(…, mode="auto")` as a Retriever (never the LLM: runs must be reproducible)."""

    name = "auto"

    def __init__(self, index: IndexDir):
        self.assistant = Assistant(index, use_llm=False)

    def search(self, query: str | Query, k: int = 10) -> list[Hit]:
        if isinstance(query, Query):
            query = query.text if query.text.strip() else f"${query.formula or ''}$"
        return self.assistant.search(query, mode="auto", k=K.check(k))


def open_auto(index: IndexDir, **options) -> PlannedRetriever:
    if options:
        raise TypeError(f"mode auto takes no options (got {sorted(options)})")
    return PlannedRetriever(index)
