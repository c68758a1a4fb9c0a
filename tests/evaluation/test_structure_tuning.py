"""`mathscout train structure`: Eq. 3.18 settings tuned on train topics, stored with the index and used by the
structure mode (explicit options still win; a broken settings file is a clear error)."""

from __future__ import annotations

import json
import shutil

import pytest

from mathscout.cli import main as cli
from mathscout.errors import MathScoutError
from mathscout.retrievers import open_retriever
from mathscout.types import Query


@pytest.fixture()
def tunable_index(small_index, tmp_path):
    """A private copy of the small index (the test writes structure.json into it)."""
    return shutil.copytree(small_index, tmp_path / "index")


@pytest.fixture()
def train_subset(shared_data, small_collection, tmp_path):
    """Train topics (with formulas) whose judged answers are all in the small index, and their qrels."""
    with open(small_collection, encoding="utf-8") as collection:
        in_index = {json.loads(line)["id"] for line in collection}
    judged: dict[str, set[str]] = {}
    with open(shared_data / "collection" / "qrels.train.txt", encoding="utf-8") as train_qrels:
        for line in train_qrels:
            qid, _, doc, _ = line.split()
            judged.setdefault(qid, set()).add(doc)
    topics = []
    with open(shared_data / "collection" / "topics.train.jsonl", encoding="utf-8") as train_topics:
        for line in train_topics:
            topic = json.loads(line)
            if (
                topic["id"] in judged
                and judged[topic["id"]] <= in_index
                and "$" in topic.get("body", "") + topic.get("title", "")
            ):
                topics.append(line)
            if len(topics) == 25:
                break
    assert len(topics) >= 10
    (tmp_path / "topics.train-subset.jsonl").write_text("".join(topics), encoding="utf-8")
    wanted = {json.loads(t)["id"] for t in topics}
    with open(shared_data / "collection" / "qrels.train.txt", encoding="utf-8") as train_qrels:
        qrels = [line for line in train_qrels if line.split()[0] in wanted]
    (tmp_path / "qrels.train-subset.txt").write_text("".join(qrels), encoding="utf-8")
    return tmp_path / "topics.train-subset.jsonl", tmp_path / "qrels.train-subset.txt"


def test_tuned_settings_are_stored_with_the_index_and_used_by_the_structure_mode(tunable_index, train_subset, capsys):
    topics, qrels = train_subset
    assert open_retriever(tunable_index, "structure").settings_source == "thesis defaults"
    code = cli(
        [
            "train",
            "structure",
            "--index",
            str(tunable_index),
            "--topics",
            str(topics),
            "--qrels",
            str(qrels),
            "--sample",
            "0",
            "--lambdas",
            "0.2,2.5",
            "--max-formulas",
            "0,1",
            "--text",
            "words,full",
            "--formula-sample",
            "8",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "stored in" in out and "formula queries from the fitting half dumped" in out
    saved = json.loads((tunable_index / "structure.json").read_text())
    assert saved["tuned_on"] == topics.name and saved["topics"] >= 10 and 0 <= saved["score"] <= 1
    # one setting per kind, with how it was fitted and the measure before and after (also in the report)
    formula, mixed = saved["kinds"]["formula"], saved["kinds"]["mixed"]
    # the formula setting is the best that keeps every transformation kind at structure alone's level: it may score
    # below an unconstrained setting the index had before
    assert "fitting half" in formula["tuned_on"] and formula["queries"] >= 8 and 0 < formula["score"] <= 1
    assert "mixed" in mixed["tuned_on"] and mixed["score"] >= mixed["before"]
    assert (mixed["lambda_m"], mixed["text"]) == (saved["lambda_m"], saved["text"])
    assert all(f"\n{kind} " in out for kind in saved["kinds"])
    setting = open_retriever(tunable_index, "structure").setting_for(Query(id="q", text="$x^2+y^2=z^2$"))
    assert (setting.lambda_m, setting.text) == (formula["lambda_m"], formula["text"])
    retriever = open_retriever(tunable_index, "structure")
    assert (retriever.lambda_m, retriever.max_formulas, retriever.text_part) == (
        saved["lambda_m"],
        saved["max_formulas"],
        saved["text"],
    )
    assert "structure.json" in retriever.settings_source
    assert open_retriever(tunable_index, "structure", lambda_m=1.5).lambda_m == 1.5  # an explicit option wins


def test_dev_topics_are_refused_and_a_broken_settings_file_is_a_clear_error(tunable_index, shared_data):
    dev = shared_data / "collection"
    with pytest.raises(MathScoutError, match="dev topics are for evaluation"):
        from mathscout.evaluation.structure_tuning import main

        main(
            [
                "--index",
                str(tunable_index),
                "--topics",
                str(dev / "topics.dev.jsonl"),
                "--qrels",
                str(dev / "qrels.dev.txt"),
            ]
        )
    (tunable_index / "structure.json").write_text('{"lambda_m": "much"}', encoding="utf-8")
    with pytest.raises(MathScoutError, match=r"structure.json is unusable"):
        open_retriever(tunable_index, "structure")
