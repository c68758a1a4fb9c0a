"""`mathscout train colbert` (issue 34) on the dense fixture index: a short training (stopped after one step, resumed)
stores the query side with the index, the `colbert` mode searches with it (`trained=False`: without), and a broken or
mismatched stored model, a colbert-less index or dev topics each give one clear line."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from mathscout.errors import DamagedIndexError, IndexMissingError, MathScoutError
from mathscout.index.layout import IndexDir
from mathscout.retrievers.registry import open_retriever
from mathscout.types import Query

pytestmark = [pytest.mark.model, pytest.mark.slow]  # the MiniLM query encoder; ~40 s with the fixture index

# 40 training and 8 held-out questions, 8 steps of 8 pairs per epoch; at this rate the held-out nDCG@10 is best after
# epoch 2 (0.831 -> 0.808 -> 0.837; lr 0.01 and 0.05 overfit: their epoch 0, the untrained model, is kept)
TINY = ["--train-topics", "40", "--held-out", "8", "--epochs", "2", "--batch", "8", "--depth", "10"]
TINY += ["--held-out-depth", "20", "--lr", "0.003"]


@pytest.fixture(scope="module")
def train_files(shared_data, dense_index, tmp_path_factory):
    """The train topics (and their qrels) whose judged answers the dense fixture index holds."""
    in_index = set(IndexDir(dense_index).store.doc_ids())
    folder = tmp_path_factory.mktemp("colbert-train")
    lines = (shared_data / "collection" / "qrels.train.txt").read_text(encoding="utf-8").splitlines()
    judged = [line for line in lines if line.split()[2] in in_index]
    wanted = {line.split()[0] for line in judged}
    (folder / "qrels.train.txt").write_text("".join(f"{line}\n" for line in judged), encoding="utf-8")
    with open(shared_data / "collection" / "topics.train.jsonl", encoding="utf-8") as f:
        topics = [line for line in f if json.loads(line)["id"] in wanted]
    (folder / "topics.train.jsonl").write_text("".join(topics), encoding="utf-8")
    return folder / "topics.train.jsonl", folder / "qrels.train.txt"


@pytest.fixture(scope="module")
def trained(dense_index, train_files, tmp_path_factory):
    """A copy of the dense fixture index with a trained colbert query side: the first run stops after one step
    (--max-minutes 0), the second resumes from its checkpoint and finishes."""
    from mathscout.evaluation.training.colbert import WORK, main

    index = tmp_path_factory.mktemp("colbert-index") / "index"
    shutil.copytree(dense_index, index)
    topics, qrels = train_files
    arguments = ["--index", str(index), "--topics", str(topics), "--qrels", str(qrels), *TINY]
    main([*arguments, "--max-minutes", "0"])
    assert (index / WORK / "checkpoint.pt").is_file() and not (index / "colbert" / "trained.json").exists()
    main(arguments)
    assert not (index / WORK).exists()  # the work folder goes once the model is stored
    return index


def test_training_stores_the_query_side_with_its_record(trained):
    from mathscout.evaluation.training.colbert import fitted_topics
    from mathscout.retrievers.colbert import ColbertTraining

    info = ColbertTraining.read(trained)
    assert info is not None and set(info.files) == {"query_adapter.npz", "loss.png"}
    record = info.training
    assert record["counts"]["pairs"] >= 8 and record["counts"]["held_out_topics"] >= 1
    counts = record["counts"]
    assert len(fitted_topics(IndexDir(trained))) == counts["training_topics"] + counts["held_out_topics"]
    curve = record["held_out_ndcg10"]
    assert len(curve) == 3 and record["best_epoch"] == 2 and curve[2] == max(curve)  # before and after each epoch
    assert set(record["held_out_search_ndcg10"]) == {"untrained", "trained"}
    assert len(record["losses"]) == 2 * record["counts"]["steps_per_epoch"] and record["seconds"]["training"] > 0
    assert (trained / "colbert" / "loss.png").stat().st_size > 1000


def test_the_colbert_mode_searches_with_the_trained_query_side(trained, dense_topics):
    query = Query(id=dense_topics[0]["id"], text=f"{dense_topics[0]['title']} {dense_topics[0]['body']}")
    model = open_retriever(IndexDir(trained), "colbert")
    base = open_retriever(IndexDir(trained), "colbert", trained=False)
    assert model.adapter is not None and base.adapter is None
    q, t = model.query_vectors(query), base.query_vectors(query)
    assert q.shape == t.shape and np.allclose(np.linalg.norm(q, axis=1), 1, atol=1e-5) and not np.allclose(q, t)
    trained_hits, base_hits = model.search(query, k=10), base.search(query, k=10)
    assert [(h.doc_id, round(h.score, 4)) for h in trained_hits] != [(h.doc_id, round(h.score, 4)) for h in base_hits]


def test_a_broken_or_mismatched_model_names_the_command(trained, tmp_path):
    copy = tmp_path / "index"
    shutil.copytree(trained, copy)
    (copy / "colbert" / "query_adapter.npz").write_bytes(b"not numpy")
    with pytest.raises(DamagedIndexError, match=r"query_adapter\.npz is damaged.*mathscout train colbert --index"):
        open_retriever(IndexDir(copy), "colbert")
    assert open_retriever(IndexDir(copy), "colbert", trained=False).adapter is None  # the untrained model still opens
    shutil.copy2(trained / "colbert" / "query_adapter.npz", copy / "colbert" / "query_adapter.npz")
    info = json.loads((copy / "colbert" / "trained.json").read_text())
    info["dense_build_id"] = "another"
    (copy / "colbert" / "trained.json").write_text(json.dumps(info))
    with pytest.raises(DamagedIndexError, match=r"another 'dense' build: retrain it with 'mathscout train colbert"):
        open_retriever(IndexDir(copy), "colbert")


def test_training_needs_an_index_with_colbert_and_train_topics(tiny_index, dense_index, shared_data, tmp_path):
    from mathscout.evaluation.training.colbert import main

    with pytest.raises(IndexMissingError, match=r"--components dense,colbert"):
        main(["--index", str(tiny_index)])
    with pytest.raises(IndexMissingError, match=r"no index at .*mathscout index --input"):
        main(["--index", str(tmp_path / "nothing")])
    collection = shared_data / "collection"
    dev = ["--topics", str(collection / "topics.dev.jsonl"), "--qrels", str(collection / "qrels.dev.txt")]
    with pytest.raises(MathScoutError, match="train topics only"):
        main(["--index", str(dense_index), *dev])
