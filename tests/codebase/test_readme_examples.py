"""The README's examples hold.

- Its first screen (issue 44): the three ```console blocks under "Try it" run, as a newcomer types them, on the demo
  collection in a fresh MATHSCOUT_HOME, and print every line shown (`…` cuts a line; a shown line's pieces appear in
  one printed line, in order, and the shown lines in the order printed); its opening speaks plain words (no term of
  art in its first FIRST_SCREEN lines) and comes before any table.
- Its composition examples run: the ```python blocks under its "Composing retrievers" heading, in order and in one
  namespace, against the small index (`INDEX`); every list of hits they leave is ranked from 1."""

from __future__ import annotations

import os
import re
import shlex
import subprocess

import pytest

from mathscout.types import Hit
from tests.support.cli import MATHSCOUT
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


# --- the first screen (issue 44) ------------------------------------------------------------------------------------

TRY_IT = "Try it"  # the heading the first screen's commands sit under
PROMPT = "$ .venv/bin/mathscout "  # a command line of a console block, as the README shows it
FIRST_SCREEN = 25  # lines of the README that must be plain words
# terms of art a newcomer does not know yet (they belong in "How it works", below the first screen)
TERMS_OF_ART = (
    "MABOWDOR", "ColBERT", "DPR", "SPLADE", "operator tree", "BM25", "LambdaMART", "Approach Zero", "bi-encoder",
    "cross-encoder", "dense retrieval", "late interaction", "fusion", "rerank", "nDCG", "ARQMath", "LangChain",
    "Gradio", "SymPy", "embedding",
)  # fmt: skip


def console_blocks(text: str, heading: str = TRY_IT) -> list[tuple[str, list[str]]]:
    """(command, lines shown after it) of each ```console block of the section headed `heading` (up to the next
    heading as high); a command is the text after the prompt `$ `."""
    section = re.search(rf"^(#+) {re.escape(heading)}\b.*?(?=^\1 |\Z)", text, re.M | re.S)
    if not section:
        return []
    examples: list[tuple[str, list[str]]] = []
    for block in re.findall(r"^```console\n(.*?)^```", section.group(0), re.M | re.S):
        for line in block.splitlines():
            if line.startswith("$ "):
                examples.append((line[2:], []))
            elif examples:
                examples[-1][1].append(line)
    return examples


def pieces(shown: str) -> list[str]:
    """The parts of a shown line that `…` separates, without their outer spaces (a bare `…` has none)."""
    return [piece.strip() for piece in shown.split("…") if piece.strip()]


def missing_lines(shown: list[str], printed: str) -> list[str]:
    """The shown lines not found in `printed`: each must match a printed line after the previous one's, its pieces in
    that line in order."""
    lines, at, missing = printed.splitlines(), 0, []
    for line in shown:
        wanted = pieces(line)
        if not wanted:
            continue
        for n in range(at, len(lines)):
            position = 0
            for piece in wanted:
                position = lines[n].find(piece, position)
                if position < 0:
                    break
                position += len(piece)
            else:
                at = n + 1
                break
        else:
            missing.append(line)
    return missing


def test_the_console_blocks_and_their_lines_are_read():
    text = (
        "# A\n```console\n$ x\nno\n```\n## Try it\n```console\n$ .venv/bin/mathscout search 'a'\n  1. a … b\n…\n\n"
        "$ .venv/bin/mathscout ask b\nc\n```\n### Deeper\n```console\n$ d\n```\n## Next\n```console\n$ e\n```\n"
    )
    assert console_blocks(text) == [
        (".venv/bin/mathscout search 'a'", ["  1. a … b", "…", ""]),
        (".venv/bin/mathscout ask b", ["c"]),
        ("d", []),
    ]
    printed = "noise\n  1. a and b\nc\n  2. z\n"
    assert missing_lines(["  1. a … b", "…", "", "  2. z"], printed) == []
    assert missing_lines(["  2. z", "  1. a … b"], printed) == ["  1. a … b"]  # out of order
    assert missing_lines(["  1. b … a"], printed) == ["  1. b … a"]  # pieces out of order
    assert missing_lines(["1. a and b and c"], printed) == ["1. a and b and c"]


def test_the_first_screen_is_plain_words_before_any_table():
    lines = README.read_text(encoding="utf-8").splitlines()
    opening = "\n".join(lines[:FIRST_SCREEN])
    used = [term for term in TERMS_OF_ART if re.search(rf"(?<!\w){re.escape(term)}(?!\w)", opening, re.I)]
    assert not used, f"the README's first {FIRST_SCREEN} lines use terms of art {used}: move them to 'How it works'"
    assert lines[0].startswith("# ") and lines[1] == "" and lines[2] and not lines[2].startswith(("#", "|", " ")), (
        "the README opens with its title, then a paragraph in plain words"
    )
    try_it = next(n for n, line in enumerate(lines) if line.startswith("#") and TRY_IT in line)
    how = next(n for n, line in enumerate(lines) if line.startswith("#") and "How it works" in line)
    first_table = next(n for n, line in enumerate(lines) if line.startswith("|"))
    assert try_it < how < first_table, "first the commands that show it working, then how it works, then the tables"


@pytest.mark.slow  # builds the demo index (~20 s) and runs three real `mathscout` processes
def test_the_first_screen_commands_print_what_the_readme_shows(tmp_path):
    examples = console_blocks(README.read_text(encoding="utf-8"))
    assert len(examples) == 3, f"README.md's '{TRY_IT}' shows three commands: {[c for c, _ in examples]}"
    environment = {
        **{k: v for k, v in os.environ.items() if k not in ("MATHSCOUT_INDEX", "MATHSCOUT_CONFIG", "OPENAI_API_KEY")},
        "MATHSCOUT_HOME": str(tmp_path / "home"),  # a fresh home: the demo index is built as on a new machine
        "PYTHONPATH": str(REPO),
        "PYTHONUNBUFFERED": "1",  # stdout and stderr interleaved as on a terminal
    }
    for command, shown in examples:
        assert command.startswith(PROMPT[2:]), f"a command of '{TRY_IT}' starts with `{PROMPT}`: {command}"
        args = shlex.split(command)[1:]
        result = subprocess.run(  # stderr into stdout, as a terminal shows both
            MATHSCOUT + args,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=environment,
            timeout=300,
            cwd=REPO,
        )
        assert result.returncode == 0, (command, result.stdout[-3000:])
        assert any(pieces(line) for line in shown), f"README.md shows nothing that `{command}` prints"
        missing = missing_lines(shown, result.stdout)
        assert not missing, f"`{command}` no longer prints {missing}; it printed:\n{result.stdout[-6000:]}"
