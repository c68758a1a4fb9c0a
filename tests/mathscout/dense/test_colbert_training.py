"""`mathscout train colbert` (issue 34) on the dense fixture index: a short training (stopped after one step, resumed)
stores both sides with the index, the `colbert` mode searches with them (`trained=False`: exactly the untrained
model), `--query-side-only` stores the query side alone (as an index trained before the document side: it loads
unchanged), and a broken or mismatched stored model, a colbert-less index or dev topics each give one clear line."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from mathscout.errors import DamagedIndexError, IndexMissingError, MathScoutError
from mathscout.index.layout import IndexDir
from mathscout.retrievers.registry import open_retriever
from mathscout.types import Query

pytestmark = [pytest.mark.model, pytest.mark.slow]  # the MiniLM query encoder; ~60 s with the fixture index

# 40 training and 8 held-out questions, 8 steps of 8 pairs per epoch; at this rate the held-out nDCG@10 is best after
# epoch 1 (both sides: 0.831 -> 0.836 -> 0.801), so a trained model is kept
TINY = ["--train-topics", "40", "--held-out", "8", "--epochs", "2", "--batch", "8", "--depth", "10"]
TINY += ["--held-out-depth", "20", "--lr", "0.003"]
DOCUMENT_SIDE = {"document_adapter.npz", "document_norms.npy", "document_ivfpq.faiss"}


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
    """A copy of the dense fixture index with a trained colbert model (both sides, the default): the first run stops
    after one step (--max-minutes 0), the second resumes from its checkpoint and finishes."""
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


def queries(dense_topics) -> list[Query]:
    return [Query(id=t["id"], text=f"{t['title']} {t['body']}") for t in dense_topics[:5]]


def ranking(retriever, query: Query) -> list[tuple[str, float]]:
    return [(h.doc_id, h.score) for h in retriever.search(query, k=10)]


def test_training_stores_both_sides_with_their_record(trained, dense_index):
    from mathscout.evaluation.training.colbert import fitted_topics
    from mathscout.retrievers.colbert_model import ColbertTraining

    info = ColbertTraining.read(trained)
    assert info is not None and set(info.files) == {"query_adapter.npz", "loss.png"} | DOCUMENT_SIDE
    assert json.loads(ColbertTraining.path(trained).read_text())["version"] == 2 and info.document_side
    record = info.training
    assert record["settings"]["document_side"] and record["counts"]["pairs"] >= 8
    counts = record["counts"]
    assert len(fitted_topics(IndexDir(trained))) == counts["training_topics"] + counts["held_out_topics"] > 0
    curve = record["held_out_ndcg10"]
    assert len(curve) == 3 and record["best_epoch"] >= 1 and curve[record["best_epoch"]] == max(curve)  # each epoch
    assert set(record["held_out_search_ndcg10"]) == {"untrained", "trained"}
    assert len(record["losses"]) == 2 * record["counts"]["steps_per_epoch"] and record["seconds"]["documents"] > 0
    assert (trained / "colbert" / "loss.png").stat().st_size > 1000
    built = (dense_index / "colbert" / "ivfpq.faiss").read_bytes()
    assert (trained / "colbert" / "ivfpq.faiss").read_bytes() == built  # the untrained candidate stage, as built


def test_the_trained_model_searches_differently_and_trained_false_is_the_untrained_model(
    trained, dense_index, dense_topics
):
    model = open_retriever(IndexDir(trained), "colbert")
    base = open_retriever(IndexDir(trained), "colbert", trained=False)
    untrained = open_retriever(IndexDir(dense_index), "colbert")  # the fixture index, never trained
    assert model.adapter is not None and model.documents is not None and base.adapter is None and base.documents is None
    assert model.faiss.ntotal == base.faiss.ntotal == len(base.vectors)
    for query in queries(dense_topics):
        assert ranking(base, query) == ranking(untrained, query)  # exactly: same documents, same scores
    assert any(ranking(model, query) != ranking(base, query) for query in queries(dense_topics))
    # the scores are exact MaxSim over d' = normalise(d + d·B), which the search never stores
    query = queries(dense_topics)[0]
    q = model.query_vectors(query)
    hits = model.search(query, k=5)
    matrix = model.documents.matrix
    for hit in hits:
        doc = model.doc_ids.index(hit.doc_id)
        d = np.asarray(model.vectors[model.offsets[doc] : model.offsets[doc + 1]], dtype=np.float32)
        mapped = (d + d @ matrix) / np.linalg.norm(d + d @ matrix, axis=1, keepdims=True)
        assert hit.score == pytest.approx(float((q @ mapped.T).max(axis=1).sum()), abs=1e-4)


def test_query_side_only_stores_the_query_side_alone(trained, train_files, dense_topics, tmp_path):
    """`--query-side-only` replaces a stored document side; that index, like one trained before the document side
    (version 1, no document files), searches the untrained documents with the trained query side."""
    from mathscout.evaluation.training.colbert import main
    from mathscout.retrievers.colbert_model import ColbertTraining

    copy = tmp_path / "index"
    shutil.copytree(trained, copy)
    topics, qrels = train_files
    main(["--index", str(copy), "--topics", str(topics), "--qrels", str(qrels), *TINY, "--query-side-only"])
    info = ColbertTraining.read(copy)
    assert info is not None and not info.document_side and set(info.files) == {"query_adapter.npz", "loss.png"}
    assert not any((copy / "colbert" / name).exists() for name in DOCUMENT_SIDE)
    old = json.loads(ColbertTraining.path(copy).read_text()) | {"version": 1}
    ColbertTraining.path(copy).write_text(json.dumps(old))  # as `mathscout train colbert` wrote it before
    model = open_retriever(IndexDir(copy), "colbert")
    base = open_retriever(IndexDir(copy), "colbert", trained=False)
    assert model.adapter is not None and model.documents is None
    for query in queries(dense_topics):
        docs, scores = base.rank_vectors(model.adapter.apply(base.query_vectors(query)), 10)
        assert ranking(model, query) == [(model.doc_ids[d], s) for d, s in zip(docs.tolist(), scores.tolist())]


def test_a_broken_or_mismatched_model_names_the_command(trained, tmp_path):
    copy = tmp_path / "index"
    shutil.copytree(trained, copy)
    for name in ("query_adapter.npz", "document_norms.npy"):
        original = (copy / "colbert" / name).read_bytes()
        (copy / "colbert" / name).write_bytes(original[:-8] + b"damaged!")
        with pytest.raises(DamagedIndexError, match=rf"{name.replace('.', '[.]')} is damaged.*train colbert --index"):
            open_retriever(IndexDir(copy), "colbert")
        assert open_retriever(IndexDir(copy), "colbert", trained=False).adapter is None  # the untrained model opens
        (copy / "colbert" / name).write_bytes(original)
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
