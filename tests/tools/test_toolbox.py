"""The agent's tools (mathscout.tools) on the tiny index: arguments are validated and bounded, documents read and
calls counted per question. How the planner and the LLM use them: tests/agent/."""

from __future__ import annotations

from mathscout.tools import ToolBox, ToolSession
from tests.support.corpora import SUM_OF_SQUARES_DOC


def test_tool_arguments_are_validated_and_bounded(tiny_index):
    session = ToolSession(ToolBox(tiny_index))
    call, output = session.call("structure_search", formula="x^2", k=500)
    assert output is None and "k: Input should be less than or equal to 50" in call.error
    call, _ = session.call("structure_search", formula="x+" * 1000, k=5)
    assert "at most 1000 characters" in call.error
    call, _ = session.call("get_document", id="no-such-id")
    assert "no document with id 'no-such-id'" in call.error
    call, _ = session.call("rerank", query="q", hit_ids=["no-such-id"])
    assert call.error  # unknown id, or no reranker installed: a message either way
    call, output = session.call("get_document", id=SUM_OF_SQUARES_DOC)
    assert output.payload["id"] == SUM_OF_SQUARES_DOC and not call.error
    for _ in range(5):
        call, _ = session.call("get_document", id=SUM_OF_SQUARES_DOC)
    assert "at most 5 documents" in call.error
    while len(session.trace) <= session.max_calls:
        call, _ = session.call("structure_search", formula="x^2", k=1)
    assert "tool budget" in call.error


def test_a_reranker_that_opens_slowly_holds_up_only_the_calls_that_need_it(tiny_index, monkeypatch):
    """Opening a reranker (a model: seconds) under the toolbox's lock held up every other session's search on the index
    (the page's first reranked question: 4.2 s instead of 12 ms); now only the calls that need that reranker wait."""
    import threading
    import time

    from mathscout.tools import toolbox

    opening, release, opened = threading.Event(), threading.Event(), []

    class SlowToOpen:
        @staticmethod
        def open_reranker(kind, **options):
            opened.append(kind)
            opening.set()
            release.wait(30)
            return f"{kind} reranker"

    monkeypatch.setattr(toolbox, "_rerank_module", lambda: SlowToOpen)
    box = ToolBox(tiny_index)
    box.structure_search("x^2", k=3)  # the structure retriever is open
    got: list[str] = []
    loading = [threading.Thread(target=lambda: got.append(box.reranker("cross"))) for _ in range(2)]
    for thread in loading:
        thread.start()
    assert opening.wait(30)
    started = time.perf_counter()
    assert box.structure_search("x^2 + y^2", k=3).hits  # while the reranker opens
    box.search("integral", "bm25", 3)  # and a retriever opened meanwhile
    waited = time.perf_counter() - started
    release.set()
    for thread in loading:
        thread.join(30)
    assert waited < 20  # without waiting for the reranker, which opened once for its two callers
    assert opened == ["cross"] and got == ["cross reranker"] * 2
