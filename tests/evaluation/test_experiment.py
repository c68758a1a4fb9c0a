"""`Experiment` (pipelines, topics, qrels, measures in; a table out) against `mathscout eval` on the same runs; the
multiple-testing corrections; which topics a mean is over (`--topics`, `over=`) and the warning when most judged
topics are missing from a run; `train fusion` on such runs."""

from __future__ import annotations

import itertools
import json
import random

import pytest

from mathscout import Experiment
from mathscout.errors import MathScoutError
from mathscout.evaluation.measures import evaluate_run, read_qrels
from mathscout.evaluation.runs import write_run
from mathscout.evaluation.significance import correct
from mathscout.evaluation.topics import load_topics
from mathscout.retrievers import open_retriever
from mathscout.types import Hit
from tests.support.cli import run_cli
from tests.support.paths import REPO

README_HEADING = "#### Comparing pipelines"


def readme_example() -> tuple[str, str]:
    """The README's Experiment example: its ```python block and the ```text block of what it prints."""
    section = (REPO / "README.md").read_text(encoding="utf-8").split(README_HEADING, 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    shown = section.split("```text\n", 1)[1].split("```", 1)[0]
    return code, shown


@pytest.mark.slow  # searches the 60 topics three times (~25 s alone, 2 min at load 5)
def test_the_readme_experiment_equals_mathscout_eval_on_the_same_runs(small_index, dev_subset, tmp_path, capsys):
    topics, qrels = dev_subset
    code, shown = readme_example()
    bm25, structure = open_retriever(small_index, "bm25"), open_retriever(small_index, "structure")
    namespace = {"bm25": bm25, "structure": structure, "TOPICS": topics, "QRELS": qrels}
    exec(compile(code, "README.md Experiment block", "exec"), namespace)  # the README's own code
    assert capsys.readouterr().out.split() == shown.split()  # the table the README shows
    result = namespace["result"]
    assert result.correction == "holm" and result.baseline == "bm25" and result.topics == 60 and not result.warnings

    paths = result.write_runs(tmp_path / "runs")
    done = run_cli(["eval", "--run", *map(str, paths.values()), "--qrels", str(qrels), "--json"], tmp_path / "home")
    assert done.returncode == 0, done.stderr[-2000:]
    cli = json.loads(done.stdout)
    assert cli["correction"] == "holm" and cli["measures"] == ["nDCG@10", "RR@10", "R@100", "MAP"]
    measures = result.measures
    assert measures == ["nDCG@10", "RR@10", "R@100"]
    for row, run in zip(result.table, cli["runs"], strict=True):
        assert row.means == {m: run["summary"][m] for m in measures}  # the same figures, to the last digit
        if not row.baseline:
            assert row.p_values == {m: run["p_values"][m] for m in measures}
            assert row.corrected == {m: run["p_corrected"][m] for m in measures}
            assert row.significant == {m: run["significant"][m] for m in measures}
    baseline, *tested = result.table
    assert baseline.baseline and baseline.p_values == {} and baseline.corrected == {} and not baseline.deltas
    for m in measures:
        raw = [row.p_values[m] for row in tested]
        fixed = [row.corrected[m] for row in tested]
        assert all(c >= p for p, c in zip(raw, fixed))  # a correction never lowers a p-value
        by_raw = sorted(zip(raw, fixed))
        assert all(a[1] <= b[1] for a, b in itertools.pairwise(by_raw))  # Holm keeps the order of the raw p-values
        assert fixed == correct(raw, "holm")
        for row in tested:
            assert row.deltas[m] == pytest.approx(row.means[m] - baseline.means[m])
    assert set(result.per_topic) == {"bm25", "structure", "bm25 top 20"} and len(result.per_topic["bm25"]) == 60
    means = result.row("structure").means
    assert means["nDCG@10"] == pytest.approx(sum(t["nDCG@10"] for t in result.per_topic["structure"].values()) / 60)

    # chosen measures, another baseline, no correction: the runs in memory, nothing searched again
    again = Experiment(
        result.runs, None, read_qrels(qrels), ["nDCG@10", "R@100"], baseline="structure", correction="none"
    )
    assert again.row("bm25").means == {m: result.row("bm25").means[m] for m in ("nDCG@10", "R@100")}
    assert again.row("structure").means["R@100"] == cli["runs"][1]["summary"]["R@100"]
    assert again.row("structure").baseline and again.row("bm25").corrected == again.row("bm25").p_values
    text, markdown = str(again), again.to_markdown()
    assert "structure (baseline)" in text and "paired t-test against structure" in text
    assert markdown.startswith("| pipeline | nDCG@10 | Δ | p (none) | R@100 |")
    assert json.loads(json.dumps(again.to_dict()))["table"][0]["name"] == "bm25"


def test_evaluate_run_takes_runs_and_qrels_in_memory(dev_subset, tmp_path):
    _, qrels = dev_subset
    judged = read_qrels(qrels)
    run = _noisy_run(judged, list(judged)[:20], noise=3.0, seed=1)
    write_run(run, tmp_path / "run.trec", tag="noisy")
    from_files = evaluate_run(tmp_path / "run.trec", qrels)
    in_memory = evaluate_run(run, judged)
    scores = evaluate_run({q: {h.doc_id: h.score for h in hits} for q, hits in run.items()}, judged)
    assert from_files.per_topic == in_memory.per_topic == scores.per_topic
    assert from_files.summary == in_memory.summary and in_memory.qrels == "qrels"


def test_corrections_by_hand():
    p = [0.01, 0.04, 0.03, None]
    assert correct(p, "none") == p
    assert correct(p, "bonferroni") == pytest.approx([0.03, 0.12, 0.09, None])
    # Holm: 0.01·3 = 0.03, 0.03·2 = 0.06, 0.04·1 = 0.04 → 0.06 (never below the step before)
    assert correct(p, "holm") == pytest.approx([0.03, 0.06, 0.06, None])
    assert correct([0.5, 0.9], "bonferroni") == [1.0, 1.0]
    with pytest.raises(MathScoutError, match="unknown correction 'fdr'"):
        correct(p, "fdr")


def test_experiment_refuses_what_it_cannot_use(dev_subset, small_index):
    _, qrels = dev_subset
    judged = read_qrels(qrels)
    run = _noisy_run(judged, list(judged), noise=1.0, seed=2)
    with pytest.raises(MathScoutError, match="retrievers need topics"):
        Experiment([open_retriever(small_index, "bm25")], None, qrels)
    with pytest.raises(MathScoutError, match="unknown measure 'nDCG@ten'"):
        Experiment([run], None, qrels, ["nDCG@ten"])
    with pytest.raises(MathScoutError, match="the baseline 'bm25' is not a pipeline"):
        Experiment({"a": run, "b": run}, None, qrels, baseline="bm25")
    with pytest.raises(MathScoutError, match="is a int"):
        Experiment({"a": 3}, None, qrels)


# --- which topics a mean is over --------------------------------------------------------------------------------


def test_eval_warns_when_most_judged_topics_are_missing_and_topics_run_averages_over_the_run(dev_subset, tmp_path):
    topics, qrels = dev_subset
    judged = read_qrels(qrels)
    answered = list(judged)[:10]
    write_run(_noisy_run(judged, answered, noise=2.0, seed=3), tmp_path / "ten.trec", tag="ten")
    args = ["eval", "--run", str(tmp_path / "ten.trec"), "--qrels", str(qrels), "--json"]

    default = run_cli(args, tmp_path / "home")
    assert default.returncode == 0, default.stderr
    over_qrels = json.loads(default.stdout)
    assert over_qrels["topics"] == 60 and over_qrels["topic_scope"] == "qrels"
    warning = [line for line in default.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warning) == 1 and "50 of the 60 judged topics are missing from the run" in warning[0]
    assert "--topics run averages over the 10 answered topics" in warning[0] and over_qrels["warnings"] == warning
    ndcg = [over_qrels["per_topic"][q]["nDCG@10"] for q in answered]
    assert over_qrels["summary"]["nDCG@10"] == pytest.approx(sum(ndcg) / 60)

    over_run = json.loads(run_cli([*args, "--topics", "run"], tmp_path / "home").stdout)
    assert over_run["topics"] == 10 and over_run["warnings"] == []
    assert over_run["summary"]["nDCG@10"] == pytest.approx(sum(ndcg) / 10)
    assert "the other 50 judged topics are not scored" in " ".join(over_run["notes"])

    twelve = tmp_path / "twelve.jsonl"  # a topic file: the run's 10 topics and 2 it does not answer
    wanted = set(list(judged)[:12])
    twelve.write_text("".join(line for line in topics.open() if json.loads(line)["id"] in wanted))
    over_file = json.loads(run_cli([*args, "--topics", str(twelve)], tmp_path / "home").stdout)
    assert over_file["topics"] == 12 and over_file["summary"]["nDCG@10"] == pytest.approx(sum(ndcg) / 12)

    experiment = Experiment({"ten": tmp_path / "ten.trec"}, None, qrels)
    assert experiment.topics == 60 and "over='run' averages over the 10 answered topics" in experiment.warnings[0]
    given = Experiment({"ten": tmp_path / "ten.trec"}, load_topics(twelve), qrels)  # default: the topics given
    assert given.topics == 12 and given.warnings == []
    assert Experiment({"ten": tmp_path / "ten.trec"}, None, qrels, over="run").row("ten").means == over_run["summary"]


def test_train_fusion_warns_when_most_judged_topics_are_missing_from_the_runs(dev_subset, tmp_path):
    _, qrels = dev_subset
    judged = read_qrels(qrels)
    answered = list(judged)[:10]
    runs = []
    for n, name in enumerate(("structure", "bm25")):
        path = tmp_path / f"{name}.trec"
        write_run(_noisy_run(judged, answered, noise=2.0 + n, seed=4 + n), path, tag=name)
        runs.append(f"{name}={path}")
    args = ["train", "fusion", "--runs", *runs, "--qrels", str(qrels), "--step", "0.25"]
    default = run_cli(args, tmp_path / "home")
    assert default.returncode == 0, default.stderr[-2000:]
    assert "on 60 judged topics" in default.stdout
    assert (
        "warning: 50 of the 60 judged topics are missing from every run and count as 0" in default.stderr
        and "--topics run" in default.stderr
    )
    restricted = run_cli([*args, "--topics", "run"], tmp_path / "home")
    assert restricted.returncode == 0, restricted.stderr[-2000:]
    assert "on 10 judged topics" in restricted.stdout and "warning:" not in restricted.stderr
    folds = [line.split() for line in restricted.stdout.splitlines() if line[:1].isdigit()]
    assert sum(int(fold[1]) for fold in folds) == 10  # every fold's topics are topics the runs answer


def test_a_tsv_topic_file_with_a_header_row(tmp_path):
    path = tmp_path / "topics.tsv"
    path.write_text("id\tquery\nq1\tx^2+y^2\nq2\t\\frac{a}{b}\n")
    assert [t.id for t in load_topics(path)] == ["q1", "q2"]
    path.write_text("q1\tx^2+y^2\n")
    assert [t.formula for t in load_topics(path)] == ["x^2+y^2"]


def _noisy_run(judged: dict[str, dict[str, int]], topics: list[str], noise: float, seed: int) -> dict[str, list[Hit]]:
    """Each topic's judged documents scored by grade plus noise, and ten unjudged ones: a run of known quality."""
    rnd = random.Random(seed)
    return {
        q: [Hit(d, g + noise * rnd.random()) for d, g in judged[q].items()]
        + [Hit(f"unjudged-{q}-{n}", noise * rnd.random()) for n in range(10)]
        for q in topics
    }
