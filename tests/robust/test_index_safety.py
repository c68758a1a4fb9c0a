"""A user's files are never lost and a damaged index never crashes the process (issue: reliability).

Real index builds over documents of ../shared/data, real subprocesses of the `mathscout` command, real
SIGKILLs, real concurrent builds."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mathscout.index import IndexDir
from mathscout.retrievers import open_retriever
from mathscout.retrievers.indexing import build_index
from tests.support.cli import MATHSCOUT, REPO, env, one_line_error, run_cli
from tests.support.corpora import TINY_DOCS


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# --- never replace what is not an index -------------------------------------------------------------------


def test_a_folder_of_the_users_is_refused_and_untouched(tiny_corpus, tmp_path):
    folder = tmp_path / "my-notes"
    folder.mkdir()
    (folder / "thesis.tex").write_text("my only copy", encoding="utf-8")
    shutil.copy(tiny_corpus, folder / "input.jsonl")
    before = _snapshot(folder)
    line = one_line_error(run_cli(["index", "--input", str(folder / "input.jsonl"), "--index", str(folder)], tmp_path))
    assert "not a MathScout index" in line and "nothing was changed" in line
    assert _snapshot(folder) == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".my-notes")) == []


def test_a_file_given_as_index_is_refused_and_untouched(tiny_corpus, tmp_path):
    target = tmp_path / "results.txt"
    target.write_text("precious", encoding="utf-8")
    line = one_line_error(run_cli(["index", "--input", str(tiny_corpus), "--index", str(target)], tmp_path))
    assert "is a file" in line
    assert target.read_text(encoding="utf-8") == "precious"


def test_an_empty_folder_becomes_an_index(tiny_corpus, tmp_path):
    (tmp_path / "empty").mkdir()
    build_index([tiny_corpus], tmp_path / "empty", ["bm25"])
    assert IndexDir(tmp_path / "empty").manifest.documents == TINY_DOCS


# --- rebuilding keeps what the index had ------------------------------------------------------------------


def test_rebuild_keeps_components_and_tuned_files_unless_asked(tiny_index, tiny_corpus, tmp_path):
    index = tmp_path / "idx"
    shutil.copytree(tiny_index, index)
    tuned = '{"lambda_m": 0.1, "max_formulas": 0, "text": "full"}'
    (index / "structure.json").write_text(tuned, encoding="utf-8")
    (index / "fusion.json").write_text('{"weights": {"bm25": 1.0}}', encoding="utf-8")
    (index / "ranker").mkdir()
    (index / "ranker" / "model.txt").write_text("trained", encoding="utf-8")
    smaller = tmp_path / "smaller.jsonl"
    smaller.write_text(
        "".join(tiny_corpus.read_text(encoding="utf-8").splitlines(keepends=True)[:100]), encoding="utf-8"
    )

    result = run_cli(["-v", "index", "--input", str(smaller), "--index", str(index)], tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "keeping its components bm25, structure" in result.stderr and "keeping tuned files" in result.stderr
    rebuilt = IndexDir(index)
    assert rebuilt.manifest.documents == 100 and rebuilt.components == ["store", "bm25", "structure"]
    assert (index / "structure.json").read_text(encoding="utf-8") == tuned
    assert (index / "ranker" / "model.txt").read_text(encoding="utf-8") == "trained"
    assert open_retriever(rebuilt, "structure").search("$a^2+b^2=c^2$", k=3)

    result = run_cli(
        ["-v", "index", "--input", str(smaller), "--index", str(index), "--components", "bm25", "--fresh"], tmp_path
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "dropping its structure component" in result.stderr and "--fresh" in result.stderr
    assert IndexDir(index).components == ["store", "bm25"]
    assert not (index / "structure.json").exists() and not (index / "ranker").exists()


# --- damaged files: a clear error, never a signal ----------------------------------------------------------


def _probe(index: Path, work: Path, how: str, *extra: str) -> list[dict]:
    work.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        [sys.executable, str(REPO / "tests" / "support" / "damage_probe.py"), str(index), str(work), how, *extra],
        capture_output=True,
        text=True,
        env=env(work / "home"),
        timeout=900,
        cwd=REPO,
    )
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    last = lines[-1] if lines else {}
    assert result.returncode == 0, (
        f"the process died ({result.returncode}) on {last.get('file')}: {result.stderr[-1500:]}"
    )
    return [line for line in lines if line["status"] != "trying"]


@pytest.mark.parametrize("how", ["truncate", "garble"])
def test_every_damaged_file_gives_a_clear_error(tiny_index, tmp_path, how):
    results = _probe(tiny_index, tmp_path, how)
    files = [p for p in tiny_index.rglob("*") if p.is_file() and p.name != "manifest.json" and p.stat().st_size]
    assert len(results) == len(files) >= 10
    for result in results:
        assert result["status"] == "error", result
        assert result["file"].split("/")[-1] in result["message"] or "store" in result["message"], result
        assert "rebuild" in result["message"], result


@pytest.mark.parametrize("how", ["truncate", "garble"])
def test_an_index_without_checksums_still_never_crashes(tiny_index, tmp_path, how):
    """Indexes built before checksums were recorded: the structure readers' own checks hold."""
    results = _probe(tiny_index, tmp_path, how, "--no-records")
    assert len(results) >= 6
    assert all(r["status"] in ("error", "searched") for r in results)
    assert all("rebuild" in r["message"] for r in results if r["status"] == "error")


def test_a_damaged_component_gives_one_line_on_the_command_line(tiny_index, tmp_path):
    index = tmp_path / "idx"
    shutil.copytree(tiny_index, index)
    postings = index / "structure" / "postings.bin"
    postings.write_bytes(postings.read_bytes()[:100])
    line = one_line_error(run_cli(["search", "--index", str(index), "--mode", "structure", "$x^2$"], tmp_path))
    assert "postings.bin" in line and f"mathscout index --index {index} --components structure" in line


# --- interrupted and concurrent builds ----------------------------------------------------------------------


def _start_build(corpus: Path, index: Path, home: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        MATHSCOUT + ["index", "--input", str(corpus), "--index", str(index), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(home),
        cwd=REPO,
    )


def _wait_for_leftover(parent: Path, name: str, process: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if list(parent.glob(f".{name}.building-*/store.sqlite")):
            time.sleep(0.5)
            return
        assert process.poll() is None, process.communicate()
        time.sleep(0.05)
    raise AssertionError("the build never started writing")


def test_kill_9_during_a_rebuild_keeps_the_old_index_and_the_next_build_cleans_up(tiny_index, tiny_corpus, tmp_path):
    index = tmp_path / "idx"
    shutil.copytree(tiny_index, index)
    before = open_retriever(IndexDir(index), "bm25").search("triangle", k=5)
    build = _start_build(tiny_corpus, index, tmp_path)
    _wait_for_leftover(tmp_path, "idx", build)
    build.send_signal(signal.SIGKILL)
    build.wait()
    assert list(tmp_path.glob(".idx.building-*")), "the kill left no leftover to clean (killed too late?)"
    assert [h.doc_id for h in open_retriever(IndexDir(index), "bm25").search("triangle", k=5)] == [
        h.doc_id for h in before
    ]

    result = run_cli(["-v", "index", "--input", str(tiny_corpus), "--index", str(index)], tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "removed leftovers of interrupted builds" in result.stderr
    assert not list(tmp_path.glob(".idx.*"))


def test_kill_9_during_a_first_build_leaves_nothing_behind_the_next_build(tiny_corpus, tmp_path):
    build = _start_build(tiny_corpus, tmp_path / "new", tmp_path)
    _wait_for_leftover(tmp_path, "new", build)
    build.send_signal(signal.SIGKILL)
    build.wait()
    assert not (tmp_path / "new").exists()
    result = run_cli(
        ["index", "--input", str(tiny_corpus), "--index", str(tmp_path / "new"), "--components", "bm25"], tmp_path
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert IndexDir(tmp_path / "new").manifest.documents == TINY_DOCS
    assert not list(tmp_path.glob(".new.*"))


def test_two_concurrent_builds_one_refuses_clearly(tiny_corpus, tmp_path):
    index = tmp_path / "idx"
    first = _start_build(tiny_corpus, index, tmp_path, "--components", "bm25,structure")
    _wait_for_leftover(tmp_path, "idx", first)
    second = run_cli(["index", "--input", str(tiny_corpus), "--index", str(index)], tmp_path)
    line = one_line_error(second)
    assert "another build into" in line and f"(process {first.pid})" in line
    _, err = first.communicate(timeout=600)
    assert first.returncode == 0, err[-2000:]
    assert IndexDir(index).components == ["store", "bm25", "structure"]


# --- paths and read-only indexes --------------------------------------------------------------------------


def test_any_legal_path_works(tiny_corpus, tmp_path):
    odd = tmp_path / "my index? #1 ünïcode"
    build_index([tiny_corpus], odd, ["bm25"])
    assert open_retriever(IndexDir(odd), "bm25").search("triangle", k=3)


def _can_mount() -> bool:
    return (
        shutil.which("unshare") is not None
        and subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0
    )


@pytest.mark.skipif(not _can_mount(), reason="needs unshare -m (a private mount namespace) to make a read-only mount")
def test_a_read_only_index_searches(tiny_index, tmp_path):
    """The index on a read-only bind mount (root ignores file modes, so a real read-only mount is used)."""
    index = tmp_path / "ro"
    shutil.copytree(tiny_index, index)
    script = (
        f"mount --bind '{index}' '{index}' && mount -o remount,ro,bind '{index}' && "
        f"touch '{index}/probe' 2>/dev/null && echo WRITABLE; "
        f"{sys.executable} -m mathscout.cli search --index '{index}' --mode structure --json '$a^2+b^2=c^2$' && "
        f"{sys.executable} -m mathscout.cli search --index '{index}' --mode bm25 --json triangle"
    )
    result = subprocess.run(
        ["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, env=env(tmp_path), cwd=REPO, timeout=300
    )
    assert "WRITABLE" not in result.stdout
    assert result.returncode == 0, result.stderr[-2000:]
    assert sorted(p.name for p in index.iterdir()) == sorted(p.name for p in tiny_index.iterdir())


# --- invalid Unicode --------------------------------------------------------------------------------------


def test_invalid_unicode_is_replaced_and_reported_per_record(tiny_corpus, tmp_path):
    corpus = tmp_path / "mixed.jsonl"
    lines = tiny_corpus.read_text(encoding="utf-8").splitlines()[:20]
    raw = b"\n".join(line.encode("utf-8") for line in lines)
    raw += b"\n" + b'{"id": "surrogate", "text": "lone \\ud800 surrogate and $x^2$"}'
    raw += b"\n" + b'{"id": "bytes", "text": "bad \xff\xfe bytes $y$"}\n'
    corpus.write_bytes(raw)
    result = run_cli(
        ["index", "--input", str(corpus), "--index", str(tmp_path / "idx"), "--components", "bm25"], tmp_path
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "replaced invalid Unicode in 2 records" in result.stderr
    assert "document surrogate" in result.stderr and "mixed.jsonl:22" in result.stderr
    store = IndexDir(tmp_path / "idx").store
    assert store.count() == 22
    assert store.get("surrogate").text == "lone \ufffd surrogate and $x^2$"
    assert store.get("surrogate").formulas[0].latex == "x^2"
