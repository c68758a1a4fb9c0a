"""The JSON HTTP API beside the page (issue 20), over real HTTP on 127.0.0.1 against a real `mathscout serve`
subprocess with a login, and `mathscout search|ask --server` using it."""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from tests.support.cli import one_line_error, run_cli, stop

LOGIN = "ada:correct horse"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _request(url: str, body: dict | bytes | None = None, login: str | None = LOGIN) -> tuple[int, dict]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"} if data is not None else {}
    if login:
        headers["Authorization"] = "Basic " + base64.b64encode(login.encode()).decode()
    request = urllib.request.Request(url, data=data, headers=headers, method="POST" if data is not None else "GET")
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture(scope="module")
def server(small_index, tmp_path_factory):
    """`mathscout serve --auth … --index SMALL` (the demo index is built in its fresh home first)."""
    home = tmp_path_factory.mktemp("api-home")
    port = _free_port()
    log = home / "serve.log"
    env = {**os.environ, "MATHSCOUT_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    for name in ("MATHSCOUT_INDEX", "OPENAI_API_KEY", "OPENAI_BASE_URL", "MATHSCOUT_AUTH"):
        env.pop(name, None)
    command = [
        sys.executable,
        "-m",
        "mathscout.cli",
        "serve",
        "--port",
        str(port),
        "--no-llm",
        "--auth",
        LOGIN,
        "--index",
        str(small_index),
    ]
    with open(log, "w") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            assert process.poll() is None, f"serve exited:\n{log.read_text()[-3000:]}"
            try:
                if _request(url + "/api/health")[0] == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, f"no API within 300 s:\n{log.read_text()[-3000:]}"
            time.sleep(0.5)
        yield url, home
        assert process.poll() is None, f"the server died:\n{log.read_text()[-3000:]}"
        assert "Traceback" not in log.read_text()
    finally:
        stop(process)


def test_health_lists_the_indexes_and_needs_the_login(server):
    url, _ = server
    status, body = _request(url + "/api/health")
    assert status == 200 and body["status"] == "ok" and body["default_index"] == "small"
    assert [i["key"] for i in body["indexes"]] == ["small"]  # the named index is the default; no demo beside it
    assert "structure" in body["indexes"][0]["modes"]
    for login in (None, "ada:wrong"):
        status, body = _request(url + "/api/search?q=x", login=login)
        assert status == 401 and "login" in body["error"]


def test_search_answers_like_the_command_line(server, small_index, tmp_path):
    url, _ = server
    query = "prove $a^2+b^2=c^2$"
    status, body = _request(
        url + "/api/search?" + urllib.parse.urlencode({"q": query, "mode": "structure", "k": 5, "index": "small"})
    )
    assert status == 200, body
    local = run_cli(
        ["search", "--index", str(small_index), "--mode", "structure", "--k", "5", "--json", query], tmp_path
    )
    assert local.returncode == 0, local.stderr[-2000:]
    expected = json.loads(local.stdout)
    assert [(h["doc_id"], h["score"]) for h in body["hits"]] == [(h["doc_id"], h["score"]) for h in expected["hits"]]
    assert body["hits"][0]["snippet"] == expected["hits"][0]["snippet"]
    assert (body["mode"], body["k"], body["rerank"]) == ("structure", 5, None)


def test_bad_input_gets_a_clear_json_error(server):
    url, _ = server
    cases = {
        "/api/search?q=x&k=0": (400, "k must be a whole number from 1 to 10,000"),
        "/api/search?q=x&k=1e9": (400, "k must be a whole number"),
        "/api/search?q=x&mode=nope": (400, "unknown search mode 'nope'"),
        "/api/search?q=x&rerank=bogus": (400, "unknown reranker 'bogus'"),
        "/api/search?q=x&rerank=embedding&rerank_depth=5000": (400, "rerank depth must be a whole number"),
        "/api/search?q=%20%20": (400, "the query is empty"),
        "/api/search?mode=bm25": (400, "q: Field required"),
        "/api/search?q=x&index=elsewhere": (400, "unknown index 'elsewhere'"),
        "/api/documents/no-such-doc": (404, "no document with id 'no-such-doc'"),
    }
    for path, (status, message) in cases.items():
        got, body = _request(url + path)
        assert (got, message in body.get("error", "")) == (status, True), (path, got, body)
    got, body = _request(url + "/api/ask", b"{not json")
    assert got == 400 and "JSON" in body["error"]
    got, body = _request(url + "/api/ask", {"question": "   "})
    assert got == 400 and "empty" in body["error"]
    got, body = _request(url + "/api/ask", {"question": "x", "k": 0})  # as `ask --k 0` and /api/search?k=0
    assert got == 400 and "k must be a whole number from 1 to 10,000" in body["error"]


def test_documents_and_answers(server):
    url, _ = server
    status, body = _request(url + "/api/search?q=pythagorean%20theorem&k=1")
    doc_id = body["hits"][0]["doc_id"]
    status, document = _request(url + "/api/documents/" + urllib.parse.quote(doc_id, safe=""))
    assert status == 200 and document["doc_id"] == doc_id and document["text"] and document["formulas"]
    status, answer = _request(url + "/api/ask", {"question": "What is $\\int_0^1 x^2 dx$?", "k": 3})
    assert status == 200 and answer["text"].startswith("**Computed by SymPy:**") and "\\frac{1}{3}" in answer["text"]
    assert answer["planner"] == "offline" and answer["trace"]
    status, capped = _request(url + "/api/ask", {"question": "harmonic series", "k": 100, "index": "small"})
    assert status == 200 and any("50" in n for n in capped["notices"])


def test_openapi_docs_are_served_behind_the_login_without_a_cdn(server):
    url, _ = server
    assert _request(url + "/openapi.json", login=None)[0] == 401
    status, spec = _request(url + "/openapi.json")
    assert status == 200 and {"/api/search", "/api/ask", "/api/documents/{doc_id}", "/api/health"} <= set(spec["paths"])
    request = urllib.request.Request(
        url + "/docs", headers={"Authorization": "Basic " + base64.b64encode(LOGIN.encode()).decode()}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        page = response.read().decode()
    assert response.status == 200 and "/docs/swagger-ui-bundle.js" in page and "cdn" not in page


def test_the_command_line_uses_the_server(server, tmp_path):
    url, _ = server
    env_home = tmp_path / "client-home"  # never built: the client needs no index of its own
    started = time.perf_counter()
    result = run_cli(
        ["search", "--server", url, "--auth", LOGIN, "--json", "--k", "3", "--mode", "structure", "$x^2+y^2=z^2$"],
        env_home,
    )
    seconds = time.perf_counter() - started
    assert result.returncode == 0, result.stderr[-2000:]
    assert len(json.loads(result.stdout)["hits"]) == 3
    assert seconds < 30, (
        seconds
    )  # a guard only: measured ≈ 0.5 s on a quiet machine (README); loose here for a busy one
    assert not (env_home / "indexes").exists()
    text = run_cli(["search", "--server", url, "--auth", LOGIN, "--k", "2", "pythagorean theorem"], env_home)
    assert text.returncode == 0 and text.stdout.startswith("scores: ") and "\n  1. " in text.stdout
    ask = run_cli(["ask", "--server", url, "--auth", LOGIN, "--k", "2", "What is $\\int_0^1 x^2 dx$?"], env_home)
    assert ask.returncode == 0 and ask.stdout.startswith("**Computed by SymPy:**") and "--- trace:" in ask.stdout
    assert "wants a login" in one_line_error(run_cli(["search", "--server", url, "x"], env_home))
    assert "server: unknown search mode" in one_line_error(
        run_cli(["search", "--server", url, "--auth", LOGIN, "--mode", "nope", "x"], env_home)
    )
    assert "cannot reach the MathScout server" in one_line_error(
        run_cli(["search", "--server", f"http://127.0.0.1:{_free_port()}", "x"], env_home)
    )
