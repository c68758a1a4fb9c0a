"""Per-family evaluation (`mathscout eval --by-family`): dev topics grouped by id prefix, on the real dev qrels."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from mathscout.evaluation.families import ALL, family_scores, format_families
from mathscout.evaluation.measures import evaluate_run, read_qrels
from mathscout.evaluation.runs import write_run
from mathscout.types import Hit


@pytest.fixture(scope="module")
def runs(shared_data, tmp_path_factory):
    """Two runs over the real dev qrels: `perfect` ranks each topic's judged documents first; `half` does
    so only for `mse:` topics and returns unjudged ids for every other family."""
    qrels_path = shared_data / "collection" / "qrels.dev.txt"
    qrels = read_qrels(qrels_path)
    folder = tmp_path_factory.mktemp("families")
    perfect = {
        q: [Hit(doc_id=d, score=10.0 - n) for n, d in enumerate(sorted(docs, key=lambda d: -docs[d]))]
        for q, docs in qrels.items()
    }
    half = {
        q: hits if q.startswith("mse:") else [Hit(doc_id=f"nothing:{n}", score=1.0 - n / 10) for n in range(3)]
        for q, hits in perfect.items()
    }
    write_run(perfect, folder / "perfect.trec", tag="perfect")
    write_run(half, folder / "half.trec", tag="half")
    return qrels_path, folder / "perfect.trec", folder / "half.trec"


def test_families_follow_topic_id_prefixes_with_paired_tests(runs):
    qrels, perfect, half = runs
    results = [evaluate_run(perfect, qrels), evaluate_run(half, qrels)]
    families = {f.family: f for f in family_scores(results)}
    assert {"mse", "mo", "math", "proofnet", "phys", "stats", ALL} <= set(families)
    assert len(families["mo"].topics) == 90 and len(families["mse"].topics) == 300
    assert len(families[ALL].topics) == 600
    assert families["mse"].means[0]["nDCG@10"] == pytest.approx(1.0)
    assert families["mse"].means[1]["nDCG@10"] == pytest.approx(1.0) and families["mse"].p_values[1]["MAP"] is None
    assert families["mo"].means[1]["MAP"] == 0.0 and families["mo"].p_values[1]["MAP"] < 0.05
    assert families[ALL].means[1]["MAP"] == pytest.approx(results[1].summary["MAP"])
    text = format_families(results, list(families.values()))
    assert "mo (90 topics)" in text and "0.0000*" in text


def test_eval_cli_prints_family_json(runs):
    from mathscout.cli import main

    qrels, perfect, half = runs
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["eval", "--run", str(perfect), str(half), "--qrels", str(qrels), "--by-family", "--json"]) == 0
    data = json.loads(out.getvalue())
    mo = next(f for f in data["families"] if f["family"] == "mo")
    assert [r["run"] for r in mo["runs"]] == [str(perfect), str(half)] and mo["runs"][1]["means"]["R@100"] == 0.0
