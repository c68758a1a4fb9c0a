"""Driving the chat page in a browser (Debian's chromium through Playwright): the browser's flags, asking a question
and waiting for its answer. The `browser` fixture is in tests/conftest.py."""

from __future__ import annotations

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ANSWER_TIMEOUT_MS = 90_000
# finished answers in the chat: each finished turn's progress message is titled 'Searched: …'
FINISHED_JS = (
    "[...document.querySelectorAll('#ms-chat .thought-group .title')]"
    ".filter(e => e.innerText.trim().startsWith('Searched:')).length"
)


def ask(page, question: str | None = None) -> None:
    """Send `question` (typed into the question box first when given) with the Ask button."""
    if question is not None:
        page.fill("#ms-question textarea", question)
    page.click("#ms-send")


def wait_for_answer(page, count: int = 1) -> None:
    """Wait until `count` answers are finished."""
    page.wait_for_function(f"n => {FINISHED_JS} >= n", arg=count, timeout=ANSWER_TIMEOUT_MS)
