"""The chat page in a real browser (Debian's chromium, headless, driven by Playwright), over the demo index.

One server (`mathscout serve`) runs for the whole module; it also offers a copy of the demo index with a
damaged structure component, to show what a crashed tool looks like. Screenshots go to tests/artifacts/.
Set MATHSCOUT_UI_TEST_URL to run the browser tests against a page that is already running instead.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import warnings
from pathlib import Path

import pytest

from mathscout.types import Document, Hit, MatchedFormula

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).parent / "artifacts"
ANSWER_TIMEOUT_MS = 60_000
SIMPLIFY = "How do I simplify $\\frac{t+1}{t}$?"
TRIG = "Why is $\\cos^2\\alpha + \\sin^2\\alpha = 1$?"


# ---- the page's logic, without a browser ----------------------------------------------------------

def test_citations_link_to_their_cards_and_unknown_ids_stay_text():
    from ui.cards import link_citations

    hits = [Hit("demo:algebra-004", 3.0, rank=1), Hit("pw:a_b", 2.0, rank=2)]
    text = "Write it as one fraction [demo:algebra-004]; see [demo:algebra-004, pw:a_b] and [nowhere:1]."
    linked = link_citations(text, hits, turn=7)
    assert "[demo:algebra-004](#hit-7-1)" in linked
    assert "[[demo:algebra-004](#hit-7-1), [pw:a\\_b](#hit-7-2)]" in linked
    assert "[nowhere:1]" in linked and "(#hit-7-3)" not in linked


def test_links_to_original_posts():
    from ui.cards import original_url

    def doc(doc_id, thread):
        return Document(doc_id, "text", metadata={"thread_id": thread})

    assert original_url(doc("692", "mse:math.stackexchange.com:154")) == "https://math.stackexchange.com/a/692"
    assert original_url(doc("phys:1", "phys:physics.stackexchange.com:248850")) == "https://physics.stackexchange.com/q/248850"
    assert original_url(doc("pm:00:AdHoc", None)) is None


def test_matched_formula_parts_are_coloured_without_breaking_the_latex():
    from ui.cards import coloured_latex, formula_html

    latex = "\\frac{a}{b} + \\left( c^2 \\right)"
    coloured = coloured_latex(latex, [(6, 10), (19, 20), (23, 24)])  # "a}{b" (merged leaves), "(" and "2"
    assert coloured.count("\\color") == 3 and coloured.startswith("\\frac{{\\color")
    assert "\\left( c^{\\color" in coloured  # the delimiter after \left is never wrapped
    assert coloured_latex("x^22 + 1", [(0, 8)]).startswith("{\\color{#d9480f}x}^22 \\mathbin")  # x² 2 stays x² 2
    long = MatchedFormula("d#0", "x+" * 300 + "y", highlight=[(0, 1)])
    assert "<mark>x</mark>" in formula_html(long)  # too long to render: source with the match marked


def test_bad_messages_are_explained():
    from ui.inputs import MAX_QUESTION_CHARS, check_question

    assert "empty" in check_question("  \n ").problem
    huge = check_question("word " * 20_000)
    assert len(huge.text) <= MAX_QUESTION_CHARS and "100,000 characters" in huge.notices[0]
    assert "shortened" in huge.echo and len(huge.echo) < 1_000
    assert "malformed (unbalanced {)" in check_question("simplify $\\frac{1}{x$").notices[0]
    assert check_question("it costs $3 or $5, why is $x^2 \\ge 0$?").notices == []


def test_a_crash_inside_the_assistant_becomes_a_note_and_a_finished_turn():
    from agent.events import AgentEvent, ToolCall
    from ui.chat import SessionState, run_turn

    class Crashing:
        def stream(self, question, **options):
            yield AgentEvent("tool_start", call=ToolCall("structure_search", {"query": question}))
            raise RuntimeError("segment file truncated")

    class Pool:
        def assistant(self, key):
            return Crashing()

    updates = list(run_turn(Pool(), "why $x^2 \\ge 0$?", [], SessionState(), index_key=None, mode="auto", k=10,
                            rerank=False, use_llm=False))
    final = updates[-1].chat
    assert "Something went wrong" in final[-1]["content"] and "segment file truncated" in final[-1]["content"]
    assert final[1]["metadata"]["status"] == "done" and "Stopped" in final[1]["metadata"]["title"]
    assert updates[-1].state == SessionState()  # nothing half-done kept in the session


def test_a_failed_tool_the_agent_worked_around_is_still_reported():
    from agent.events import AgentEvent, Answer, ToolCall
    from ui.chat import run_turn

    class CarryingOn:
        def stream(self, question, **options):
            call = ToolCall("dense_search", {"query": question}, error="model file missing", seconds=0.01)
            yield AgentEvent("tool_start", call=call)
            yield AgentEvent("tool_end", call=call)
            yield AgentEvent("answer", answer=Answer(question, "Nothing better than [d1].", [Hit("d1", 1.0, rank=1)]))

    class Pool:
        def assistant(self, key):
            return CarryingOn()

        def documents(self, key, doc_ids):
            return {"d1": Document("d1", "A document about $x^2$.")}

    final = list(run_turn(Pool(), "why $x^2 \\ge 0$?", [], None, index_key=None, mode="auto", k=10,
                          rerank=False, use_llm=False))[-1]
    text = " ".join(str(m["content"]) for m in final.chat)
    assert "The tool dense_search failed (model file missing)" in text
    assert "[d1](#hit-1-1)" in final.chat[-1]["content"] and 'id="hit-1-1"' in final.results


def test_serve_refuses_to_expose_the_page_without_an_explicit_flag(capsys):
    from mathscout.cli import main

    assert main(["serve", "--host", "0.0.0.0"]) == 2
    assert "--public" in capsys.readouterr().err
    assert main(["serve", "--auth", "nopassword"]) == 2


# ---- the page in a browser ------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_page(url: str, process: subprocess.Popen | None, log: Path, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            pytest.fail(f"mathscout serve exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"the page did not come up within {timeout:.0f} s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The page's URL: `mathscout serve` over the demo index and a copy of it with a damaged component."""
    if os.environ.get("MATHSCOUT_UI_TEST_URL"):
        yield os.environ["MATHSCOUT_UI_TEST_URL"].rstrip("/") + "/"
        return
    from mathscout.config import ensure_demo_index

    home = tmp_path_factory.mktemp("ui-home")
    demo = ensure_demo_index(home / "indexes" / "demo")
    broken = tmp_path_factory.mktemp("ui-broken") / "broken"
    shutil.copytree(demo, broken)
    for part in (broken / "structure").iterdir():
        part.write_bytes(b"damaged")
    port = _free_port()
    log = home / "serve.log"
    env = {**os.environ, "MATHSCOUT_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    env.pop("MATHSCOUT_INDEX", None)
    serve = ["serve", "--port", str(port), "--no-llm", "--index", str(broken)]
    if importlib.util.find_spec("agent.assistant") is not None:
        command = [sys.executable, "-m", "mathscout.cli", *serve]
    else:  # until the agent lands: the page over the contract's test double (see the end of this file)
        warnings.warn("agent.assistant is missing: the browser tests run the page over a test double")
        command = [sys.executable, __file__, *serve]
    with open(log, "w") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    try:
        _wait_for_page(url, process, log)
        yield url
        assert process.poll() is None, f"the server died:\n{log.read_text()[-3000:]}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not installed (scripts/setup.sh installs it: apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture()
def page(browser, server):
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    page = context.new_page()
    page.goto(server)
    page.wait_for_selector("#ms-question textarea")
    yield page
    context.close()


def _shot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))


def _ask(page, question: str | None = None) -> None:
    if question is not None:
        page.fill("#ms-question textarea", question)
    page.click("#ms-send")


_FINISHED = ("[...document.querySelectorAll('#ms-chat .thought-group .title')]"
             ".filter(e => e.innerText.trim().startsWith('Searched:')).length")


def _answers(page) -> int:
    """How many answers are finished: each finished turn's progress message is titled 'Searched: …'."""
    return page.evaluate(f"() => {_FINISHED}")


def _wait_for_answer(page, count: int = 1) -> None:
    page.wait_for_function(f"n => {_FINISHED} >= n", arg=count, timeout=ANSWER_TIMEOUT_MS)


def _wait_for_turns(page, count: int) -> None:
    """Wait until `count` turns are over, answered or stopped with a note."""
    over = ("[...document.querySelectorAll('#ms-chat .thought-group .title')]"
            ".filter(e => !e.innerText.includes('Working')).length")
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


@pytest.fixture(autouse=True)
def _playwright_expect():
    global expect
    from playwright.sync_api import expect


expect = None


def test_example_question_gets_a_streamed_cited_answer_with_rendered_math(page):
    page.locator("#ms-examples button.gallery-item").filter(has_text="simplify").first.click()
    expect(page.locator("#ms-question textarea")).to_have_value(SIMPLIFY)
    page.evaluate("""() => { window.msSawProgress = false;
        new MutationObserver(() => { if (document.querySelector('#ms-chat').innerText.includes('Working'))
            window.msSawProgress = true; }).observe(document.querySelector('#ms-chat'),
            {subtree: true, childList: true, characterData: true}); }""")
    _ask(page)
    _wait_for_answer(page)
    assert page.evaluate("window.msSawProgress")  # the answer was streamed: progress showed before it
    expect(page.locator("#ms-question textarea")).to_have_value("")
    assert page.locator("#ms-chat .message .katex").count() >= 1  # the question's fraction, rendered
    citations = page.locator('#ms-chat a[href^="#hit-"]')
    assert citations.count() >= 1
    cards = page.locator("#ms-results .ms-hit")
    assert cards.count() >= 3
    ids = page.locator("#ms-results .ms-hit .ms-meta code").all_inner_texts()
    assert {"demo:algebra-004", "demo:algebra-005"} & set(ids[:5]), ids
    assert page.locator("#ms-results .ms-formula .katex").count() >= 1
    assert page.locator("#ms-results .ms-score").count() >= cards.count()
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
    assert "Tool calls" in text and trace.locator("ol li").count() >= 1 and " hits · " in text
    assert "Formula rewrites" in text and "Type expansions" in text
    trace.scroll_into_view_if_needed()
    _shot(page, "3-trace")


def test_switching_modes_changes_how_the_answer_is_searched(page):
    modes = page.locator("#ms-mode input")
    _choose(page, "#ms-mode", "structure")
    assert modes.input_value().startswith("structure")
    _ask(page, TRIG)
    _wait_for_answer(page)
    ids = page.locator("#ms-results .ms-hit .ms-meta code").all_inner_texts()
    assert {"demo:trigonometry-001", "demo:trigonometry-002"} & set(ids[:5]), ids
    assert "mode: structure" in _trace_text(page)
    _choose(page, "#ms-mode", "text")
    _ask(page, TRIG)
    _wait_for_answer(page, 2)
    assert page.locator("#ms-results details.ms-turn-earlier").count() == 1  # the first answer's cards kept
    _shot(page, "4-modes")


def test_bad_input_gets_a_clear_message_and_the_page_stays_usable(page):
    _ask(page, "")
    page.wait_for_selector("#ms-chat >> text=Your message is empty", timeout=10_000)

    _ask(page, "simplify $\\frac{1}{x$ please")
    _wait_for_turns(page, 1)
    assert "looks malformed (unbalanced {)" in _chat_text(page)

    _ask(page, "x^2 " * 25_000)  # a 100 KB paste
    _wait_for_turns(page, 2)
    assert "100,000 characters" in _chat_text(page) and "shortened here" in _chat_text(page)
    _shot(page, "5-bad-input")

    page.fill("#ms-index input", "no-such-index")
    page.press("#ms-index input", "Enter")
    _ask(page, SIMPLIFY)
    page.wait_for_selector("#ms-chat >> text=unknown index 'no-such-index'", timeout=ANSWER_TIMEOUT_MS)
    _wait_for_turns(page, 3)

    _choose(page, "#ms-index", "demo")
    _ask(page, TRIG)
    _wait_for_answer(page)  # still usable after all of that


def test_a_crashed_tool_is_reported_in_the_chat(page):
    if os.environ.get("MATHSCOUT_UI_TEST_URL"):
        pytest.skip("needs the test server's damaged index")
    _choose(page, "#ms-index", "broken")  # a copy of the demo index whose structure component is damaged
    _ask(page, TRIG)
    _wait_for_turns(page, 1)
    assert "Note:" in _chat_text(page)
    _shot(page, "6-crashed-tool")
    _choose(page, "#ms-index", "demo")
    _ask(page, TRIG)
    _wait_for_answer(page)


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
    page.wait_for_function("() => document.querySelector('#ms-question textarea').value === 'What is $\\\\binom{n}{k}$'",
                           timeout=10_000)
    _shot(page, "7-formula-editor")


# ---- a test double of agent.assistant.Assistant, used only while the real one has not landed -------

def _install_assistant_double() -> None:
    """Register `agent.assistant` with a minimal Assistant honouring the contract: plan, one search tool
    call per retriever, a streamed answer citing the top hits."""
    import types

    from agent.events import AgentEvent, Answer, ToolCall
    from mathscout.index.layout import IndexDir
    from retrievers import available_modes, open_retriever

    class Assistant:
        def __init__(self, index=None, *, use_llm=None):
            self.index = IndexDir(index)

        @property
        def llm_status(self):
            return False, "no LLM configured: the offline planner writes the answers"

        def modes(self):
            supported = [m for m, spec in available_modes().items() if set(spec.requires) <= set(self.index.components)]
            return ["auto", *supported]

        def stream(self, question, *, mode="auto", k=10, rerank=False, use_llm=None):
            started = time.perf_counter()
            yield AgentEvent("plan", text=f"search with {'structure and bm25' if mode == 'auto' else mode}")
            calls, hits = [], []
            for name in (["structure", "bm25"] if mode == "auto" else [mode]):
                call = ToolCall(f"search_{name}", {"query": question, "k": k})
                yield AgentEvent("tool_start", call=call)
                found = open_retriever(self.index, name).search(question, k=k)
                call.hit_count, call.seconds = len(found), time.perf_counter() - started
                call.summary = f"{len(found)} hits"
                calls.append(call)
                yield AgentEvent("tool_end", call=call)
                hits = hits or found
            text = ("The closest documents: " + ", ".join(f"[{h.doc_id}]" for h in hits[:3]) + ".") if hits else "Nothing found."
            for word in text.split(" "):
                yield AgentEvent("token", text=word + " ")
            answer = Answer(question, text, hits, [h.doc_id for h in hits[:3]], calls, mode=mode,
                            seconds=time.perf_counter() - started)
            yield AgentEvent("answer", answer=answer)

        def ask(self, question, **options):
            return [e for e in self.stream(question, **options)][-1].answer

    module = types.ModuleType("agent.assistant")
    module.Assistant = Assistant
    sys.modules["agent.assistant"] = module


if __name__ == "__main__":  # `python tests/test_ui_browser.py serve …`: the page over the test double
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    _install_assistant_double()
    from mathscout.cli import main

    sys.exit(main(sys.argv[1:]))
