"""Hostile HTTP requests to a real `mathscout serve` on 127.0.0.1 (issue 32, items 1, 2, 3 and 10; issue 42,
items 2 and 7; requests another website's page makes a visitor's browser send).

Three servers run for the whole module over a copy of the tiny index with a secret file beside it, and an index
of documents with odd ids: the default `serve` (no login), one with `--auth`, and one listening on 0.0.0.0
(`--public --allow-host scout.example`). Add a case by adding one entry to a table:

    HOSTILE        (method, path, body, status, words of the one-line error): failures of /api and /docs
    HOSTILE_HEADERS (headers, path, status, words): requests refused for their head
    HOSTS          (Host header, answered by a loopback server, answered by the 0.0.0.0 one): DNS rebinding
    CROSS_SITE     (headers, answered): where the browser says a request comes from (cross-site request forgery)
    ODD_IDS        document ids the API must fetch percent-encoded
    file_targets   files no route may serve; every route of the app is probed (enumerated in-process, so a
                   route a new Gradio adds is probed too), and every input of every page event
"""

from __future__ import annotations

import base64
import http.client
import json
import re
import shutil
import time
import urllib.parse
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from mathscout.limits import MAX_REQUEST_BYTES
from tests.support.harness import Server, assert_http_error, page_ask

LOGIN = "u:p"
SECRET = "top-secret-" + uuid.uuid4().hex
CACHED = "cached-secret-" + uuid.uuid4().hex  # in the folder a server is told is Gradio's examples cache
FORWARDED = "X-Forwarded-For"  # uvicorn trusts it from 127.0.0.1 (a local proxy): tests speak from many addresses
FUZZ_ADDRESS = "192.0.2.250"
CHROMIUM = "/usr/bin/chromium"
PUBLIC_NAME = "scout.example"  # the public server's --allow-host
ODD_IDS = [  # ids of the odd index: each must come back from GET /api/documents/{percent-encoded id}
    "line\nbreak",
    "two\nlines and\ta tab",  # (other control characters are refused in ids at index time: issue 42 item 5)
    "a/b?c#d%e&f=g",
    "../../etc/passwd",
    "ünï©ødé ∑",
]


# ---- the servers ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def index(tiny_index, tmp_path_factory) -> Path:
    """A copy of the tiny index in a folder that also holds a secret file and an 'examples cache'."""
    folder = tmp_path_factory.mktemp("hostile")
    shutil.copytree(tiny_index, folder / "idx")
    (folder / "secret.txt").write_text(SECRET)
    (folder / "examples").mkdir()
    (folder / "examples" / "cached.txt").write_text(CACHED)
    return folder / "idx"


@pytest.fixture(scope="module")
def file_targets(index) -> dict[str, bytes]:
    """Files no request may read, with bytes that show one was read."""
    return {
        "/etc/passwd": b"root:x:0:0:",
        str(index / "store.sqlite"): b"SQLite format 3",
        str(index.parent / "secret.txt"): SECRET.encode(),
        str(index.parent / "examples" / "cached.txt"): CACHED.encode(),
    }


@pytest.fixture(scope="module")
def odd_index(tmp_path_factory) -> Path:
    """A structure index of a document per ODD_IDS id (each holds a formula)."""
    from mathscout.retrievers.indexing import build_index

    folder = tmp_path_factory.mktemp("odd")
    with open(folder / "odd.jsonl", "w", encoding="utf-8") as out:
        for n, doc_id in enumerate(ODD_IDS):
            out.write(json.dumps({"id": doc_id, "title": f"odd id {n}", "text": f"An odd id: $x^{n + 2} + 1$."}) + "\n")
    build_index([folder / "odd.jsonl"], folder / "odd", ["structure"])
    return folder / "odd"


def _serve(home: Path, index: Path, cache: Path, auth: str | None, *more: str, access_log: bool = False):
    """`access_log`: the server logs a line per request (client, method, path, status) into its log."""
    server = Server(
        home,
        "--index",
        str(index),
        *more,
        auth=auth,
        extra_env={
            "GRADIO_TEMP_DIR": str(cache),
            "GRADIO_EXAMPLES_CACHE": str(index.parent / "examples"),
            **({"MATHSCOUT_LOG": "info"} if access_log else {}),
        },
    )
    server.cache = cache  # Gradio's file cache is made inside it: no target may ever be copied there
    return server


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("hostile-home")  # shared: the demo index is built once


@pytest.fixture(scope="module")
def open_server(home, index, odd_index, tmp_path_factory):
    cache = tmp_path_factory.mktemp("open-cache")
    with _serve(home, index, cache, None, "--index", str(odd_index), access_log=True) as server:
        yield server


@pytest.fixture(scope="module")
def auth_server(home, index, odd_index, tmp_path_factory):
    with _serve(home, index, tmp_path_factory.mktemp("auth-cache"), LOGIN, "--index", str(odd_index)) as server:
        yield server


@pytest.fixture(scope="module")
def spare_index(index, tmp_path_factory) -> Path:
    """A second copy of the index, offered by the public server only: a test removes it while it serves."""
    spare = tmp_path_factory.mktemp("spare") / "spare"
    shutil.copytree(index, spare)
    return spare


@pytest.fixture(scope="module")
def public_server(home, index, spare_index, tmp_path_factory):
    """`serve --host 0.0.0.0 --public --allow-host scout.example` (no login): the Host rules of a public server."""
    more = ("--index", str(spare_index), "--host", "0.0.0.0", "--public", "--allow-host", PUBLIC_NAME)
    with _serve(home, index, tmp_path_factory.mktemp("public-cache"), None, *more) as server:
        yield server


SERVERS = ["open_server", "auth_server"]


def _basic(login: str) -> str:
    return "Basic " + base64.b64encode(login.encode()).decode()


def _page_login(server, user: str, password: str, address: str) -> tuple[int, float, bytes, list[str]]:
    """POST the page's login form from `address`: (status, seconds, body, cookies set)."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    started = time.perf_counter()
    try:
        connection.request(
            "POST",
            "/login",
            urllib.parse.urlencode({"username": user, "password": password}),
            {"Content-Type": "application/x-www-form-urlencoded", FORWARDED: address},
        )
        response = connection.getresponse()
        body = response.read()
        cookies = [c.split(";", 1)[0] for c in response.headers.get_all("set-cookie") or []]
        return response.status, time.perf_counter() - started, body, cookies
    finally:
        connection.close()


def _attacker(server) -> dict[str, str]:
    """The headers of a logged-in user of `server` (its page cookie and API login) when it has a login."""
    headers = {FORWARDED: FUZZ_ADDRESS}
    if server.auth:
        status, _, _, cookies = _page_login(server, *server.auth.split(":"), FUZZ_ADDRESS)
        assert status == 200 and cookies
        headers.update({"Cookie": "; ".join(cookies), "Authorization": _basic(server.auth)})
    return headers


def fetch(
    server, method: str, path: str, body=None, headers=None, seconds: float = 1.5, until: bytes | None = None
) -> tuple[int, bytes]:
    """One request whose answer is read for at most `seconds` (event streams never end) or until `until`."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=seconds)
    data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
    got = b""
    try:
        connection.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
        response = connection.getresponse()
        try:
            while len(got) < 8 << 20 and not (until and until in got) and (chunk := response.read1(1 << 16)):
                got += chunk
        except (OSError, http.client.HTTPException):  # a stream cut by the timeout or by the server
            pass
        return response.status, got
    except (OSError, http.client.HTTPException):
        return 0, got
    finally:
        connection.close()


# ---- item 1: no route reads a file the server did not make ------------------------------------------------


def _file_item(path: str) -> dict:
    return {"path": path, "meta": {"_type": "gradio.FileData"}}


def _payloads(targets) -> list:
    """File items as the page's API takes them: a list of FileData, and chat history items holding files."""
    return [
        [_file_item(t) for t in targets],
        [{"role": "user", "content": [{"type": "file", "file": _file_item(t)}]} for t in targets],
    ]


def _walk(routes, prefix: str = ""):
    """(method, path template) of every route, into mounted apps and included routers."""
    for route in routes:
        if hasattr(route, "original_router"):  # FastAPI's included router (Gradio's /gradio_api routes)
            yield from _walk(route.original_router.routes, prefix + route.include_context.prefix)
        elif not getattr(route, "methods", None) and hasattr(getattr(route, "app", None), "routes"):  # a mount
            yield from _walk(route.app.routes, prefix + route.path)
        else:
            for method in sorted(getattr(route, "methods", None) or {"GET", "POST"}):
                yield method, prefix + route.path


@pytest.fixture(scope="module")
def site_routes(index, tmp_path_factory, monkeypatch_module) -> list[tuple[str, str]]:
    """Every route of the app `mathscout serve` runs (the API with the page mounted), built here in-process."""
    from mathscout.ui.app import build_site
    from mathscout.ui.chat import AssistantPool
    from mathscout.ui.indexes import IndexChoice
    from mathscout.ui.login import LoginGuard

    monkeypatch_module.setenv("GRADIO_TEMP_DIR", str(tmp_path_factory.mktemp("in-process-cache")))
    site = build_site(AssistantPool([IndexChoice("idx", "idx", index)], use_llm=False), LoginGuard("u", "p"))
    routes = sorted(set(_walk(site.routes)))
    assert len(routes) > 60 and ("POST", "/gradio_api/queue/join") in routes and ("GET", "/api/search") in routes
    return routes


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def _filled(template: str, target: str) -> list[str]:
    """The template with each parameter set to the target as an absolute path, encoded, climbing up with ../,
    and as a file: URL; a query naming it too."""
    climb = "../" * 12 + target.lstrip("/")
    values = [
        target,
        urllib.parse.quote(target, safe=""),
        climb,
        urllib.parse.quote(climb, safe=""),
        "file://" + target,
    ]
    query = "?" + urllib.parse.urlencode(
        {
            "path": target,
            "file": target,
            "url": target,
            "session_hash": "fuzz",
            "fn_index": 0,
            "index": str(Path(target).parent),
        }
    )
    if "{" not in template:
        return [template + query]
    return [re.sub(r"\{[^}]+\}", lambda _, value=value: value, template) + query for value in values]


def _leaks(server, seen: bytes, headers, targets: dict[str, bytes]) -> list[str]:
    """Targets whose bytes are in the answers, in a file an answer links to, or copied into Gradio's cache."""
    found = [f"{path} in an answer" for path, mark in targets.items() if mark in seen]
    for url in sorted(set(re.findall(rb"/gradio_api/file=[^\"'\\\s<>]+", seen)))[:200]:
        _, body = fetch(
            server, "GET", urllib.parse.quote(url.decode(errors="replace"), safe="/=:%?&+"), headers=headers, seconds=10
        )
        found += [f"{path} at {url.decode()}" for path, mark in targets.items() if mark in body]
    for copy in server.cache.rglob("*"):
        if copy.is_file() and not copy.is_symlink():
            content = copy.read_bytes()
            found += [f"{path} copied to {copy}" for path, mark in targets.items() if mark in content]
    return found


@pytest.mark.parametrize("server_name", SERVERS)
def test_no_route_serves_a_file_beside_the_index_or_anywhere(server_name, request, site_routes, file_targets):
    """Every route of the app, with every path parameter and a JSON body naming the targets (as a path, encoded,
    by ../ and as file:), as a logged-in user when the server has a login."""
    server = request.getfixturevalue(server_name)
    headers = _attacker(server)
    body = {
        "data": _payloads(file_targets)[0] * 2,
        "fn_index": 0,
        "session_hash": "fuzz",
        "path": "/etc/passwd",
        "files": _payloads(file_targets)[0],
        "component_id": 1,
        "fn_name": "preprocess",
    }
    requests = [
        (method, path)
        for method, template in site_routes
        if method != "HEAD" and "/logout" not in template
        for target in file_targets
        for path in _filled(template, target)
    ]
    with ThreadPoolExecutor(6) as pool:
        answers = list(
            pool.map(lambda r: fetch(server, r[0], r[1], body if r[0] != "GET" else None, headers), requests)
        )
    assert server.alive()
    assert all(status != 200 or not any(m in got for m in file_targets.values()) for status, got in answers)
    assert _leaks(server, b"\n".join(got for _, got in answers), headers, file_targets) == []


def _event_routes(fn_index: int, api_name: str | None):
    """How a client can submit an event: the page's queue, and the named API's run, api, call and call/v2."""
    yield "queue", "/gradio_api/queue/join"
    yield "run", "/gradio_api/run/predict"
    if api_name:
        yield from (
            ("run", f"/gradio_api/run/{api_name}"),
            ("run", f"/gradio_api/api/{api_name}"),
            ("call", f"/gradio_api/call/{api_name}"),
            ("call", f"/gradio_api/call/v2/{api_name}"),
        )


def _submit(server, headers, kind: str, route: str, fn_index: int, data: list) -> bytes:
    """Submit one event and read all that comes back (the queue's and call's event streams included)."""
    session = uuid.uuid4().hex
    body = {"data": data, "fn_index": fn_index, "session_hash": session, "event_data": None, "trigger_id": None}
    status, got = fetch(server, "POST", route, body, headers, seconds=30)
    if status != 200 or kind == "run":
        return got
    if kind == "queue":
        return (
            got
            + fetch(
                server,
                "GET",
                f"/gradio_api/queue/data?session_hash={session}",
                headers=headers,
                seconds=60,
                until=b"process_completed",
            )[1]
        )
    event = json.loads(got)["event_id"]
    return got + fetch(server, "GET", f"{route}/{event}", headers=headers, seconds=60, until=b"event: complete")[1]


@pytest.mark.parametrize("server_name", SERVERS)
def test_no_page_event_takes_a_file_item(server_name, request, file_targets):
    """Every event of the page (from its /config), a file item in each input in turn (as a list of FileData
    and as chat history items), through the queue and every API route: nothing is copied or served."""
    server = request.getfixturevalue(server_name)
    headers = _attacker(server)
    status, config = fetch(server, "GET", "/config", headers=headers, seconds=30)
    assert status == 200, config[:300]
    config = json.loads(config)
    values = {c["id"]: c.get("props", {}).get("value") for c in config["components"]}
    seen = b""
    events = [d for d in config["dependencies"] if d.get("backend_fn")]
    assert any(d.get("api_name") == "ask" for d in events)
    for event in events:
        page_values = [values.get(i) for i in event["inputs"]]
        for position in range(len(page_values)):
            for payload in _payloads(file_targets):
                data = page_values[:position] + [payload] + page_values[position + 1 :]
                for kind, route in _event_routes(event["id"], event.get("api_name")):
                    seen += _submit(server, headers, kind, route, event["id"], data)
    assert server.alive()
    assert _leaks(server, seen, headers, file_targets) == []


@pytest.mark.parametrize("server_name", SERVERS)
def test_uploads_are_refused_and_nothing_is_written(server_name, request):
    server = request.getfixturevalue(server_name)
    headers = {**_attacker(server), "Content-Type": "multipart/form-data; boundary=b"}
    form = (
        b'--b\r\nContent-Disposition: form-data; name="files"; filename="x.html"\r\n\r\n<script>1</script>\r\n--b--\r\n'
    )
    status, body = fetch(server, "POST", "/gradio_api/upload", form, headers, seconds=10)
    assert_http_error(status, body, 404)
    assert [p for p in server.cache.rglob("*") if p.is_file()] == []


# ---- item 2: failed logins slow the failing client and name, never the right login ------------------------


def test_failed_logins_of_one_name_never_delay_the_right_login(auth_server):
    """The issue's case: wrong passwords as 'mallory' used to make every login of everyone wait."""
    seconds = [_page_login(auth_server, "mallory", f"guess{n}", "203.0.113.66")[:2] for n in range(5)]
    assert [s for s, _ in seconds] == [400] * 5
    assert max(t for _, t in seconds[:3]) < 0.8 and seconds[3][1] >= 0.9 and seconds[4][1] >= 1.9  # 3 free, 1 s, 2 s
    status, took, _, cookies = _page_login(auth_server, "u", "p", "198.51.100.7")
    assert status == 200 and cookies and took < 0.8, took
    started = time.perf_counter()
    status, _, _ = auth_server.request("GET", "/api/health", login=LOGIN, headers={FORWARDED: "198.51.100.7"})
    assert status == 200 and time.perf_counter() - started < 0.8


def test_parallel_guesses_from_one_address_are_refused_before_any_is_checked(auth_server):
    address = "203.0.113.77"
    for n in range(4):  # three free failures, then one slowed by 1 s: the next is slowed by 2 s
        assert _page_login(auth_server, "trudy", f"warm{n}", address)[0] == 400
    with ThreadPoolExecutor(8) as pool:
        slowed = pool.submit(_page_login, auth_server, "trudy", "first", address)
        time.sleep(0.3)
        parallel = list(pool.map(lambda n: _page_login(auth_server, "trudy", f"p{n}", address), range(6)))
        right = _page_login(auth_server, "u", "p", address)  # not even the right password is looked at now
        api = auth_server.request("GET", "/api/health", login=LOGIN, headers={FORWARDED: address})
        assert slowed.result()[0] == 400 and slowed.result()[1] >= 1.9
    assert [(status, took < 0.8) for status, took, _, _ in parallel] == [(429, True)] * 6
    assert right[0] == 429 and b"try again in" in right[2]
    assert_http_error(api[0], api[2], 429) and api[1]["retry-after"].isdigit()
    assert _page_login(auth_server, "u", "p", address)[0] == 200  # once the slowed attempt is answered


def test_guessing_one_name_from_many_addresses_is_slowed_too(auth_server):
    took = [_page_login(auth_server, "spread", "x", f"203.0.113.{n}")[1] for n in range(1, 5)]
    assert max(took[:3]) < 0.8 and took[3] >= 0.9  # the name's 4th failure waits, whatever its address
    status, _, _ = auth_server.request("GET", "/api/health", login="spread:x", headers={FORWARDED: "203.0.113.9"})
    assert status == 401  # the API's Basic login is the same guard


# ---- item 3: the API docs behind the login, served without a CDN ------------------------------------------


def test_docs_and_schema_need_the_login(auth_server):
    for path in ("/docs", "/openapi.json", "/docs/swagger-ui-bundle.js", "/docs/swagger-ui.css"):
        for login in (None, "u:wrong-docs"):
            status, headers, body = auth_server.request("GET", path, login=login, headers={FORWARDED: "198.51.100.20"})
            assert_http_error(status, body, 401) and headers["www-authenticate"].startswith("Basic")
        status, headers, body = auth_server.request("GET", path, login=LOGIN)
        assert status == 200 and len(body) > 100
    page = auth_server.request("GET", "/docs", login=LOGIN)[2].decode()
    assert "/docs/swagger-ui-bundle.js" in page and not re.search(r"(src|href)=\"https?:", page)


@pytest.mark.browser
def test_docs_render_the_operations_offline_in_a_browser(auth_server):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    user, password = LOGIN.split(":")
    outside: list[str] = []

    def only_local(route):
        if route.request.url.startswith(auth_server.url):
            return route.continue_()
        outside.append(route.request.url)
        return route.abort()

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            context = browser.new_context(http_credentials={"username": user, "password": password})
            context.route("**/*", only_local)
            page = context.new_page()
            page.goto(auth_server.url + "/docs")
            page.wait_for_selector(".opblock-summary-path", timeout=30_000)
            paths = page.locator(".opblock-summary-path").all_inner_texts()
        finally:
            browser.close()
    assert {"/api/health", "/api/search", "/api/ask", "/api/documents/{doc_id}"} <= {
        p.replace("\u200b", "").strip() for p in paths
    }
    assert outside == []


# ---- item 10: one error shape for every failure of /api and /docs -----------------------------------------

BIG_K = "9" * 5_000
HOSTILE = [  # method, path, body, status, words of the error
    ("POST", "/api/ask", '{"question": "\\ud800"}', 400, "lone surrogate"),
    ("POST", "/api/ask", '{"question": "x", "mode": "\\udfff"}', 400, "mode: not valid Unicode"),
    ("POST", "/api/ask", '{"question": "x", "k": ' + BIG_K + "}", 400, "body"),
    ("GET", "/api/search?q=x&k=" + BIG_K, None, 400, "k must be a whole number"),
    ("POST", "/api/ask", "{not json", 400, "JSON"),
    ("POST", "/api/ask", "[1, 2]", 400, "request body"),
    ("POST", "/api/ask", '{"question": "   "}', 400, "empty"),
    ("POST", "/api/ask", '{"question": "' + "x" * MAX_REQUEST_BYTES + '"}', 413, "over 1 MiB"),
    ("GET", "/api/documents/no-such-doc", None, 404, "no document"),
    ("GET", "/api/nope", None, 404, "no route /api/nope"),
    ("GET", "/api", None, 404, "no route"),
    ("GET", "/api/ask", None, 405, "use POST"),
    ("DELETE", "/api/health", None, 405, "use GET"),
    ("PUT", "/api/documents/x", "{}", 405, "use GET"),
    ("PATCH", "/api/search?q=x", "{}", 405, "use GET"),
    ("POST", "/docs", "{}", 405, "use GET"),
    ("POST", "/openapi.json", "{}", 405, "use GET"),
    ("GET", "/docs/swagger.js", None, 404, "no file"),
    ("GET", "/docs/..%2F..%2Fetc%2Fpasswd", None, 404, "no"),
    ("GET", "/docs/", None, 404, "no route"),
    ("POST", "/gradio_api/upload", "x", 404, "no files"),
    ("GET", "/gradio_api/file=https://example.org/x.html", None, 404, "no files"),
    # issue 42, item 7
    ("POST", "/api/ask", '{"question": "x", "k": true}', 400, "k must be a whole number"),
    ("POST", "/api/ask", '{"question": "x", "rerank_depth": false}', 400, "rerank depth must be a whole number"),
    ("POST", "/api/ask", '{"question": "x", "k": 2.5}', 400, "k must be a whole number"),
    ("GET", "/api/search?q=" + "x" * (1 << 20), None, 414, "URL is over 128 KiB"),
    ("GET", "/api/search?q=x&k=" + "1" * (200 << 10), None, 414, "URL is over 128 KiB"),
    ("GET", "/api/documents/no%0Asuch%0Adoc?index=odd", None, 404, "no document with id 'no\\nsuch\\ndoc'"),
]


@pytest.mark.parametrize("server_name", SERVERS)
@pytest.mark.parametrize("method, path, body, status, words", HOSTILE, ids=lambda v: str(v)[:40])
def test_a_hostile_request_gets_one_json_error_line(server_name, request, method, path, body, status, words):
    server = request.getfixturevalue(server_name)
    got, headers, answer = server.request(method, path, body, login=LOGIN if server.auth else None)
    assert words in assert_http_error(got, answer, status)
    assert headers["content-type"] == "application/json"
    if status == 405:
        assert headers["allow"]


HOSTILE_HEADERS = [  # headers, path, status, words of the error
    ({"X-Big": "y" * (1 << 20)}, "/api/health", 431, "headers are over 128 KiB"),
    ({f"X-Many-{n}": "y" * 1000 for n in range(200)}, "/api/health", 431, "headers are over 128 KiB"),
]


@pytest.mark.parametrize("headers, path, status, words", HOSTILE_HEADERS, ids=lambda v: str(v)[:40])
def test_a_hostile_head_gets_one_json_error_line(open_server, headers, path, status, words):
    got, answered, answer = open_server.request("GET", path, headers=headers)
    assert words in assert_http_error(got, answer, status)
    assert answered["content-type"] == "application/json"
    assert open_server.request("GET", "/api/health")[0] == 200


def test_a_request_that_is_no_http_gets_one_json_error_line(open_server):
    import socket

    with socket.create_connection(("127.0.0.1", open_server.port), timeout=30) as raw:
        raw.sendall(b"HELLO THERE\r\n\r\n")
        head, _, body = b"".join(iter(lambda: raw.recv(1 << 16), b"")).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ") and b"content-type: application/json" in head.lower()
    assert "not a valid HTTP/1.1 request" in assert_http_error(400, body, 400)


# ---- issue 42, item 2: DNS rebinding: a Host header the server is not for ----------------------------------

HOSTS = [  # Host header, answered by a server on 127.0.0.1, answered by one on 0.0.0.0 with --allow-host scout.example
    ("evil.example", False, False),
    ("evil.example:7860", False, False),
    ("127.0.0.1.evil.example", False, False),
    ("localhost.evil.example:80", False, False),
    ("evil.example@127.0.0.1", False, False),
    ("127.0.0.1 evil.example", False, False),
    ("scout.example.evil.example", False, False),
    ("", False, False),
    ("scout.example", False, True),
    ("Scout.Example.:8443", False, True),
    ("192.0.2.7:7860", False, True),  # an IP address: a rebinding page needs a name; a loopback server wants its own
    ("[2001:db8::7]:80", False, True),
    ("localhost", True, True),
    ("LOCALHOST.:1234", True, True),
    ("127.0.0.1:1", True, True),
    ("[::1]:7860", True, True),
]
HOST_ROUTES = [  # method, path, body: the API, the docs and the page
    ("GET", "/api/health", None),
    ("GET", "/api/search?q=x", None),
    ("GET", "/api/documents/x", None),
    ("POST", "/api/ask", "{}"),
    ("GET", "/openapi.json", None),
    ("GET", "/", None),
    ("GET", "/config", None),
    ("POST", "/gradio_api/queue/join", "{}"),
    ("GET", "/gradio_api/info", None),
]


@pytest.mark.parametrize("server_name", [*SERVERS, "public_server"])
@pytest.mark.parametrize("host, on_loopback, on_public", HOSTS, ids=lambda v: str(v)[:30])
def test_a_host_the_server_is_not_for_is_refused_on_every_route(server_name, request, host, on_loopback, on_public):
    server = request.getfixturevalue(server_name)
    answered = on_public if server_name == "public_server" else on_loopback
    login = LOGIN if server.auth else None
    for method, path, body in HOST_ROUTES:
        status, headers, got = server.request(method, path, body, login=login, headers={"Host": host})
        if answered:
            assert status != 421, (method, path, got[:300])
        else:
            assert "does not answer for the host" in assert_http_error(status, got, 421), (method, path)
            assert headers["content-type"] == "application/json"


def test_every_route_of_the_app_refuses_a_rebound_name(open_server, site_routes):
    """Every route the app has (enumerated in-process), as a page at evil.example rebound to 127.0.0.1 sends it."""
    requests = [(m, re.sub(r"\{[^}]+\}", "x", t)) for m, t in site_routes if m != "HEAD"]
    headers = {"Host": f"evil.example:{open_server.port}", "Origin": f"http://evil.example:{open_server.port}"}
    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(lambda r: fetch(open_server, r[0], r[1], b"{}", headers, seconds=30), requests))
    assert [(r, status) for r, (status, _) in zip(requests, answers) if status != 421] == []
    assert all("does not answer for the host" in assert_http_error(status, got, 421) for status, got in answers)


# ---- requests another website's page makes the visitor's browser send (cross-site request forgery) ----------

NAVIGATION = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}
CROSS_SITE = [  # headers as a browser sends them, answered on every route (else 403 on every route)
    ({"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "image"}, False),
    ({"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "cors", "Sec-Fetch-Dest": "empty"}, False),
    ({"Sec-Fetch-Site": "CROSS-SITE"}, False),
    ({"Origin": "https://evil.example"}, False),
    ({"Origin": "http://127.0.0.1.evil.example:7860"}, False),
    ({"Origin": "null"}, False),
    ({"Origin": "file://"}, False),
    ({"Origin": "http://localhost:1234", "Sec-Fetch-Site": "cross-site"}, False),
    ({"Origin": "http://127.0.0.1:7860", "Sec-Fetch-Site": "same-origin"}, True),
    ({"Origin": "http://[::1]:7860", "Sec-Fetch-Site": "same-site"}, True),
    ({"Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate"}, True),  # typed into the address bar
    ({}, True),  # a program: curl, `mathscout --server`, the Python client
]


@pytest.mark.parametrize("server_name", [*SERVERS, "public_server"])
@pytest.mark.parametrize("headers, answered", CROSS_SITE, ids=lambda v: str(v)[:60])
def test_a_request_another_website_sends_is_refused_on_every_route(server_name, request, headers, answered):
    server = request.getfixturevalue(server_name)
    login = LOGIN if server.auth else None
    for method, path, body in HOST_ROUTES:
        status, got_headers, got = server.request(method, path, body, login=login, headers=headers)
        if answered:
            assert status != 403, (method, path, got[:300])
        else:
            assert "not other websites" in assert_http_error(status, got, 403), (method, path)
            assert got_headers["content-type"] == "application/json"


def test_a_link_from_another_website_opens_the_page_but_runs_no_api_route(open_server):
    assert open_server.request("GET", "/", None, headers=NAVIGATION)[0] == 200
    status, _, got = open_server.request("GET", "/api/search?q=x", None, headers=NAVIGATION)
    assert "another website's page sent this request" in assert_http_error(status, got, 403)


@pytest.mark.browser
def test_a_page_of_another_site_cannot_make_the_browser_search_or_ask(open_server):
    """A real chromium opens a page at evil.example (mapped to this machine, so the browser sends its requests: a
    public site's requests to 127.0.0.1 chromium blocks itself, other browsers do not) that asks this server through
    an image, a no-cors fetch and a posted text body: each reaches the server (its access log) and is refused."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not installed (apt-get install chromium)")
    import http.server
    import threading

    from playwright.sync_api import sync_playwright

    target = open_server.url
    evil = f"""<html><body><img src="{target}/api/search?q=from-an-image"><script>
    fetch("{target}/api/search?q=from-a-fetch", {{mode: "no-cors"}});
    fetch("{target}/api/ask", {{method: "POST", mode: "no-cors", headers: {{"Content-Type": "text/plain"}},
        body: JSON.stringify({{question: "from a form"}})}});
    </script></body></html>""".encode()

    class EvilSite(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(evil)))
            self.end_headers()
            self.wfile.write(evil)

        def log_message(self, *args):
            pass

    def requests_logged() -> list[str]:
        lines = open_server.log_text()[logged_before:].splitlines()
        return sorted(" ".join(line.split()[1:4]) for line in lines if re.match(r"\S+ (GET|POST) /api/", line))

    site = http.server.ThreadingHTTPServer(("127.0.0.1", 0), EvilSite)
    threading.Thread(target=site.serve_forever, daemon=True).start()
    logged_before = len(open_server.log_text())
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM,
                headless=True,
                args=["--no-sandbox", "--host-resolver-rules=MAP evil.example 127.0.0.1"],
            )
            try:
                page = browser.new_page()
                page.goto(f"http://evil.example:{site.server_address[1]}/")
                deadline = time.monotonic() + 30
                while len(requests_logged()) < 3 and time.monotonic() < deadline:
                    page.wait_for_timeout(200)
            finally:
                browser.close()
    finally:
        site.shutdown()
    assert requests_logged() == ["GET /api/search 403", "GET /api/search 403", "POST /api/ask 403"]


def test_the_public_server_says_who_may_reach_it(public_server):
    log = public_server.log_text()
    assert "--public without --auth: anyone who can reach this address can use the page" in log
    assert "LLM: none (LLM switched off" in log


# ---- issue 42, item 7: ids with any character; no path of the server in a message -------------------------


@pytest.mark.parametrize("server_name", SERVERS)
def test_any_document_id_is_fetched_percent_encoded(server_name, request):
    server = request.getfixturevalue(server_name)
    for doc_id in ODD_IDS:
        path = "/api/documents/" + urllib.parse.quote(doc_id, safe="") + "?index=odd"
        status, _, body = server.request("GET", path, login=LOGIN if server.auth else None)
        assert status == 200, (doc_id, body[:300])
        assert json.loads(body)["doc_id"] == doc_id


def test_no_message_names_a_path_of_the_server(public_server, spare_index):
    """An offered index removed while the server runs: the API's errors and the page's notes say so by its name;
    the paths go to the server's log only."""
    spare_index.rename(spare_index.with_name("spare-removed"))
    try:
        answers = [
            public_server.request("GET", "/api/health"),
            public_server.request("GET", "/api/search?q=x&index=spare"),
            public_server.request("GET", "/api/documents/x?index=spare"),
            public_server.request("POST", "/api/ask", {"question": "x", "index": "spare"}),
        ]
        for status, _, body in answers:
            message = assert_http_error(status, body, 400)
            assert "index 'spare'" in message and "/" not in message, message
        page = page_ask(public_server, "why is $a^2+b^2=c^2$?", index="spare")
        assert "index &#x27;spare&#x27;" in page or "index 'spare'" in page, page[-2000:]
        assert str(spare_index.parent) not in page and "/tmp" not in page, page[-2000:]
        assert str(spare_index) in public_server.log_text()  # the owner still learns where
    finally:
        spare_index.with_name("spare-removed").rename(spare_index)


def test_a_body_streamed_past_the_limit_is_cut_while_it_is_read(open_server):
    """A chunked body (no length given) over the limit: 413 once the limit is passed, the server unharmed."""
    connection = http.client.HTTPConnection("127.0.0.1", open_server.port, timeout=60)
    try:
        chunk = b'{"question": "' + b"x" * (1 << 16)
        connection.request(
            "POST",
            "/api/ask",
            body=iter([chunk] * 40),
            encode_chunked=True,
            headers={"Content-Type": "application/json", "Transfer-Encoding": "chunked"},
        )
        response = connection.getresponse()
        assert_http_error(response.status, response.read(), 413)
    finally:
        connection.close()
    assert open_server.request("GET", "/api/health")[0] == 200


def test_the_openapi_schema_declares_the_one_error_shape(auth_server):
    status, _, body = auth_server.request("GET", "/openapi.json", login=LOGIN)
    spec = json.loads(body)
    assert status == 200 and '"422"' not in body.decode() and "HTTPValidationError" not in body.decode()
    assert spec["components"]["schemas"]["ErrorRecord"]["required"] == ["error"]  # mathscout.schema
    operations = [op for item in spec["paths"].values() for op in item.values()]
    assert len(operations) == 4
    for operation in operations:
        for status in ("4XX", "5XX"):
            schema = operation["responses"][status]["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/ErrorRecord"}, operation["summary"]


def test_an_unforeseen_failure_is_one_json_line_without_details():
    from starlette.testclient import TestClient

    from mathscout.ui.http_api import create_api

    class Broken:
        @property
        def choices(self):
            raise RuntimeError("a secret detail\nand a second line")

    client = TestClient(create_api(Broken()), raise_server_exceptions=False)
    response = client.get("/api/health")
    message = assert_http_error(response.status_code, response.content, 500)
    assert message.startswith("internal error: RuntimeError") and "secret" not in message
