"""Formulas typed without `$…$` are math (issue 35): in a query, a part of it, every mode and the planner."""

from __future__ import annotations

import pytest

from mathscout.latex.bare import delimit_bare_math
from mathscout.question import read_question

READ_AS_MATH = [
    ("x^2+y^2=z^2", ["x^2+y^2=z^2"]),
    ("\\frac{a}{b}", ["\\frac{a}{b}"]),
    ("\\int_0^1 x dx", ["\\int_0^1 x dx"]),
    ("How do I find all integer solutions of x^2+y^2=z^2?", ["x^2+y^2=z^2"]),
    ("prove that a + b = c for all a", ["a + b = c"]),
    ("why is \\frac{a + b}{c} = 1 true", ["\\frac{a + b}{c} = 1"]),
    ("what is f(x) = sin(x)/x near 0", ["f(x) = sin(x)/x"]),
    ("n! grows faster than 2^n", ["n!", "2^n"]),
    ("x_1 + x_2 + ... + x_n", ["x_1 + x_2 + ... + x_n"]),
    ("Let $x$ be real and x^2 = 4. Find x.", ["x^2 = 4"]),
    ("is 2 + 2 = 4?", ["2 + 2 = 4"]),
]
WORDS_ONLY = [
    "a proof by induction",
    "Is there a proof of the x-axis symmetry in 2017?",
    "e-mail and C++ code",
    "is x = a number?",
    "(start with n = 1)",
    "see https://math.stackexchange.com/q/1_2",
    "snake_case names",
    "Let G be a group and H a subgroup",
    "$x^2$ already delimited",
]


@pytest.mark.parametrize("text, formulas", READ_AS_MATH)
def test_bare_formulas_are_read_as_math(text, formulas):
    read = delimit_bare_math(text)
    assert list(read.formulas) == formulas
    assert all(f"${f}$" in read.text for f in formulas)


@pytest.mark.parametrize("text", WORDS_ONLY)
def test_words_stay_words(text):
    assert delimit_bare_math(text).text == text


def test_the_planner_reads_a_bare_formula_inside_words():
    question = read_question("How do I find all integer solutions of x^2+y^2=z^2?")
    assert question.formulas == ["x^2+y^2=z^2"] and question.kind == "mixed"


@pytest.mark.parametrize("mode", ["bm25", "structure", "hybrid", "auto"])
def test_a_bare_formula_finds_the_same_top_hit_as_its_dollar_form(tiny_index, mode):
    from mathscout.agent.planned import open_mode
    from mathscout.tools.searching import SearchRequest, run_search
    from mathscout.tools.toolbox import ToolBox

    toolbox = ToolBox(tiny_index)
    for bare in ("x^2+y^2=z^2", "\\frac{1}{n^2}", "sum of 1/n^2 for n = 1 to infinity"):
        dollar = delimit_bare_math(bare).text
        plain, delimited = (run_search(SearchRequest(q, mode, 5).checked(), toolbox, open_mode) for q in (bare, dollar))
        assert [h.doc_id for h in plain.hits] == [h.doc_id for h in delimited.hits], (mode, bare)
        assert plain.formulas == delimited.formulas and plain.formulas
        assert any("read as math" in n for n in plain.notices)


@pytest.mark.slow
def test_a_library_call_writes_nothing_and_the_command_line_shows_the_notices(tmp_path):
    """`MathScout().search/ask` and `FormulaRewrite() >> structure` print nothing; their notices are data (logged,
    collected); `mathscout search` shows them as `note:` lines (issue 35: the library prints)."""
    import subprocess
    import sys

    from tests.support.cli import REPO, env, run_cli

    script = (
        "from mathscout import MathScout\n"
        "from mathscout.notices import collecting\n"
        "from mathscout.retrievers import open_retriever\n"
        "from mathscout.retrievers.compose import FormulaRewrite\n"
        "scout = MathScout(use_llm=False)\n"
        "scout.search('x^2+y^2=z^2', mode='structure', k=3)\n"
        "scout.ask('How do I simplify \\\\frac{t+1}{t}?')\n"
        "with collecting() as said:\n"
        "    (FormulaRewrite() >> open_retriever(scout.index, 'structure')).search('$\\\\frac{t+1}{t}$', k=3)\n"
        "assert any('also searched' in n for n in said), said\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env(tmp_path), cwd=REPO, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    # the demo index is built on first use (its build log is the builder's notices): build it first, then compare
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env(tmp_path), cwd=REPO, timeout=600
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    shown = run_cli(["search", "--mode", "structure-rewrite", "--k", "2", "\\frac{t+1}{t}"], tmp_path)
    # the result's notes come with its hits (stdout); nothing on stderr
    assert "note: read as math (typed without $…$): `\\frac{t+1}{t}`" in shown.stdout
    assert "note: rewrite: also searched $1 + \\frac{1}{t}$ (expand)" in shown.stdout
    assert shown.returncode == 0 and shown.stderr == ""
