"""`mathscout search` and `mathscout ask` through a running MathScout service of the same user, without `--server`
(issue 35): a real `mathscout serve` on 127.0.0.1, real command-line processes, the service record in
$MATHSCOUT_HOME/services (mathscout.ui.services)."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.support.cli import MATHSCOUT, REPO, stop
from tests.support.harness import free_port

LOGIN = "ada:correct horse"
QUERY = "pythagorean theorem $a^2+b^2=c^2$"
THROUGH = "through the service at"
SECONDS = re.compile(r'^\s*"seconds": [0-9.e-]+,?\n', re.MULTILINE)  # timing lines of the JSON output


SOURCES = ("mathscout", "agent", "retrievers", "tools", "ui", "evaluation", "benchmarks", "prompts")


@pytest.fixture(scope="module")
def code(tmp_path_factory) -> Path:
    """A copy of the code as it is now (modification times and numba caches kept), which the servers and command
    lines of these tests run: an edit of the tree meanwhile would rightly make the command line pass a service over."""
    copy = tmp_path_factory.mktemp("code")
    for name in SOURCES:
        shutil.copytree(REPO / name, copy / name, symlinks=True)
    return copy


def _env(home: Path, code: Path) -> dict:
    environment = {
        **os.environ,
        "MATHSCOUT_HOME": str(home),
        "PYTHONPATH": str(code),
        "PYTHONUNBUFFERED": "1",
        "MATHSCOUT_DEBUG": "1",
    }  # the debug line says which way a search went
    for name in ("MATHSCOUT_INDEX", "MATHSCOUT_AUTH", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        environment.pop(name, None)
    return environment


def _cli(args: list[str], home: Path, code: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        MATHSCOUT + args, check=False, capture_output=True, text=True, env=_env(home, code), timeout=timeout, cwd=code
    )


def _records(home: Path) -> list[Path]:
    return sorted((home / "services").glob("*.json"))


def _through_service(result: subprocess.CompletedProcess) -> bool:
    assert result.returncode == 0, result.stderr[-3000:]
    return THROUGH in result.stderr


@pytest.fixture(scope="module")
def service(tiny_index, code, tmp_path_factory):
    """`mathscout serve --auth … --index TINY` in a fresh home, once its record is written: (home, record)."""
    home = tmp_path_factory.mktemp("service-home")
    log = home / "serve.log"
    command = MATHSCOUT + ["serve", "--port", str(free_port()), "--no-llm", "--auth", LOGIN, "--index", str(tiny_index)]
    with open(log, "w") as out:
        process = subprocess.Popen(command, env=_env(home, code), stdout=out, stderr=subprocess.STDOUT, cwd=code)
    try:
        deadline = time.monotonic() + 300
        while not _records(home):
            assert process.poll() is None, f"serve exited:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"no service record within 300 s:\n{log.read_text()[-3000:]}"
            time.sleep(0.5)
        record = _records(home)[0]
        yield home, record
        assert process.poll() is None, f"the server died:\n{log.read_text()[-3000:]}"
    finally:
        stop(process)
    assert not _records(home), "the server left its record behind on SIGTERM"


def _record(path: Path) -> dict:
    return json.loads(path.read_text())


def _get(url: str, authorization: str | None) -> tuple[int, dict]:
    request = urllib.request.Request(url, headers={"Authorization": authorization} if authorization else {})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_the_record_is_private_and_names_the_index(service, tiny_index):
    home, path = service
    assert stat.S_IMODE(os.stat(home / "services").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600 and os.stat(path).st_uid == os.getuid()
    record = _record(path)
    assert record["url"].startswith("http://127.0.0.1:") and path.name == f"{record['pid']}.json"
    assert record["indexes"] == {str(tiny_index.resolve()): "idx"}
    assert len(record["token"]) >= 40


def test_the_token_is_a_login_and_another_token_is_refused(service):
    _, path = service
    record = _record(path)
    search = record["url"] + "/api/search?q=x&k=1"
    assert _get(search, f"Bearer {record['token']}")[0] == 200
    status, body = _get(search, "Bearer " + "x" * len(record["token"]))
    assert status == 401 and "token" in body["error"]
    assert _get(search, None)[0] == 401  # the --auth login is still wanted without the token


@pytest.mark.parametrize("mode", ["bm25", "structure", "auto"])
def test_search_prints_what_a_local_search_prints(service, tiny_index, code, mode):
    home, _ = service
    search = ["search", "--index", str(tiny_index), "--mode", mode, "--k", "5", QUERY]
    for output in ([], ["--json"]):
        served, local = _cli(search + output, home, code), _cli(search + output + ["--local"], home, code)
        assert _through_service(served), served.stderr[-2000:]
        assert not _through_service(local), local.stderr[-2000:]
        assert served.stdout.strip() and SECONDS.sub("", served.stdout) == SECONDS.sub("", local.stdout)
        if not output:
            assert served.stdout == local.stdout  # byte for byte


def test_ask_prints_what_a_local_answer_prints(service, tiny_index, code):
    home, _ = service
    ask = ["ask", "--no-llm", "--index", str(tiny_index), "--k", "5", "Why is $a^2+b^2=c^2$ for a right triangle?"]
    served, local = _cli(ask, home, code), _cli(ask + ["--local"], home, code)
    assert _through_service(served) and not _through_service(local), served.stderr[-2000:]
    trace_time = re.compile(r"(--- trace: .*tool calls), [0-9.]+ s$", re.MULTILINE)  # the answer's own timing
    call_time = re.compile(r" \([0-9.]+ s\)$", re.MULTILINE)  # each tool call's, listed in the trace (not a terminal)
    assert "--- trace: planner offline" in served.stdout

    def untimed(printed: str) -> str:
        return call_time.sub("", trace_time.sub(r"\1", printed))

    assert untimed(served.stdout) == untimed(local.stdout)
    served, local = _cli(ask + ["--json"], home, code), _cli(ask + ["--json", "--local"], home, code)
    assert _through_service(served), served.stderr[-2000:]
    assert SECONDS.sub("", served.stdout) == SECONDS.sub("", local.stdout)
    assert json.loads(served.stdout)["hits"]


def test_stale_and_foreign_records_are_not_used(service, tiny_index, code):
    home, path = service
    record = _record(path)
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        with open(f"/proc/{sleeper.pid}/stat") as f:
            sleeper_start = f.read().rpartition(")")[2].split()[19]
        silent = f"http://127.0.0.1:{free_port()}"
        fakes = {  # newer than the real record, so they are tried first
            "ended.json": dict(record, pid=ended.pid, since=record["since"] + 10),
            "silent.json": dict(record, pid=sleeper.pid, started=sleeper_start, url=silent, since=record["since"] + 20),
        }
        for name, fake in fakes.items():
            (home / "services" / name).write_text(json.dumps(fake))
            os.chmod(home / "services" / name, 0o600)
        readable = home / "services" / "readable.json"  # readable by others: never trusted, never removed
        readable.write_text(json.dumps(dict(record, url=silent, since=record["since"] + 30)))
        os.chmod(readable, 0o644)
        search = ["search", "--index", str(tiny_index), "--k", "3", QUERY]
        served = _cli(search, home, code)
        assert _through_service(served) and record["url"] in served.stderr, served.stderr[-2000:]
        assert "removed the record of ended service" in served.stderr and "nothing listens" in served.stderr
        assert [p.name for p in _records(home)] == [path.name, "readable.json"]
        assert served.stdout == _cli(search + ["--local"], home, code).stdout
    finally:
        stop(sleeper)
        for name in ("ended.json", "silent.json", "readable.json"):
            (home / "services" / name).unlink(missing_ok=True)


def test_no_service_means_a_local_search(tiny_index, code, tmp_path):
    result = _cli(["search", "--index", str(tiny_index), "--k", "2", QUERY], tmp_path, code)
    lines = [line for line in result.stdout.splitlines() if line.strip() and not line.startswith("note: ")]
    # the result's notes come first, then what the scores mean (once), then the hits
    assert not _through_service(result) and lines[0].startswith("scores: ") and lines[1].lstrip().startswith("1. ")
    assert not (tmp_path / "services").exists()  # nothing is created by looking


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_a_background_service_starts_serves_and_stops(tiny_index, code, tmp_path):
    started = _cli(["serve", "--background", "--no-llm", "--index", str(tiny_index)], tmp_path, code, timeout=600)
    pid = 0
    try:
        assert started.returncode == 0, started.stderr[-3000:]
        assert re.search(r"serving idx on http://127\.0\.0\.1:\d+ in the background \(process \d+", started.stdout)
        pid = int(re.search(r"process (\d+)", started.stdout).group(1))
        assert [p.name for p in _records(tmp_path)] == [f"{pid}.json"] and _running(pid)
        served = _cli(["search", "--index", str(tiny_index), "--k", "2", QUERY], tmp_path, code)
        assert _through_service(served), served.stderr[-2000:]
    finally:
        stopped = _cli(["serve", "--stop"], tmp_path, code, timeout=120)
    assert stopped.returncode == 0 and f"(process {pid})" in stopped.stdout, stopped.stdout + stopped.stderr
    assert not _records(tmp_path) and not _running(pid)
    assert "no service" in _cli(["serve", "--stop"], tmp_path, code).stdout
