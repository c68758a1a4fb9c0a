"""Typed records that flow between ingestion, indexing, retrieval and evaluation.

The lowest floor: it imports no other MathScout module. How a record is written out (JSON, the API) lives above
it, in `mathscout.schema` (`hit_record(hit)`, `document_record(document)`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Formula:
    """One formula found in a document.

    `id` is stable: `<doc_id>#<ordinal>` (ordinal = 0-based position among the document's formulas).
    `start`/`end` are character offsets of the whole delimited span (delimiters included) in the
    document text; `latex` is the formula body without delimiters.
    """

    id: str
    doc_id: str
    latex: str
    start: int
    end: int
    display: bool = False


@dataclass
class Document:
    """A retrievable unit (an answer, an encyclopedia entry, a note)."""

    id: str
    text: str
    title: str = ""
    formulas: list[Formula] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)

    def missing_title(self) -> str:
        """The title when the text does not already start with it, else "": the one rule for putting a title
        before a document's text (BM25 terms, dense and SPLADE encoding, type detection)."""
        title = self.title.strip()
        return "" if not title or self.text.lstrip().startswith(title) else title

    def titled(self, body: str | None = None) -> str:
        """`body` (default: the text) with the missing title on the line before it."""
        body = self.text if body is None else body
        title = self.missing_title()
        return f"{title}\n{body}" if title else body


@dataclass(frozen=True)
class Query:
    """A search request: `text` may mix words and `$…$` LaTeX; `formula` is set for formula-only topics."""

    id: str
    text: str
    formula: str | None = None


@dataclass
class MatchedFormula:
    """A formula of a hit that matched the query, with the matched span(s) inside its LaTeX."""

    formula_id: str
    latex: str
    score: float = 0.0
    highlight: list[tuple[int, int]] = field(default_factory=list)


@dataclass
class Hit:
    """One ranked result. `components` holds per-retriever scores when results were fused."""

    doc_id: str
    score: float
    rank: int = 0
    snippet: str = ""
    formulas: list[MatchedFormula] = field(default_factory=list)
    components: dict[str, float] = field(default_factory=dict)
    title: str = ""  # the document's title (set with the snippet, `mathscout.render.explain_hits`)
    explanation: str = ""  # what the score means, in words (`mathscout.retrievers.scores.explain_score`)


def renumbered(hits: list[Hit]) -> list[Hit]:
    """`hits` with their ranks set to their positions from 1 (in place), for chaining: `return renumbered(hits)`."""
    for rank, hit in enumerate(hits, start=1):
        hit.rank = rank
    return hits
