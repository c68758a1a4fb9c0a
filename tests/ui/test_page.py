"""The chat page in a real browser (Debian's chromium, headless, driven by Playwright) over the real assistant.

One server (`mathscout serve`) runs for the whole module. It offers the demo index, a copy of it whose
structure component is damaged (a tool that crashes, through the real code path) and a small index of real
Math StackExchange answers from ../shared/data (links to the original posts). Its LLM is the coordinator's
OpenAI-protocol HTTP server (tests/support/fake_openai.py), so the LLM switch is enabled; the other tests switch it
off. Screenshots go to tests/artifacts/ (git-ignored).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from mathscout.types import Document, Hit, MatchedFormula
from tests.support.cli import stop
from tests.support.corpora import EVIL, HOSTILE_ID
from tests.support.fake_openai import FakeOpenAI, Text, ToolCalls
from tests.support.page import ANSWER_TIMEOUT_MS, ask, wait_for_answer
from tests.support.paths import ARTIFACTS

SIMPLIFY = "How do I simplify $\\frac{t+1}{t}$?"
TRIG = "Why is $\\cos^2\\alpha + \\sin^2\\alpha = 1$?"
SQRT = "When is $\\sqrt{ab}=\\sqrt{a}\\sqrt{b}$ true?"
LLM_MODEL = "fake-gpt"
LLM_MARK = "(written by the LLM agent)"


# ---- the page's logic, without a browser ----------------------------------------------------------


def test_citations_link_to_their_cards_and_unknown_ids_stay_text():
    from mathscout.ui.cards import link_citations

    hits = [Hit("demo:algebra-004", 3.0, rank=1), Hit("pw:a_b", 2.0, rank=2)]
    text = "Write it as one fraction [demo:algebra-004]; see [demo:algebra-004, pw:a_b] and [nowhere:1]."
    linked = link_citations(text, hits, turn=7)
    assert "[demo:algebra-004](#hit-7-1)" in linked
    assert "[[demo:algebra-004](#hit-7-1), [pw:a\\_b](#hit-7-2)]" in linked
    assert "[nowhere:1]" in linked and "(#hit-7-3)" not in linked


def test_links_to_original_posts():
    from mathscout.ui.cards import original_url

    def doc(doc_id, thread):
        return Document(doc_id, "text", metadata={"thread_id": thread})

    assert original_url(doc("692", "mse:math.stackexchange.com:154")) == "https://math.stackexchange.com/a/692"
    assert (
        original_url(doc("phys:1", "phys:physics.stackexchange.com:248850"))
        == "https://physics.stackexchange.com/q/248850"
    )
    assert original_url(doc("pm:00:AdHoc", None)) is None


def test_matched_formula_parts_are_coloured_without_breaking_the_latex():
    from mathscout.ui.cards import coloured_latex, formula_html

    latex = "\\frac{a}{b} + \\left( c^2 \\right)"
    coloured = coloured_latex(latex, [(6, 10), (19, 20), (23, 24)])  # "a}{b" (merged leaves), "(" and "2"
    assert coloured.count("\\color") == 3 and coloured.startswith("\\frac{{\\color")
    assert "\\left( c^{\\color" in coloured  # the delimiter after \left is never wrapped
    assert coloured_latex("x^22 + 1", [(0, 8)]).startswith("{\\color{#d9480f}x}^22 \\mathbin")  # x² 2 stays x² 2
    long = MatchedFormula("d#0", "x+" * 300 + "y", highlight=[(0, 1)])
    assert "<mark>x</mark>" in formula_html(long)  # too long to render: source with the match marked
    broken = formula_html(MatchedFormula("d#1", "\\frac{a}{b <script>", highlight=[(0, 5)]))
    assert broken.startswith('<div class="ms-formula ms-formula-source"><code')  # unbalanced: escaped code
    assert "&lt;script&gt;" in broken and "$$" not in broken


def test_align_bodies_in_answers_are_made_renderable():
    from mathscout.ui.cards import renderable_math

    text = "matched formula $\\alpha + \\beta &= 0,\\\\ 2\\alpha &= 1$ and $x \\& y$, costs $3 [demo:a]"
    assert renderable_math(text) == (
        "matched formula $\\begin{aligned}\\alpha + \\beta &= 0,\\\\ 2\\alpha &= 1"
        "\\end{aligned}$ and $x \\& y$, costs $3 [demo:a]"
    )


def test_bad_messages_are_explained():
    from mathscout.ui.inputs import MAX_QUESTION_CHARS, check_question

    assert "empty" in check_question("  \n ").problem
    huge = check_question("word " * 20_000)
    assert len(huge.text) <= MAX_QUESTION_CHARS and "100,000 characters" in huge.notices[0]
    assert "shortened" in huge.echo and len(huge.echo) < 1_000
    assert "malformed (unbalanced {)" in check_question("simplify $\\frac{1}{x$").notices[0]
    assert check_question("it costs $3 or $5, why is $x^2 \\ge 0$?").notices == []


def test_example_labels_fit_and_never_cut_a_formula():
    from mathscout.ui.app import EXAMPLE_LABEL_CHARS, example_label, example_questions

    questions = example_questions(limit=100)
    assert len(questions) >= 6
    for question in questions:
        label = example_label(question)
        assert len(label) <= EXAMPLE_LABEL_CHARS and label.count("$") % 2 == 0, label
    assert example_label("Why do the sides of a right triangle satisfy $u^2 + v^2 = w^2$?").endswith(
        "$u^2 + v^2 = w^2$?"
    )


def test_serve_refuses_to_expose_the_page_without_an_explicit_flag(capsys):
    from mathscout.cli import main

    assert main(["serve", "--host", "0.0.0.0"]) == 2
    assert "--public" in capsys.readouterr().err
    assert main(["serve", "--share"]) == 2
    assert "--public" in capsys.readouterr().err
    assert main(["serve", "--auth", "nopassword"]) == 2


# ---- shared fixtures: indexes and the page's server -----------------------------------------------


@pytest.fixture(scope="module")
def ui_indexes(tmp_path_factory, tiny_index):
    """MATHSCOUT_HOME with the demo index, a damaged copy and a small index of real MSE answers (a copy of the tiny
    index the tests share, named as the page lists it; it holds a document that tries to load and link outside URLs)."""
    from mathscout.retrievers.indexing import ensure_demo_index

    home = tmp_path_factory.mktemp("ui-home")
    demo = ensure_demo_index(home / "indexes" / "demo")
    broken = tmp_path_factory.mktemp("ui-broken") / "broken"
    shutil.copytree(demo, broken)
    for part in (broken / "structure").iterdir():
        part.write_bytes(b"damaged")
    mse = shutil.copytree(tiny_index, tmp_path_factory.mktemp("ui-mse") / "mse-sample")
    return {"home": home, "demo": demo, "broken": broken, "mse": mse}


def _llm_responder(request):
    """The LLM's side of the conversation: structure-search the question's formula, then answer citing the
    first id the tool returned."""
    if not request.tool_results:
        formula = re.search(r"\$([^$]+)\$", request.last_user)
        return ToolCalls([("structure_search", {"formula": formula.group(1) if formula else "x", "k": 5})])
    ids = re.findall(r'"id":\s*"([^"]+)"', request.tool_results[-1])
    cited = f" [{ids[0]}]" if ids else ""
    return Text(
        f"Divide each term by $t$: $\\frac{{t+1}}{{t}} = 1 + \\frac{{1}}{{t}}$ for $t \\ne 0${cited}. {LLM_MARK}"
    )


@pytest.fixture(scope="module")
def fake_llm():
    with FakeOpenAI(_llm_responder) as server:
        yield server


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_page(url: str, process: subprocess.Popen, log: Path, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"mathscout serve exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"the page did not come up within {timeout:.0f} s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def server(ui_indexes, fake_llm):
    """The page's URL: `mathscout serve` (the real assistant) over the three indexes, LLM = the fake server."""
    port = _free_port()
    log = ui_indexes["home"] / "serve.log"
    env = {
        **os.environ,
        "MATHSCOUT_HOME": str(ui_indexes["home"]),
        "PYTHONUNBUFFERED": "1",
        "OPENAI_BASE_URL": fake_llm.base_url,
        "MATHSCOUT_LLM_MODEL": LLM_MODEL,
        "MATHSCOUT_LLM_TIMEOUT": "30",
    }
    for name in ("MATHSCOUT_INDEX", "OPENAI_API_KEY", "MATHSCOUT_CONFIG"):
        env.pop(name, None)
    command = [
        sys.executable,
        "-m",
        "mathscout.cli",
        "serve",
        "--port",
        str(port),
        "--index",
        str(ui_indexes["demo"]),
        "--index",
        str(ui_indexes["broken"]),
        "--index",
        str(ui_indexes["mse"]),
    ]
    with open(log, "w") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    try:
        _wait_for_page(url, process, log)
        yield url
        assert process.poll() is None, f"the server died:\n{log.read_text()[-3000:]}"
    finally:
        stop(process)


@pytest.fixture()
def page(browser, server):
    """A new browser session on the page, with the LLM switched off (the LLM test switches it back on)."""
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    page = context.new_page()
    page.goto(server)
    page.wait_for_selector("#ms-question textarea")
    llm = page.locator("#ms-llm input")
    if llm.is_checked():
        llm.uncheck()
    yield page
    context.close()


# ---- helpers ----------------------------------------------------------------------------------------


def _shot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))


def _wait_for_turns(page, count: int) -> None:
    """Wait until `count` turns are over, answered or stopped with a note."""
    over = (
        "[...document.querySelectorAll('#ms-chat .thought-group .title')]"
        ".filter(e => !e.innerText.includes('Working')).length"
    )
    page.wait_for_function(f"n => {over} >= n", arg=count, timeout=ANSWER_TIMEOUT_MS)


def _chat_text(page) -> str:
    return page.inner_text("#ms-chat")


def _trace_text(page) -> str:
    """The trace panel's text (the panel is opened first: it starts folded)."""
    if not page.locator("#ms-trace").is_visible():
        page.click("#ms-trace-panel button")
    page.locator("#ms-trace").wait_for()
    return page.inner_text("#ms-trace")


def _choose(page, dropdown: str, option: str) -> None:
    """Pick the option whose label starts with `option`."""
    page.click(f"{dropdown} input")
    page.get_by_role("option", name=re.compile("^" + re.escape(option))).first.click()


def _card_ids(page) -> list[str]:
    return page.locator("#ms-results .ms-turn:not(.ms-turn-earlier) .ms-hit .ms-meta code").all_inner_texts()


@pytest.fixture(autouse=True)
def _playwright_expect():
    global expect
    from playwright.sync_api import expect


expect = None


# ---- the page in a browser ------------------------------------------------------------------------


@pytest.mark.browser
def test_example_question_gets_a_streamed_cited_answer_with_rendered_math(page):
    page.locator("#ms-examples .gallery-item").filter(has_text="simplify").first.click()
    expect(page.locator("#ms-question textarea")).to_have_value(SIMPLIFY)
    page.evaluate("""() => { window.msSawProgress = false;
        new MutationObserver(() => { if (document.querySelector('#ms-chat').innerText.includes('Working'))
            window.msSawProgress = true; }).observe(document.querySelector('#ms-chat'),
            {subtree: true, childList: true, characterData: true}); }""")
    ask(page)
    wait_for_answer(page)
    assert page.evaluate("window.msSawProgress")  # the answer was streamed: progress showed before it
    expect(page.locator("#ms-question textarea")).to_have_value("")
    assert page.locator("#ms-chat .message .katex").count() >= 2  # the question's and the answer's formulas
    assert page.locator("#ms-chat .katex-error").count() == 0
    citations = page.locator('#ms-chat a[href^="#hit-"]')
    assert citations.count() >= 1
    cards = page.locator("#ms-results .ms-hit")
    assert cards.count() >= 3
    assert {"demo:algebra-004", "demo:algebra-005"} & set(_card_ids(page)[:5]), _card_ids(page)
    assert page.locator("#ms-results .ms-formula .katex").count() >= 1
    assert page.locator("#ms-results .ms-formula [style*='color']").count() >= 1  # the matched part, coloured
    assert page.locator("#ms-results .ms-score").count() >= 2 * cards.count()  # the score and its components
    assert page.locator("#ms-results .ms-snippet mark").count() >= 1
    _shot(page, "1-answer")

    target = citations.first.get_attribute("href")[1:]
    citations.first.click()
    card = page.locator(f"#{target}")
    page.wait_for_timeout(700)  # smooth scrolling
    assert "ms-flash" in card.get_attribute("class")
    assert card.is_visible() and card.bounding_box()["y"] < 1000
    _shot(page, "2-citation-clicked")

    text = _trace_text(page)
    trace = page.locator("#ms-trace")
    assert "Tool calls" in text and trace.locator("ol li").count() >= 2 and " hits · " in text
    assert "structure_search" in text and 'formula="\\frac{t+1}{t}"' in text  # the tool, its arguments
    assert "Formula rewrites" in text and "(expand)" in text  # the SymPy rewrite that was searched too
    assert "Type expansions" in text
    trace.scroll_into_view_if_needed()
    _shot(page, "3-trace")


@pytest.mark.browser
def test_a_computed_answer_is_shown_from_its_start_with_the_result_first(page):
    ask(page, "Why is $\\cos^2 x + \\sin^2 x = 1$?")  # a first turn, so the chat can scroll
    wait_for_answer(page)
    ask(page, "What is $\\int_0^1 x^2 dx$")
    wait_for_answer(page, 2)
    page.wait_for_timeout(900)  # the scroll runs once rendering settled
    answer = page.locator("#ms-chat .message-row.bot-row, #ms-chat [data-testid='bot']").last
    assert "Computed by SymPy" in _chat_text(page) and "In short" in _chat_text(page)
    asked = page.locator("#ms-chat .message-row.user-row, #ms-chat [data-testid='user']").last
    chat = page.locator("#ms-chat").bounding_box()
    top = asked.bounding_box()["y"]
    assert chat["y"] - 5 <= top <= chat["y"] + 120, (top, chat)  # the question heads the view, not the answer's end
    assert answer.count() == 1
    _shot(page, "4-computed-answer-from-its-start")
    titles = page.locator("#ms-results .ms-score-main").first.get_attribute("title")
    # the score's explanation names its parts: Eq. 3.18's sum, or for a formula alone the match tier and the scores
    assert " = " in titles or ("match tier" in titles and "structure" in titles), titles


@pytest.mark.browser
def test_enter_sends_and_shift_enter_starts_a_new_line(page):
    """What the input's placeholder promises: Enter sends the question, Shift+Enter starts a new line."""
    box = page.locator("#ms-question textarea")
    assert "Enter sends" in box.get_attribute("placeholder")
    box.click()
    box.type("Why is")
    box.press("Shift+Enter")
    box.type("$a^2+b^2=c^2$ true?")
    assert box.input_value() == "Why is\n$a^2+b^2=c^2$ true?"
    box.press("Enter")
    wait_for_answer(page)
    assert box.input_value() == ""
    assert page.locator("#ms-results .ms-hit").count() >= 1


@pytest.mark.browser
def test_switching_modes_changes_how_the_answer_is_searched(page):
    info = page.inner_text("#ms-mode")
    assert "pick one: structure, text" in info and "dense" not in info  # the index's modes, not what it lacks
    _choose(page, "#ms-mode", "structure —")
    assert page.locator("#ms-mode input").input_value().startswith("structure")
    ask(page, TRIG)
    wait_for_answer(page)
    assert {"demo:trigonometry-001", "demo:trigonometry-002"} & set(_card_ids(page)[:5]), _card_ids(page)
    trace = _trace_text(page)
    assert "mode: structure" in trace and "structure_search" in trace
    _choose(page, "#ms-mode", "text")
    page.fill("#ms-k input[type='number']", "3")
    page.press("#ms-k input[type='number']", "Tab")
    ask(page, TRIG)
    wait_for_answer(page, 2)
    assert "mode: bm25" in _trace_text(page)
    assert page.locator("#ms-results .ms-turn:not(.ms-turn-earlier) .ms-hit").count() == 3  # k = 3
    assert page.locator("#ms-results details.ms-turn-earlier").count() == 1  # the first answer's cards kept
    assert page.locator("#ms-results .ms-turn:not(.ms-turn-earlier) .ms-score", has_text="text").count() >= 1
    _shot(page, "4-modes")


@pytest.mark.browser
@pytest.mark.model
def test_rerank_switch_reranks_the_hits(page):
    _choose(page, "#ms-rerank", "auto")  # the reranker menu, made from the reranker table
    ask(page, SIMPLIFY)
    wait_for_answer(page)
    assert "rerank" in _trace_text(page)
    assert page.locator("#ms-results .ms-score", has_text="rerank").count() >= 1


@pytest.mark.browser
def test_bad_input_gets_a_clear_message_and_the_page_stays_usable(page):
    ask(page, "")
    page.wait_for_selector("#ms-chat >> text=Your message is empty", timeout=10_000)

    ask(page, "simplify $\\frac{1}{x$ please")
    _wait_for_turns(page, 1)
    assert "looks malformed (unbalanced {)" in _chat_text(page)
    _shot(page, "5a-malformed-latex")

    ask(page, "x^2 " * 25_000)  # a 100 KB paste
    _wait_for_turns(page, 2)
    assert "100,000 characters" in _chat_text(page) and "shortened here" in _chat_text(page)
    _shot(page, "5b-huge-paste")

    page.fill("#ms-index input", "no-such-index")
    page.press("#ms-index input", "Enter")
    ask(page, SIMPLIFY)
    page.wait_for_selector("#ms-chat >> text=unknown index 'no-such-index'", timeout=ANSWER_TIMEOUT_MS)
    _wait_for_turns(page, 3)
    _shot(page, "5c-unknown-index")

    _choose(page, "#ms-index", "demo")
    ask(page, TRIG)
    wait_for_answer(page)  # still usable after all of that


@pytest.mark.browser
def test_a_crashed_tool_is_reported_in_the_chat(page):
    _choose(page, "#ms-index", "broken")  # a copy of the demo index whose structure component is damaged
    ask(page, TRIG)
    _wait_for_turns(page, 1)
    note = page.locator("#ms-chat .message", has_text="The tool structure_search failed").last
    expect(note).to_contain_text("is damaged")
    expect(note).to_contain_text("--components structure")
    assert _chat_text(page).count("The tool structure_search failed") == 1  # said once, not once per call
    note.scroll_into_view_if_needed()
    _shot(page, "6-crashed-tool")
    _choose(page, "#ms-index", "demo")
    ask(page, TRIG)
    wait_for_answer(page)


@pytest.mark.browser
def test_another_index_links_hits_to_their_original_posts(page):
    _choose(page, "#ms-index", "mse-sample")
    page.wait_for_function("() => document.querySelector('#ms-mode').innerText.includes('pick one')")
    ask(page, SQRT)
    wait_for_answer(page)
    links = page.locator('#ms-results a[href^="https://math.stackexchange.com/"]')
    assert links.count() >= 1 and links.first.get_attribute("target") == "_blank"
    assert page.locator("#ms-results .ms-meta", has_text="math.stackexchange.com").count() >= 1
    _shot(page, "8-mse-index")


@pytest.mark.browser
def test_a_hostile_document_is_shown_as_text_and_nothing_leaves_the_machine(page):
    """Its images, links, HTML and LaTeX \\href are rendered as text; every request goes to 127.0.0.1."""
    hosts: list[str] = []
    page.on("request", lambda request: hosts.append(re.sub(r"^[a-z]+://([^/:]+).*$", r"\1", request.url)))
    _choose(page, "#ms-index", "mse-sample")
    ask(page, SQRT + " click me")
    wait_for_answer(page)
    page.wait_for_timeout(1500)  # give any injected image time to be requested
    assert HOSTILE_ID in _card_ids(page)
    for area in ("#ms-chat", "#ms-results"):
        assert page.locator(f'{area} img[src*="{EVIL}"]').count() == 0
        assert page.locator(f'{area} a[href*="{EVIL}"]').count() == 0
        assert page.locator(f"{area} script, {area} iframe").count() == 0
    assert "click me" in _chat_text(page)
    outside = {h for h in hosts if h not in ("127.0.0.1", "localhost") and not h.startswith("data")}
    assert not outside, outside
    _shot(page, "10-hostile-document")


@pytest.mark.browser
def test_llm_switch_streams_an_llm_planned_answer(page, fake_llm):
    llm = page.locator("#ms-llm input")
    assert llm.is_enabled()
    assert f"LLM agent: {LLM_MODEL}" in page.inner_text("#ms-llm")
    llm.check()
    before = len(fake_llm.requests)
    ask(page, SIMPLIFY)
    wait_for_answer(page)
    assert LLM_MARK in _chat_text(page)
    assert page.locator('#ms-chat a[href^="#hit-"]').count() >= 1
    requests = fake_llm.requests[before:]
    assert len(requests) >= 2 and requests[0].stream and "structure_search" in requests[0].tools
    _shot(page, "9-llm-answer")
    trace = _trace_text(page)
    assert f"llm:{LLM_MODEL}" in trace and "structure_search" in trace


@pytest.mark.browser
def test_formula_editor_previews_and_inserts_latex(page):
    page.click("#ms-formula-panel button")
    page.fill("#ms-formula textarea, #ms-formula input", "\\sum_{k=1}^{n} k = \\frac{n(n+1)}{2}")
    page.locator("#ms-formula-preview .katex").first.wait_for(timeout=10_000)
    assert "readable formula" in page.inner_text("#ms-formula-preview")
    page.fill("#ms-formula textarea, #ms-formula input", "\\frac{n}{")
    page.wait_for_selector("#ms-formula-preview >> text=can't be read completely", timeout=10_000)
    page.fill("#ms-formula textarea, #ms-formula input", "\\binom{n}{k}")
    page.fill("#ms-question textarea", "What is")
    page.click("#ms-insert")
    page.wait_for_function(
        "() => document.querySelector('#ms-question textarea').value === 'What is $\\\\binom{n}{k}$'", timeout=10_000
    )
    _shot(page, "7-formula-editor")


# ---- the page's wiring over the real assistant, without a browser -----------------------------------


def test_llm_switch_is_greyed_out_with_a_reason_without_an_endpoint(ui_indexes, monkeypatch, tmp_path):
    from mathscout.ui.app import build_app
    from mathscout.ui.chat import AssistantPool
    from mathscout.ui.indexes import IndexChoice

    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MATHSCOUT_CONFIG", str(tmp_path / "no-config.toml"))
    app = build_app(AssistantPool([IndexChoice("demo", "demo", ui_indexes["demo"])]))
    llm = next(b for b in app.blocks.values() if getattr(b, "elem_id", None) == "ms-llm")
    assert llm.interactive is False and llm.value is False
    assert "no LLM configured" in llm.info and "OPENAI_API_KEY" in llm.info


def test_a_damaged_document_store_becomes_a_note_and_a_finished_turn(ui_indexes, tmp_path):
    from mathscout.ui.chat import AssistantPool, SessionState, run_turn
    from mathscout.ui.indexes import IndexChoice

    damaged = tmp_path / "damaged"
    shutil.copytree(ui_indexes["demo"], damaged)
    (damaged / "store.sqlite").write_bytes(b"this is not a database" * 100)
    pool = AssistantPool([IndexChoice("damaged", "damaged", damaged)], use_llm=False)
    updates = list(
        run_turn(pool, TRIG, [], SessionState(), index_key="damaged", mode="auto", k=5, rerank=False, use_llm=False)
    )
    final = updates[-1]
    text = " ".join(str(m["content"]) for m in final.chat)
    assert "**Note:**" in text and final.chat[-1]["content"].startswith("**Note:**"), text
    assert final.chat[1]["metadata"]["status"] == "done"
