"""The one shape of everything MathScout hands out: a hit, a search result, an answer, a document, an error.

The command line's `--json`, the HTTP API (these models are its declared responses in OpenAPI), the Python API
(`hit_record(hit).to_dict()`, `Answer.to_dict()`, `document_record(document).to_dict()`) and the page all build them
here, so a field has one name and one meaning everywhere. Serialisation lives here, above the types: `Hit` and
`Document` (`mathscout.types`) know nothing of JSON, so the types import nothing of MathScout. Snippets are plain text (math between `$…$`); the query's matches in them are
character ranges (`marks`), not markup.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from mathscout.options import MODE
from mathscout.render import plain_snippet

RERANK_RAN = "the reranker that ran ('auto' resolved to one), or null for none"


class Record(BaseModel):
    """A record of the schema; `to_dict()` is its JSON-ready form (what `--json` prints and the API answers)."""

    model_config = ConfigDict(extra="forbid")

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class FormulaMatch(Record):
    """A formula of a hit that matched the query: its id, LaTeX, score and the matched ranges inside the LaTeX."""

    formula_id: str
    latex: str
    score: float = 0.0
    highlight: list[tuple[int, int]] = Field(default_factory=list)


class HitRecord(Record):
    """One ranked document."""

    rank: int = Field(description="1 for the best hit")
    doc_id: str
    score: float
    score_explained: str = Field("", description="what the score means for this mode, in words")
    title: str = ""
    snippet: str = Field("", description="plain text around the matches (math between $…$)")
    marks: list[tuple[int, int]] = Field(
        default_factory=list, description="the query's matches in `snippet`: [start, end) character ranges"
    )
    formulas: list[FormulaMatch] = Field(default_factory=list)
    components: dict[str, float] = Field(default_factory=dict, description="each fused retriever's score")


class SearchRecord(Record):
    """A search: the request as it was understood and its hits."""

    query: str
    mode: str
    k: int
    rerank: str | None = Field(None, description=RERANK_RAN)
    rerank_depth: int = 10
    index: str = Field("", description="the index searched")
    formulas: list[str] = Field(default_factory=list, description="the query's formulas, those typed without $…$ too")
    hits: list[HitRecord] = Field(default_factory=list)
    notices: list[str] = Field(default_factory=list, description="what was said along the way (one line each)")
    missing_shards: list[str] = Field(
        default_factory=list, description="shards of a sharded index that did not answer: the hits are partial"
    )
    seconds: float = 0.0


class ToolCallRecord(Record):
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    summary: str = ""
    hit_count: int = 0
    seconds: float = 0.0
    error: str | None = None


class RewriteRecord(Record):
    original: str
    rewritten: str
    rule: str


class ExpansionRecord(Record):
    type: str
    related: list[tuple[str, float]] = Field(default_factory=list)


class AnswerRecord(Record):
    """An answer: Markdown text with `$…$` math and `[doc-id]` citations, and the evidence behind it."""

    question: str
    text: str
    citations: list[str] = Field(default_factory=list, description="doc ids cited in `text`, in order of first use")
    hits: list[HitRecord] = Field(default_factory=list)
    mode: str = MODE.default
    k: int = 10
    rerank: str | None = Field(None, description=RERANK_RAN)
    rerank_depth: int = 10
    index: str = ""
    planner: str = Field("offline", description="offline, or llm:<model>")
    trace: list[ToolCallRecord] = Field(default_factory=list)
    rewrites: list[RewriteRecord] = Field(default_factory=list)
    expansions: list[ExpansionRecord] = Field(default_factory=list)
    notices: list[str] = Field(default_factory=list)
    seconds: float = 0.0


class DocumentFormula(Record):
    formula_id: str
    latex: str
    display: bool = False


class DocumentRecord(Record):
    """One document of an index."""

    doc_id: str
    title: str = ""
    text: str
    formulas: list[DocumentFormula] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)


class ErrorRecord(Record):
    """Every failure: one line that says what went wrong and what to do."""

    error: str = Field(description="one line: what went wrong and what to do, e.g. 'k must be a whole number …'")


def hit_record(hit) -> HitRecord:
    """A `mathscout.types.Hit` in the schema (its snippet's `**` marks become `marks`)."""
    snippet, marks = plain_snippet(hit.snippet)
    return HitRecord(
        rank=hit.rank,
        doc_id=hit.doc_id,
        score=round(float(hit.score), 4),
        score_explained=hit.explanation,
        title=hit.title,
        snippet=snippet,
        marks=marks,
        formulas=[
            FormulaMatch(
                formula_id=f.formula_id, latex=f.latex, score=f.score, highlight=[tuple(h) for h in f.highlight]
            )
            for f in hit.formulas
        ],
        components={name: float(value) for name, value in hit.components.items()},
    )


def answer_record(answer) -> AnswerRecord:
    """A `mathscout.events.Answer` in the schema."""
    return AnswerRecord(
        question=answer.question,
        text=answer.text,
        citations=list(answer.citations),
        hits=[hit_record(h) for h in answer.hits],
        mode=answer.mode,
        k=answer.k,
        rerank=answer.rerank,
        rerank_depth=answer.rerank_depth,
        index=answer.index,
        planner=answer.planner,
        trace=[
            ToolCallRecord(
                tool=c.tool,
                arguments=c.arguments,
                summary=c.summary,
                hit_count=c.hit_count,
                seconds=c.seconds,
                error=c.error,
            )
            for c in answer.trace
        ],
        rewrites=[RewriteRecord(original=r.original, rewritten=r.rewritten, rule=r.rule) for r in answer.rewrites],
        expansions=[ExpansionRecord(type=e.type, related=list(e.related)) for e in answer.expansions],
        notices=list(answer.notices),
        seconds=round(answer.seconds, 3),
    )


def document_record(document) -> DocumentRecord:
    """A `mathscout.types.Document` in the schema."""
    return DocumentRecord(
        doc_id=document.id,
        title=document.title,
        text=document.text,
        metadata=document.metadata,
        formulas=[DocumentFormula(formula_id=f.id, latex=f.latex, display=f.display) for f in document.formulas],
    )
