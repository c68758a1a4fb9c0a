"""A core install has no Lucene (pyserini is the `lucene` extra): the index leaves bm25 out and says why, and
structure search answers words from its own text lists, for `structure` and for `auto`."""

from __future__ import annotations

import importlib.util
import itertools
import json

import pytest

from mathscout.index.components import default_components
from mathscout.notices import collecting
from mathscout.retrievers import registry  # noqa: F401  (offers every retriever's component)


@pytest.fixture(scope="module")
def structure_only_index(tiny_corpus, tmp_path_factory):
    """The tiny corpus indexed as a core install indexes it: structure alone (the shared tiny index has bm25, which
    is what this test must not have)."""
    from mathscout.retrievers.indexing import build_index

    path = tmp_path_factory.mktemp("no-lucene") / "idx"
    build_index([tiny_corpus], path, ["structure"])
    return path


@pytest.fixture(scope="module")
def titled_document(tiny_corpus) -> tuple[str, str]:
    """(id, title) of the first tiny-corpus document with a title of four words or more."""
    with open(tiny_corpus, encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            title = record.get("title") or ""
            if len(title.split()) >= 4 and "$" not in title:
                return record["id"], title
    pytest.skip("no titled document in the tiny corpus")


def test_default_components_leave_out_a_missing_extra(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "pyserini" else real_find_spec(name, *a)
    )
    with collecting() as said:
        names = default_components()
    assert "bm25" not in names and "structure" in names
    assert any("bm25 component is left out" in line and "pip install 'mathscout[lucene]'" in line for line in said)


def test_structure_search_answers_words_without_bm25(structure_only_index, titled_document):
    from mathscout import MathScout

    doc_id, title = titled_document
    scout = MathScout(structure_only_index, use_llm=False)
    hits = scout.search(title, mode="structure", k=5)
    assert doc_id in [h.doc_id for h in hits[:3]]
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
    assert all(a.score >= b.score for a, b in itertools.pairwise(hits))


def test_auto_searches_a_text_question_with_structure_without_bm25(structure_only_index, titled_document):
    from mathscout import MathScout

    doc_id, title = titled_document
    scout = MathScout(structure_only_index, use_llm=False)
    assert doc_id in [h.doc_id for h in scout.search(title, k=5)[:3]]
    answer = scout.ask(title)
    assert doc_id in [h.doc_id for h in answer.hits[:3]]
    assert any(call.get("mode") == "structure" for call in _searches(answer))


def _searches(answer) -> list[dict]:
    """The arguments of the answer's search tool calls."""
    return [call.arguments for call in answer.trace if call.tool == "search"]
