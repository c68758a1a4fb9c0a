"""The evaluation harness: topic readers, run files, (prime) measures, comparisons, the eval/run CLI."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from mathscout.errors import MathScoutError
from mathscout.evaluation.measures import compare_runs, evaluate_run, read_qrels
from mathscout.evaluation.report import format_comparison, format_evaluation
from mathscout.evaluation.runs import read_run, write_run
from mathscout.evaluation.topics import load_topics
from mathscout.retrievers.base import BaseRetriever
from mathscout.types import Hit, Query


@pytest.fixture(scope="session")
def arqmath(shared_data) -> Path:
    return shared_data / "arqmath"


# --- topics -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, count, first, last",
    [
        ("topics.arqmath-2020-task1-origin.xml", 98, "A.1", "A.100"),
        ("topics.arqmath-2021-task1-origin.xml", 100, "A.201", "A.300"),
        ("topics.arqmath-2022-task1-or-task3-origin.xml", 100, "A.301", "A.400"),
    ],
)
def test_arqmath_task1_topics_become_plain_text_with_dollar_math(arqmath, name, count, first, last):
    topics = load_topics(arqmath / name)
    assert len(topics) == count
    assert (topics[0].id, topics[-1].id) == (first, last)
    for topic in topics:
        assert topic.formula is None
        assert topic.text.strip()
        assert "math-container" not in topic.text and "&lt;" not in topic.text and "<p>" not in topic.text


def test_arqmath_2020_topics_cover_the_judged_topics_and_keep_title_math(arqmath):
    topics = {t.id: t for t in load_topics(arqmath / "topics.arqmath-2020-task1-origin.xml")}
    judged = set(read_qrels(arqmath / "qrels.arqmath-2020-task1.txt"))
    assert len(judged) == 77 and judged <= set(topics)
    assert "A.31" not in topics  # the 2020 file skips A.31 and A.78
    a1 = topics["A.1"]
    assert a1.text.startswith(
        r"Finding value of $c$ such that the range of the rational function "
        r"$f(x) = \frac{x^2 + x + c}{x^2 + 2x + c}$ does not contain $[-1, -\frac{1}{3}]$"
    )
    assert "how do we do the reverse?" in a1.text  # the question follows the title
    assert r"f(x)= \frac{x^2 + x + c}{x^2 + 2x + c}" in a1.text  # the $$…$$ display formula survives
    assert topics["A.3"].tags == ("numerical-methods", "algorithms", "bisection")


def test_arqmath_2022_topic_title(arqmath):
    a301 = load_topics(arqmath / "topics.arqmath-2022-task1-or-task3-origin.xml")[0]
    assert a301.id == "A.301"
    assert a301.text.startswith(r"Inequality between norm 1,norm 2 and norm $\infty$ of Matrices")


@pytest.mark.parametrize("year, count", [(2020, 85), (2021, 100), (2022, 100)])
def test_arqmath_task2_topics_are_formula_queries(arqmath, year, count):
    topics = load_topics(arqmath / f"topics.arqmath-{year}-task2-origin.xml")
    assert len(topics) == count
    assert all(t.id.startswith("B.") and t.formula and t.text == f"${t.formula}$" for t in topics)
    if year == 2020:
        assert topics[0].id == "B.1"
        assert topics[0].formula == r"f(x)= \frac{x^2 + x + c}{x^2 + 2x + c}"


def test_dev_jsonl_topics_are_title_plus_body_with_tags(shared_data):
    topics = load_topics(shared_data / "collection" / "topics.dev.jsonl")
    assert len(topics) == 600
    first = topics[0]
    assert first.id == "mse:math.stackexchange.com:440"
    assert first.text.startswith("Why isn't reflexivity redundant in the definition of equivalence relation?")
    assert "$aRb$ implies $bRa$" in first.text
    assert first.tags == ("elementary-set-theory", "relations", "equivalence-relations")


def test_jsonl_formula_queries(tmp_path):
    path = tmp_path / "formulas.jsonl"
    path.write_text(
        "\n".join(
            json.dumps(r)
            for r in [
                {"id": "f1", "query": r"x^2 + y^2 = z^2"},
                {"id": "f2", "query": r"$\int_0^1 f(x)\,dx$"},
                {"id": "f3", "query": r"bound $\sum a_n$ by $\int f$"},
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    f1, f2, f3 = load_topics(path)
    assert (f1.formula, f1.text) == (r"x^2 + y^2 = z^2", r"$x^2 + y^2 = z^2$")
    assert (f2.formula, f2.text) == (r"\int_0^1 f(x)\,dx", r"$\int_0^1 f(x)\,dx$")
    assert (f3.formula, f3.text) == (None, r"bound $\sum a_n$ by $\int f$")


def test_ntcir12_formula_topics_keep_wildcards(shared_data):
    topics = load_topics(shared_data / "ntcir12" / "topics.ntcir12-math-browsing.txt")
    assert len(topics) == 40
    by_id = {t.id: t for t in topics}
    assert by_id["NTCIR12-MathWiki-11"].formula == r"\ ax^{2}+bx+c=0"
    assert by_id["NTCIR12-MathWiki-21"].formula == r"-0.\qvar{*1*}\ldots"
    assert by_id["NTCIR12-MathWiki-21"].text == r"$-0.\qvar{*1*}\ldots$"


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "cannot read"),
        (b"", "empty"),
        (b"\xff\xfe\x00garbage", "cannot read"),
        (b"<Topics><Topic number='A.1'><Title>unclosed", "not well-formed XML"),
        (b'{"id": "q1", "title": "ok"}\n{"id": broken\n', ":2: not valid JSON"),
        (b'{"title": "no id"}\n', "expected an object"),
        (b"just some words on a line\n", "unrecognised topic line"),
        (b"<Topics></Topics>", "no topics found"),
        (b'{"id": "q1", "title": "a"}\n{"id": "q1", "title": "b"}\n', "appears twice"),
    ],
)
def test_unusable_topic_files_give_clear_errors(tmp_path, content, message):
    path = tmp_path / "topics.txt"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(MathScoutError, match=message):
        load_topics(path)


# --- run files ----------------------------------------------------------------------------------------


def test_trec_run_roundtrip_sorts_by_score_and_breaks_ties_stably(tmp_path):
    results = {"q2": [Hit("b", 1.0), Hit("a", 3.5), Hit("c", 1.0), Hit("d", 0.123456789012345)], "q1": [Hit("x", -2.0)]}
    path = tmp_path / "out" / "run.trec"
    assert write_run(results, path, tag="mytag") == 5
    lines = path.read_text().splitlines()
    assert lines[0] == "q2 Q0 a 1 3.5 mytag"
    assert [line.split()[2] for line in lines[:4]] == ["a", "b", "c", "d"]  # b before c: stable tie
    assert lines[4] == "q1 Q0 x 1 -2.0 mytag"
    run = read_run(path)
    assert (run.format, run.tag) == ("trec", "mytag")
    assert [(e.doc_id, e.rank) for e in run.topics["q2"]] == [("a", 1), ("b", 2), ("c", 3), ("d", 4)]
    assert run.scores()["q2"]["d"] == 0.123456789012345  # full precision survives


def test_arqmath_run_format_is_five_tab_separated_columns(tmp_path):
    path = tmp_path / "run.tsv"
    write_run({"A.1": [Hit("2761594", 2.0), Hit("1414307", 7.0)]}, path, tag="team-run1", fmt="arqmath")
    assert path.read_text().splitlines() == ["A.1\t1414307\t1\t7.0\tteam-run1", "A.1\t2761594\t2\t2.0\tteam-run1"]
    run = read_run(path)
    assert run.format == "arqmath"
    assert run.scores() == {"A.1": {"1414307": 7.0, "2761594": 2.0}}


def test_document_ids_with_whitespace_survive_a_roundtrip(tmp_path):
    ids = ["pw:Euclid's Lemma", "100%", "proofnet:Rudin|exercise_1_17#proof"]
    write_run({"q1": [Hit(d, float(-n)) for n, d in enumerate(ids)]}, tmp_path / "r", tag="t")
    assert tmp_path.joinpath("r").read_text().splitlines()[0] == "q1 Q0 pw:Euclid's%20Lemma 1 0.0 t"
    assert [e.doc_id for e in read_run(tmp_path / "r").topics["q1"]] == ids


def test_run_files_reject_bad_input(tmp_path):
    with pytest.raises(MathScoutError, match="whitespace"):
        write_run({"topic 1": [Hit("d", 1.0)]}, tmp_path / "r", tag="t")
    with pytest.raises(MathScoutError, match="unknown run format"):
        write_run({"q1": [Hit("d", 1.0)]}, tmp_path / "r", tag="t", fmt="csv")
    bad = tmp_path / "bad.run"
    bad.write_text("q1 Q0 d1 one 1.0 t\n")
    with pytest.raises(MathScoutError, match=r"bad.run:1: rank must be an integer"):
        read_run(bad)
    bad.write_text("q1 d1 1.0\n")
    with pytest.raises(MathScoutError, match="got 3 columns"):
        read_run(bad)


# --- measures -----------------------------------------------------------------------------------------

QRELS = """q1 0 d1 3
q1 0 d2 2
q1 0 d3 1
q1 0 d4 0
q2 0 e1 2
q3 0 f1 0
"""
# q1 ranks d4 (grade 0), d1 (3), d5 (unjudged), d2 (2); q2 is judged but not in the run; q3 has
# nothing relevant (scored 0: every assessed topic counts, as in ARQMath); q9 is not judged (ignored).
RUN = """q1 Q0 d4 1 4.0 t
q1 Q0 d1 2 3.0 t
q1 Q0 d5 3 2.0 t
q1 Q0 d2 4 1.0 t
q9 Q0 x 1 1.0 t
"""
IDCG = 3 + 2 / math.log2(3) + 1 / math.log2(4)  # ideal order d1 (3), d2 (2), d3 (1); gain = grade


@pytest.fixture()
def tiny(tmp_path) -> tuple[Path, Path]:
    (tmp_path / "qrels.txt").write_text(QRELS)
    (tmp_path / "run.txt").write_text(RUN)
    return tmp_path / "run.txt", tmp_path / "qrels.txt"


def test_hand_computed_arqmath_measures_without_prime(tiny):
    result = evaluate_run(*tiny, prime=False, measure_set="arqmath")
    q1 = result.per_topic["q1"]
    assert q1["P@10"] == pytest.approx(2 / 10)  # d1, d2 have grade >= 2
    assert q1["MAP"] == pytest.approx((1 / 2 + 2 / 4) / 2)  # relevant at ranks 2 and 4
    assert q1["nDCG"] == pytest.approx((3 / math.log2(3) + 2 / math.log2(5)) / IDCG)
    assert q1["bpref"] == pytest.approx(0.5)  # each relevant doc has 1 of min(R=2, N=2) non-relevant above
    assert result.per_topic["q2"] == dict.fromkeys(result.measures, 0.0)  # judged, missing: zero
    assert result.per_topic["q3"] == dict.fromkeys(result.measures, 0.0)  # judged, nothing relevant: zero
    assert set(result.per_topic) == {"q1", "q2", "q3"}
    assert (result.missing_topics, result.skipped_topics, result.unjudged_topics) == (["q2", "q3"], [], 1)
    assert result.unanswerable_topics == ["q3"]
    assert result.summary["MAP"] == pytest.approx(0.5 / 3)  # over every assessed topic


def test_topics_with_relevant_keeps_the_older_view(tiny):
    result = evaluate_run(*tiny, prime=False, measure_set="arqmath", topics_with_relevant=True)
    assert set(result.per_topic) == {"q1", "q2"}
    assert (result.skipped_topics, result.unanswerable_topics) == (["q3"], [])
    assert result.summary["MAP"] == pytest.approx(0.25)


def test_hand_computed_prime_measures_drop_unjudged_documents(tiny):
    result = evaluate_run(*tiny, prime=True)
    assert result.measure_set == "arqmath"
    assert result.measures == ["nDCG'", "MAP'", "P'@10", "bpref"]
    q1 = result.per_topic["q1"]
    assert q1["MAP'"] == pytest.approx((1 / 2 + 2 / 3) / 2)  # d5 gone: d2 moves up to rank 3
    assert q1["nDCG'"] == pytest.approx((3 / math.log2(3) + 2 / math.log2(4)) / IDCG)
    assert q1["P'@10"] == pytest.approx(0.2)
    assert result.unjudged_removed == 1
    text = format_evaluation(result, per_topic=True)
    assert "2 topics judged but missing from the run: count as 0" in text  # q2, and q3 (nothing relevant)
    assert "q1 " in text and "mean" in text


def test_prime_scores_ignore_interleaved_unjudged_documents(tmp_path, arqmath):
    qrels = arqmath / "qrels.arqmath-2020-task1-available.txt"
    judged = read_qrels(qrels)
    clean, noisy = {}, {}
    for qid, docs in judged.items():
        order = sorted(docs)  # any order will do
        clean[qid] = [Hit(d, float(len(order) - i)) for i, d in enumerate(order)]
        noisy[qid] = [Hit(f"unjudged-{i}", float(len(order) - i) + 0.5) for i in range(len(order))] + clean[qid]
    write_run(clean, tmp_path / "clean.run", tag="clean")
    write_run(noisy, tmp_path / "noisy.run", tag="noisy")
    prime_clean = evaluate_run(tmp_path / "clean.run", qrels, prime=True)
    prime_noisy = evaluate_run(tmp_path / "noisy.run", qrels, prime=True)
    assert prime_noisy.per_topic == prime_clean.per_topic
    assert prime_noisy.unjudged_removed == sum(len(judged[q]) for q in prime_noisy.per_topic)
    plain_noisy = evaluate_run(tmp_path / "noisy.run", qrels, prime=False)
    assert plain_noisy.summary["nDCG"] < prime_clean.summary["nDCG'"]


def test_qrels_as_run_is_perfect(tmp_path, arqmath):
    qrels = arqmath / "qrels.arqmath-2020-task1-available.txt"
    judged = read_qrels(qrels)
    write_run(
        {q: [Hit(d, float(g)) for d, g in docs.items()] for q, docs in judged.items()},
        tmp_path / "perfect.run",
        tag="qrels",
    )
    result = evaluate_run(tmp_path / "perfect.run", qrels, prime=True)
    assert result.topics == 76  # every assessed 2020 topic, as the official ARQMath evaluation averages
    assert len(result.unanswerable_topics) == 76 - 47  # no available High or Medium answer: 0 on MAP′, P′@10, bpref
    assert result.summary["nDCG'"] == pytest.approx(61 / 76)  # 15 topics hold only grade-0 answers: nDCG′ 0
    assert result.summary["MAP'"] == pytest.approx(47 / 76)
    assert result.summary["bpref"] == pytest.approx(47 / 76)
    assert 0 < result.summary["P'@10"] < 1  # most topics have fewer than 10 relevant answers
    older = evaluate_run(tmp_path / "perfect.run", qrels, prime=True, topics_with_relevant=True)
    assert older.topics == 47 and len(older.skipped_topics) == 76 - 47
    assert older.summary["nDCG'"] == older.summary["MAP'"] == older.summary["bpref"] == pytest.approx(1.0)


def test_collection_qrels_use_the_collection_measures(tmp_path, shared_data):
    qrels = shared_data / "collection" / "qrels.dev.txt"
    judged = read_qrels(qrels)
    first = next(iter(judged))
    write_run({first: [Hit(d, float(g)) for d, g in judged[first].items()]}, tmp_path / "one.run", tag="t")
    result = evaluate_run(tmp_path / "one.run", qrels)
    assert result.measures == ["nDCG@10", "RR@10", "R@100", "MAP"]
    assert result.per_topic[first] == {"nDCG@10": 1.0, "RR@10": 1.0, "R@100": 1.0, "MAP": 1.0}
    assert result.topics == 600 and len(result.missing_topics) == 599
    assert result.summary["MAP"] == pytest.approx(1 / 600)


def test_cutoffs_and_ties(tmp_path, tiny):
    qrels = tiny[1]
    ranked = [Hit(f"x{i}", 100.0 - i) for i in range(10)] + [Hit("d1", 50.0)]  # d1 (grade 3) at rank 11
    write_run({"q1": ranked}, tmp_path / "r11.run", tag="t")
    q1 = evaluate_run(tmp_path / "r11.run", qrels, measure_set="collection").per_topic["q1"]
    assert q1["RR@10"] == 0.0 and q1["nDCG@10"] == 0.0 and q1["R@100"] == pytest.approx(1 / 3)
    # equal scores: trec_eval's order (document id descending) decides, for every measure alike
    write_run({"q1": [Hit("d1", 1.0), Hit("d4", 1.0)]}, tmp_path / "tie.run", tag="t")
    q1 = evaluate_run(tmp_path / "tie.run", qrels, measure_set="collection").per_topic["q1"]
    assert q1["RR@10"] == 0.5 and q1["MAP"] == pytest.approx(1 / 2 / 3)


def test_unrelated_run_and_qrels_are_refused(tiny, tmp_path):
    other = tmp_path / "other.run"
    write_run({"zz": [Hit("d1", 1.0)]}, other, tag="t")
    with pytest.raises(MathScoutError, match="share no topic"):
        evaluate_run(other, tiny[1])


def _runs_of_differing_quality(tmp_path, qrels: Path) -> tuple[Path, Path]:
    judged = read_qrels(qrels)
    good = {q: [Hit(d, float(g)) for d, g in docs.items()] for q, docs in judged.items()}
    bad = {q: [Hit(d, -float(g)) for d, g in docs.items()] for q, docs in judged.items()}
    write_run(good, tmp_path / "good.run", tag="good")
    write_run(bad, tmp_path / "bad.run", tag="bad")
    return tmp_path / "good.run", tmp_path / "bad.run"


def test_compare_runs_gives_paired_p_values(tmp_path, arqmath):
    qrels = arqmath / "qrels.arqmath-2020-task1-available.txt"
    good, bad = _runs_of_differing_quality(tmp_path, qrels)
    comparison = compare_runs([good, bad], qrels, prime=True)
    assert comparison.p_values[0] == {}
    p = comparison.p_values[1]
    assert set(p) == {"nDCG'", "MAP'", "P'@10", "bpref"}
    assert all(0 <= v < 0.05 for v in p.values())  # reversing the perfect ranking hurts on every measure
    assert comparison.significant(1, "MAP'")
    text = format_comparison(comparison)
    assert "(baseline)" in text and "*" in text and "paired t-test" in text
    same = compare_runs([good, good], qrels, prime=True)
    assert same.p_values[1] == dict.fromkeys(same.measures, 1.0) and not same.significant(1, "MAP'")


def test_cli_eval_prints_json(tmp_path, arqmath):
    qrels = arqmath / "qrels.arqmath-2020-task1-available.txt"
    good, bad = _runs_of_differing_quality(tmp_path, qrels)
    mathscout = [sys.executable, "-m", "mathscout.cli"]
    out = subprocess.run(
        mathscout + ["eval", "--run", str(good), "--qrels", str(qrels), "--prime", "--json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    data = json.loads(out)
    assert data["summary"]["nDCG'"] == pytest.approx(61 / 76)  # every assessed topic; 15 hold only grade-0 answers
    assert data["topics"] == 76 and len(data["per_topic"]) == 76
    out = subprocess.run(
        mathscout + ["eval", "--run", str(good), "--qrels", str(qrels), "--prime", "--json", "--topics-with-relevant"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    data = json.loads(out)
    assert data["summary"]["nDCG'"] == pytest.approx(1.0) and data["topics"] == 47
    out = subprocess.run(
        mathscout + ["eval", "--run", str(good), str(bad), "--qrels", str(qrels), "--prime", "--json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    runs = json.loads(out)["runs"]
    assert runs[1]["significant"]["MAP'"] is True
    failed = subprocess.run(
        mathscout + ["eval", "--run", str(tmp_path / "nope.run"), "--qrels", str(qrels)], capture_output=True, text=True
    )
    assert failed.returncode == 2 and "cannot read the run file" in failed.stderr
    assert "Traceback" not in failed.stderr


# --- runner -------------------------------------------------------------------------------------------


class _FakeRetriever(BaseRetriever):
    """Ranks two fixed documents; refuses empty queries like every real retriever."""

    name = "fake"

    def _search(self, query: Query, k: int) -> list[Hit]:
        return [Hit("d2", 1.0), Hit("d1", 2.0)][:k]


def test_run_topics_skips_failing_topics_and_summarises(tmp_path, monkeypatch):
    import mathscout.evaluation.runner as runner
    from mathscout.notices import collecting

    monkeypatch.setattr(runner, "open_retriever", lambda index, mode: _FakeRetriever())
    topics = tmp_path / "topics.jsonl"
    topics.write_text(
        '{"id": "t1", "title": "integral of $x^2$"}\n{"id": "t2", "title": "  "}\n{"id": "t3", "query": "a^2+b^2"}\n'
    )
    with collecting() as said:
        summary = runner.run_topics(None, topics, "fake", 10, tmp_path / "run.tsv", fmt="arqmath")
    assert "2 topics, 1 skipped (t2)" in summary and "mean latency" in summary and "tag mathscout-fake" in summary
    assert any("topic t2 skipped: the query is empty" in n for n in said)
    run = read_run(tmp_path / "run.tsv")
    assert run.format == "arqmath" and list(run.topics) == ["t1", "t3"]
    assert [e.doc_id for e in run.topics["t1"]] == ["d1", "d2"]


def test_mathscout_run_then_eval_on_the_small_index(request, shared_data, dev_topic_ids, tmp_path):
    small_index = request.getfixturevalue("small_index")
    wanted = set(dev_topic_ids[:10])
    topics = tmp_path / "topics.jsonl"
    with open(shared_data / "collection" / "topics.dev.jsonl", encoding="utf-8") as f:
        topics.write_text("".join(line for line in f if json.loads(line)["id"] in wanted))
    run = tmp_path / "bm25.run"
    mathscout = [sys.executable, "-m", "mathscout.cli"]
    done = subprocess.run(
        mathscout
        + [
            "run",
            "--index",
            str(small_index),
            "--topics",
            str(topics),
            "--mode",
            "bm25",
            "--k",
            "100",
            "--output",
            str(run),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "10 topics" in done.stdout
    result = evaluate_run(run, shared_data / "collection" / "qrels.dev.txt")
    assert set(read_run(run).topics) == wanted
    assert sum(result.per_topic[t]["R@100"] for t in wanted) / len(wanted) > 0.5  # BM25 finds the thread


def test_an_arqmath_run_holds_at_most_1000_hits_per_topic(tmp_path, monkeypatch):
    """`run --format arqmath --k 2000` searches 1,000 per topic and says so (ARQMath's limit; never silently more)."""
    import mathscout.evaluation.runner as runner
    from mathscout.notices import collecting

    asked = []

    class Many(_FakeRetriever):
        def _search(self, query: Query, k: int) -> list[Hit]:
            asked.append(k)
            return [Hit(f"d{n}", 1.0 / (n + 1)) for n in range(k)]

    monkeypatch.setattr(runner, "open_retriever", lambda index, mode: Many())
    topics = tmp_path / "topics.jsonl"
    topics.write_text('{"id": "t1", "title": "integral of $x^2$"}\n')
    with collecting() as said:
        runner.run_topics(None, topics, "fake", 2000, tmp_path / "run.tsv", fmt="arqmath")
    assert asked == [1000] and len(read_run(tmp_path / "run.tsv").topics["t1"]) == 1000
    assert any("k = 2,000 is outside 1–1,000 (hits per topic an ARQMath run may hold): 1,000 used" in n for n in said)
    runner.run_topics(None, topics, "fake", 2000, tmp_path / "run.trec", fmt="trec")
    assert asked[-1] == 2000
