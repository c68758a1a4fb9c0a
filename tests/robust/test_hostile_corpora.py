"""Hostile inputs to `mathscout index` (issue 32, items 4, 5, 11): each builds bm25 + structure in a real subprocess,
never crashes, reports per line what it skipped or cut, stays under MEMORY_BOUND_MIB over the whole process tree, and
leaves its input untouched.

Add a case with one entry in CASES: a name → a function writing the input into a folder (it returns the path given
to `--input`), the lines the build must print, and how many documents it must keep.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from mathscout.benchmarks.robust import DEEP, NORMAL, big_jsonl_document, big_note, deep_json, gzip_bomb
from mathscout.corpus.math_spans import MAX_FORMULA_CHARS
from tests.support.harness import MEMORY_BOUND_MIB, assert_no_crash, run_measured, snapshot


def normal_lines() -> str:
    return "".join(line + "\n" for line in NORMAL)


def big_posts_row(folder: Path) -> Path:
    """ARQMath Posts XML with a 50 MB answer row between normal rows."""
    body = "&lt;p&gt;Let &lt;span class=&quot;math-container&quot;&gt;$x^2$&lt;/span&gt; be. &lt;/p&gt;" * 600_000
    path = folder / "Posts.xml"
    path.write_text(
        '<?xml version="1.0" encoding="utf-8"?>\n<posts>\n'
        '  <row Id="1" PostTypeId="1" Title="A question" Body="q" />\n'
        '  <row Id="2" PostTypeId="2" ParentId="1" Body="Small $x$" />\n'
        f'  <row Id="3" PostTypeId="2" ParentId="1" Body="{body}" />\n'
        '  <row Id="4" PostTypeId="2" ParentId="1" Body="Also $y$" />\n</posts>\n'
    )
    return path


def deep_formulas(folder: Path) -> Path:
    """Formulas nested as deep as the longest formula allows (braces, \\frac, chained scripts, \\sqrt, parentheses),
    and the same 100,000 deep (longer than any formula: text), in otherwise normal documents."""
    nests = [
        ("{", "x", "}"),
        ("\\frac{", "1", "}{2}"),
        ("x^", "2", ""),
        ("x_", "1", ""),
        ("\\sqrt", "x", ""),
        ("(", "x", ")"),
    ]
    texts = [
        f"Deep ${opener * depth}{middle}{closer * depth}$ here."
        for opener, middle, closer in nests
        for depth in ((MAX_FORMULA_CHARS - 1) // len(opener + closer), DEEP)
    ]
    path = folder / "formulas.jsonl"
    path.write_text(
        "".join(json.dumps({"id": f"f{n}", "text": text}) + "\n" for n, text in enumerate(texts)) + normal_lines()
    )
    return path


def bad_ids(folder: Path) -> Path:
    """Ids that are a list, an object, a float, a boolean, a 5,000-digit number, or 600 characters long."""
    path = folder / "ids.jsonl"
    path.write_text(
        '{"id": ["a", "b"], "text": "list id"}\n{"id": {"k": 1}, "text": "object id"}\n'
        '{"id": 1.5, "text": "float id"}\n{"id": true, "text": "boolean id"}\n'
        '{"id": ' + "9" * 5000 + ', "text": "huge number"}\n'
        '{"id": "' + "i" * 600 + '", "text": "long id"}\n{"id": 7, "text": "whole number id"}\n' + normal_lines()
    )
    return path


def control_ids(folder: Path) -> Path:
    """Ids holding an escape sequence (a terminal's window title), a C1 control, a bidirectional override."""
    path = folder / "ctl.jsonl"
    ids = ["a\x1b]0;pwned\x07", "b\x9b2J", "c\u202e"]
    path.write_text("".join(json.dumps({"id": i, "text": "text $x$"}) + "\n" for i in ids) + normal_lines())
    return path


def links_out(folder: Path) -> Path:
    """A notes folder holding a link to a file outside it, a link inside it, a loop of folder links, a broken link."""
    secret = folder / "secret.md"
    secret.write_text("# Secret\n\npassword hunter2\n")
    notes = folder / "notes"
    (notes / "sub").mkdir(parents=True)
    (notes / "a.md").write_text("# A\n\n$a^2$\n")
    (notes / "pw.md").symlink_to(secret)
    (notes / "passwd.txt").symlink_to("/etc/passwd")
    (notes / "again.md").symlink_to(notes / "a.md")
    (notes / "sub" / "loop").symlink_to(notes, target_is_directory=True)
    (notes / "up").symlink_to(folder, target_is_directory=True)
    (notes / "gone.md").symlink_to(folder / "missing.md")
    return notes


@dataclass(frozen=True)
class Case:
    write: Callable[[Path], Path]
    reports: tuple[str, ...]  # lines the build must print (on stderr)
    documents: int  # documents the index must hold


CASES = {
    "gzip bomb": Case(gzip_bomb, ("bomb.jsonl.gz:2: line longer than 8 MiB: skipped",), 2),
    "50 MB JSONL document": Case(big_jsonl_document, ("big.jsonl:2: line longer than 8 MiB: skipped",), 2),
    "50 MB note": Case(big_note, ("big.md: text longer than 1,048,576 characters: cut to its first",), 2),
    "50 MB Posts row": Case(big_posts_row, ("Posts.xml:5: line longer than 8 MiB: skipped",), 2),
    "JSON nested 100,000 deep": Case(
        deep_json, ("deep.jsonl:2: nested deeper than 64 levels", "deep.jsonl:3: nested deeper than 64 levels"), 2
    ),
    "formulas nested deep": Case(deep_formulas, ("ingested 14 documents",), 14),
    "ids of other types": Case(
        bad_ids,
        (
            "ids.jsonl:1: 'id' is a list (ids are strings or whole numbers)",
            "ids.jsonl:2: 'id' is a dict",
            "ids.jsonl:3: 'id' is a float",
            "ids.jsonl:4: 'id' is a boolean",
            "ids.jsonl:5: not valid JSON",
            "ids.jsonl:6: 'id' longer than 512 characters",
        ),
        3,
    ),
    "ids holding control characters": Case(
        control_ids,
        tuple(
            f"ctl.jsonl:{n}: 'id' holds a control character ({c})"
            for n, c in ((1, "U+001B"), (2, "U+009B"), (3, "U+202E"))
        ),
        2,
    ),
    "links out of the folder": Case(
        links_out,
        (
            "pw.md: a link to a file outside the folder: skipped",
            "passwd.txt: a link to a file outside the folder: skipped",
            "up: a link to a folder outside the folder: skipped",
            "gone.md: a broken link or a loop of links: skipped",
        ),
        2,
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_hostile_corpus(name, tmp_path):
    case = CASES[name]
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    given = case.write(inputs)
    before = snapshot(inputs)
    outcome = run_measured(
        ["-v", "index", "--input", str(given), "--index", str(tmp_path / "idx"), "--components", "bm25,structure"],
        tmp_path,
    )  # -v: the build's report (documents ingested, lines skipped) is logged; skipped input is also a warning
    assert_no_crash(outcome)
    assert outcome.returncode == 0, outcome.stderr[-3000:]
    for line in case.reports:
        assert line in outcome.stderr, (line, outcome.stderr[-3000:])
    manifest = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    assert manifest["documents"] == case.documents, outcome.stderr[-3000:]
    assert outcome.peak_mib < MEMORY_BOUND_MIB, f"{name}: peak {outcome.peak_mib:,.0f} MiB"
    assert snapshot(inputs) == before


def test_links_are_read_only_inside_the_folder(tmp_path):
    """Of a folder's links, only the one to a note inside it is read (under its own name)."""
    from mathscout.corpus import IngestReport, read_corpus

    notes = links_out(tmp_path)
    docs = {d.id: d.text for d in read_corpus([notes], IngestReport())}
    assert sorted(docs) == ["a.md", "again.md"] and "hunter2" not in "".join(docs.values())
    assert os.path.islink(notes / "pw.md")
