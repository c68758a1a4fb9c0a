"""Typed, bounded arguments of the agent's tools (pydantic): what an LLM may pass, and the limits enforced."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from mathscout.limits import AGENT_K

MAX_K = AGENT_K.high  # hits one search may return to the agent
MAX_FORMULA_CHARS = 1_000  # a query formula; longer ones are pastes, not questions
MAX_QUERY_CHARS = 2_000  # a search query in words and LaTeX (the chat's question limit)
MAX_HIT_IDS = 50  # documents one rerank call may reorder
MAX_ID_CHARS = 200


def _strip_delimiters(latex: str) -> str:
    """`$x^2$`, `$$x^2$$`, `\\(x^2\\)`, `\\[x^2\\]` → `x^2` (models often keep the delimiters)."""
    latex = latex.strip()
    for left, right in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
        if latex.startswith(left) and latex.endswith(right) and len(latex) > len(left) + len(right):
            return latex[len(left) : -len(right)].strip()
    return latex


def one_formula(value: str) -> str:
    """A single formula's LaTeX, delimiters removed; empty or several formulas are refused."""
    value = _strip_delimiters(value)
    if not value:
        raise ValueError("the formula is empty: pass LaTeX such as x^2+y^2=z^2")
    if "$" in value:
        raise ValueError("pass one formula without $ signs inside it")
    return value


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class StructureSearchArgs(_Args):
    formula: str = Field(
        min_length=1,
        max_length=MAX_FORMULA_CHARS,
        description="ONE formula in LaTeX without $ delimiters, e.g. \\frac{x+1}{x}",
    )
    k: int = Field(10, ge=1, le=MAX_K, description=f"how many documents to return (1–{MAX_K})")
    words: str = Field(
        "",
        max_length=MAX_QUERY_CHARS,
        description="optional words of the question to match as text as well (e.g. 'simplify')",
    )

    _formula = field_validator("formula")(classmethod(lambda cls, value: one_formula(value)))


class SearchArgs(_Args):
    query: str = Field(
        min_length=1, max_length=MAX_QUERY_CHARS, description="the search query: words and LaTeX formulas between $…$"
    )
    k: int = Field(10, ge=1, le=MAX_K, description=f"how many documents to return (1–{MAX_K})")


class TypeExpansionArgs(_Args):
    text: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description="the question in words")


class RewriteFormulaArgs(_Args):
    latex: str = Field(min_length=1, max_length=MAX_FORMULA_CHARS, description="ONE formula in LaTeX without $")

    _latex = field_validator("latex")(classmethod(lambda cls, value: one_formula(value)))


class RerankArgs(_Args):
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description="the question the documents should answer")
    hit_ids: list[str] = Field(
        min_length=1,
        max_length=MAX_HIT_IDS,
        description=f"document ids returned by a search tool (at most {MAX_HIT_IDS})",
    )

    @field_validator("hit_ids")
    @classmethod
    def _ids(cls, value: list[str]) -> list[str]:
        ids = [i.strip().strip("[]") for i in value if i and i.strip()]
        if not ids:
            raise ValueError("give at least one document id")
        if any(len(i) > MAX_ID_CHARS for i in ids):
            raise ValueError("a document id is too long")
        return list(dict.fromkeys(ids))


class GetDocumentArgs(_Args):
    id: str = Field(min_length=1, max_length=MAX_ID_CHARS, description="a document id returned by a search tool")

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        return value.strip().strip("[]")


SCHEMAS: dict[str, type[_Args]] = {
    "structure_search": StructureSearchArgs,
    "hybrid_search": SearchArgs,
    "search": SearchArgs,
    "type_expansion": TypeExpansionArgs,
    "rewrite_formula": RewriteFormulaArgs,
    "rerank": RerankArgs,
    "get_document": GetDocumentArgs,
}
