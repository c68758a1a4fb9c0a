"""Which candidates a question's formulas reach through a SymPy-equivalent form: a ranking feature, computed once
per question with `structure-rewrite`'s own machinery (`retrievers/rewrite.py`, issue 5; Zhong 2023 thesis ch. 6 names query
rewriting as future work for structure search).

    matcher = EquivalenceMatcher(index, structure_retriever, depth=100)
    found = matcher.match(query, docs)  # RewriteMatches: forms searched, and per document its best rewritten match
    found.matches["48131"]              # RewriteMatch(tier=2.0, score=0.99): best reached through a rewritten form

Bounded so that 2,000 training questions stay affordable: questions without a formula are not searched (their
features are NaN, not 0), at most REWRITE_FORMS forms per question (over its first 3 formulas) and
REWRITE_SECONDS of SymPy per formula; a question whose formulas SymPy cannot rewrite costs no search at all.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from mathscout.errors import QueryError
from mathscout.index.layout import IndexDir
from mathscout.retrievers.base import RankResult
from mathscout.retrievers.rewrite import StructureRewriteRetriever, StructureSearch
from mathscout.retrievers.structure import split_query
from mathscout.rewrite import RewriteResult, equivalent_forms
from mathscout.types import Query

REWRITE_FORMS = 4  # equivalent forms searched per question (structure-rewrite's interactive default: 8)
REWRITE_SECONDS = 1.0  # SymPy time per formula (structure-rewrite's default: 2 s)


@dataclass(frozen=True)
class RewriteMatch:
    """A document whose best structure match came from a rewritten form of a query formula."""

    tier: (
        float  # the match tier of that form's best formula in the document (structure.search.match_tier; NaN: unknown)
    )
    score: float  # that form's fused score of the document (structure-rewrite's value: weighted, normalised for formulas alone)


@dataclass
class RewriteMatches:
    """One question's rewrite search: how many forms were searched, and the documents a rewritten form matched best."""

    forms: int | None  # rewritten forms searched; None: the question has no formula (its features are NaN)
    matches: dict[str, RewriteMatch] = field(default_factory=dict)
    seconds: float = 0.0


class EquivalenceMatcher:
    """Structure search over the equivalent forms of a question's formulas, reusing the candidates' structure retriever."""

    def __init__(
        self,
        index: IndexDir,
        structure: StructureSearch,
        depth: int,
        max_forms: int = REWRITE_FORMS,
        seconds: float = REWRITE_SECONDS,
    ):
        self.depth = depth
        self.structure = structure
        self._rewrites: dict[tuple, RewriteResult] = {}
        self._written: tuple[Query, RankResult] | None = None  # the question and its structure ranking, when known
        self.retriever = StructureRewriteRetriever(
            index,
            structure=structure,
            max_forms=max_forms,
            seconds=seconds,
            rewriter=self._rewrite,
            search_form=self._search_form,
        )

    def _rewrite(self, latex: str, max_forms: int = REWRITE_FORMS, seconds: float = REWRITE_SECONDS) -> RewriteResult:
        """SymPy once per formula and question (`variants` is asked twice: to decide, then to search)."""
        key = (latex, max_forms, seconds)
        if key not in self._rewrites:
            self._rewrites[key] = equivalent_forms(latex, max_forms=max_forms, seconds=seconds)
        return self._rewrites[key]

    def _search_form(self, query: Query, depth: int) -> RankResult:
        """One form's structure ranking: the question as written reuses the candidates' structure ranking."""
        if self._written is not None and query is self._written[0] and depth == self.depth:
            return self._written[1]
        return self.structure.rank(query, depth)

    def match(self, query: Query, docs: list[str], written: RankResult | None = None) -> RewriteMatches:
        """The rewrite search of `query`, and which of `docs` (its candidates) a rewritten form matched best;
        `written`: the structure ranking of `query` at this matcher's depth, when the candidates hold it."""
        started = time.perf_counter()
        self._rewrites.clear()
        self._written = (query, written) if written is not None else None
        formulas, _ = split_query(query)
        if not formulas:
            return RewriteMatches(None, seconds=time.perf_counter() - started)
        try:
            forms = len(self.retriever.variants(query)) - 1
            if forms == 0:  # nothing equivalent to search: no document can match through a rewrite
                return RewriteMatches(0, seconds=time.perf_counter() - started)
            ranking = self.retriever.rank(query, self.depth)
        except QueryError:  # formulas structure search cannot read
            return RewriteMatches(0, seconds=time.perf_counter() - started)
        matches = {}
        for doc_id in docs:
            entry = ranking.fused.get(doc_id)
            if (
                entry is not None and entry.variant > 0
            ):  # its best value came from a rewritten form, not the formula as written
                tier = float(entry.formula_hit.tier) if entry.formula_hit is not None else float("nan")
                matches[doc_id] = RewriteMatch(tier, float(entry.best))
        return RewriteMatches(forms, matches, time.perf_counter() - started)
