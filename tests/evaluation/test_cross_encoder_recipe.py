"""The cross-encoder's recipe and devices (issue 43): `--device` resolved once (auto is the CPU here, cuda refused in
one line), each recipe option recorded with the model and honoured (the group reaches the loss, frozen layers stay
as the weights it started from, the miner named is the one mined, `--init` a bi-encoder folder), a model trained on
a GPU (bf16 weights) stored fp32 and ranking alike on the CPU, and ONNX scoring from the tokenizer alone."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from mathscout.errors import MathScoutError
from tests.support.training import TINY_CROSS_ENCODER

QUESTION = "How do I prove that $\\sum_{n=1}^\\infty 1/n^2$ converges?"
PASSAGES = [
    "Compare with the telescoping series $\\sum 1/(n(n-1))$, which converges.",
    "Paris is the capital of France.",
    "The integral test: $\\int_1^\\infty x^{-2} dx = 1$ is finite, so the series converges.",
    "A group of order $p^2$ is abelian.",
]


def _cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def test_the_device_option_resolves_once_and_refuses_cuda_without_it():
    from mathscout.dense.device import resolve_device
    from mathscout.options import DEVICE

    assert DEVICE.default == "auto" and DEVICE.flag == "--device"
    assert resolve_device("cpu") == "cpu"
    if _cuda():
        assert resolve_device("auto") == resolve_device(None) == "cuda"
        return
    assert resolve_device("auto") == resolve_device(None) == "cpu"
    with pytest.raises(MathScoutError, match=r"^--device cuda: this torch has no CUDA device") as refused:
        resolve_device("cuda")
    assert "\n" not in str(refused.value)
    with pytest.raises(MathScoutError, match="unknown device 'tpu'"):
        resolve_device("tpu")


@pytest.mark.model
def test_train_cross_encoder_refuses_cuda_in_one_line(small_index, cross_train_files, capsys):
    from mathscout.cli import main

    if _cuda():
        pytest.skip("this machine has CUDA")
    topics, qrels = cross_train_files
    code = main(
        ["train", "cross-encoder", "--index", str(small_index), "--topics", str(topics), "--qrels", str(qrels)]
        + ["--device", "cuda"]
    )
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert code == 2 and len(errors) == 1 and "--device cuda" in errors[0], errors


@pytest.mark.model
def test_the_group_reaches_the_listwise_and_pointwise_losses():
    """One question, its positive and 3 negatives (+ the other question's positive in-batch): the listwise loss is the
    softmax cross-entropy of the positive's logit over all 5, the pointwise one the mean BCE over the same logits."""
    import torch

    from mathscout.dense.cross import load_cross_model
    from mathscout.dense.model import default_model_path
    from mathscout.evaluation.training.cross_recipe import group_loss

    model = load_cross_model(default_model_path(), 64, cached=False)
    model.eval()
    queries = [QUESTION, "Is every group of order $p^2$ abelian?"]
    columns = [
        [PASSAGES[0], PASSAGES[3]],
        [PASSAGES[1], PASSAGES[1]],
        [PASSAGES[2], PASSAGES[0]],
        [PASSAGES[3], PASSAGES[2]],
    ]
    with torch.no_grad():
        listwise = float(group_loss(model, "listwise", 1)([queries, *columns]))
        pointwise = float(group_loss(model, "pointwise", 1)([queries, *columns]))
        hard_only = float(group_loss(model, "listwise", 0)([queries, *columns]))
        groups = [[*(c[i] for c in columns), columns[0][1 - i]] for i in range(2)]  # + the other positive
        logits = [
            model(model.preprocess([(queries[i], text) for text in groups[i]]))["scores"].view(-1) for i in range(2)
        ]
        logits = torch.stack(logits)
    assert logits.shape == (2, 5)
    expected = torch.nn.functional.cross_entropy(logits, torch.zeros(2, dtype=torch.long))
    assert listwise == pytest.approx(float(expected), abs=1e-4)
    expected_hard = torch.nn.functional.cross_entropy(logits[:, :4], torch.zeros(2, dtype=torch.long))
    assert hard_only == pytest.approx(float(expected_hard), abs=1e-4)
    truth = torch.zeros_like(logits)
    truth[:, 0] = 1
    assert pointwise == pytest.approx(
        float(torch.nn.functional.binary_cross_entropy_with_logits(logits, truth)), abs=1e-4
    )


@pytest.mark.model
def test_freeze_layers_freezes_the_embeddings_and_the_lower_layers():
    from mathscout.dense.cross import load_cross_model
    from mathscout.dense.model import default_model_path
    from mathscout.evaluation.training.cross_recipe import freeze_layers

    model = load_cross_model(default_model_path(), 64, cached=False)
    frozen = freeze_layers(model, 2)
    base = model.model.base_model
    assert frozen == sum(p.numel() for m in (base.embeddings, *base.encoder.layer[:2]) for p in m.parameters())
    assert not any(p.requires_grad for p in base.embeddings.parameters())
    assert [all(not p.requires_grad for p in layer.parameters()) for layer in base.encoder.layer] == [
        True,
        True,
        False,
        False,
        False,
        False,
    ]
    assert all(p.requires_grad for n, p in model.model.named_parameters() if n.startswith("classifier"))
    with pytest.raises(MathScoutError, match="has 6 transformer layers"):
        freeze_layers(load_cross_model(default_model_path(), 64, cached=False), 7)


def test_a_budget_sees_the_train_topics_in_the_collections_source_mix(shared_data):
    """The train topics are 78 % MATH problems, dev's half MSE: the mixed order gives every prefix (what a budget
    that ends the pass early trains on, and the held-out topics) the sources' shares while each lasts."""
    import random
    from collections import Counter

    from mathscout.evaluation.topics import COLLECTION_MIX, in_collection_mix, load_topics, source_of

    ids = [t.id for t in load_topics(shared_data / "collection" / "topics.train.jsonl")]
    random.Random(13).shuffle(ids)
    mixed = in_collection_mix(ids)
    assert sorted(mixed) == sorted(ids)
    assert Counter(source_of(t) for t in ids[:1000])["math"] > 700  # the seeded order alone
    first = Counter(source_of(t) for t in mixed[:1000])
    assert all(abs(first[source] - 1000 * share) <= 1 for source, share in COLLECTION_MIX.items()), first
    assert [t for t in mixed if source_of(t) == "mse"] == [t for t in ids if source_of(t) == "mse"]  # each in order
    assert in_collection_mix(["A.301", "A.302", "mse:x:1"]) == ["A.301", "A.302", "mse:x:1"]  # another collection


def test_a_resumed_training_reads_its_rows_back_and_records_the_topics_its_checkpoint_saw(tmp_path):
    """The training rows are written once to the work folder (a resume read them instead of rebuilding them: 2.5
    minutes of its budget on the full index), in their order; the topics a checkpoint trained on are the first
    step × batch rows', every one past the first epoch."""
    from mathscout.evaluation.training.cross_encoder import cached_rows, topics_seen

    built = {"t3": ["q3", "$x^2$", "n1"], "t1": ["q1", "p1 \u00e9", "n2"], "t2": ["q2", "p2", "n3"]}
    calls = []
    path = tmp_path / "rows.json"
    assert cached_rows(path, lambda: calls.append(1) or built) == built
    again = cached_rows(path, lambda: calls.append(1) or {})
    assert again == built and list(again) == ["t3", "t1", "t2"] and calls == [1]
    path.write_text('{"topic": "t3", "texts": ["q3"', encoding="utf-8")  # damaged: built again
    assert cached_rows(path, lambda: calls.append(1) or built) == built and calls == [1, 1]
    assert topics_seen(list(built), batch=2, step=1) == ["t3", "t1"]
    assert topics_seen(list(built), batch=2, step=5) == ["t3", "t1", "t2"]
    assert topics_seen(list(built), batch=2, step=None) == ["t3", "t1", "t2"]


def test_the_held_out_topics_are_ones_the_first_stage_was_not_fit_on(small_index, cross_train_files):
    """Held out among the topics dense-ft held out (cross_recipe.unseen_topics), the others trained on, in the seeded
    order; without that record the choice is the one before it."""
    from mathscout.evaluation.training.cross_encoder import Settings, choose
    from mathscout.index.layout import IndexDir

    topics, qrels = cross_train_files
    index, settings = IndexDir(small_index), Settings(held_out=4)
    trained, held = choose(topics, qrels, index, settings)
    assert len(held) == 4 and not set(trained) & set(held)
    unseen = set(trained[-6:])
    trained_now, held_now = choose(topics, qrels, index, settings, unseen)
    assert len(held_now) == 4 and set(held_now) <= unseen and not set(trained_now) & set(held_now)
    assert sorted(trained_now + held_now) == sorted(trained + held)  # every usable topic still used
    assert [t for t in trained_now if t not in unseen] == [t for t in held + trained if t not in unseen]  # same order


@pytest.fixture(scope="module")
def recipe_index(small_index, cross_train_files, tmp_path_factory):
    """A tiny training with every recipe option away from its default, from a bi-encoder folder whose embeddings were
    scaled (so that starting from it, and keeping them frozen, shows in the stored weights)."""
    from safetensors.torch import load_file, save_file

    from mathscout.dense.model import default_model_path
    from mathscout.evaluation.training.cross_encoder import main

    folder = tmp_path_factory.mktemp("recipe")
    init = folder / "bi-encoder"
    shutil.copytree(default_model_path(), init)
    weights = load_file(str(init / "model.safetensors"))
    name = next(k for k in weights if k.endswith("word_embeddings.weight"))
    weights[name] = weights[name] * 1.5
    save_file(weights, str(init / "model.safetensors"), metadata={"format": "pt"})
    index = folder / "small"
    shutil.copytree(small_index, index)
    topics, qrels = cross_train_files
    group = TINY_CROSS_ENCODER.index("--group")
    tiny = [*TINY_CROSS_ENCODER[:group], *TINY_CROSS_ENCODER[group + 2 :]]
    main(
        ["--index", str(index), "--topics", str(topics), "--qrels", str(qrels), *tiny]
        + ["--group", "3", "--in-batch", "1", "--loss", "pointwise", "--negatives-from", "bm25", "--freeze-layers", "2"]
        + ["--init", str(init), "--lr", "3e-5", "--backends", "onnx-int8", "--save", str(folder / "kept")]
    )
    return index, init, folder / "kept"


@pytest.mark.model
@pytest.mark.slow
def test_each_recipe_option_is_recorded_and_honoured(recipe_index):
    from safetensors.torch import load_file

    from mathscout.dense.cross import CrossEncoderInfo
    from mathscout.evaluation.training.cross_encoder import Settings

    index, init, kept = recipe_index
    info = CrossEncoderInfo.require(index)
    training = info.training
    settings = Settings.recorded(training)
    assert (settings.group, settings.in_batch, settings.loss, settings.negatives_from) == (3, 1, "pointwise", "bm25")
    assert (settings.freeze_layers, settings.init, settings.lr, settings.batch) == (2, str(init), 3e-5, 4)
    assert settings.train_topics == 8 and training["base"] == str(init) and training["devices"] == ["cpu"]
    counts = training["counts"]
    assert counts["mined_from"] == ["bm25"] and counts["validated_on"] == "bm25"  # the small index's strongest
    assert set(counts["held_out_from"]) == {"bm25", "structure"}
    assert training["loss"].startswith("pointwise binary cross-entropy over the same pairs: 1 positive + 3 hard")
    assert training["pairs_per_step"] == 4 * (1 + 3 + 1) and training["pairs_seen"] == training["steps"] * 20
    assert training["ms_per_pair"] > 0 and training["training_minutes"] >= 0 and training["frozen_parameters"] > 0
    # frozen: the embeddings (scaled in the init folder) and layers 0-1 are the init's; the top layer was trained
    start = load_file(str(init / "model.safetensors"))
    stored = load_file(str(index / "cross-encoder" / "model" / "model.safetensors"))
    assert all(t.dtype.is_floating_point and str(t.dtype) == "torch.float32" for t in stored.values())

    def weight(weights, suffix):
        return next(v for k, v in weights.items() if k.endswith(suffix))

    for frozen in ("word_embeddings.weight", "layer.0.attention.self.query.weight", "layer.1.output.dense.weight"):
        assert np.array_equal(weight(start, frozen).numpy(), weight(stored, frozen).numpy()), frozen
    assert not np.array_equal(
        weight(start, "layer.5.output.dense.weight").numpy(), weight(stored, "layer.5.output.dense.weight").numpy()
    )
    # the weight tuned per first stage; the stored one is the validation stage's
    fused = training["held_out"]["interpolation"]
    assert (
        fused["stage"] == "bm25" and set(info.weights) == {"bm25", "structure"} and info.weight == info.weights["bm25"]
    )
    assert json.loads((kept / "cross-encoder.json").read_text(encoding="utf-8"))["files"] == info.files


@pytest.mark.model
@pytest.mark.slow
def test_the_reranker_interpolates_with_the_weight_of_its_first_stage(recipe_index):
    from mathscout.dense.cross import CrossEncoderInfo, measured_gain
    from mathscout.index.layout import IndexDir
    from mathscout.retrievers.registry import open_retriever
    from mathscout.retrievers.rerank import CrossEncoderReranker

    index_path, _, _ = recipe_index
    copy = index_path.parent / "weights"
    shutil.copytree(index_path, copy)
    info = CrossEncoderInfo.require(copy)
    info.weights = {"bm25": 0.25, "structure": 0.75}
    info.write(copy)
    index = IndexDir(copy)
    reranker = CrossEncoderReranker(index, index.store)
    bm25 = open_retriever(index, "bm25").search(QUESTION, k=5)
    assert reranker.weight_for(bm25) == 0.25
    assert reranker.weight_for([*bm25[:2], *open_retriever(index, "structure").search(QUESTION, k=2)]) == info.weight
    assert CrossEncoderReranker(index, index.store, weight=1.0).weight_for(bm25) == 1.0
    held = info.training["held_out"]
    gain = held["interpolation"]["grid"]["0.25"]["bm25"] > held["first_stage"]["bm25"]
    assert measured_gain(info, "bm25") is gain


@pytest.mark.model
@pytest.mark.slow
def test_a_model_trained_on_a_gpu_is_stored_fp32_and_ranks_alike_on_the_cpu(cross_index, tmp_path):
    """GPU training runs bf16 autocast; simulated here by bf16 weights, a `cuda` device recorded, then `save_fp32`:
    the stored weights are fp32 safetensors, they load on the CPU and order passages as the fp32 model does."""
    import torch
    from safetensors.torch import load_file

    from mathscout.dense.cross import INFO_FILE, MODEL_DIR, CrossEncoderInfo, load_cross_model, open_cross_scorer
    from mathscout.evaluation.training.cross_encoder import save_fp32
    from mathscout.index.integrity import record_folder

    copy = tmp_path / "gpu"
    shutil.copytree(cross_index, copy)
    info = CrossEncoderInfo.require(copy)
    model = load_cross_model(copy / "cross-encoder" / MODEL_DIR, info.max_length, cached=False)
    model.model.to(torch.bfloat16)
    save_fp32(model, copy / "cross-encoder" / MODEL_DIR)
    stored = load_file(str(copy / "cross-encoder" / MODEL_DIR / "model.safetensors"))
    assert {str(t.dtype) for t in stored.values()} == {"torch.float32"}
    info.training["devices"] = ["cuda"]
    for name in list(info.files):
        if name.endswith(".onnx"):
            (copy / "cross-encoder" / name).unlink()
    info.backend = "torch"
    info.files = {k: v for k, v in record_folder(copy / "cross-encoder").items() if k != INFO_FILE}
    info.write(copy)
    before = open_cross_scorer(cross_index, "torch", "cpu").scores(QUESTION, PASSAGES)
    after = open_cross_scorer(copy, device="cpu").scores(QUESTION, PASSAGES)
    assert open_cross_scorer(copy, device="cpu").device == "cpu"
    assert np.argsort(-before).tolist() == np.argsort(-after).tolist()
    assert np.allclose(before, after, atol=0.05)


@pytest.mark.model
@pytest.mark.slow
def test_onnx_scores_from_the_tokenizer_alone_equal_the_model_preprocessing(cross_index):
    from mathscout.dense.cross import CrossScorer, load_cross_model, open_cross_scorer

    scorer = open_cross_scorer(cross_index, "onnx-int8")
    assert scorer.model is None and scorer.tokenizer is not None  # no torch model loaded for ONNX
    model = load_cross_model(scorer.model_dir, scorer.max_length)
    long = PASSAGES[2] + " more words" * 200  # cut to the trained length, the longer side first
    texts = [*PASSAGES, long]
    from mathscout.dense.model import model_input_text

    query = model_input_text(QUESTION)
    rendered = [model_input_text(t) for t in texts]
    reference = CrossScorer._pairs_alone(scorer.session, model.preprocess([(query, t) for t in rendered]))
    assert scorer.scores(QUESTION, texts).tolist() == reference.tolist()


@pytest.mark.gpu
@pytest.mark.model
@pytest.mark.slow
def test_the_tiny_training_runs_on_cuda(small_index, cross_train_files, tmp_path):
    """The CUDA path: the tiny training with --device cuda (bf16), stored fp32 and scoring on the CPU."""
    if not _cuda():
        pytest.skip("no CUDA device")
    from mathscout.dense.cross import CrossEncoderInfo, open_cross_scorer
    from mathscout.evaluation.training.cross_encoder import main

    index = tmp_path / "small"
    shutil.copytree(small_index, index)
    topics, qrels = cross_train_files
    main(
        ["--index", str(index), "--topics", str(topics), "--qrels", str(qrels), *TINY_CROSS_ENCODER, "--device", "cuda"]
    )
    training = CrossEncoderInfo.require(index).training
    assert training["devices"] == ["cuda"] and training["settings"]["batch"] == 4
    assert len(open_cross_scorer(index, "torch", "cpu").scores(QUESTION, PASSAGES)) == len(PASSAGES)
    assert len(open_cross_scorer(index, device="cuda").scores(QUESTION, PASSAGES)) == len(PASSAGES)


@pytest.mark.parametrize("command", [["train", "dense"], ["train", "colbert"], ["train", "cross-encoder"], ["index"]])
def test_every_neural_step_offers_the_device(command, capsys):
    """`--device auto|cpu|cuda` on each command that runs a neural model (issue 43), spelled as the option table says."""
    from mathscout.cli import main

    with pytest.raises(SystemExit):
        main([*command, "--help"])
    shown = capsys.readouterr().out
    assert "--device {auto,cpu,cuda}" in shown, shown


@pytest.mark.gpu
def test_the_query_and_token_adapters_train_on_cuda():
    """The query-side adapter (train dense) and the colbert MaxSim step run on CUDA and come back to the CPU."""
    if not _cuda():
        pytest.skip("no CUDA device")
    import numpy as np
    import torch

    from mathscout.evaluation.training.colbert import maxsim_logits
    from mathscout.evaluation.training.dense_query_side import PassageScorer, QuerySideSettings, TrainingData, fit

    rng = np.random.default_rng(0)
    passages = rng.normal(size=(700, 16)).astype(np.float32)
    owner = np.concatenate([np.arange(500), rng.integers(0, 500, 200)])
    questions = rng.normal(size=(300, 16)).astype(np.float32)
    data = TrainingData(
        [str(i) for i in range(300)], questions, [{i % 500: 2} for i in range(300)], [(i, i % 500) for i in range(300)]
    )
    settings = QuerySideSettings(epochs=1, batch=32, held_out=50, device="cuda")
    matrix, record = fit(data, PassageScorer(passages, owner, 500, "cuda"), settings)
    assert isinstance(matrix, np.ndarray) and matrix.shape == (16, 16) and record["steps_per_epoch"] > 0
    queries = [torch.randn(3, 8, device="cuda"), torch.randn(5, 8, device="cuda")]
    logits = maxsim_logits(queries, torch.randn(7, 8, device="cuda"), torch.tensor([0, 0, 1, 1, 1, 2, 2]).cuda(), 10.0)
    assert logits.shape == (2, 3) and logits.device.type == "cuda"
