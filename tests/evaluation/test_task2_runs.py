"""ARQMath Task 2 (formula retrieval) runs: real Task 2 topics, formula-level structure search, the official run format
(`topic formula post rank score run`), official formula ids kept from Posts XML, and `eval` over Task 2 qrels."""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from mathscout.errors import MathScoutError
from mathscout.evaluation.measures import evaluate_run
from mathscout.evaluation.runner import run_task2
from mathscout.evaluation.runs import read_run
from mathscout.evaluation.topics import load_topics
from mathscout.index.layout import IndexDir
from tests.support.cli import run_cli

YEARS = ("2020", "2021", "2022")


def _topics(shared_data: Path, year: str) -> Path:
    return shared_data / "arqmath" / f"topics.arqmath-{year}-task2-origin.xml"


def _lines(path: Path) -> list[list[str]]:
    return [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("year", YEARS)
def test_task2_topics_are_read_as_their_query_formulas(shared_data, year):
    topics = load_topics(_topics(shared_data, year))
    assert len(topics) in (85, 100) and all(t.id.startswith("B.") and t.formula for t in topics)
    if year == "2020":
        assert topics[0].formula == "f(x)= \\frac{x^2 + x + c}{x^2 + 2x + c}"


@pytest.mark.slow
def test_a_task2_run_over_the_small_index_is_in_the_official_format(shared_data, small_index, tmp_path):
    out = tmp_path / "task2.tsv"
    result = run_cli(
        [
            "run",
            "--task",
            "2",
            "--format",
            "arqmath",
            "--mode",
            "structure",
            "--k",
            "20",
            "--index",
            str(small_index),
            "--topics",
            str(_topics(shared_data, "2021")),
            "--output",
            str(out),
        ],
        tmp_path / "home",
    )
    assert result.returncode == 0, result.stderr
    assert "Task 2" in result.stdout
    store = IndexDir(small_index).store
    rows = _lines(out)
    assert rows and all(len(row) == 6 for row in rows)
    by_topic: dict[str, list[list[str]]] = {}
    for row in rows:
        by_topic.setdefault(row[0], []).append(row)
    assert len(by_topic) >= 90  # nearly every 2021 topic's formula finds formulas
    for topic, entries in by_topic.items():
        assert topic.startswith("B.") and [int(r[3]) for r in entries] == list(range(1, len(entries) + 1))
        scores = [float(r[4]) for r in entries]
        assert scores == sorted(scores, reverse=True) and len(entries) <= 20
        assert {r[5] for r in entries} == {"mathscout-task2-structure"}
    for formula_id, post_id in {(r[1], r[2]) for r in rows[:50]}:
        formula = store.formula(formula_id)  # the formula id names a stored formula of the post beside it
        assert (
            formula is not None and formula.doc_id == post_id and formula_id == f"{post_id}#{formula_id.split('#')[1]}"
        )
    run = read_run(out)  # read back as formula ids, the ids Task 2 qrels judge
    assert run.format == "arqmath-task2" and run.topics[rows[0][0]][0].doc_id == rows[0][1]


def test_task2_needs_formula_retrieval(shared_data, small_index, tmp_path):
    with pytest.raises(MathScoutError, match="--mode structure"):
        run_task2(IndexDir(small_index), _topics(shared_data, "2020"), "bm25", 10, tmp_path / "r")
    with pytest.raises(MathScoutError, match="no formula topics"):
        run_task2(
            IndexDir(small_index), shared_data / "collection" / "topics.dev.jsonl", "structure", 10, tmp_path / "r"
        )


@pytest.fixture(scope="module")
def posts_index(shared_data, tmp_path_factory) -> tuple[Path, list]:
    """An index of an ARQMath Posts XML whose answers are the 2020 Task 2 topics' real question bodies, with their
    official `math-container` formula ids (`q_4` …). Its own build: the tiny index holds no Posts XML and no official
    formula ids."""
    from mathscout.retrievers.indexing import build_index

    root = ET.parse(_topics(shared_data, "2020")).getroot()
    rows = ['<row Id="1" PostTypeId="1" Title="topics" Tags="&lt;test&gt;" Body="" />']
    for n, topic in enumerate(root.iter("Topic"), start=2):
        body = html.unescape(topic.findtext("Question") or "")
        rows.append(f'<row Id="{n}" PostTypeId="2" ParentId="1" Score="1" Body="{html.escape(body, quote=True)}" />')
    folder = tmp_path_factory.mktemp("posts")
    posts = folder / "Posts.xml"
    posts.write_text(
        '<?xml version="1.0" encoding="utf-8"?>\n<posts>\n' + "\n".join(rows) + "\n</posts>\n", encoding="utf-8"
    )
    index = folder / "index"
    build_index([posts], index, ["structure"])
    return index, list(root.iter("Topic"))


def test_posts_xml_formulas_keep_their_official_ids_and_task2_runs_use_them(posts_index, shared_data, tmp_path):
    index, topics = posts_index
    store = IndexDir(index).store
    first = topics[0]  # B.1: the query formula is q_4 of its own body
    assert store.formula("q_4").latex.strip() == first.findtext("Latex").strip()
    out = tmp_path / "b.tsv"
    run_task2(IndexDir(index), _topics(shared_data, "2020"), "structure", 10, out)
    rows = _lines(out)
    top = {r[0]: r for r in rows if r[3] == "1"}
    assert top["B.1"][1] == "q_4"  # the official formula id, and its post
    official = [r for r in rows if re.fullmatch(r"q_\d+", r[1])]
    assert len(official) >= 0.95 * len(rows)  # formulas kept their official ids (matched by LaTeX, in order) …
    assert all(r[1].startswith(r[2] + "#") for r in rows if r not in official)  # … the few unmatched: <post>#<n>

    qrels = tmp_path / "qrels.txt"  # judgements on the official ids score the run
    qrels.write_text("B.1 0 q_4 3\nB.2 0 q_9 3\n", encoding="utf-8")
    result = evaluate_run(out, qrels)
    assert result.summary["nDCG"] > 0.9 and result.judged_in_run >= 2


def test_eval_says_when_a_task2_run_and_the_official_qrels_share_no_id(shared_data, small_index, tmp_path):
    out = tmp_path / "task2.tsv"
    run_task2(IndexDir(small_index), _topics(shared_data, "2020"), "structure", 50, out)
    result = evaluate_run(out, shared_data / "arqmath" / "qrels.arqmath-2020-task2.txt")
    assert result.judged_in_run == 0 and any("no id of the run is judged" in n for n in result.notes())
