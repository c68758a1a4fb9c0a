"""The options of a search and of a question, each with its one default, for every entry point: the command line
(`mathscout search|ask|run`), the HTTP API (`GET /api/search`, `POST /api/ask`), the Python API
(`MathScout.search/ask`, `Assistant.search/stream`) and the page. Ranges and choices are checked by
`mathscout.limits` the same way everywhere; `tests/mathscout/test_options.py` walks the entry points against this table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Option:
    """One option: its Python and JSON name, its default and what it means."""

    name: str
    default: Any
    help: str

    @property
    def flag(self) -> str:
        """The command line's spelling: `--rerank-depth`."""
        return "--" + self.name.replace("_", "-")


AUTO = "auto"  # the planned mode (mathscout.agent.planned): the assistant chooses the searches
MODE = Option(
    "mode",
    AUTO,
    "auto (the assistant plans the searches: rewrites, structure and text search, fusion) "
    "or a search mode of the index",
)
K = Option("k", 10, "hits to return (1–10,000; an answer shows at most 50, with a notice)")
RERANK = Option(
    "rerank",
    None,
    "rerank the top hits: auto or a reranker of the index's table (mathscout.retrievers.registry.RERANKERS), or none",
)
RERANK_DEPTH = Option("rerank_depth", 10, "first-stage hits reranked (1–1,000)")  # Zhong 2023 thesis ch. 6: the top 10
INDEX = Option("index", None, "the index (default: the one the server or command names first, else the demo)")
USE_LLM = Option("use_llm", None, "false: the offline planner; null: the LLM when one is configured")
# where a neural step runs (trainers, dense/colbert encoding, torch rerankers): mathscout.dense.device
DEVICE = Option("device", "auto", "auto (CUDA when torch sees a GPU, else the CPU), cpu or cuda")

SEARCH_OPTIONS = (MODE, K, RERANK, RERANK_DEPTH, INDEX)
ASK_OPTIONS = (*SEARCH_OPTIONS, USE_LLM)
