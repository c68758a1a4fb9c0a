"""Document text never controls the user's terminal (issue 42 item 5).

The real `mathscout search` and `mathscout ask` run in a pseudo-terminal (so that they print as for a person, in
colour) over an index whose documents hold escape sequences in their titles and texts; every byte they write is
read back: the only escape sequences left are the colours MathScout adds, and each hostile one shows as text. An id
holding a control character is refused when the index is built, with a line saying so. Add a sequence to HOSTILE
in one line.
"""

from __future__ import annotations

import json
import os
import re
import select
import subprocess

import pytest

from mathscout.terminal import printable
from tests.support.cli import MATHSCOUT, REPO, env, run_cli

HOSTILE = {  # name → what a document's title and text hold
    "clear screen": "\x1b[2J\x1b[H",
    "window title (OSC 0)": "\x1b]0;pwned\x07",
    "clipboard (OSC 52)": "\x1b]52;c;cm0gLXJmIH4=\x07",
    "hyperlink (OSC 8)": "\x1b]8;;http://evil.example/\x1b\\click here\x1b]8;;\x1b\\",
    "bell": "\x07\x07",
    "C1 CSI": "\x9b2J",
    "C1 OSC": "\x9d0;pwned\x9c",
    "carriage return": "\rfake prompt$ ",
    "bidirectional override": "\u202eevil\u202c",
}
BAD_ID = "id\x1b]0;pwned\x07"
OWN_COLOUR = re.compile(r"\x1b\[[0-9;]*m")  # the SGR colours MathScout adds on a terminal


@pytest.fixture(scope="module")
def hostile_index(tmp_path_factory):
    folder = tmp_path_factory.mktemp("terminal")
    corpus = folder / "docs.jsonl"
    records = [
        {"id": f"h{n}", "title": f"Pythagoras {name} {seq} title", "text": f"Pythagoras: $a^2+b^2=c^2$ {seq} holds."}
        for n, (name, seq) in enumerate(HOSTILE.items())
    ] + [{"id": BAD_ID, "title": "Pythagoras", "text": "Pythagoras: $a^2+b^2=c^2$."}]
    corpus.write_text("".join(json.dumps(r) + "\n" for r in records))
    built = run_cli(
        ["index", "--input", str(corpus), "--index", str(folder / "idx"), "--components", "bm25,structure"],
        folder / "home",
    )
    assert built.returncode == 0, built.stderr[-3000:]
    assert "'id' holds a control character (U+001B), which a terminal would obey: skipped" in built.stderr
    assert "\x1b" not in built.stderr  # the refused id is quoted, not obeyed
    return folder


def in_terminal(args: list[str], folder) -> str:
    """Everything `mathscout ARGS` writes to a pseudo-terminal (stdout and stderr), as the terminal receives it."""
    leader, follower = os.openpty()
    process = subprocess.Popen(
        MATHSCOUT + args,
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env={**{k: v for k, v in env(folder / "home").items() if k != "NO_COLOR"}, "TERM": "xterm-256color"},
        cwd=REPO,
    )
    os.close(follower)
    received = bytearray()
    try:
        while True:
            ready, _, _ = select.select([leader], [], [], 300)
            assert ready, f"mathscout {args[0]} wrote nothing for 300 s"
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the process closed the terminal
                break
            if not chunk:
                break
            received += chunk
    finally:
        os.close(leader)
        process.wait(timeout=60)
    return received.decode("utf-8", errors="replace")


def assert_nothing_obeyed(shown: str) -> None:
    """Only MathScout's own colours remain as escape sequences; every hostile sequence shows as text."""
    plain = OWN_COLOUR.sub("", shown).replace("\r\n", "\n")  # the terminal's own line ends (onlcr)
    controls = sorted({f"U+{ord(c):04X}" for c in plain if c not in "\n\t" and printable(c) != c})
    assert not controls, f"control characters reached the terminal: {controls}\n{shown[-2000:]!r}"


def test_search_output_shows_document_escapes_without_obeying_them(hostile_index):
    shown = in_terminal(
        ["search", "--local", "--index", str(hostile_index / "idx"), "--mode", "bm25", "--k", "20", "Pythagoras"],
        hostile_index,
    )
    assert_nothing_obeyed(shown)
    assert printable(HOSTILE["window title (OSC 0)"]) in shown  # visible as text: \x1b]0;pwned\x07
    assert OWN_COLOUR.search(shown)  # a terminal still gets MathScout's colours
    assert "h0" in shown and BAD_ID not in shown


def test_ask_output_shows_document_escapes_without_obeying_them(hostile_index):
    shown = in_terminal(
        ["ask", "--local", "--no-llm", "--index", str(hostile_index / "idx"), "--mode", "bm25", "Pythagoras"],
        hostile_index,
    )
    assert_nothing_obeyed(shown)
    assert printable(HOSTILE["bell"]) in shown  # a quoted passage: \x07\x07 as text


def test_json_output_escapes_every_control_character(hostile_index):
    shown = in_terminal(
        ["search", "--local", "--json", "--index", str(hostile_index / "idx"), "--mode", "bm25", "Pythagoras"],
        hostile_index,
    )
    assert_nothing_obeyed(shown)
    result = json.loads(shown[shown.index("{") : shown.rindex("}") + 1])
    assert any(HOSTILE["C1 CSI"] in hit["title"] for hit in result["hits"])  # the data itself is unchanged


def test_an_error_line_quoting_hostile_input_obeys_nothing(hostile_index):
    shown = in_terminal(
        ["search", "--local", "--index", str(hostile_index / "idx"), "--mode", "x\x1b]0;pwned\x07", "Pythagoras"],
        hostile_index,
    )
    assert_nothing_obeyed(shown)
    assert "error" in shown and "pwned" in shown
