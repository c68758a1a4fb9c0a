"""The cross-encoder (issue 34): `mathscout train cross-encoder` on the small index (a few steps, stopped and resumed),
stored with the index and read back offline; `--rerank cross` reorders hits; an index without one says what to run."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from mathscout.errors import DamagedIndexError, IndexMissingError, MathScoutError
from tests.support.training import CROSS_HELD_OUT as HELD_OUT
from tests.support.training import CROSS_MAX_LENGTH
from tests.support.training import CROSS_TRAIN_TOPICS as TRAIN_TOPICS

# the fixture `cross_index` (tests/conftest.py) is trained from the MiniLM weights (~50 s, once; the missing-model
# checks ride along)
pytestmark = [pytest.mark.model, pytest.mark.slow]


def test_training_stores_a_model_that_loads_offline(cross_index, monkeypatch):
    from mathscout.dense.cross import BACKENDS, CrossEncoderInfo, open_cross_scorer

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    info = CrossEncoderInfo.require(cross_index)
    training = info.training
    assert info.backend in BACKENDS and info.max_length == CROSS_MAX_LENGTH
    assert training["counts"]["training_topics"] == TRAIN_TOPICS and training["counts"]["held_out_topics"] == HELD_OUT
    assert set(training["counts"]["mined_from"]) == {"bm25", "structure"}
    assert len(training["index_build"]) == 16 and training["settings"]["epochs"] == 1
    held = training["held_out"]
    assert set(held["first_stage"]) == set(held["reranked"]) == {"bm25", "structure"}
    assert set(held["backends"]) == set(BACKENDS)
    assert held["backends"]["torch"]["kendall_tau"] == 1.0 and held["chosen"] == info.backend
    assert training["seconds"]["training"] > 0 and training["losses"] and training["steps"] == 2
    assert [step for step, _ in training["held_out_curve"]] == [0, 1, 2] and training["best_step"] in (1, 2)
    scorer = open_cross_scorer(cross_index)
    first, second = scorer.scores("What is $x^2$?", ["$x^2$ is x times x.", "Paris is in France."])
    assert first != second
    torch_scores = open_cross_scorer(cross_index, "torch").scores("What is $x^2$?", ["$x^2$ is x times x."])
    assert len(torch_scores) == 1


def test_measure_backends_remeasures_the_stored_model_without_training(cross_index, tmp_path):
    """`--measure-backends`: the same model (its weights and held-out torch scores unchanged) measured again on its
    held-out topics, the chosen backend stored and recorded; a training under way is not overwritten."""
    from mathscout.dense.cross import CrossEncoderInfo
    from mathscout.evaluation.training.cross_encoder import WORK, main

    copy = tmp_path / "idx"
    shutil.copytree(cross_index, copy)
    before = CrossEncoderInfo.require(copy)
    main(["--index", str(copy), "--measure-backends", "--backends", "onnx-int8"])
    after = CrossEncoderInfo.require(copy)
    assert after.training["remeasured"]["seconds"] > 0 and not (copy / WORK).exists()
    held_before, held_after = before.training["held_out"], after.training["held_out"]
    assert set(held_after["backends"]) == {"torch", "onnx-int8"} and held_after["chosen"] == after.backend
    assert held_after["reranked"] == held_before["reranked"] and after.weight == before.weight
    weights = [name for name in before.files if name.startswith("model/")]
    assert {n: after.files[n] for n in weights} == {n: before.files[n] for n in weights}
    assert after.training["topic_ids"] == before.training["topic_ids"]
    (copy / WORK).mkdir()
    with pytest.raises(MathScoutError, match="training is under way"):
        main(["--index", str(copy), "--measure-backends"])


def test_the_int8_graph_keeps_the_embedding_tables_fp32(cross_index):
    """int8 quantises the linear layers' MatMuls only: every embedding lookup reads a float table."""
    import onnx

    from mathscout.dense.cross import MODEL_DIR, onnx_graph
    from mathscout.dense.encoder import onnx_file

    model = cross_index / "cross-encoder" / MODEL_DIR
    graph = onnx.load(str(onnx_file(model, True, onnx_graph(model, CROSS_MAX_LENGTH))))
    floats = {t.name for t in graph.graph.initializer if t.data_type == onnx.TensorProto.FLOAT}
    gathers = [n for n in graph.graph.node if n.op_type == "Gather" and n.name.endswith("_embeddings/Gather")]
    assert gathers and all(n.input[0] in floats for n in gathers)
    assert any(n.op_type in ("MatMulInteger", "DynamicQuantizeMatMul") for n in graph.graph.node)


def test_an_int8_logit_does_not_depend_on_the_hits_beside_it(cross_index):
    from mathscout.dense.cross import open_cross_scorer

    scorer = open_cross_scorer(cross_index, "onnx-int8")
    question = "Why is $\\sum 1/n^2 = \\pi^2/6$?"
    passages = ["Use Parseval on $f(x)=x$.", "Paris is in France.", "By Euler's product for $\\sin x / x$ ... " * 20]
    together = scorer.scores(question, passages)
    alone = [scorer.scores(question, [p])[0] for p in passages]
    assert together.tolist() == alone


def test_a_damaged_model_file_is_one_line(cross_index, tmp_path):
    from mathscout.dense.cross import CrossEncoderInfo

    copy = tmp_path / "idx"
    shutil.copytree(cross_index, copy)
    config = copy / "cross-encoder" / "model" / "config.json"
    config.write_text(config.read_text(encoding="utf-8").replace("{", "{ ", 1), encoding="utf-8")
    with pytest.raises(DamagedIndexError, match="train cross-encoder"):
        CrossEncoderInfo.require(copy)


def test_a_missing_model_says_what_to_run(small_index):
    from mathscout.dense.cross import open_cross_scorer

    with pytest.raises(IndexMissingError, match=r"no trained cross-encoder: run mathscout train cross-encoder --index"):
        open_cross_scorer(small_index)


QUESTION = "How do I prove that $\\sum_{n=1}^\\infty 1/n^2$ converges?"
DEPTH = 5


def _reranked(hits: list[dict], first: list[str]) -> list[str]:
    """The ids of hits that the cross-encoder reranked: the top DEPTH are a reordering of the first stage's."""
    ids = [h["doc_id"] for h in hits]
    assert sorted(ids[:DEPTH]) == sorted(first[:DEPTH]) and all("rerank" in h["components"] for h in hits[:DEPTH])
    return ids


def test_rerank_cross_reorders_hits_on_every_entry_point(cross_index, capsys):
    """`--rerank cross` through the option table: the Python API, the command line, the HTTP API and a run."""
    from fastapi.testclient import TestClient

    from mathscout import MathScout
    from mathscout.cli import main
    from mathscout.ui.chat import AssistantPool
    from mathscout.ui.http_api import create_api
    from mathscout.ui.indexes import discover_indexes

    scout = MathScout(cross_index, use_llm=False)
    first = [h.doc_id for h in scout.search(QUESTION, mode="bm25", k=20)]
    python = _reranked(
        [
            {"doc_id": h.doc_id, "components": h.components}
            for h in scout.search(QUESTION, mode="bm25", k=20, rerank="cross", rerank_depth=DEPTH)
        ],
        first,
    )
    assert python[DEPTH:] == first[DEPTH:]
    assert (
        main(
            [
                "search",
                "--local",
                "--index",
                str(cross_index),
                "--mode",
                "bm25",
                "--k",
                "20",
                "--rerank",
                "cross",
                "--rerank-depth",
                str(DEPTH),
                "--json",
                QUESTION,
            ]
        )
        == 0
    )
    assert _reranked(json.loads(capsys.readouterr().out)["hits"], first) == python
    client = TestClient(create_api(AssistantPool(discover_indexes([cross_index]))))
    response = client.get(
        "/api/search", params={"q": QUESTION, "mode": "bm25", "k": 20, "rerank": "cross", "rerank_depth": DEPTH}
    )
    assert response.status_code == 200, response.text
    assert _reranked(response.json()["hits"], first) == python


def test_the_cross_encoder_has_an_opinion_and_its_weight_fuses_it(cross_index):
    """Alone (weight 1) the model reorders BM25's top hits; the stored weight was tuned on the held-out topics and
    weight 0 keeps the first stage's order."""
    from mathscout.dense.cross import CrossEncoderInfo, interpolate
    from mathscout.index.layout import IndexDir
    from mathscout.retrievers.registry import open_retriever
    from mathscout.retrievers.rerank import CrossEncoderReranker

    info = CrossEncoderInfo.require(cross_index)
    fused = info.training["held_out"]["interpolation"]
    assert 0.0 <= info.weight <= 1.0 and fused["weight"] == info.weight and len(fused["grid"]) == 21
    index = IndexDir(cross_index)
    bm25 = open_retriever(index, "bm25")
    alone = CrossEncoderReranker(index, index.store, weight=1.0)
    kept = CrossEncoderReranker(index, index.store, weight=0.0)
    orders = []
    for question in (QUESTION, "Why is $e^{i\\pi} = -1$?", "integral of $x^2$ from 0 to 1", "infinitely many primes"):
        hits = bm25.search(question, k=DEPTH)
        assert [h.doc_id for h in kept.rerank(question, hits)] == [h.doc_id for h in hits]
        orders.append([h.doc_id for h in alone.rerank(question, hits)] != [h.doc_id for h in hits])
    assert any(orders)
    assert info.scale == "probability"  # what this version tunes the weights on
    assert interpolate([3.0, 1.0, 2.0], [0.0, 0.0, 0.0], 0.5, "logit").tolist() == pytest.approx(
        [0.5 * 1.5**0.5, -0.5 * 1.5**0.5, 0.0]
    )


def test_on_the_probability_scale_the_first_stage_orders_the_hits_the_cross_encoder_is_sure_of():
    """Two hits the cross-encoder is sure of (logits 6 and 9: probabilities 0.998 and 0.9999) are ordered by the first
    stage at weight 0.5; on the logit scale the long upper tail lets the larger logit win. Weight 1 is the logits."""
    from mathscout.dense.cross import interpolate

    first, logits = [1.0, 0.9, 0.5, 0.1], [6.0, 9.0, -2.0, -3.0]
    on_probability = interpolate(logits, first, 0.5)
    on_logit = interpolate(logits, first, 0.5, "logit")
    assert on_probability[0] > on_probability[1] > on_probability[2] > on_probability[3]
    assert on_logit[1] > on_logit[0]
    assert interpolate(logits, first, 1.0).tolist() == logits
    assert np.isfinite(interpolate([800.0, -800.0, 0.0], [1.0, 2.0, 3.0], 0.5)).all()  # no overflow


def test_run_reranks_with_the_cross_encoder(cross_index, dev_subset, tmp_path):
    from mathscout.evaluation.runner import run_topics
    from mathscout.evaluation.runs import read_run
    from mathscout.index.layout import IndexDir

    topics, _ = dev_subset
    three = tmp_path / "topics.jsonl"
    three.write_text("".join(topics.read_text(encoding="utf-8").splitlines(keepends=True)[:3]), encoding="utf-8")
    first, second = tmp_path / "bm25.trec", tmp_path / "bm25.cross.trec"
    run_topics(IndexDir(cross_index), three, "bm25", 20, first)
    run_topics(IndexDir(cross_index), three, "bm25", 20, second, rerank="cross", rerank_depth=DEPTH)
    before, after = read_run(first).topics, read_run(second).topics
    for qid in before:
        ids_before, ids_after = [e.doc_id for e in before[qid]], [e.doc_id for e in after[qid]]
        assert set(ids_after[:DEPTH]) == set(ids_before[:DEPTH]) and ids_after[DEPTH:] == ids_before[DEPTH:]


def test_rerank_cross_without_a_model_is_one_line(small_index, capsys):
    from mathscout.cli import main

    assert main(["search", "--local", "--index", str(small_index), "--mode", "bm25", "--rerank", "cross", "x^2"]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(errors) == 1 and errors[0].endswith(
        f"no trained cross-encoder: run mathscout train cross-encoder --index {small_index}"
    ), errors


def test_the_assistant_reranks_with_the_cross_encoder_where_its_training_measured_a_gain(
    cross_index, small_index, tmp_path
):
    """`auto` plans the index's cross-encoder over its top hits when the training measured a gain over the text search
    (bm25 here), not otherwise; `--rerank auto` offline means the cross-encoder; an index without one plans none."""
    from mathscout.agent.assistant import Assistant
    from mathscout.dense.cross import CROSS_DEPTH, CrossEncoderInfo

    def plan_and_answer(index):
        events = list(Assistant(index, use_llm=False).stream(QUESTION, k=5))
        return next(e.text for e in events if e.kind == "plan"), events[-1].answer

    step = f"rerank the top {CROSS_DEPTH} with the index's cross-encoder"
    copy = tmp_path / "measured"
    shutil.copytree(cross_index, copy)
    info = CrossEncoderInfo.require(copy)
    for gain, planned in ((0.05, True), (-0.05, False)):
        held_out = info.training["held_out"]
        held_out["interpolation"]["grid"]["0.50"]["bm25"] = held_out["first_stage"]["bm25"] + gain
        info.weight, info.weights = 0.5, {"bm25": 0.5}  # measured at the weight stored for bm25
        info.write(copy)
        assert Assistant(copy, use_llm=False).toolbox.local_reranker() == "cross"
        plan, answer = plan_and_answer(copy)
        reranks = [call for call in answer.trace if call.tool == "rerank"]
        assert (step in plan) is planned and len(reranks) == int(planned), (plan, reranks)
        if planned:
            assert reranks[0].summary.startswith("cross:") and all("rerank" in h.components for h in answer.hits)
    assert Assistant(small_index, use_llm=False).toolbox.local_reranker() == "embedding"
    plan, plain = plan_and_answer(small_index)
    assert "cross-encoder" not in plan and not [c for c in plain.trace if c.tool == "rerank"]


@pytest.fixture(scope="module")
def cross_ranker(cross_index, cross_train_files, tmp_path_factory):
    """A learned ranker trained over the copy with the cross-encoder (its `cross.*` features read the top 30)."""
    from mathscout.evaluation.ranker_training import main

    folder = tmp_path_factory.mktemp("cross-ranker")
    topics, qrels = cross_train_files
    common = ["--index", str(cross_index), "--topics", str(topics), "--qrels", str(qrels), "--sample", "0"]
    main([*common, "--folds", "2", "--rounds", "20", "--save", str(folder / "with")])
    main([*common, "--folds", "2", "--rounds", "20", "--cross-depth", "0", "--save", str(folder / "without")])
    return folder


def test_the_ranker_reads_the_cross_encoder_as_features(cross_index, cross_ranker):
    from mathscout.dense.cross import CROSS_DEPTH
    from mathscout.index.layout import IndexDir
    from mathscout.retrievers.candidates import CandidateGenerator, cross_order
    from mathscout.retrievers.features import feature_names
    from mathscout.retrievers.ranked import RankedRetriever, RankerConfig
    from mathscout.types import Query

    config = RankerConfig.read(cross_ranker / "with")
    assert config.cross_depth == CROSS_DEPTH
    assert config.features == feature_names(config.retrievers, cross=True) and config.features[-5:] == [
        "cross.score",
        "cross.rank",
        "cross.score_max",
        "cross.zscore",
        "cross.found",
    ]
    # the topics the stored checkpoint trained on and the tuning ones are left out of the ranker's (its logits there
    # are fitted)
    from mathscout.dense.cross import CrossEncoderInfo

    counts = CrossEncoderInfo.require(cross_index).training["counts"]
    fitted = counts["trained_on_topics"] + counts["held_out_topics"]
    assert HELD_OUT < fitted <= TRAIN_TOPICS + HELD_OUT
    assert config.training["left_out"]["cross-encoder"] == fitted
    without = RankerConfig.read(cross_ranker / "without")
    assert without.training["left_out"]["cross-encoder"] == 0
    assert config.training["topics"] + fitted == without.training["topics"]
    assert RankerConfig.read(cross_ranker / "without").cross_depth == 0
    assert not any(f.startswith("cross.") for f in RankerConfig.read(cross_ranker / "without").features)
    index = IndexDir(cross_index)
    ranked = RankedRetriever(index, cross_ranker / "with")
    generator = CandidateGenerator(index, tuple(config.retrievers), config.depth, CROSS_DEPTH)
    candidates = generator.generate(Query(id="q", text=QUESTION))
    read = [h.doc_id for h in candidates.cross or []]
    assert len(read) == min(CROSS_DEPTH, len(candidates.docs)) and set(read) == set(cross_order(candidates, 30))
    docs, matrix = ranked.ranker.features(candidates, index.store)
    found = matrix[:, config.features.index("cross.found")]
    assert {d for d, f in zip(docs, found) if f == 1.0} == set(read)  # scored: exactly the consensus top 30
    hits = ranked.search(QUESTION, k=10)
    assert len(hits) == 10 and "cross" in ranked.timings


def test_a_ranker_with_no_topic_left_beside_the_cross_encoders_says_so(cross_index, cross_train_files, tmp_path):
    """Topics the cross-encoder was fitted on cannot train a ranker over its logits: when those are all the topics
    given, one line says why and what to do."""
    from mathscout.dense.cross import CrossEncoderInfo
    from mathscout.evaluation.ranker_training import main

    topics, qrels = cross_train_files
    fitted = set(CrossEncoderInfo.require(cross_index).training["topic_ids"])
    only_fitted = tmp_path / "fitted.jsonl"
    only_fitted.write_text(
        "".join(
            line + "\n" for line in topics.read_text(encoding="utf-8").splitlines() if json.loads(line)["id"] in fitted
        ),
        encoding="utf-8",
    )
    with pytest.raises(
        MathScoutError, match=r"no topic of .* is left to train the ranker on: the cross-encoder of .* was"
    ):
        main(["--index", str(cross_index), "--topics", str(only_fitted), "--qrels", str(qrels), "--sample", "0"])


def test_a_ranker_that_reads_the_cross_encoder_needs_it(cross_index, cross_ranker, tmp_path):
    import shutil as sh

    from mathscout.index.layout import IndexDir
    from mathscout.retrievers.ranked import RankedRetriever

    copy = tmp_path / "no-cross"
    sh.copytree(cross_index, copy)
    sh.rmtree(copy / "cross-encoder")
    with pytest.raises(IndexMissingError, match="the ranker reads the index's cross-encoder"):
        RankedRetriever(IndexDir(copy), cross_ranker / "with")


def test_the_curve_tool_orders_candidates_by_grade_and_by_the_cross_encoder(cross_index, cross_train_files):
    """`mathscout.evaluation.ranker_curve`'s orderings: the oracles sort by judged grade (the top N only, or every
    candidate), the cross-encoder's by its logits over the fused top N, the rest staying in fused order."""
    from mathscout.evaluation.measures import read_qrels
    from mathscout.evaluation.ranker_curve import orderings
    from mathscout.evaluation.topics import load_topics
    from mathscout.index.layout import IndexDir
    from mathscout.retrievers.candidates import CandidateGenerator

    topics_path, qrels_path = cross_train_files
    qrels = read_qrels(qrels_path)
    generator = CandidateGenerator(IndexDir(cross_index), ("bm25", "structure"), 20, DEPTH)
    orders = orderings(qrels, DEPTH)
    for topic in load_topics(topics_path)[:3]:
        found = generator.generate(topic)
        ids = {name: [doc for doc, _ in order(found)] for name, order in orders.items()}
        fused = ids["rrf"]
        grades = [max(qrels[topic.id].get(d, 0), 0) for d in ids["oracle"]]
        assert grades == sorted(grades, reverse=True) and sorted(ids["oracle"]) == sorted(fused)
        for name in (f"oracle@{DEPTH}", f"cross@{DEPTH}"):
            assert ids[name][DEPTH:] == fused[DEPTH:] and set(ids[name][:DEPTH]) == set(fused[:DEPTH])
        logits = {h.doc_id: h.score for h in found.cross or []}
        head = [logits[d] for d in ids[f"cross@{DEPTH}"][:DEPTH]]
        assert head == sorted(head, reverse=True)
