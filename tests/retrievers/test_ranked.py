"""Learned ranking on a small real index: trained on train topics by the real command, scored on held-out dev
topics, its stored description, missing features, and the errors a user meets."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest

from mathscout.evaluation.measures import compare_runs
from mathscout.index.layout import IndexDir
from mathscout.retrievers.candidates import CandidateGenerator
from mathscout.retrievers.features import FEATURES, PER_RETRIEVER, Vocabulary, feature_matrix
from mathscout.retrievers.ranked import CONFIG_FILE, MODEL_FILE, RankerConfig, tail_retriever
from mathscout.types import Query
from tests.support.cli import one_line_error, run_cli

pytest.importorskip("lightgbm")

TRAIN_TOPICS = 200  # train topics whose judged answers are in the index (the ranker learns from these)
DISTRACTORS = 1500  # other documents of the collection
EVAL_TOPICS = 60  # held-out dev topics whose judged answers are in the index


def _column(name: str) -> int:
    return FEATURES.index(name)


def _lines(path, keep) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return [line for line in f if keep(line)]


@pytest.fixture(scope="module")
def ranker_data(shared_data, tmp_path_factory):
    """Topic and qrels files (train and held-out dev) and an index holding their judged answers. Its own build: the
    ranker learns from the judged answers of 200 train topics, which neither the tiny nor the small index holds."""
    from mathscout.retrievers.indexing import build_index

    folder = tmp_path_factory.mktemp("ranker")
    collection = shared_data / "collection"
    sets = {}
    for name, count in (("train", TRAIN_TOPICS), ("dev", EVAL_TOPICS)):
        topics = _lines(collection / f"topics.{name}.jsonl", lambda line: True)[:count]
        ids = {json.loads(t)["id"] for t in topics}
        (folder / f"topics.{name}.jsonl").write_text("".join(topics), encoding="utf-8")
        qrels = _lines(collection / f"qrels.{name}.txt", lambda line, ids=ids: line.split()[0] in ids)
        (folder / f"qrels.{name}.txt").write_text("".join(qrels), encoding="utf-8")
        sets[name] = (folder / f"topics.{name}.jsonl", folder / f"qrels.{name}.txt", {q.split()[2] for q in qrels})
    judged = sets["train"][2] | sets["dev"][2]
    corpus = folder / "docs.jsonl"
    with open(collection / "docs.jsonl", encoding="utf-8") as f, open(corpus, "w", encoding="utf-8") as out:
        for n, line in enumerate(f):
            if n < DISTRACTORS or json.loads(line)["id"] in judged:
                out.write(line)
    build_index([corpus], folder / "index", ["bm25", "structure"])
    return folder / "index", sets["train"][:2], sets["dev"][:2]


@pytest.fixture(scope="module")
def trained(ranker_data, tmp_path_factory):
    index, (topics, qrels), _ = ranker_data
    home = tmp_path_factory.mktemp("home")
    result = run_cli(
        [
            "train",
            "ranker",
            "--index",
            str(index),
            "--topics",
            str(topics),
            "--qrels",
            str(qrels),
            "--sample",
            "0",
            "--folds",
            "3",
            "--rounds",
            "100",
        ],
        home,
        timeout=1800,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return index, result.stdout, home


@pytest.mark.slow
def test_ranker_beats_or_ties_its_inputs_on_held_out_topics(trained, ranker_data, tmp_path):
    index, _, home = trained
    _, _, (topics, qrels) = ranker_data
    runs = []
    for mode in ("bm25", "structure", "ranked"):
        run = tmp_path / f"{mode}.trec"
        result = run_cli(
            ["run", "--index", str(index), "--topics", str(topics), "--mode", mode, "--k", "100", "--output", str(run)],
            home,
            timeout=600,
        )
        assert result.returncode == 0, result.stderr[-2000:]
        runs.append(run)
    comparison = compare_runs(runs, qrels)
    bm25, structure, ranked = (r.summary["nDCG@10"] for r in comparison.results)
    assert ranked >= max(bm25, structure) - 0.01, (bm25, structure, ranked)


@pytest.mark.slow
def test_ranker_json_says_how_the_model_was_trained(trained):
    index, stdout, _ = trained
    config = json.loads((index / CONFIG_FILE).read_text(encoding="utf-8"))
    assert config["used"] == ["bm25", "structure"] and config["features"] == FEATURES
    training = config["training"]
    assert training["topics"] == TRAIN_TOPICS and len(training["folds"]) == 3 and training["rounds"] == 100
    assert training["sets"][0]["topics"].endswith("topics.train.jsonl")
    assert set(training["cv"]) == {"ranker", "bm25", "structure"}
    assert training["importances_gain"] and set(training["importances_gain"]) <= set(FEATURES)
    assert not any(
        name.startswith(("dense.", "colbert.")) for name in training["importances_gain"]
    )  # absent: never split on
    assert config["model"]["bytes"] == (index / MODEL_FILE).stat().st_size
    assert (index / "ranker-importance.png").stat().st_size > 1000
    assert "3-fold CV" in stdout and "ranker" in stdout


@pytest.mark.slow
def test_a_long_ranked_run_continues_with_the_best_retriever_of_the_training_cv(trained, ranker_data, tmp_path):
    index, _, home = trained
    config = RankerConfig.read(index)
    best = max(config.used, key=lambda name: config.training["cv"][name])
    assert tail_retriever(config) == best
    _, _, (topics, _) = ranker_data
    run = tmp_path / "ranked.trec"
    result = run_cli(
        [
            "run",
            "--index",
            str(index),
            "--topics",
            str(topics),
            "--mode",
            "ranked",
            "--k",
            "1000",
            "--output",
            str(run),
        ],
        home,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    per_topic = {}
    for line in run.read_text().splitlines():
        per_topic[line.split()[0]] = per_topic.get(line.split()[0], 0) + 1
    assert max(per_topic.values()) > 300  # past the ~100–300 candidates: the best retriever's own top 1,000 follows


@pytest.mark.slow
def test_missing_retrievers_and_documents_are_flagged_not_zero(ranker_data):
    index = IndexDir(ranker_data[0])
    generator = CandidateGenerator(index)
    assert generator.missing == ("dense", "dense-ft", "colbert", "types")
    found = generator.generate(Query(id="q", text="does the harmonic series diverge"))  # words only
    docs, matrix = feature_matrix(found, index.store.summaries(found.docs), Vocabulary(["answer"], []))
    for name in ("dense", "colbert", "types"):
        for part in PER_RETRIEVER:
            assert np.isnan(matrix[:, _column(f"{name}.{part}")]).all()  # no such retriever: missing, flagged NaN
    assert np.isnan(matrix[:, _column("structure.coverage")]).all()  # no formula to cover
    only_bm25 = [i for i, d in enumerate(docs) if d not in {h.doc_id for h in found.runs["structure"]}]
    if found.runs["structure"] and only_bm25:
        row = matrix[only_bm25[0]]
        assert row[_column("structure.found")] == 0 and math.isnan(row[_column("structure.score")])
    assert set(matrix[:, _column("bm25.found")]) <= {0.0, 1.0}
    assert np.isnan(matrix[:, _column("d.source")]).all()  # not in this vocabulary: missing, not code 0
    assert (matrix[:, _column("d.kind")][~np.isnan(matrix[:, _column("d.kind")])] == 0).all()


@pytest.mark.model
def test_dense_and_colbert_features_are_present_when_the_index_has_them(dense_index, dense_topics):
    index = IndexDir(dense_index)
    generator = CandidateGenerator(index)
    assert set(generator.names) == {"bm25", "dense", "colbert"}
    topic = dense_topics[0]
    found = generator.generate(Query(id=topic["id"], text=f"{topic['title']}\n{topic['body']}"))
    _, matrix = feature_matrix(found, index.store.summaries(found.docs), Vocabulary())
    for name in ("dense", "colbert"):
        assert (matrix[:, _column(f"{name}.found")] == 1).any()
        assert np.isfinite(matrix[:, _column(f"{name}.score")]).any()
    assert np.isnan(matrix[:, _column("structure.found")]).all()  # this index has no structure component


@pytest.mark.slow
def test_the_assistant_plans_with_the_ranker_when_the_index_has_one(trained):
    from mathscout.agent.assistant import Assistant

    assistant = Assistant(trained[0], use_llm=False)
    assert assistant.toolbox.text_mode() == "ranked" and "ranked" in assistant.modes()
    answer = assistant.ask("does the harmonic series diverge", k=5)
    assert [call.arguments.get("mode") for call in answer.trace if call.tool == "search"] == ["ranked"]
    assert answer.hits and answer.citations


@pytest.mark.slow
def test_clear_errors_without_a_ranker_or_with_a_damaged_one(trained, ranker_data, tmp_path):
    index, _, home = trained
    _, (_topics, _qrels), (dev_topics, dev_qrels) = ranker_data
    copy = tmp_path / "copy"
    shutil.copytree(index, copy)
    (copy / CONFIG_FILE).unlink()
    error = one_line_error(run_cli(["search", "--index", str(copy), "--mode", "ranked", "harmonic series"], home))
    assert "no learned ranker" in error and "mathscout train ranker" in error
    shutil.copy(index / CONFIG_FILE, copy / CONFIG_FILE)
    model = bytearray((copy / MODEL_FILE).read_bytes())
    model[len(model) // 2] ^= 0xFF
    (copy / MODEL_FILE).write_bytes(bytes(model))
    error = one_line_error(run_cli(["search", "--index", str(copy), "--mode", "ranked", "harmonic series"], home))
    assert "damaged" in error and "mathscout train ranker" in error
    (copy / CONFIG_FILE).write_text('{"retrievers": ["bm25"', encoding="utf-8")
    error = one_line_error(run_cli(["search", "--index", str(copy), "--mode", "ranked", "harmonic series"], home))
    assert "unusable" in error
    error = one_line_error(
        run_cli(["train", "ranker", "--index", str(copy), "--topics", str(dev_topics), "--qrels", str(dev_qrels)], home)
    )
    assert "train topics only" in error


# ------------------------------------------------------------------ SymPy-equivalence and title BM25 features


def test_a_candidate_matched_only_through_a_sympy_rewrite_is_flagged(small_index):
    """Answer 48131 writes $(x-a)^{2}$: asked for the expanded form, its best match comes from the factored form."""
    index = IndexDir(small_index)
    generator = CandidateGenerator(index)
    found = generator.generate(Query(id="q", text="", formula="x^2 - 2ax + a^2"))
    docs, matrix = feature_matrix(found, index.store.summaries(found.docs), Vocabulary())
    assert found.rewrites is not None and found.rewrites.forms >= 1
    row = matrix[docs.index("48131")]
    assert row[_column("rewrite.equivalent")] == 1 and row[_column("rewrite.tier")] >= 1  # the whole structure matched
    assert row[_column("rewrite.score")] > 0 and row[_column("q.rewrites")] == found.rewrites.forms
    written = [docs.index(h.doc_id) for h in found.runs["structure"][:3] if h.doc_id not in found.rewrites.matches]
    assert written and all(matrix[i, _column("rewrite.equivalent")] == 0 for i in written)  # the formula as written: 0
    words = generator.generate(Query(id="w", text="does the harmonic series diverge"))
    _, matrix = feature_matrix(words, index.store.summaries(words.docs), Vocabulary())
    for name in ("rewrite.equivalent", "rewrite.tier", "rewrite.score", "q.rewrites"):
        assert np.isnan(matrix[:, _column(name)]).all()  # no formula: missing, never a silent 0


def test_the_rewrite_search_reuses_the_candidates_structure_ranking(small_index, monkeypatch):
    """The formula as written is structure-searched once per question: the rewrite search takes the candidates'
    ranking for it (and finds what a search of its own finds), searching only the rewritten forms."""
    index = IndexDir(small_index)
    generator = CandidateGenerator(index)
    structure = generator.retrievers["structure"]
    searched = []
    real_rank = structure.rank
    monkeypatch.setattr(structure, "rank", lambda query, k: searched.append(query.formula) or real_rank(query, k))
    found = generator.generate(Query(id="q", text="", formula="x^2 - 2ax + a^2"))
    assert searched.count("x^2 - 2ax + a^2") == 1 and len(searched) == 1 + found.rewrites.forms
    again = generator.equivalence.match(found.query, found.docs)  # no ranking given: it searches the written form
    assert searched.count("x^2 - 2ax + a^2") == 2
    assert again.forms == found.rewrites.forms and again.matches == found.rewrites.matches


TITLED_THREADS = 30  # Math StackExchange train questions written as an ARQMath Posts file, with their answers


@pytest.fixture(scope="module")
def titled_index(shared_data, tmp_path_factory):
    """An index of a real ARQMath-format Posts XML (train questions of the shared collection as question rows, their
    answers from docs.jsonl as answer rows: the thread's real title) plus 100 untitled JSONL documents. Its own build:
    the shared collection's documents have no titles."""
    from html import escape

    from mathscout.retrievers.indexing import build_index

    folder = tmp_path_factory.mktemp("titled")
    collection = shared_data / "collection"
    questions = []
    with open(collection / "topics.train.jsonl", encoding="utf-8") as topics:
        for line in topics:
            topic = json.loads(line)
            if topic["id"].startswith("mse:"):
                questions.append(topic)
            if len(questions) == TITLED_THREADS:
                break
    threads = {q["id"]: q for q in questions}
    answers, untitled = [], []
    with open(collection / "docs.jsonl", encoding="utf-8") as documents:
        for line in documents:
            doc = json.loads(line)
            if doc.get("thread_id") in threads:
                answers.append(doc)
            elif len(untitled) < 100:
                untitled.append(line)
    rows = [
        f'<row Id="{n}" PostTypeId="1" Title="{escape(escape(q["title"]))}" Body="{escape(escape(q["body"]))}" />'
        for n, q in enumerate(questions, start=1)
    ]
    number = {q["id"]: n for n, q in enumerate(questions, start=1)}
    rows += [
        f'<row Id="{a["id"]}" PostTypeId="2" ParentId="{number[a["thread_id"]]}" Score="1" Body="{escape(escape(a["text"]))}" />'
        for a in answers
    ]
    (folder / "Posts.xml").write_text("<posts>\n" + "\n".join(rows) + "\n</posts>\n", encoding="utf-8")
    (folder / "other.jsonl").write_text("".join(untitled), encoding="utf-8")
    build_index([folder / "Posts.xml", folder / "other.jsonl"], folder / "index", ["bm25", "structure"])
    return folder / "index", questions, answers


def test_title_bm25_scores_titled_answers_and_is_missing_without_a_title(titled_index):
    path, questions, answers = titled_index
    index = IndexDir(path)
    question = questions[0]
    found = CandidateGenerator(index).generate(Query(id="q", text=question["title"]))
    docs, matrix = feature_matrix(found, index.store.summaries(found.docs), Vocabulary())
    titles = matrix[:, _column("title.bm25")]
    own = [docs.index(a["id"]) for a in answers if a["thread_id"] == question["id"] and a["id"] in docs]
    assert own and all(titles[i] > 0 for i in own)  # the thread's own answers: their title is the question asked
    best_other = np.nanmax(np.where(np.isin(np.arange(len(docs)), own), np.nan, titles), initial=0.0)
    assert min(titles[i] for i in own) > best_other  # and it scores above any other thread's title
    untitled = [i for i, d in enumerate(docs) if not index.store.get(d).title]
    assert untitled and np.isnan(titles[untitled]).all()  # no title: missing (NaN), not 0


def test_the_shared_collection_has_no_titles_so_title_bm25_is_missing(small_index):
    index = IndexDir(small_index)
    found = CandidateGenerator(index).generate(Query(id="q", text="does the harmonic series diverge"))
    assert found.titles == {}
    _, matrix = feature_matrix(found, index.store.summaries(found.docs), Vocabulary())
    assert np.isnan(matrix[:, _column("title.bm25")]).all()
