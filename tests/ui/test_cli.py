"""The command line as a new user meets it (issue 20): pure JSON on first use, the same options on every command,
--version, --quiet, the search prompt's own commands, a one-line error for a wrong reranker. Real subprocesses."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.support.cli import MATHSCOUT, REPO, env, one_line_error, run_cli


def test_json_is_pure_on_first_use_with_a_fresh_home(tmp_path):
    """The demo index is built inside this very command (with -v: its logs, Java's too): stdout is still one JSON
    value."""
    result = run_cli(["-v", "search", "--json", "--k", "3", "$x^2+y^2=z^2$"], tmp_path / "home")
    assert result.returncode == 0, result.stderr[-2000:]
    data = json.loads(result.stdout)
    assert data["k"] == 3 and data["mode"] == "auto" and len(data["hits"]) == 3
    assert "building component" in result.stderr  # the build really happened in this process
    ask = run_cli(["ask", "--json", "--no-llm", "--k", "2", "What is $\\int_0^1 x^2 dx$?"], tmp_path / "home")
    assert ask.returncode == 0, ask.stderr[-2000:]
    answer = json.loads(ask.stdout)
    assert answer["text"].startswith("**Computed by SymPy:**") and "\\frac{1}{3}" in answer["text"]


@pytest.mark.model
@pytest.mark.slow
def test_the_same_options_on_every_command(tmp_path, small_index):
    home = tmp_path / "home"
    auto = run_cli(
        ["search", "--index", str(small_index), "--mode", "auto", "--k", "2", "--json", "$a^2+b^2=c^2$"], home
    )
    assert auto.returncode == 0, auto.stderr[-2000:]
    assert json.loads(auto.stdout)["mode"] == "auto" and len(json.loads(auto.stdout)["hits"]) == 2
    reranked = run_cli(
        [
            "search",
            "--index",
            str(small_index),
            "--rerank",
            "embedding",
            "--k",
            "3",
            "--json",
            "integral of sin x over x",
        ],
        home,
    )
    assert reranked.returncode == 0, reranked.stderr[-2000:]
    data = json.loads(reranked.stdout)
    assert data["rerank"] == "embedding" and "rerank" in data["hits"][0]["components"]
    capped = run_cli(
        [
            "ask",
            "--index",
            str(small_index),
            "--no-llm",
            "--k",
            "100",
            "--rerank",
            "embedding",
            "--json",
            "harmonic series diverges",
        ],
        home,
    )
    assert capped.returncode == 0, capped.stderr[-2000:]
    answer = json.loads(capped.stdout)
    assert any("100" in n and "50" in n for n in answer["notices"])  # the k cap is reported
    assert [c["tool"] for c in answer["trace"]][-1] == "rerank"
    for command in (["search", "x"], ["ask", "--no-llm", "x"], ["run", "--topics", "t", "--output", "o"]):
        line = one_line_error(run_cli([*command, "--rerank", "bogus"], home))
        assert "unknown reranker 'bogus'" in line and "embedding" in line


def test_version_and_quiet(tmp_path, small_index):
    version = run_cli(["--version"], tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("mathscout 0.")
    loud = run_cli(["search", "--index", str(small_index), "--mode", "hybrid", "--k", "1", "x^2"], tmp_path)
    quiet = run_cli(["search", "--quiet", "--index", str(small_index), "--mode", "hybrid", "--k", "1", "x^2"], tmp_path)
    assert loud.returncode == quiet.returncode == 0
    # the result's notice is part of the result (stdout); nothing on stderr, with or without --quiet
    assert "note: " in loud.stdout and "no tuned fusion weights" in loud.stdout
    assert loud.stderr.strip() == "" and quiet.stderr.strip() == ""
    assert quiet.stdout == loud.stdout
    also = run_cli(["--quiet", "search", "--index", str(small_index), "--mode", "hybrid", "--k", "1", "x^2"], tmp_path)
    assert also.returncode == 0 and also.stderr.strip() == ""


def test_bench_and_train_help_list_what_they_run(tmp_path):
    from mathscout.benchmarks import BENCHMARKS
    from mathscout.ui.registry import trainers

    for command, table in (("bench", BENCHMARKS), ("train", trainers())):
        shown = run_cli([command, "--help"], tmp_path)
        assert shown.returncode == 0 and shown.stderr == ""
        listed = shown.stdout[shown.stdout.index("\nbenchmarks:\n" if command == "bench" else "\ntrainers:\n") :]
        # one line a name, its description beside it (wrapped under it), in name order
        names = [line.split()[0] for line in listed.splitlines()[1:] if line.startswith("  ") and line[2] != " "]
        assert names == sorted(table), shown.stdout
        assert all(len(line) <= 100 for line in listed.splitlines())


def test_the_search_prompt_understands_its_own_commands(tmp_path, small_index):
    lines = ":help\n:mode structure\n:k 2\n$a^2+b^2=c^2$\n:mode nonsense\n:frobnicate\n:k 0\n:quit\nnever searched\n"
    result = subprocess.run(
        MATHSCOUT + ["search", "--index", str(small_index)],
        input=lines,
        capture_output=True,
        text=True,
        env=env(tmp_path),
        cwd=REPO,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout
    assert ":mode NAME" in out and "mode structure" in out and "k 2" in out
    assert "  1. " in out and "  2. " in out and "  3. " not in out  # searched with k 2 …
    assert "structure" in out.split("  1. ")[1].splitlines()[0]  # … by structure
    assert "unknown search mode 'nonsense'" in out and "unknown command ':frobnicate'" in out
    assert "k must be a whole number" in out
    assert "no results for ':" not in out and "never searched" not in out


def test_ask_lists_the_tool_calls_once(tmp_path, small_index):
    result = run_cli(
        ["ask", "--index", str(small_index), "--no-llm", "--k", "3", "$\\sum_{n=1}^\\infty 1/n$"], tmp_path
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "--- trace: planner offline" in result.stdout
    # not on a terminal: no live progress on stderr, the calls listed once in the trace
    trace = result.stdout.split("--- trace: planner offline")[1]
    assert result.stderr.strip() == "" and trace.count("structure_search") >= 1
    assert result.stdout.count("structure_search") == trace.count("structure_search")
    quiet = run_cli(
        ["ask", "-q", "--index", str(small_index), "--no-llm", "--k", "3", "$\\sum_{n=1}^\\infty 1/n$"], tmp_path
    )
    assert quiet.stderr.strip() == "" and "structure_search" in quiet.stdout  # quiet: the list is in the trace


def test_a_missing_optional_part_is_named_in_one_line(tmp_path):
    """As on a core installation without the [ui] extra: gradio cannot be imported."""
    code = (
        "import sys; sys.modules['gradio'] = None; from mathscout.cli import main; "
        "sys.exit(main(['serve', '--port', '7']))"
    )
    result = subprocess.run(
        [MATHSCOUT[0], "-c", code], capture_output=True, text=True, env=env(tmp_path), cwd=REPO, timeout=300
    )
    line = one_line_error(result)
    assert "pip install 'mathscout[ui]'" in line


@pytest.mark.slow
def test_kernel_compilation_is_announced_once_per_installation(tmp_path, small_index):
    """An empty numba cache is what a fresh installation has: the first structure search says it compiles (on a
    terminal, or in its log: -v), the next one (cache filled) says nothing."""
    cache = {**env(tmp_path), "NUMBA_CACHE_DIR": str(tmp_path / "numba-cache")}
    command = MATHSCOUT + ["-v", "search", "--index", str(small_index), "--mode", "structure", "--k", "1", "$x^2+y^2$"]
    first = subprocess.run(command, capture_output=True, text=True, env=cache, cwd=REPO, timeout=900)
    assert first.returncode == 0, first.stderr[-2000:]
    assert first.stderr.count("compiling the structure-search kernels") == 1
    second = subprocess.run(command, capture_output=True, text=True, env=cache, cwd=REPO, timeout=900)
    assert second.returncode == 0 and "compiling" not in second.stderr and second.stdout == first.stdout


def test_a_search_imports_only_what_its_mode_needs(tmp_path, small_index):
    """No encoders, UI, agent framework, SymPy or full NLTK for a bm25 or structure search (they cost seconds)."""
    heavy = [
        "torch",
        "transformers",
        "pyserini.encode",
        "nltk",
        "gradio",
        "langchain_core",
        "sympy",
        "sentence_transformers",
        "faiss",
        "gensim",
    ]
    for mode, absent in (("bm25", heavy + ["numba"]), ("structure", heavy)):
        code = (
            "import contextlib, io, json, sys; from mathscout.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    code = main(['search', '--index', {str(small_index)!r}, '--mode', {mode!r}, '--k', '3', "
            "'prove $a^2+b^2=c^2$'])\n"
            f"print(json.dumps([code, [m for m in {absent!r} if m in sys.modules]]))"
        )
        result = subprocess.run(
            [MATHSCOUT[0], "-c", code], capture_output=True, text=True, env=env(tmp_path), cwd=REPO, timeout=300
        )
        assert result.returncode == 0, result.stderr[-2000:]
        assert json.loads(result.stdout.splitlines()[-1]) == [0, []], mode
