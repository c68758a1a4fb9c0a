"""The composition algebra is closed: every stage (retriever, reranker, query stage) composes with every other
through `>>`, fusion and cut-off take any retriever, and the base module names no concrete retriever. Fake stages
over fixed rankings, no index."""

from __future__ import annotations

import ast

import pytest

from mathscout.errors import MathScoutError
from mathscout.retrievers.base import BaseRetriever, Composable, QueryStage, Reranker, Retriever
from mathscout.retrievers.compose import Cutoff, Pending, QueryMap, RerankChain, ScoredBy
from mathscout.retrievers.fusion import FusedRetriever
from mathscout.retrievers.rerank import Reranked
from mathscout.retrievers.rewrite import FormulaRewrite
from mathscout.types import Hit, Query
from tests.support.paths import REPO

RETRIEVERS = REPO / "retrievers"


class Fixed(BaseRetriever):
    """A retriever with a fixed ranking; it records the queries it was given."""

    def __init__(self, name: str, docs: list[str]):
        self.name, self.docs, self.queries = name, docs, []

    def _search(self, query: Query, k: int) -> list[Hit]:
        self.queries.append(query.text)
        return [Hit(d, float(len(self.docs) - n), n + 1) for n, d in enumerate(self.docs[:k])]


class Reverse(Composable):
    """A reranker that reverses the hits; it records the queries it was given."""

    name = "reverse"
    store = "own"

    def __init__(self):
        self.queries = []

    def rerank(self, query, hits, k=None):
        self.queries.append(getattr(query, "text", query))
        out = [
            Hit(h.doc_id, float(n), n, components={**h.components, "rerank": float(n)})
            for n, h in enumerate(reversed(hits), start=1)
        ]
        return out[:k] if k is not None else out


def ids(hits: list[Hit]) -> list[str]:
    return [h.doc_id for h in hits]


def test_the_stages_meet_their_protocols():
    assert isinstance(Fixed("a", []), Retriever) and isinstance(Reverse(), Reranker)
    assert isinstance(QueryMap(lambda q: q), QueryStage) and isinstance(FormulaRewrite(), QueryStage)


def test_retriever_then_reranker_and_reranker_then_reranker():
    first = Fixed("a", ["d1", "d2", "d3"])
    assert ids((first >> Reverse()).search("q", k=3)) == ["d3", "d2", "d1"]
    twice = Reverse() >> Reverse()
    assert isinstance(twice, RerankChain) and isinstance(twice, Reranker)
    assert ids((first >> twice).search("q", k=3)) == ["d1", "d2", "d3"]
    assert ids((first >> Reverse() >> Reverse()).search("q", k=3)) == ["d1", "d2", "d3"]  # Reranked, then reranked


def test_a_retriever_on_the_right_reorders_by_its_scores():
    """`a >> b`: the hits b also finds, by b's score, then the others in a's order, below them."""
    a, b = Fixed("a", ["d1", "d2", "d3", "d4"]), Fixed("b", ["d3", "x", "d1"])
    pipeline = a >> b
    assert isinstance(pipeline, Reranked) and isinstance(pipeline.reranker, ScoredBy) and pipeline.name == "a>>b"
    hits = pipeline.search("q", k=4)
    assert ids(hits) == ["d3", "d1", "d2", "d4"] and [h.rank for h in hits] == [1, 2, 3, 4]
    assert hits[0].components["rerank"] == 3.0 and hits[1].score > hits[2].score > hits[3].score
    assert ids((Reverse() >> b).rerank("q", a.search("q", k=4))) == ["d3", "d1", "d4", "d2"]


def test_query_stages_feed_any_stage():
    upper = QueryMap(lambda q: Query(q.id, q.text.upper()))
    series = QueryMap(lambda q: Query(q.id, q.text + " series"))
    first, reverse = Fixed("a", ["d1", "d2"]), Reverse()
    (upper >> series >> first).search("sum", k=2)  # upper first, then series
    assert first.queries == ["SUM series"]
    (first >> (upper >> reverse)).search("sum", k=2)  # a query stage before a reranker
    assert reverse.queries == ["SUM"]
    pending = first >> upper  # a query stage after a stage waits for what follows…
    assert isinstance(pending, Pending) and ids(pending.search("sum", k=2)) == ["d1", "d2"]  # …alone, the stage
    assert ids((pending >> reverse).search("sum", k=2)) == ["d2", "d1"] and reverse.queries[-1] == "SUM"


def test_fusion_and_cutoff_take_any_retriever():
    a, b = Fixed("a", ["d1", "d2", "d3"]), Fixed("b", ["d3", "d2"])
    fused = 0.5 * (a >> Reverse()) + 0.5 * b
    assert isinstance(fused, FusedRetriever) and len((fused % 2).search("q", k=10)) == 2
    assert ids((a % 1).search("q", k=10)) == ["d1"] and isinstance(a % 1, Cutoff)


def test_what_cannot_compose_says_why():
    a = Fixed("a", ["d1"])
    with pytest.raises(MathScoutError, match="each side must be"):
        a >> "text"
    with pytest.raises(MathScoutError, match="no retriever"):
        a + Reverse()
    with pytest.raises(MathScoutError, match="no retriever"):
        Reverse() % 3
    with pytest.raises(MathScoutError, match="feeds structure search"):
        FormulaRewrite() >> a


def test_the_base_module_names_no_concrete_stage():
    """base.py defines the operators once; what they build lives elsewhere (PyTerrier's base knows no subclass)."""
    defined = set()
    for path in RETRIEVERS.rglob("*.py"):
        if path.name != "base.py":
            defined |= {
                n.name for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(n, ast.ClassDef)
            }
    tree = ast.parse((RETRIEVERS / "base.py").read_text(encoding="utf-8"))
    named = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
    }
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    assert not (named | imported) & defined
