"""SymPy rewriting: equivalent forms a user would expect, clear notices on bad input, bounded time on
pathological formulas (the worker is killed and replaced), and the structure-rewrite mode on real data."""

from __future__ import annotations

import json

import pytest

from mathscout.errors import QueryError
from mathscout.rewrite import MAX_REWRITE_CHARS, equivalent_forms
from mathscout.rewrite.canonical import tree_key
from mathscout.rewrite.pool import WorkerPool
from mathscout.structure.parser import parse_latex


@pytest.fixture(scope="module")
def pool():
    pool = WorkerPool(size=1)
    yield pool
    pool.close()


def forms(pool, latex, **options):
    return {
        f.latex: f.rule
        for f in equivalent_forms(latex, pool=pool, seconds=options.pop("seconds", 10.0), **options).forms
    }


def same_tree(a: str, b: str) -> bool:
    return tree_key(parse_latex(a).tree) == tree_key(parse_latex(b).tree)


def test_one_plus_one_over_x_and_its_fraction_are_rewritten_into_each_other(pool):
    assert any(same_tree(f, r"\frac{x+1}{x}") for f in forms(pool, r"1 + \frac{1}{x}"))
    assert any(same_tree(f, r"1 + \frac{1}{x}") for f in forms(pool, r"\frac{x+1}{x}"))


def test_pythagorean_identity_simplifies_to_one(pool):
    result = forms(pool, r"\sin^2 x + \cos^2 x")
    assert "1" in result and result["1"] in {"trigsimp", "simplify"}


def test_square_expands_and_factors_back(pool):
    assert any(same_tree(f, "x^2+2x+1") for f in forms(pool, "(x+1)^2"))
    assert any(same_tree(f, "(x+1)^2") for f in forms(pool, "x^2+2x+1"))


def test_relations_are_normalised_and_inequalities_swapped(pool):
    equation = forms(pool, "x^2 - 5x + 6 = 0")
    assert any(same_tree(f, "(x-2)(x-3)=0") for f in equation)
    assert any(same_tree(f, "x^2+6=5x") for f in equation)
    assert any(same_tree(f, "2y > x") for f in forms(pool, "x < 2y"))


def test_log_rules_assume_positive_arguments(pool):
    assert any(same_tree(f, r"\log a + \log b") for f in forms(pool, r"\log(ab)"))
    assert any(same_tree(f, r"\ln(ab)") for f in forms(pool, r"\ln a + \ln b"))  # \ln stays \ln


def test_every_form_reparses_and_differs_from_the_input(pool):
    for latex in [r"\frac{1}{x(x+1)}", r"a_{n+1} = a_n + 2", r"\binom{n}{k} = \frac{n!}{k!(n-k)!}", r"e^{2x} - 1"]:
        original = tree_key(parse_latex(latex).tree)
        keys = []
        for form in forms(pool, latex):
            parsed = parse_latex(form)
            assert parsed.complete and parsed.tree is not None, form
            keys.append(tree_key(parsed.tree))
        assert original not in keys and len(keys) == len(set(keys))


def test_max_forms_bounds_the_result(pool):
    assert len(equivalent_forms("x^2 - 5x + 6 = 0", max_forms=1, pool=pool, seconds=10).forms) == 1


def test_malformed_latex_gives_a_notice_not_an_exception(pool):
    result = equivalent_forms(r"\frac{{", pool=pool)
    assert result.forms == [] and "could not read the formula" in result.notice
    unsupported = equivalent_forms(r"\begin{pmatrix} 1 & 2 \end{pmatrix} \otimes \mathbb{R}", pool=pool)
    assert unsupported.forms == [] and unsupported.notice
    with pytest.raises(QueryError, match="nothing to rewrite"):
        equivalent_forms("  $$ ", pool=pool)


def test_too_long_input_is_refused_before_sympy(pool):
    result = equivalent_forms("+".join(["x"] * 10_000), pool=pool)
    assert result.forms == [] and f"limit {MAX_REWRITE_CHARS:,}" in result.notice


@pytest.mark.parametrize(
    "latex",
    [
        r"2^{2^{2^{100}}}",  # refused by the converter: a numeric tower
        r"\prod_{k=1}^{10^9} k",  # read by SymPy's LaTeX parser; its rules run into the time limit
        r"(x+y+z+1)^{500}",  # expand would build ~21 million terms
        "(" * 400 + "x" + ")" * 400,  # deep nesting
    ],
)
def test_pathological_formulas_return_within_the_limit_and_the_pool_recovers(pool, latex):
    result = equivalent_forms(latex, pool=pool, seconds=1.0)
    assert result.notice is None or result.notice
    # the pool still answers after whatever happened (a killed worker is replaced)
    assert any(same_tree(f, r"\frac{x+1}{x}") for f in forms(pool, r"1 + \frac{1}{x}"))


def test_expand_blow_up_is_stopped_with_a_notice(pool):
    result = equivalent_forms(r"(x+y+z+1)^{500}", pool=pool, seconds=1.0)
    assert "rewriting stopped" in (result.notice or "")


# ------------------------------------------------------------------ the structure-rewrite mode


@pytest.fixture(scope="module")
def rewrite_retriever(small_index):
    from mathscout.retrievers.registry import open_retriever

    return open_retriever(small_index, "structure-rewrite")


def test_structure_rewrite_finds_a_document_written_in_another_form(rewrite_retriever, small_index):
    """Answer 48131 writes $(x-a)^{2}$; queried expanded, it is found through the factored form."""
    from mathscout.index.layout import IndexDir
    from mathscout.retrievers.structure import StructureRetriever
    from mathscout.types import Query

    target = "48131"
    query = Query(id="q", text="", formula="x^2 - 2ax + a^2")
    with_rewrite = rewrite_retriever.search(query, k=10)
    forms = [f.latex for f in rewrite_retriever.last_rewrites[0].forms]
    assert any(same_tree(f, "(x-a)^2") for f in forms), forms
    ranked = [h.doc_id for h in with_rewrite]
    assert target in ranked[:3], ranked
    best = next(h for h in with_rewrite if h.doc_id == target)
    assert best.formulas and best.formulas[0].latex == "(x-a)^{2}"  # the matched formula is shown
    plain = [h.doc_id for h in StructureRetriever(IndexDir(small_index)).search(query, k=10)]
    assert target not in plain[:3]


def test_structure_rewrite_runs_in_batch_from_the_cli(small_index, tmp_path):
    from mathscout.cli import main

    topics = tmp_path / "topics.jsonl"
    topics.write_text(
        json.dumps({"id": "t1", "query": r"1 + \frac{1}{n}"})
        + "\n"
        + json.dumps({"id": "t2", "title": "only words here"})
        + "\n"
    )
    run = tmp_path / "run.trec"
    main(
        [
            "run",
            "--index",
            str(small_index),
            "--topics",
            str(topics),
            "--mode",
            "structure-rewrite",
            "--k",
            "20",
            "--output",
            str(run),
        ]
    )
    lines = run.read_text().splitlines()
    assert lines and all(line.split()[0] == "t1" for line in lines)
    assert len(lines) <= 20
