"""Values of the wrong kind given to the Python API (issue 42, item 7): each is one MathScoutError that says what
was given and what to do, never a raw TypeError from deep inside. Add a case with one entry of NOT_TEXT."""

from __future__ import annotations

import pytest

from mathscout.errors import MathScoutError

NOT_TEXT = [  # a query or question, the words of the error
    (b"x^2+y^2=z^2", "must be text (str), not bytes: decode it first"),
    (bytearray(b"x^2"), "not bytearray: decode it first"),
    (None, "not NoneType"),
    (42, "not int"),
    (["x^2"], "not list"),
]


@pytest.fixture(scope="module")
def scout(tiny_index):
    from mathscout import MathScout

    return MathScout(tiny_index, use_llm=False)


@pytest.mark.parametrize("value, words", NOT_TEXT, ids=lambda v: type(v).__name__)
def test_a_query_that_is_no_text_is_one_clear_error(scout, value, words):
    calls = {
        "search": lambda: scout.search(value, mode="bm25"),
        "ask": lambda: scout.ask(value),
        "stream": lambda: list(scout.stream(value)),
    }
    for name, call in calls.items():
        with pytest.raises(MathScoutError) as caught:
            call()
        assert words in str(caught.value), (name, str(caught.value))
