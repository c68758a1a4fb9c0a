"""The cross-encoder (issue 34): `mathscout train cross-encoder` on the small index (a few steps, stopped and resumed),
stored with the index and read back offline; `--rerank cross` reorders hits; an index without one says what to run."""

from __future__ import annotations

import json
import shutil

import pytest

from mathscout.errors import DamagedIndexError, IndexMissingError

TRAIN_TOPICS = 8
HELD_OUT = 4
TINY = ["--train-topics", str(TRAIN_TOPICS), "--held-out", str(HELD_OUT), "--negatives", "2", "--depth", "5",
        "--max-length", "64", "--batch", "4", "--checkpoint-every", "1"]


@pytest.fixture(scope="module")
def train_files(shared_data, small_index, tmp_path_factory):
    """Train topics whose relevant answers the small index holds (its first documents are those of train threads)."""
    from mathscout.index.layout import IndexDir

    qrels = {}
    for line in (shared_data / "collection" / "qrels.train.txt").read_text(encoding="utf-8").splitlines():
        qid, _, doc, grade = line.split()
        qrels.setdefault(qid, {})[doc] = int(grade)
    stored = IndexDir(small_index).store.summaries(d for judged in qrels.values() for d in judged)
    wanted = [q for q, judged in qrels.items() if any(d in stored and g >= 2 for d, g in judged.items())][:40]
    folder = tmp_path_factory.mktemp("cross-train")
    with open(shared_data / "collection" / "topics.train.jsonl", encoding="utf-8") as f:
        lines = [line for line in f if json.loads(line)["id"] in set(wanted)]
    (folder / "topics.train.jsonl").write_text("".join(lines), encoding="utf-8")
    (folder / "qrels.train.txt").write_text("".join(f"{q} 0 {d} {g}\n" for q in wanted for d, g in qrels[q].items()),
                                            encoding="utf-8")
    return folder / "topics.train.jsonl", folder / "qrels.train.txt"


@pytest.fixture(scope="module")
def trained(small_index, train_files, tmp_path_factory):
    """A copy of the small index with a tiny cross-encoder: the first run stops after one step (--max-minutes 0), the
    second resumes from its checkpoint and finishes."""
    from mathscout.evaluation.training.cross_encoder import WORK, main

    index = tmp_path_factory.mktemp("cross-index") / "small"
    shutil.copytree(small_index, index)
    topics, qrels = train_files
    arguments = ["--index", str(index), "--topics", str(topics), "--qrels", str(qrels), *TINY]
    main([*arguments, "--max-minutes", "0"])
    checkpoints = sorted(p.name for p in (index / WORK / "trainer").glob("checkpoint-*"))
    assert checkpoints == ["checkpoint-1"], checkpoints  # stopped after its first step, resumable
    assert not (index / "cross-encoder").exists()
    main(arguments)
    assert not (index / WORK).exists()  # the work folder goes once the model is stored
    return index


def test_training_stores_a_model_that_loads_offline(trained, monkeypatch):
    from mathscout.dense.cross import BACKENDS, CrossEncoderInfo, open_cross_scorer

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    info = CrossEncoderInfo.require(trained)
    training = info.training
    assert info.backend in BACKENDS and info.max_length == 64
    assert training["counts"]["training_topics"] == TRAIN_TOPICS and training["counts"]["held_out_topics"] == HELD_OUT
    assert set(training["counts"]["mined_from"]) == {"bm25", "structure"}
    assert len(training["index_build"]) == 16 and training["settings"]["epochs"] == 1
    held = training["held_out"]
    assert set(held["first_stage"]) == {"bm25", "structure"} and set(held["backends"]) == set(BACKENDS)
    assert held["backends"]["torch"]["kendall_tau"] == 1.0 and held["chosen"] == info.backend
    assert training["seconds"]["training"] > 0 and training["losses"]
    scorer = open_cross_scorer(trained)
    first, second = scorer.scores("What is $x^2$?", ["$x^2$ is x times x.", "Paris is in France."])
    assert first != second
    torch_scores = open_cross_scorer(trained, "torch").scores("What is $x^2$?", ["$x^2$ is x times x."])
    assert len(torch_scores) == 1


def test_a_damaged_model_file_is_one_line(trained, tmp_path):
    from mathscout.dense.cross import CrossEncoderInfo

    copy = tmp_path / "idx"
    shutil.copytree(trained, copy)
    config = copy / "cross-encoder" / "model" / "config.json"
    config.write_text(config.read_text(encoding="utf-8").replace("{", "{ ", 1), encoding="utf-8")
    with pytest.raises(DamagedIndexError, match="train cross-encoder"):
        CrossEncoderInfo.require(copy)


def test_a_missing_model_says_what_to_run(small_index):
    from mathscout.dense.cross import open_cross_scorer

    with pytest.raises(IndexMissingError, match=r"no trained cross-encoder: run mathscout train cross-encoder --index"):
        open_cross_scorer(small_index)
