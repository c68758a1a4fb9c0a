"""The cross-encoder trainer's time budget (issue 34: training ≤ 60 min on this machine): a spent budget ends the
training early with a validated, stored model instead of overrunning."""

from __future__ import annotations

import shutil

import pytest

from tests.support.training import TINY_CROSS_ENCODER

pytestmark = [pytest.mark.model, pytest.mark.slow]  # a training from the MiniLM weights (~30 s)


def test_a_spent_time_budget_ends_training_early_with_a_usable_model(small_index, cross_train_files, tmp_path, capsys):
    """`--budget-minutes 0`: the training stops after its first step (of 4), validates it and stores that model,
    recording where it stopped; the model scores passages."""
    from mathscout.dense.cross import CrossEncoderInfo, open_cross_scorer
    from mathscout.evaluation.training.cross_encoder import WORK, fitted_topics, main
    from mathscout.index.layout import IndexDir

    index = tmp_path / "small"
    shutil.copytree(small_index, index)
    topics, qrels = cross_train_files
    batch = TINY_CROSS_ENCODER.index("--batch")
    tiny = [*TINY_CROSS_ENCODER[:batch], "--batch", "2", *TINY_CROSS_ENCODER[batch + 2 :]]  # 8 topics: 4 steps
    main(
        [
            "--index",
            str(index),
            "--topics",
            str(topics),
            "--qrels",
            str(qrels),
            *tiny,
            "--backends",
            "torch",
            "--budget-minutes",
            "0",
        ]
    )
    main_output = capsys.readouterr()
    assert "training ended at step 1 of 4 to fit the 0-minute budget" in main_output.err
    training = CrossEncoderInfo.require(index).training
    assert training["stopped_early"] == {"step": 1, "of": 4, "budget_minutes": 0.0}
    assert training["steps"] == 1 and [step for step, _ in training["held_out_curve"]] == [0, 1]
    assert training["best_step"] == 1 and not (index / WORK).exists()
    # the stored checkpoint saw one batch of 2: those topics and the held-out ones are what a ranker leaves out
    assert training["counts"]["trained_on_topics"] == 2 < training["counts"]["training_questions"]
    assert fitted_topics(IndexDir(index)) == set(training["topic_ids"])
    assert len(training["topic_ids"]) == 2 + training["counts"]["held_out_topics"]
    assert len(open_cross_scorer(index).scores("What is $x^2$?", ["$x^2$ is x times x."])) == 1
