"""The README's composition examples run: the ```python blocks under its "Composing retrievers" heading, in order and
in one namespace, against the small index (`INDEX`); every list of hits they leave is ranked from 1."""

from __future__ import annotations

from mathscout.types import Hit
from tests.support.paths import REPO

README = REPO / "README.md"
HEADING = "Compos"  # the heading the examples sit under
MIN_BLOCKS = 3


def section_blocks(text: str, heading: str = HEADING) -> list[str]:
    """The ```python blocks of the first section whose heading holds `heading` (up to the next heading as high)."""
    blocks: list[str] = []
    level = 0  # the section's heading level, once found
    block = None  # the python block being read
    fenced = False
    for line in text.splitlines(keepends=True):
        if line.startswith("```"):  # a fence opens or closes a block
            if fenced and block is not None:
                blocks.append(block)
            opens_python = not fenced and level > 0 and line.strip() == "```python"
            fenced, block = not fenced, ("" if opens_python else None)
        elif fenced:
            if block is not None:
                block += line
        elif line.startswith("#"):
            depth = len(line) - len(line.lstrip("#"))
            if level and depth <= level:
                break
            if not level and heading in line:
                level = depth
    return blocks


def test_the_section_is_found_with_its_blocks():
    text = (
        "# A\n```python\nw = 0\n```\n## Composing things\nwords\n```python\n# a comment\nx = 1\n```\n```text\n"
        "out\n```\n### Deeper\n```python\ny = 2\n```\n## Next\n```python\nz = 3\n```\n"
    )
    assert section_blocks(text) == ["# a comment\nx = 1\n", "y = 2\n"]
    assert section_blocks("# A\n```python\nx = 1\n```\n") == []


def test_readme_composition_examples_run(small_index):
    blocks = section_blocks(README.read_text(encoding="utf-8"))
    assert len(blocks) >= MIN_BLOCKS, f"README.md needs a section headed '…{HEADING}…' with {MIN_BLOCKS}+ python blocks"
    namespace = {"INDEX": small_index}
    for number, block in enumerate(blocks, start=1):
        exec(compile(block, f"README.md composition block {number}", "exec"), namespace)  # the README's own code
    rankings = {
        name: value
        for name, value in namespace.items()
        if isinstance(value, list) and value and all(isinstance(h, Hit) for h in value)
    }
    assert len(rankings) >= MIN_BLOCKS
    for name, hits in rankings.items():
        assert [h.rank for h in hits] == list(range(1, len(hits) + 1)), name
