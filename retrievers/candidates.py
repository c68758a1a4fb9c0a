"""Candidates for learned ranking: each first-stage retriever's top hits for one query, and what the query is.

The ranker (`retrievers/ranked.py`) and its training (`evaluation/ranker_training.py`) see a query through
the same `Candidates` value, so a model is trained on exactly what the `ranked` mode gives it:

    generator = CandidateGenerator(IndexDir(path))             # the index's usable retrievers of RETRIEVERS
    found = generator.generate(Query(id="q", text="…"), explain=False)
    found.docs                                                 # union of every retriever's top `depth`, in order
    found.runs["bm25"]                                         # that retriever's hits (ids, scores, components)

A retriever the index cannot serve (no `dense` component, say) is absent from `runs` and named in
`missing`; one that cannot search this query (structure search of a query without words or formulas)
has an empty run. Neither is ever a zero score: the features mark them missing (`retrievers/features.py`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from mathscout.dense.cross import CROSS_DEPTH as CROSS_DEPTH  # the candidates' cross-encoder depth, re-exported
from mathscout.errors import QueryError
from mathscout.index.layout import IndexDir
from mathscout.latex.tokens import is_math_term, query_formulas, query_terms
from mathscout.limits import TextLimit
from mathscout.notices import warning
from mathscout.question import read_question  # the planner's classifier of question kinds
from mathscout.retrievers.base import RankResult, prepare_query
from mathscout.retrievers.equivalence import EquivalenceMatcher, RewriteMatches
from mathscout.retrievers.fusion import fuse
from mathscout.retrievers.registry import open_retriever, servable_modes
from mathscout.retrievers.rerank import CrossEncoderReranker
from mathscout.retrievers.structure import StructureRetriever
from mathscout.retrievers.title_bm25 import TitleScorer
from mathscout.types import Hit, Query

if TYPE_CHECKING:
    from mathscout.retrievers.bm25 import BM25Retriever
    from mathscout.retrievers.shards.retriever import ShardedStructure

# First-stage retrievers a ranker may use, in feature order (each one's features are flagged missing when the
# index lacks it). structure-rewrite is not one (5× the cost of structure per query, docs/results.md, issue 5): a bounded
# rewrite search gives the candidates' SymPy-equivalence features instead (`retrievers/equivalence.py`).
RETRIEVERS = ("bm25", "structure", "dense", "dense-ft", "colbert", "types")
DEPTH = 100  # hits taken from each retriever


@dataclass(frozen=True)
class QueryStats:
    """What the question is, before any document is seen."""

    formulas: int  # formulas in the question ($…$ and bare LaTeX)
    math_share: float  # share of the question's index terms that are math tokens
    terms: int  # index terms (words and math tokens): its length
    kind: str  # the planner's question kind (mathscout.question.read_question): formula, text, mixed, empty
    perfect_structure: float | None  # structure score of a perfect match of the query formulas (None: none readable)


@dataclass
class Candidates:
    """One query's first-stage results: per retriever its hits, and the union of their documents."""

    query: Query
    stats: QueryStats
    runs: dict[str, list[Hit]]  # retriever name → hits, best first
    missing: tuple[str, ...] = ()  # retrievers of RETRIEVERS the index cannot serve
    seconds: dict[str, float] = field(default_factory=dict)  # time per retriever (and "rewrite", "title-bm25")
    # question–document signals beyond the runs (None: not computed, e.g. the index has no structure or bm25 component)
    rewrites: RewriteMatches | None = None  # which documents a SymPy-equivalent form of a query formula matched best
    titles: dict[str, float] | None = None  # title BM25 of the candidates that have a title
    cross: list[Hit] | None = None  # the cross-encoder's logits of the runs' consensus top candidates (`cross_order`)

    @property
    def docs(self) -> list[str]:
        """Every retrieved document once, in the order the runs first list it."""
        return list(dict.fromkeys(h.doc_id for hits in self.runs.values() for h in hits))


def question_stats(query: Query, perfect_structure: float | None = None) -> QueryStats:
    """Counts over the question text (the planner's classifier gives the kind)."""
    text = (query.formula and f"${query.formula}$") or query.text
    terms = query_terms(text)
    math = sum(1 for t in terms if is_math_term(t))
    return QueryStats(
        formulas=len(query_formulas(text)),
        math_share=math / len(terms) if terms else 0.0,
        terms=len(terms),
        kind=read_question(text, TextLimit("topic", len(text) + 1)).kind,
        perfect_structure=perfect_structure,
    )


def cross_order(candidates: Candidates, count: int) -> list[str]:
    """The `count` candidates the runs agree on most: reciprocal rank fusion of every run at equal weights
    (Cormack et al. 2009; `retrievers/fusion.py`'s `rrf`), the documents the cross-encoder reads."""
    runs = [{h.doc_id: h.score for h in hits} for hits in candidates.runs.values() if hits]
    return [doc for doc, _ in fuse(runs, [1.0] * len(runs), "rrf", k=count)] if runs else []


class CandidateGenerator:
    """Runs the index's first-stage retrievers (those of `retrievers` it can serve) to `depth` hits each; with
    `cross_depth`, the index's cross-encoder also reads the top `cross_depth` candidates (`cross_order`)."""

    def __init__(
        self, index: IndexDir, retrievers: tuple[str, ...] = RETRIEVERS, depth: int = DEPTH, cross_depth: int = 0
    ):
        self.index = index
        self.depth = depth
        self.cross_depth = cross_depth
        # the logit alone (weight 1): the ranker weighs it against the runs itself
        self.cross = CrossEncoderReranker(index, store=index.store, weight=1.0) if cross_depth > 0 else None
        self.names = servable_modes(index, retrievers)
        self.missing = tuple(name for name in retrievers if name not in self.names)
        options = {
            "structure": {"depth": depth}
        }  # Zhong 2023 thesis, Eq. 3.18 over each list's top `depth` (not 1,000)
        self.retrievers = {name: open_retriever(index, name, **options.get(name, {})) for name in self.names}
        structure = self._structure()
        bm25 = cast("BM25Retriever | None", self.retrievers.get("bm25"))  # the bm25 mode
        self.equivalence = EquivalenceMatcher(index, structure, depth) if structure is not None else None
        self.titles = TitleScorer(index.store, bm25) if bm25 is not None else None

    def _structure(self) -> StructureRetriever | ShardedStructure | None:
        """The structure mode's retriever (a sharded index's answers from its shards), when the index has one."""
        return cast("StructureRetriever | ShardedStructure | None", self.retrievers.get("structure"))

    def generate(self, query: Query, explain: bool = False) -> Candidates:
        """Each retriever's top hits (with snippets and matched formulas when `explain`)."""
        query = prepare_query(query)
        runs: dict[str, list[Hit]] = {}
        seconds: dict[str, float] = {}
        written = None  # the structure ranking, which the rewrite search reuses for the formulas as written
        for name, retriever in self.retrievers.items():
            started = time.perf_counter()
            try:
                if explain:
                    runs[name] = retriever.search(query, self.depth)
                elif isinstance(retriever, StructureRetriever):
                    written = retriever.batch_rank([query], self.depth)[query.id]
                    runs[name] = written.hits
                else:
                    runs[name] = retriever.batch_search([query], self.depth)[query.id]
            except QueryError as exc:
                if explain:
                    warning(f"{name}: {exc}")
                runs[name] = []
            seconds[name] = time.perf_counter() - started
        perfect = None
        structure = self._structure()
        if structure is not None:
            perfect = structure.perfect_score(query)
        return self.add_question_document(
            Candidates(query, question_stats(query, perfect), runs, self.missing, seconds), written
        )

    def add_question_document(self, candidates: Candidates, written: RankResult | None = None) -> Candidates:
        """Compute the SymPy-equivalence matches, title BM25 and cross-encoder logits of the candidates (also for
        candidates cached without them); `written`: the query's structure ranking, when `generate` has it."""
        if self.equivalence is not None and candidates.rewrites is None:
            candidates.rewrites = self.equivalence.match(candidates.query, candidates.docs, written)
            candidates.seconds["rewrite"] = candidates.rewrites.seconds
        if self.titles is not None and candidates.titles is None:
            started = time.perf_counter()
            candidates.titles = self.titles.scores(candidates.query, candidates.docs)
            candidates.seconds["title-bm25"] = time.perf_counter() - started
        if self.cross is not None and lacks_cross(candidates, self.cross_depth):
            started = time.perf_counter()
            query = candidates.query
            read = [Hit(doc_id=doc, score=0.0) for doc in cross_order(candidates, self.cross_depth)]
            candidates.cross = self.cross.rerank(query.text or f"${query.formula or ''}$", read)
            candidates.seconds["cross"] = time.perf_counter() - started
        return candidates


def lacks_cross(candidates: Candidates, cross_depth: int) -> bool:
    """True when the candidates' cross-encoder logits are missing or were computed to another depth."""
    if cross_depth <= 0:
        return False
    return candidates.cross is None or len(candidates.cross) != min(cross_depth, len(candidates.docs))
