"""Quiet by default, logs where logs go (issue 44): from a fresh MATHSCOUT_HOME, `index`, `run`, `search`,
`ask --no-llm`, `serve --background` and the Python API's `search` and `ask` print nothing on stderr when they
succeed (no Java log line, no per-topic line, no progress bar into a pipe, no library warning or 'Loading weights'
bar); `-v` and MATHSCOUT_LOG show the logs. Real `mathscout` processes (tests/support/cli.py), stderr captured."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.support.cli import REPO, env, one_line_error, run_cli

QUESTION = "How do I simplify $\\frac{t+1}{t}$?"


@pytest.fixture(scope="module")
def topics(shared_data, tmp_path_factory):
    """Three dev topics of the shared collection."""
    with open(shared_data / "collection" / "topics.dev.jsonl", encoding="utf-8") as f:
        lines = [next(f) for _ in range(3)]
    path = tmp_path_factory.mktemp("topics") / "topics.jsonl"
    path.write_text("".join(lines), encoding="utf-8")
    return path


def silent(result: subprocess.CompletedProcess) -> None:
    """It succeeded and said nothing on stderr."""
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr == "", result.stderr[-3000:]


@pytest.mark.slow
def test_index_is_silent_and_verbose_shows_its_log(tiny_corpus, tmp_path):
    """No Java 'INFO [main] index.SimpleIndexer' line, no progress bars, no build report; -v shows them (Java's too)."""
    built = run_cli(["index", "--input", str(tiny_corpus), "--index", str(tmp_path / "idx")], tmp_path / "home")
    silent(built)
    assert "components: store, bm25, structure" in built.stdout
    loud = run_cli(["-v", "index", "--input", str(tiny_corpus), "--index", str(tmp_path / "idx2")], tmp_path / "home")
    assert loud.returncode == 0, loud.stderr[-3000:]
    assert "building component 'bm25'" in loud.stderr and "component 'structure':" in loud.stderr
    assert "SimpleIndexer" in loud.stderr  # Anserini's own log at info
    assert "\r" not in loud.stderr  # into a pipe: no progress bar, even with -v


@pytest.mark.slow  # five real commands, ~40 s
def test_search_ask_and_run_are_silent(tiny_index, topics, tmp_path):
    """The result's notes come with the result on stdout (and in --json); the run has no line per topic."""
    home = tmp_path / "home"
    found = run_cli(["search", "--index", str(tiny_index), "--k", "3", "$a^2+b^2=c^2$"], home)
    silent(found)
    assert "note: rewrite: also searched" in found.stdout and "  1. " in found.stdout
    as_json = run_cli(["search", "--index", str(tiny_index), "--k", "3", "--json", "$a^2+b^2=c^2$"], home)
    silent(as_json)
    assert any(n.startswith("rewrite: also searched") for n in json.loads(as_json.stdout)["notices"])
    answered = run_cli(["ask", "--no-llm", "--index", str(tiny_index), "--k", "3", QUESTION], home)
    silent(answered)
    assert "--- trace: planner offline" in answered.stdout and "rewrite_formula" in answered.stdout
    ran = run_cli(
        ["run", "--index", str(tiny_index), "--topics", str(topics), "--mode", "structure", "--k", "10"]
        + ["--output", str(tmp_path / "run.trec")],
        home,
    )
    silent(ran)
    assert "3 topics" in ran.stdout and "structure: 1 queries" not in ran.stdout


@pytest.mark.slow  # four real commands, ~30 s
def test_the_log_level_is_asked_for_with_v_or_mathscout_log(tiny_index, tmp_path):
    """-v and MATHSCOUT_LOG=info show the logs on stderr (stdout unchanged); a wrong level is one line."""
    home = tmp_path / "home"
    query = ["search", "--index", str(tiny_index), "--mode", "structure-rewrite", "--k", "2", "$a^2+b^2=c^2$"]
    quiet = run_cli(query, home)
    silent(quiet)
    verbose = run_cli(["-v", *query], home)
    assert verbose.returncode == 0 and "rewrite: also searched" in verbose.stderr
    assert verbose.stdout == quiet.stdout

    def with_log(level: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "mathscout.cli", *query],
            capture_output=True,
            text=True,
            env={**env(home), "MATHSCOUT_LOG": level},
            cwd=REPO,
            timeout=300,
        )

    logged = with_log("info")
    assert logged.returncode == 0 and "rewrite: also searched" in logged.stderr
    assert "MATHSCOUT_LOG is 'loud'" in one_line_error(with_log("loud"))


@pytest.mark.slow
def test_serve_in_the_background_is_silent(tiny_index, tmp_path):
    """`serve --background` says where it serves on stdout and nothing on stderr; its log (a file) has no line per
    question and no '(Ctrl-C stops)'; search and ask through it are silent too."""
    home = tmp_path / "home"
    started = run_cli(["serve", "--background", "--no-llm", "--index", str(tiny_index)], home, timeout=900)
    try:
        silent(started)
        assert "in the background" in started.stdout
        silent(run_cli(["search", "--index", str(tiny_index), "--k", "2", "$a^2+b^2=c^2$"], home))
        silent(run_cli(["ask", "--no-llm", "--index", str(tiny_index), "--k", "2", QUESTION], home))
        log = next((home / "services").glob("*.log")).read_text(encoding="utf-8")
        assert "ready in" in log and "(Ctrl-C stops)" not in log and "rewrite:" not in log, log
    finally:
        stopped = run_cli(["serve", "--stop"], home)
    silent(stopped)


def test_the_python_api_prints_nothing(tiny_index, tmp_path):
    """`MathScout(index).search` and `.ask` in a fresh process: nothing on stdout or stderr."""
    script = (
        "from mathscout import MathScout\n"
        f"scout = MathScout({str(tiny_index)!r})\n"
        "assert scout.search('$a^2+b^2=c^2$', k=3)\n"
        f"assert scout.ask({QUESTION!r}, use_llm=False).text\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env(tmp_path), cwd=REPO, timeout=600
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "", ""), done.stderr[-3000:]


@pytest.mark.model
@pytest.mark.slow
def test_dense_builds_and_searches_silently(tiny_index, tmp_path):
    """`index --components dense` exports and quantises the model (TracerWarnings, UserWarnings, onnxruntime's
    advice, 'Loading weights' bars before): nothing on stderr; nor a dense search of the Python API."""
    index = shutil.copytree(tiny_index, tmp_path / "idx")
    home = tmp_path / "home"
    silent(run_cli(["index", "--index", str(index), "--components", "dense"], home, timeout=1200))
    script = (
        "from mathscout import MathScout\n"
        f"assert MathScout({str(index)!r}).search('sum of squares', mode='dense', k=3)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env(home), cwd=REPO, timeout=600
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "", ""), done.stderr[-3000:]
    assert os.path.isdir(index / "dense")
