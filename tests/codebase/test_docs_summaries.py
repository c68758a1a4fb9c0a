"""Every page of docs/ opens with a summary a reader can stop after (issue 44).

The format: the page's first line is its title (`# …`), then one blank line, then the summary: one paragraph that
starts with `**In short:**`, of at most MAX_LINES lines of prose (no heading, table, list or code), ended by a blank
line and before the page's first `##` section."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.paths import REPO

DOCS = REPO / "docs"
MAX_LINES = 10
OPENS = "**In short:**"


def summary(text: str) -> list[str]:
    """The lines of the summary paragraph that follows the title, or an AssertionError saying what is wrong."""
    lines = text.splitlines()
    assert lines and lines[0].startswith("# "), "the page opens with its title, '# …'"
    assert len(lines) > 2 and lines[1] == "" and lines[2].startswith(OPENS), (
        f"a blank line after the title, then a paragraph starting with '{OPENS}'"
    )
    paragraph = []
    for line in lines[2:]:
        if not line.strip():
            break
        paragraph.append(line)
    assert len(paragraph) <= MAX_LINES, f"the summary has {len(paragraph)} lines, more than {MAX_LINES}"
    assert not any(line.startswith(("#", "|", "    ", "```", "- ", "* ")) for line in paragraph), (
        "the summary is prose: no heading, table, list or code in it"
    )
    return paragraph


def test_the_summary_format_is_checked():
    good = "# Page\n\n**In short:** what it is.\nWhere to look next.\n\n## First\n"
    assert summary(good) == ["**In short:** what it is.", "Where to look next."]
    for bad in (
        "Page\n\n**In short:** x\n",  # no title
        "# Page\n**In short:** x\n",  # no blank line after the title
        "# Page\n\nIntro first.\n\n**In short:** x\n",  # not the first paragraph
        "# Page\n\n## Section\n\n**In short:** x\n",  # after a section
        "# Page\n\n" + OPENS + "\n" + "line\n" * MAX_LINES + "\n",  # too long
        "# Page\n\n**In short:** x\n| a | b |\n",  # a table in it
    ):
        with pytest.raises(AssertionError):
            summary(bad)


def pages() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


def test_there_are_pages():
    assert len(pages()) >= 5


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.name)
def test_every_docs_page_opens_with_a_short_summary(page: Path):
    try:
        summary(page.read_text(encoding="utf-8"))
    except AssertionError as error:
        raise AssertionError(f"docs/{page.name}: {error}") from None
