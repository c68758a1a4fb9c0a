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


def test_auto_validation_spacing_skips_the_validations_that_cost_too_much(
    small_index, cross_train_files, tmp_path, monkeypatch
):
    """`--eval-every auto` (the default): a scheduled validation runs only when `validation_due` says it costs little
    enough against the steps since the last one (here steps 1 and 3 are refused, step 2 allowed), the last step is
    always validated, and the rule is given the last validation's seconds and the steps' seconds since it."""
    from mathscout.dense.cross import CrossEncoderInfo
    from mathscout.evaluation.training import cross_encoder

    index = tmp_path / "small"
    shutil.copytree(small_index, index)
    topics, qrels = cross_train_files
    every = TINY_CROSS_ENCODER.index("--eval-every")
    batch = TINY_CROSS_ENCODER.index("--batch")
    tiny = [*TINY_CROSS_ENCODER[:batch], "--batch", "2", *TINY_CROSS_ENCODER[batch + 2 : every]]  # 4 steps, auto
    asked: list[tuple[float, float]] = []
    monkeypatch.setattr(cross_encoder, "EVAL_EVERY", 1)  # every step is scheduled; the rule decides
    monkeypatch.setattr(cross_encoder, "validation_due", lambda v, s: asked.append((v, s)) or len(asked) == 2)
    args = ["--index", str(index), "--topics", str(topics), "--qrels", str(qrels), *tiny, "--backends", "torch"]
    cross_encoder.main(args)
    training = CrossEncoderInfo.require(index).training
    assert [step for step, _ in training["held_out_curve"]] == [0, 2, 4]
    assert len(asked) == 3 and all(v > 0 and s > 0 for v, s in asked)  # steps 1, 2 and 3; not the last
    assert asked[2][1] < asked[1][1]  # one step's time at step 3 (counted again from step 2's validation), two at 2


def test_the_validation_rule_and_its_option(capsys):
    """A validation is due when it costs at most a tenth of the steps' time since the last one (40 s of validation:
    after 400 s of steps, not 100 s); `--eval-every` takes a number of steps or auto, and refuses others in one line."""
    from mathscout.evaluation.training.cross_encoder import main, spacing_text, validation_due

    assert not validation_due(40.0, 100.0) and validation_due(40.0, 400.0) and validation_due(0.5, 10.0)
    assert spacing_text(None).startswith("every 100 steps or more") and spacing_text(7) == "every 7 steps"
    for bad, why in (("0", "at least 1"), ("often", "a number of steps or auto, not 'often'")):
        with pytest.raises(SystemExit):
            main(["--index", "/nonexistent", "--eval-every", bad])
        errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
        assert len(errors) == 1 and "--eval-every" in errors[0] and why in errors[0], errors


def test_the_expected_steps_count_the_validations_and_what_the_budget_keeps(monkeypatch):
    """The expected time a training prints counts each step's share of the validations (auto: at most a tenth of the
    step, at most one validation every 100 steps; a number: one every that many steps), and the steps a budget covers
    leave out what it keeps for the last validation and the report (a 100-minute run here predicted 2,882 steps
    without them and ended at 1,853)."""
    import time

    from mathscout.evaluation.training import cross_encoder
    from mathscout.evaluation.training.cross_encoder import SAFETY, Budget, validation_seconds_per_step

    assert validation_seconds_per_step(20.0, 2.0, None, 3000) == pytest.approx(0.2)  # a tenth of the step
    assert validation_seconds_per_step(5.0, 2.0, None, 3000) == pytest.approx(0.05)  # one every 100 steps costs less
    assert validation_seconds_per_step(20.0, 2.0, 10, 3000) == pytest.approx(2.0)
    # no scheduled step before the end allows one (a validation dearer than the steps left): the last step's alone
    assert validation_seconds_per_step(300.0, 2.0, None, 250) == pytest.approx(300.0 / 250)
    assert validation_seconds_per_step(20.0, 2.0, 10, 4) == pytest.approx(5.0)  # fewer steps left than the spacing
    monkeypatch.setattr(cross_encoder, "validation_due", lambda v, s: False)  # a rule that never allows one ends too
    assert validation_seconds_per_step(20.0, 2.0, None, 100_000) == pytest.approx(20.0 / 100_000)
    budget = Budget(10.0, ends=time.time() + 600.0, validation_pairs=1000, report_pairs=2000, pair_seconds=0.02)
    kept = SAFETY * (0.02 * (2 * 1000 + 2000) + budget.export_seconds)
    assert budget.kept() == pytest.approx(kept) and not budget.spent()
    assert budget.steps_left(2.2) in (int((600.0 - kept) / 2.2) - 1, int((600.0 - kept) / 2.2))
    assert Budget(1.0, ends=time.time() + 60.0, validation_pairs=1000, report_pairs=2000, pair_seconds=0.02).spent()
    assert Budget(1.0, ends=time.time() - 1.0, validation_pairs=1, report_pairs=1).steps_left(1.0) == 0
