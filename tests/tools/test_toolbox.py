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
