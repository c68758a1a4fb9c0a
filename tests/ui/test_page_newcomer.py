"""What a newcomer sees on the chat page (issue 44), checked in a real browser (Debian's chromium through Playwright) on
a phone (390 px wide, the results below the chat) and a desktop (1440 px, the results beside it): the no-results hint
shows `$…$` as typed, the mode menu offers only what the index serves well (no `hybrid` without dense vectors or tuned
weights) and its help is built from the modes the index has, hit cards show only the scores a reader can weigh (not
`rewrite_form` or `tier`), titles render their formulas (and a price stays a price, a hostile title stays text), and the
chat's placeholder says where the hits appear in both layouts.

One server (`mathscout serve --no-llm`) runs for the module over an index of its own (bm25 + structure, no dense
vectors, no fusion.json): a few documents written for these checks, since titles with formulas, a formula the title's
cut falls in, a price in a title and a hostile title must all be there (the tiny index's real answers have no titles).
A failed test leaves a screenshot in tests/artifacts/ (newcomer-TEST.png).
"""

from __future__ import annotations

import json
import re

import pytest

from tests.support.corpora import EVIL
from tests.support.harness import Server
from tests.support.page import ask, wait_for_answer
from tests.support.paths import ARTIFACTS

pytestmark = pytest.mark.browser

VIEWPORTS = {"phone": {"width": 390, "height": 844}, "desktop": {"width": 1440, "height": 1000}}
WORD = "newcomer"  # every document holds it: a text search for it lists them all
LONG_FIRST_LINE = (
    "Another way of finishing the argument above, newcomer: one proves that the integral "
    "$\\int_{0}^{\\pi/2}\\frac{\\sin(2n+1)x}{\\sin x}\\,dx=\\frac{\\pi}{2}$ holds for every n."
)  # no title: the card's title is this line, cut at 110 characters, which falls inside the formula
DOCUMENTS = [
    {
        "id": "n:sum",
        "title": "Why is $\\sum_{k=1}^{n} k = \\frac{n(n+1)}{2}$?",
        "text": f"A {WORD} asks: pair the first and last terms, $\\sum_{{k=1}}^{{n}} k = \\frac{{n(n+1)}}{{2}}$.",
    },
    {
        "id": "n:price",
        "title": "Which pizza is better value, 12 inch for $10 or 16 inch for $16?",
        "text": f"A {WORD} compares areas: $\\pi \\cdot 6^2$ against $\\pi \\cdot 8^2$ square inches.",
    },
    {"id": "n:long", "text": LONG_FIRST_LINE + "\n\nExpand the sine quotient as a sum of cosines."},
    {
        "id": "n:frac",
        "title": "Simplify $\\frac{x+1}{x}$ into a whole part and a remainder",
        "text": f"For a {WORD}: $\\frac{{x+1}}{{x}} = 1 + \\frac{{1}}{{x}}$ when $x \\neq 0$.",
    },
    {
        "id": "n:hostile",
        "title": f'Roots <img src="http://{EVIL}/t.png"> $\\href{{http://{EVIL}/}}{{x}}$ and <b>bold</b>',
        "text": f"A {WORD} reads $\\sqrt{{ab}}=\\sqrt{{a}}\\sqrt{{b}}$ for $a, b \\geq 0$.",
    },
]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The page's URL: `mathscout serve --no-llm` over DOCUMENTS' index (bm25 + structure)."""
    from mathscout.retrievers.indexing import build_index

    folder = tmp_path_factory.mktemp("newcomer")
    corpus = folder / "newcomer.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in DOCUMENTS), encoding="utf-8")
    index = folder / "newcomer"
    build_index([corpus], index, ["bm25", "structure"])
    with Server(folder / "home", "--index", str(index)) as running:
        yield running.url + "/"


@pytest.fixture(params=list(VIEWPORTS))
def page(request, browser, server):
    """A new session on the page at the viewport's size; a screenshot in tests/artifacts/ when the test failed."""
    context = browser.new_context(viewport=VIEWPORTS[request.param])
    page = context.new_page()
    page.goto(server)
    page.wait_for_selector("#ms-question textarea")
    yield page
    report = getattr(request.node, "outcome_call", None)
    if report is not None and report.failed:
        ARTIFACTS.mkdir(exist_ok=True)
        name = re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name).strip("-")
        page.screenshot(path=str(ARTIFACTS / f"newcomer-{name}.png"), full_page=True)
    context.close()


def _current(page, selector: str):
    return page.locator(f"#ms-results .ms-turn:not(.ms-turn-earlier) {selector}")


def _mode_options(page) -> list[str]:
    page.click("#ms-mode input")
    options = page.get_by_role("option")
    options.first.wait_for()
    labels = [" ".join(t.replace("✓", "").split()) for t in options.all_inner_texts()]
    page.keyboard.press("Escape")
    return labels


def _choose_mode(page, label: str) -> None:
    page.click("#ms-mode input")
    page.get_by_role("option", name=re.compile("^" + re.escape(label))).first.click()


def test_the_no_results_hint_shows_dollar_signs_as_typed(page):
    ask(page, "zxqvw blorptastic frumious")
    wait_for_answer(page)
    hint = page.locator("#ms-chat .message", has_text="No document in this index matches").last
    assert hint.locator("code", has_text="$…$").count() == 1, hint.inner_html()
    assert hint.locator(".katex").count() == 0  # KaTeX read "$…$" as a formula: "between . . ."
    assert "between dollar signs ($…$)" in " ".join(hint.inner_text().split())


def test_the_mode_menu_offers_what_the_index_serves_and_its_help_names_those_modes(page):
    labels = _mode_options(page)
    names = [label.split(" — ")[0] for label in labels]
    assert names[0] == "auto" and {"structure", "text"} <= set(names), labels
    assert "hybrid" not in names, labels  # no dense vectors, no tuned weights: hybrid is not offered
    help_text = " ".join(page.inner_text("#ms-mode").split())
    for name in names:
        assert name in help_text, (name, help_text)
    for lacking in ("dense", "colbert", "splade", "lacks", "not on this index"):
        assert lacking not in help_text, help_text


def test_cards_show_only_the_scores_a_reader_can_weigh(page):
    from mathscout.ui.cards import score_chips

    ask(page, "$\\frac{t+1}{t}$")  # auto: the planner's structure + rewrites search (tiers, form numbers)
    wait_for_answer(page)
    chips = _current(page, ".ms-score:not(.ms-score-main)").all_inner_texts()
    main = _current(page, ".ms-score-main").first.get_attribute("title")
    assert "tier" in main, main  # the hits carry a match tier, explained in the main score's tooltip …
    assert chips, "no component score shown"
    labels = {label for label, _ in score_chips().values()}
    for chip in chips:
        assert chip.rsplit(" ", 1)[0] in labels, chips  # … and never shown as a chip of its own
        assert not chip.startswith(("tier", "rewrite_form")), chips


def test_titles_render_their_formulas_and_stay_text_otherwise(page):
    hosts: list[str] = []
    page.on("request", lambda request: hosts.append(re.sub(r"^[a-z]+://([^/:]+).*$", r"\1", request.url)))
    _choose_mode(page, "text")
    ask(page, WORD)
    wait_for_answer(page)
    cards = {
        card.locator(".ms-meta code").first.inner_text(): card.locator(".ms-title")
        for card in _current(page, ".ms-hit").all()
    }
    assert set(cards) == {d["id"] for d in DOCUMENTS}, list(cards)
    for doc_id in ("n:sum", "n:frac", "n:long"):
        title = cards[doc_id]
        assert title.locator(".katex").count() == 1, (doc_id, title.inner_html())
        assert title.locator(".katex-error").count() == 0 and "\\frac" not in title.inner_text(), doc_id
    assert "…" in cards["n:long"].inner_text()  # cut after its formula, never inside it
    price = cards["n:price"]
    assert price.locator(".katex").count() == 0
    assert "12 inch for $10 or 16 inch for $16?" in " ".join(price.inner_text().split())
    hostile = cards["n:hostile"]
    assert "<b>bold</b>" in hostile.inner_text() and hostile.locator("b, img, a").count() == 0
    assert page.locator(f'#ms-results img[src*="{EVIL}"], #ms-results a[href*="{EVIL}"]').count() == 0
    assert not [h for h in hosts if h not in ("127.0.0.1", "localhost") and not h.startswith("data")], hosts


def test_the_placeholder_says_where_the_hits_appear_in_either_layout(page):
    text = " ".join(page.inner_text("#ms-chat").split())
    assert "Ask a math question." in text and "listed under Search results" in text, text
    assert "on the right" not in text and "below" not in text, text
    heading = page.locator(".ms-section", has_text="Search results")
    chat, results = page.locator("#ms-chat").bounding_box(), heading.bounding_box()
    if page.viewport_size["width"] < 700:  # a phone: the results come below the chat
        assert results["y"] > chat["y"] + chat["height"] - 1, (chat, results)
    else:  # a desktop: beside it
        assert results["x"] > chat["x"] + chat["width"] - 1, (chat, results)
