"""The range of every numeric option, defined once and checked the same way everywhere.

The command line (argparse types), the Python API, the agent's tools (pydantic bounds) and the chat page
(slider bounds and a server-side check) all read these, so a value is refused with the same one-line
message wherever it comes from.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass

from mathscout.errors import MathScoutError


@dataclass(frozen=True)
class Limit:
    """An integer option and its inclusive range."""

    name: str
    low: int
    high: int
    meaning: str

    def message(self, value: object) -> str:
        return f"{self.name} must be a whole number from {self.low:,} to {self.high:,} ({self.meaning}); got {value!r}"

    def number(self, value: object) -> int:
        """`value` as a whole number (a digit string, an int or an integral float), else MathScoutError."""
        if isinstance(value, str) and re.fullmatch(r"[+-]?[0-9]{1,15}", value.strip()):
            return int(value.strip())
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise MathScoutError(self.message(value))

    def check(self, value: object) -> int:
        """`value` as an int inside the range, else MathScoutError with the one-line message."""
        number = self.number(value)
        if not self.low <= number <= self.high:
            raise MathScoutError(self.message(value))
        return number

    def cap(self, value: object) -> tuple[int, str | None]:
        """`value` brought into the range, with a notice saying so when it had to be (never silent)."""
        number = self.number(value)
        bounded = min(max(number, self.low), self.high)
        if bounded == number:
            return number, None
        return (
            bounded,
            f"{self.name} = {number:,} is outside {self.low:,}–{self.high:,} ({self.meaning}): {bounded:,} used",
        )

    def argparse(self):
        """An argparse `type=` that checks the range (argparse then prints the message)."""

        def parse(text: str) -> int:
            try:
                return self.check(text.strip())
            except MathScoutError as exc:
                raise argparse.ArgumentTypeError(str(exc)) from None

        parse.__name__ = self.name
        return parse


K = Limit("k", 1, 10_000, "hits to return")
AGENT_K = Limit("k", 1, 50, "hits the assistant shows and passes to its tools")
ARQMATH_RUN_K = Limit("k", 1, 1_000, "hits per topic an ARQMath run may hold")
RERANK_DEPTH = Limit("rerank depth", 1, 1_000, "first-stage hits reranked")
PASSAGES = Limit("passages", 1, 64, "passages searched per document")
EF_SEARCH = Limit("ef_search", 1, 10_000, "HNSW candidate list size")
PORT = Limit("port", 1, 65_535, "TCP port")


@dataclass(frozen=True)
class TextLimit:
    """The most characters of a text that are read: a longer one is cut before anything scans it, with a notice
    (never refused). Every entry point cuts through one of these (mathscout.question.read_question for questions,
    mathscout.tools.searching.run_search for searches), so the page, the API, the command line and the Python API
    cut alike."""

    name: str
    chars: int

    def cut(self, text: str) -> tuple[str, str | None]:
        """`text` up to the bound (at its last space in the bound's second half, else at the bound) and the notice
        saying so, or `text` and None when it fits."""
        if len(text) <= self.chars:
            return text, None
        cut = text.rfind(" ", self.chars // 2 + 1, self.chars)
        cut = cut if cut > 0 else self.chars
        return text[:cut], (
            f"The {self.name} has {len(text):,} characters; only the first {cut:,} were searched "
            "(ask about one formula or idea at a time)."
        )


QUESTION = TextLimit("question", 2_000)  # a question, not a document (the chat page, `ask`, POST /api/ask)
QUERY = TextLimit("query", 10_000)  # a search (`search`, GET /api/search, MathScout.search)


# The named choices of `rerank` are the reranker table's (`mathscout.retrievers.registry.RERANKERS`, `rerank_kind`),
# the only list of them, from which their validation, help and the page's menu are made.


# ---- the HTTP server (`mathscout serve`) ----------------------------------------------------------------------

MAX_REQUEST_BYTES = (
    1 << 20
)  # 1 MiB: the largest request body the server reads (413 beyond; a question is ≤ 2,000 chars)
MAX_REQUEST_HEAD_BYTES = (
    1 << 17
)  # 128 KiB: the largest URL, and the largest request line and headers in all (414 / 431 beyond); a 10,000-character query fits percent-encoded
LLM_RATE = Limit("LLM rate", 1, 10_000, "questions a minute each client address may have the LLM answer")
LLM_BUDGET = Limit("LLM budget", 1, 1_000_000, "questions in any 24 hours the LLM may answer for all clients")

# ---- ingestion bounds (issue 32): what one document may cost, whatever the input ------------------------------
# Measured on the shared collection (37,651 documents, 509,539 formulas): the longest text is 259,853 characters
# (a PlanetMath entry; its JSONL line 264,657 bytes), the longest MSE answer 28,176 (Stack Exchange caps a post at
# 30,000), the longest id 156 characters, the longest formula 7,150, the deepest formula tree 97 levels.

MAX_DOCUMENT_CHARS = (
    1 << 20
)  # 4x the longest shared document, 35x Stack Exchange's post cap: longer texts are cut at a break outside formulas
MAX_LINE_BYTES = (
    8 << 20
)  # a text at MAX_DOCUMENT_CHARS still fits after JSON's \uXXXX escaping (6 bytes a character): longer JSONL/XML lines are skipped unread
MAX_TITLE_CHARS = 1_000  # Stack Exchange caps a title at 150 characters: longer titles are cut
MAX_ID_CHARS = 512  # 3x the longest shared id (156); every formula id repeats its document's id: longer ids are skipped
MAX_NESTING = 64  # JSON values and XML elements nested deeper (the shared records: 1 level, Posts XML: 2) are skipped: parsers recurse per level
MAX_TREE_DEPTH = (
    128  # formula trees deeper than this are flattened below it (deepest real one: 97): tree walks recurse per level
)


# ---- files stored with an index (issue 32) --------------------------------------------------------------------

FUSION_DEPTH = Limit("fusion depth", 1, 10_000, "hits taken from each fused retriever")
