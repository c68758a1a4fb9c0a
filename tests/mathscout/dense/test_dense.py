"""Dense (bi-encoder) and ColBERT-style retrieval over a small real index, with the real MiniLM weights and faiss.

The fixture index holds the judged answers of a few dev topics, 150 other collection documents and two
edge cases (a formula-only document, a long document split into passages): encoding ~200 documents
takes seconds, where the conftest's 3,100-document subset would take minutes on this machine.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from mathscout.dense.model import load_sentence_model, model_input_text, render_formula
from mathscout.errors import IndexMissingError, MathScoutError, QueryError
from mathscout.index.layout import IndexDir
from mathscout.retrievers.registry import open_retriever
from mathscout.types import Query
from tests.support.corpora import DENSE_TOPICS as TOPICS
from tests.support.corpora import FORMULA_ONLY


def _query(topic: dict) -> Query:
    return Query(id=topic["id"], text=f"{topic['title']}\n{topic['body']}")


# --- model input -------------------------------------------------------------------------------------------


@pytest.mark.model
def test_latex_variants_read_alike():
    assert render_formula(r"\dfrac12 \leqslant \left( x^2 \right)") == r"\frac{1}{2} \le ( x^2 )"
    tokenizer = load_sentence_model().tokenizer  # what the model reads: spacing next to punctuation is no token
    assert tokenizer.tokenize(model_input_text(r"is $\tfrac{1}{2}\leq x$ true")) == tokenizer.tokenize(
        model_input_text(r"is \(\frac12 \le x\) true")
    )
    assert model_input_text(r"in $\Bbb R$ or ℝ") == r"in $\mathbb{R}$ or ℝ"
    assert model_input_text("") == ""


def test_model_folder_errors(tmp_path):
    with pytest.raises(MathScoutError, match="no dense model at"):
        load_sentence_model(tmp_path / "missing")
    with pytest.raises(MathScoutError, match="is not a model folder"):
        load_sentence_model(tmp_path)


# --- dense --------------------------------------------------------------------------------------------------


@pytest.mark.model
def test_dense_finds_judged_answers(dense_index, dense_topics, dense_qrels):
    dense = open_retriever(IndexDir(dense_index), "dense")
    results = dense.batch_search([_query(t) for t in dense_topics], k=10)
    at_one = sum(results[t["id"]][0].doc_id in dense_qrels[t["id"]] for t in dense_topics)
    assert at_one >= TOPICS - 2  # the judged answers of nearly every question come first
    for hits in results.values():
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True) and [h.rank for h in hits] == list(range(1, len(hits) + 1))


@pytest.mark.model
def test_long_documents_are_split_and_max_pooled(dense_index):
    index = IndexDir(dense_index)
    dense = open_retriever(index, "dense")
    meta = dense.meta
    assert meta["passages"] > meta["documents"] and meta["max_passages"] == 2
    counts = np.bincount(dense.passage_doc)
    doc = int(np.argmax(counts))
    assert counts[doc] == 2
    # the document scores the better of its two passages
    vectors = dense.faiss.reconstruct_n(0, dense.faiss.ntotal)
    query = Query(id="q", text=index.store.get(dense.doc_ids[doc]).text[-400:])
    q = dense.encode([query])[0]
    expected = max(float(vectors[p] @ q) for p in np.flatnonzero(dense.passage_doc == doc))
    hit = next(h for h in dense.search(query, k=50) if h.doc_id == dense.doc_ids[doc])
    assert hit.score == pytest.approx(expected, abs=1e-5)


@pytest.mark.model
def test_formula_only_document_is_found(dense_index):
    hits = open_retriever(IndexDir(dense_index), "dense").search(r"$\int_0^1 x^2 dx$", k=3)
    assert hits[0].doc_id == FORMULA_ONLY["id"]


@pytest.mark.model
def test_hnsw_agrees_with_flat(dense_index, dense_topics):
    index = IndexDir(dense_index)
    flat, hnsw = open_retriever(index, "dense"), open_retriever(index, "dense", search="hnsw")
    assert hnsw.faiss.hnsw.efSearch == 64
    query = _query(dense_topics[0])
    assert [h.doc_id for h in hnsw.search(query, k=5)] == [h.doc_id for h in flat.search(query, k=5)]


@pytest.mark.model
def test_hnsw_is_built_in_blocks_under_a_progress_bar(dense_index, monkeypatch, capsys):
    import faiss

    from mathscout.dense import ann

    flat = faiss.read_index(str(dense_index / "dense" / "flat.faiss"))
    vectors = flat.reconstruct_n(0, flat.ntotal)
    monkeypatch.setattr(ann, "HNSW_BLOCK_ROWS", 40)
    monkeypatch.setattr("mathscout.progress.shown", lambda: True)  # as in a command on a terminal
    hnsw = ann.build_hnsw(vectors, 32, 40, label="test")
    final = [p for p in capsys.readouterr().err.replace("\r", "\n").splitlines() if p.startswith("test HNSW (M = 32)")][
        -1
    ]
    assert "100%" in final and f"{len(vectors)}/{len(vectors)}" in final and "<00:00" in final
    assert hnsw.ntotal == len(vectors) and len(vectors) > 3 * 40  # several blocks
    hnsw.hnsw.efSearch = 64
    _, exact = flat.search(vectors[:60], 5)
    _, found = hnsw.search(vectors[:60], 5)
    assert np.mean([len(set(a) & set(b)) / 5 for a, b in zip(exact, found)]) >= 0.95  # blocks keep the graph searchable


@pytest.mark.model
def test_bad_queries(dense_index):
    dense = open_retriever(IndexDir(dense_index), "dense")
    with pytest.raises(QueryError, match="empty"):
        dense.search("   ", k=5)
    huge = "prime numbers and $x^2+1$ " * 4000  # ≈ 100 KB: cut, still answered
    assert len(dense.search(huge, k=5)) == 5


@pytest.mark.model
def test_dimension_mismatch_is_one_clear_line(dense_index, tmp_path):
    from sentence_transformers import SentenceTransformer, models

    base = load_sentence_model()
    smaller = SentenceTransformer(modules=[base[0], base[1], models.Dense(384, 128)], device="cpu")
    smaller.save(str(tmp_path / "m128"))
    with pytest.raises(MathScoutError, match="makes 128-dimensional vectors but the 'dense' index holds 384"):
        open_retriever(IndexDir(dense_index), "dense", model=tmp_path / "m128")


@pytest.mark.model
def test_corrupted_faiss_file(dense_index, tmp_path):
    copy = tmp_path / "index"
    shutil.copytree(dense_index, copy)
    (copy / "dense" / "flat.faiss").write_bytes(b"not a faiss index")
    with pytest.raises(MathScoutError, match=r"flat.faiss is damaged .*rebuild it with 'mathscout index"):
        open_retriever(IndexDir(copy), "dense")
    manifest = json.loads((copy / "manifest.json").read_text(encoding="utf-8"))
    del manifest["components"]["dense"]["files"]  # an index built before checksums: faiss's own check holds
    (copy / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(IndexMissingError, match="unreadable or corrupted: rebuild it with 'mathscout index"):
        open_retriever(IndexDir(copy), "dense")


# --- large components: vectors streamed to disk, IVF-PQ built from them -------------------------------------------


@pytest.fixture(scope="module")
def ivfpq_index(dense_index, tmp_path_factory) -> Path:
    """The dense_index documents as a 'large' component: ANN above 50 passages, encoded in chunks of 64 documents."""
    import os

    from mathscout.retrievers.indexing import build_index

    path = tmp_path_factory.mktemp("ivfpq") / "index"
    saved = {k: os.environ.get(k) for k in ("MATHSCOUT_DENSE_ANN_ABOVE", "MATHSCOUT_DENSE_CHUNK_DOCUMENTS")}
    os.environ.update({"MATHSCOUT_DENSE_ANN_ABOVE": "50", "MATHSCOUT_DENSE_CHUNK_DOCUMENTS": "64"})
    try:
        build_index([dense_index.parent / "docs.jsonl"], path, ["dense"])
    finally:
        for key, value in saved.items():
            os.environ.pop(key) if value is None else os.environ.__setitem__(key, value)
    return path


@pytest.mark.model
def test_small_components_stay_exact_flat(dense_index):
    dense = open_retriever(IndexDir(dense_index), "dense")
    assert dense.meta["default_search"] == "flat" and dense.meta["passages"] <= dense.meta["ann_above"]
    assert not (dense_index / "dense" / "passage_vectors.f32").exists()  # flat.faiss holds the vectors


@pytest.mark.model
@pytest.mark.slow
def test_large_component_streams_vectors_and_builds_ivfpq_from_them(ivfpq_index, dense_index):
    folder = ivfpq_index / "dense"
    meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    assert meta["default_search"] == "ivfpq" and not (folder / "flat.faiss").exists()
    vectors = np.fromfile(folder / "passage_vectors.f32", dtype=np.float32).reshape(-1, meta["dimension"])
    exact = open_retriever(IndexDir(dense_index), "dense")
    assert len(vectors) == meta["passages"] == exact.faiss.ntotal
    assert np.array_equal(np.load(folder / "passage_doc.npy"), exact.passage_doc)
    # three chunks instead of one: each passage is encoded alone (batching "passage"), so its int8 vector is the same
    # whatever it was encoded with (under "length" batching: mean cosine 0.99+, min 0.956 here)
    assert meta["batching"] == "passage"
    assert np.array_equal(vectors, exact.faiss.reconstruct_n(0, exact.faiss.ntotal))
    assert np.array_equal(
        np.load(folder / "tokens" / "offsets.npy"), np.load(dense_index / "dense" / "tokens" / "offsets.npy")
    )


@pytest.mark.model
def test_a_passage_vector_is_the_same_alone_or_among_others(dense_index):
    """int8 dynamic quantisation scales activations per forward pass: under the default "passage" batching a
    document's vector does not depend on the documents encoded with it (a shard's vectors are one index's)."""
    from mathscout.dense.build import document_text
    from mathscout.dense.encoder import Encoder

    store = IndexDir(dense_index).store
    documents = store.get_many(store.doc_ids()[:40])
    encoder = Encoder()
    sequences = [encoder.passages(p, 1)[0] for p in encoder.pieces([document_text(d) for d in documents.values()])]
    together = encoder.encode_passages(sequences)
    assert encoder.backend == "onnx-int8" and encoder.batching == "passage"
    for n in (0, 7, 39):
        assert np.array_equal(encoder.encode_passages([sequences[n]])[0], together[n])
    assert np.array_equal(encoder.encode_passages(sequences[::-1])[::-1], together)
    batched = Encoder(batching="length").encode_passages(sequences)  # the policy of older indexes: peers matter
    assert not np.array_equal(batched, together)


@pytest.mark.model
def test_parallel_builds_quantise_the_model_once(dense_index, tmp_path):
    """Shard build tasks start encoding at the same moment on an empty cache: onnxruntime's quantiser writes a side
    file next to the exported model, so three processes quantising at once failed (FileNotFoundError) until the
    export is held by one process at a time. Each process gets the int8 model, and it encodes."""
    import os
    import subprocess
    import sys

    from mathscout.dense.encoder import onnx_file
    from mathscout.dense.model import default_model_path

    model = Path(default_model_path())
    exported = onnx_file(model, quantized=False)  # the session's cached export: the processes race to quantise it
    fresh = tmp_path / "home" / "onnx" / exported.parent.name
    fresh.mkdir(parents=True)
    shutil.copy2(exported, fresh / exported.name)
    script = (
        "import sys; from pathlib import Path; from mathscout.dense.encoder import onnx_file; "
        f"print(onnx_file(Path({str(model)!r}), quantized=True))"
    )
    env = {**os.environ, "MATHSCOUT_HOME": str(tmp_path / "home")}
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    results = [(run.wait(timeout=300), *run.communicate()) for run in runs]
    assert [code for code, _, _ in results] == [0, 0, 0], [err[-500:] for _, _, err in results]
    assert {out.strip() for _, out, _ in results} == {str(fresh / "model.int8.onnx")}
    assert sorted(p.name for p in fresh.iterdir()) == ["export.lock", "model.int8.onnx", "model.onnx"]
    import onnxruntime as ort

    session = ort.InferenceSession(str(fresh / "model.int8.onnx"), providers=["CPUExecutionProvider"])
    ones = np.ones((1, 4), dtype=np.int64)
    hidden = session.run(None, {"input_ids": ones, "attention_mask": ones, "token_type_ids": ones * 0})[0]
    assert hidden.shape == (1, 4, 384)


@pytest.mark.model
def test_a_query_ranks_the_same_alone_or_in_a_batch(dense_index, shared_data):
    """With two threads faiss scores a lone query and a large batch (against a collection of the shared one's size)
    by different code paths that sum in another order: the last bit of a score differed and near-tied documents
    swapped between `search` and `run` (and between one index and its shards). Every hit is re-scored from its
    passage vector, whatever the batch: the same ids, order and scores."""
    import faiss

    from mathscout.evaluation.topics import load_topics
    from mathscout.retrievers.base import prepare_query

    topics = load_topics(shared_data / "collection" / "topics.dev.jsonl")[:32]
    dense = open_retriever(IndexDir(dense_index), "dense")
    vectors = dense.passage_vectors()  # faiss takes BLAS for large batch × collection products: the fixture's real
    copies = -(-60_000 // len(vectors))  # vectors repeated to the shared collection's size (50,636 passages)
    flat = faiss.IndexFlatIP(vectors.shape[1])
    flat.add(np.tile(vectors, (copies, 1)))
    dense.faiss, dense.passage_doc = flat, np.tile(dense.passage_doc, copies)
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(2)  # a search process's default on this machine (builds set 1; with 1 the paths agree)
    try:
        batched = dense.batch_search(topics, 1000)
        alone = {topic.id: dense.rank(prepare_query(topic), 1000).hits for topic in topics}  # as search() prepares
    finally:
        faiss.omp_set_num_threads(threads)
    for topic in topics:
        assert [(h.doc_id, h.score) for h in alone[topic.id]] == [(h.doc_id, h.score) for h in batched[topic.id]], (
            topic.id
        )


@pytest.mark.model
def test_a_text_vector_is_the_same_alone_or_among_others(dense_topics):
    """`encode_texts` (what the embedding reranker compares) on the int8 ONNX backend batches as passages do: under
    the default "passage" batching a text's vector does not depend on the texts encoded with it."""
    from mathscout.dense.encoder import Encoder

    encoder = Encoder()
    texts = [f"{t['title']} {t['body']}" for t in dense_topics]
    together = encoder.encode_texts(texts)
    assert encoder.backend == "onnx-int8" and encoder.batching == "passage"
    for n in (0, 3, len(texts) - 1):
        assert np.array_equal(encoder.encode_texts([texts[n]])[0], together[n])
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)


@pytest.mark.model
@pytest.mark.slow
def test_ivfpq_search_rescores_exactly(ivfpq_index, dense_topics, dense_qrels):
    from mathscout.retrievers.dense import best_documents

    dense = open_retriever(IndexDir(ivfpq_index), "dense")
    vectors = np.asarray(dense.passage_vectors())
    found = 0
    for topic in dense_topics:
        hits = dense.search(_query(topic), k=10)
        q = dense.encode([_query(topic)])[0]
        scores = vectors @ q
        order = np.argsort(-scores, kind="stable")
        truth = dict(best_documents(scores[order], order, dense.passage_doc, 10))
        assert {dense.doc_ids[d] for d in truth} == {h.doc_id for h in hits}  # every list probed: exact here
        for hit in hits:  # candidates are re-scored from the vectors: the exact inner product
            assert hit.score == pytest.approx(truth[dense.doc_ids.index(hit.doc_id)], abs=1e-5)
        found += hits[0].doc_id in dense_qrels[topic["id"]]
    assert found >= TOPICS - 2
    with pytest.raises(MathScoutError, match=r"has no 'flat' search .*it has ivfpq"):
        open_retriever(IndexDir(ivfpq_index), "dense", search="flat")


@pytest.mark.model
@pytest.mark.slow
def test_truncated_vector_file_is_one_clear_error(ivfpq_index, tmp_path):
    copy = tmp_path / "index"
    shutil.copytree(ivfpq_index, copy)
    path = copy / "dense" / "passage_vectors.f32"
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(MathScoutError, match=r"passage_vectors.f32"):
        open_retriever(IndexDir(copy), "dense")


# --- colbert ------------------------------------------------------------------------------------------------


@pytest.mark.model
def test_colbert_ranks_with_exact_maxsim(dense_index, dense_topics, dense_qrels):
    colbert = open_retriever(IndexDir(dense_index), "colbert")
    topic = dense_topics[0]
    hits = colbert.search(_query(topic), k=10)
    assert hits[0].doc_id in dense_qrels[topic["id"]]
    # Eq. 3 computed directly over every document's stored vectors gives the same top score
    q = colbert.query_vectors(_query(topic))
    docs = np.flatnonzero(np.diff(colbert.offsets) > 0)
    exact = colbert.maxsim(q, docs)
    assert hits[0].score == pytest.approx(float(exact.max()), rel=1e-5)
    assert colbert.doc_ids[docs[int(np.argmax(exact))]] == hits[0].doc_id


@pytest.mark.model
def test_colbert_needs_the_dense_tokens_it_was_built_from(dense_index, tmp_path):
    copy = tmp_path / "index"
    shutil.copytree(dense_index, copy)
    meta = json.loads((copy / "colbert" / "meta.json").read_text())
    meta["dense_build_id"] = "older"
    (copy / "colbert" / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(MathScoutError, match=r"meta.json is damaged"):  # the file differs from what the build wrote
        open_retriever(IndexDir(copy), "colbert")
    manifest = json.loads((copy / "manifest.json").read_text(encoding="utf-8"))
    del manifest["components"]["colbert"]["files"]  # as an index built before checksums were recorded
    (copy / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(IndexMissingError, match="built from an older 'dense' component"):
        open_retriever(IndexDir(copy), "colbert")


# --- fine-tuning --------------------------------------------------------------------------------------------


def test_training_triplets_never_read_dev(shared_data, tmp_path):
    from mathscout.evaluation.training.dense import load_triplets

    collection = shared_data / "collection"
    with pytest.raises(MathScoutError, match="train topics only"):
        load_triplets(collection / "topics.dev.jsonl", collection / "qrels.dev.txt", collection / "docs.jsonl", 10)


def test_hard_negatives_share_a_tag_from_another_thread(shared_data):
    from mathscout.evaluation.training.dense import load_triplets

    collection = shared_data / "collection"
    triplets = load_triplets(
        collection / "topics.train.jsonl", collection / "qrels.train.txt", collection / "docs.jsonl", 40
    )
    assert len(triplets) >= 35
    threads, tags = {}, {}
    with open(collection / "docs.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            threads[d["id"]] = d.get("thread_id")
    with open(collection / "topics.train.jsonl", encoding="utf-8") as f:
        for line in f:
            t = json.loads(line)
            tags[t["id"]] = {x for x in t.get("tags") or [] if not x.lower().startswith("level ")}
    for t in triplets:
        topic, positive, negative = t.ids
        assert threads[negative] != topic and negative != positive
        if tags[topic]:
            assert tags[topic] & tags[threads[negative]]


@pytest.mark.model
def test_training_is_resumable(shared_data, tmp_path):
    from mathscout.dense.model import default_model_path
    from mathscout.evaluation.training.dense import load_triplets, train

    collection = shared_data / "collection"
    triplets = load_triplets(
        collection / "topics.train.jsonl", collection / "qrels.train.txt", collection / "docs.jsonl", 12
    )[:8]
    output = tmp_path / "ft"
    stopped = train(triplets, default_model_path(), output, 4, 2e-5, 0.1, 16, 16, 10, max_minutes=0)
    assert stopped.name == "ft.checkpoint" and (stopped / "state.pt").is_file() and not output.exists()
    assert train(triplets, default_model_path(), output, 4, 2e-5, 0.1, 16, 16, 10, None) == output
    record = json.loads((output / "training.json").read_text())
    assert record["steps"] == 2 and len(record["losses"]) == 2  # one step before the stop, one after resuming
    assert (output / "loss.png").stat().st_size > 1000
    assert load_sentence_model(output).encode(["x"]).shape == (1, 384)


@pytest.mark.model
def test_training_without_hard_negatives_is_recorded(shared_data, tmp_path):
    from mathscout.dense.model import default_model_path
    from mathscout.evaluation.training.dense import load_triplets, train

    collection = shared_data / "collection"
    triplets = load_triplets(
        collection / "topics.train.jsonl", collection / "qrels.train.txt", collection / "docs.jsonl", 12
    )[:4]
    output = train(
        triplets, default_model_path(), tmp_path / "ft", 4, 2e-5, 0.1, 16, 16, 10, None, hard_negatives=False
    )
    record = json.loads((output / "training.json").read_text())
    assert record["hard_negatives"] is False and record["steps"] == 1


# --- query-side fine-tuning ---------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def query_side_model(shared_data, dense_index, tmp_path_factory) -> Path:
    """A query adapter trained over the fixture index's vectors, on the train topics judged there."""
    from mathscout.evaluation.training.dense_query_side import QuerySideSettings, train_query_side

    in_index = set(IndexDir(dense_index).store.doc_ids())
    folder = tmp_path_factory.mktemp("query-side")
    wanted = set()
    with (
        open(shared_data / "collection" / "qrels.train.txt", encoding="utf-8") as f,
        open(folder / "qrels.train.txt", "w", encoding="utf-8") as out,
    ):
        for line in f:
            if line.split()[2] in in_index:
                wanted.add(line.split()[0])
                out.write(line)
    with (
        open(shared_data / "collection" / "topics.train.jsonl", encoding="utf-8") as f,
        open(folder / "topics.train.jsonl", "w", encoding="utf-8") as out,
    ):
        out.writelines(line for line in f if json.loads(line)["id"] in wanted)
    settings = QuerySideSettings(epochs=4, batch=16, lr=1e-2, held_out=0)  # too few questions to hold some out
    return train_query_side(
        dense_index, folder / "topics.train.jsonl", folder / "qrels.train.txt", folder / "model", settings
    )


@pytest.mark.model
def test_query_side_training_learns_and_records_it(query_side_model):
    record = json.loads((query_side_model / "training.json").read_text())
    assert record["method"] == "query-side" and record["negatives"] == "collection" and record["pairs"] >= 50
    assert record["held_out_ndcg10"] == [] and record["best_epoch"] == 4  # nothing held out: the last epoch
    per_epoch = record["steps_per_epoch"]
    losses = record["losses"]
    assert np.mean(losses[-per_epoch:]) < np.mean(losses[:per_epoch])  # the contrastive loss falls
    assert (query_side_model / "loss.png").stat().st_size > 1000
    assert not query_side_model.with_name("model.checkpoint").exists()  # the question cache is cleaned up


@pytest.mark.model
def test_query_side_model_changes_queries_only(query_side_model, dense_index, dense_topics):
    from mathscout.dense.encoder import Encoder

    base, tuned = Encoder(None), Encoder(query_side_model)
    text = [model_input_text(dense_topics[0]["title"])]
    pieces = base.passages(base.pieces(text)[0], 1)
    assert np.allclose(base.encode_passages(pieces), tuned.encode_passages(pieces), atol=1e-6)  # documents: base
    assert not np.allclose(base.encode_queries(text).pooled, tuned.encode_queries(text).pooled, atol=1e-3)
    assert abs(np.linalg.norm(tuned.encode_queries(text).pooled) - 1) < 1e-5


@pytest.mark.model
def test_dense_ft_reuses_the_document_vectors(query_side_model, dense_index, dense_topics, monkeypatch, tmp_path):
    from mathscout.retrievers.indexing import add_components

    index = tmp_path / "index"
    shutil.copytree(dense_index, index)
    monkeypatch.setenv("MATHSCOUT_DENSE_FT_MODEL", str(query_side_model))
    manifest = add_components(index, ["dense-ft"])
    assert manifest.components["dense-ft"]["document_vectors_from"] == "dense"
    assert (index / "dense-ft" / "flat.faiss").read_bytes() == (index / "dense" / "flat.faiss").read_bytes()
    query = _query(dense_topics[0])
    base = open_retriever(IndexDir(index), "dense").search(query, k=5)
    tuned = open_retriever(IndexDir(index), "dense-ft").search(query, k=5)
    assert [h.score for h in tuned] != [h.score for h in base] and tuned[0].score >= tuned[-1].score


@pytest.mark.model
def test_the_cross_encoder_holds_out_what_dense_ft_held_out(
    query_side_model, dense_index, monkeypatch, tmp_path, capsys
):
    """dense-ft's training records the topics it held out; the cross-encoder's held-out topics are drawn from them."""
    from mathscout.errors import DamagedIndexError
    from mathscout.evaluation.training.cross_recipe import unseen_topics
    from mathscout.notices import collecting
    from mathscout.retrievers.indexing import add_components

    model, index = tmp_path / "model", tmp_path / "index"
    shutil.copytree(query_side_model, model)
    shutil.copytree(dense_index, index)
    monkeypatch.setenv("MATHSCOUT_DENSE_FT_MODEL", str(model))
    add_components(index, ["dense-ft"])
    record = json.loads((model / "training.json").read_text())
    assert record["held_out_ids"] == []  # held_out=0: nothing held out

    def recorded(**fields) -> set[str] | None:
        (model / "training.json").write_text(json.dumps({**record, **fields}))
        return unseen_topics(IndexDir(index), "dense-ft")

    assert recorded(held_out_ids=["A.301", "A.302"]) == {"A.301", "A.302"}
    assert unseen_topics(IndexDir(index), "bm25") is None  # an untrained first stage: no limit
    del record["held_out_ids"]
    with collecting() as said:
        assert recorded() is None  # a model trained before it was recorded: not known, and said
    assert len(said) == 1 and "does not record the topics it held out" in said[0]
    with pytest.raises(DamagedIndexError, match=r"held_out_ids is 'A\.301', not a list"):
        recorded(held_out_ids="A.301")


@pytest.mark.model
def test_query_side_refuses_dev_and_broken_adapters(shared_data, dense_index, query_side_model, tmp_path):
    from mathscout.dense.encoder import Encoder
    from mathscout.evaluation.training.dense_query_side import QuerySideSettings, train_query_side

    collection = shared_data / "collection"
    with pytest.raises(MathScoutError, match="train topics only"):
        train_query_side(
            dense_index,
            collection / "topics.dev.jsonl",
            collection / "qrels.dev.txt",
            tmp_path / "m",
            QuerySideSettings(),
        )
    broken = tmp_path / "broken"
    shutil.copytree(query_side_model, broken)
    (broken / "query_adapter.npz").write_bytes(b"not numpy")
    with pytest.raises(MathScoutError, match=r"query adapter .* is unreadable"):
        Encoder(broken)


@pytest.mark.model
def test_question_cache_resumes_only_the_same_job(dense_index, dense_topics, tmp_path):
    from mathscout.evaluation.training.dense_query_side import _encode_questions

    retriever = open_retriever(IndexDir(dense_index), "dense")
    first, second = [_query(t) for t in dense_topics[:2]], [_query(t) for t in dense_topics[2:4]]
    cache = tmp_path / "cache"
    encoded = _encode_questions(retriever, first, cache)
    assert np.array_equal(_encode_questions(retriever, first, cache), encoded)  # the cached chunk is reused
    assert np.allclose(_encode_questions(retriever, second, cache), retriever.encode(second), atol=1e-6)  # not stale
