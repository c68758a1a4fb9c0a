"""The JSON HTTP API that `mathscout serve` serves beside the chat page (FastAPI; the page is mounted on it).

    GET  /api/health                       version and the offered indexes with their search modes
    GET  /api/search?q=…&mode=bm25&k=10    hits (the same JSON as `mathscout search --json`); also rerank,
                                           rerank_depth, index
    POST /api/ask   {"question": …}        an answer with citations, hits and trace (as `mathscout ask --json`);
                                           also mode, k, rerank, use_llm, index
    GET  /api/documents/{doc_id}?index=…   one document: id, title, text, formulas, metadata
    GET  /docs, /openapi.json              the OpenAPI description (Swagger UI served from this server)

Options are checked by mathscout.limits as on the command line. Every failure under /api and /docs is JSON
`{"error": "one line"}` (`mathscout.schema.ErrorRecord`): 400 for bad input, 401 without the login (HTTP Basic, when `--auth` is
set; failures slowed as on the page, 429 while one is), 404 for an unknown document or route, 405 for a wrong
method, 413 for a body over MAX_REQUEST_BYTES, 414 / 431 for a URL / head over MAX_REQUEST_HEAD_BYTES, 403 / 429 for
an LLM reranker this client may not use now (`mathscout.ui.llm_allowance`), 500 for anything unforeseen (never a
traceback). A message names no path of the server (`mathscout.ui.redact`).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, Field, ValidationInfo, field_validator
from starlette.convertors import Convertor, register_url_convertor
from starlette.exceptions import HTTPException

from mathscout import __version__, options
from mathscout.clients import address_of
from mathscout.errors import MathScoutError
from mathscout.limits import MAX_REQUEST_BYTES
from mathscout.retrievers.registry import rerank_help
from mathscout.schema import AnswerRecord, DocumentRecord, ErrorRecord, SearchRecord, document_record
from mathscout.tools.searching import SearchRequest, check_options
from mathscout.ui import services
from mathscout.ui.chat import AssistantPool
from mathscout.ui.http_protocol import head_refusal
from mathscout.ui.llm_allowance import LlmAllowance, LlmRefused
from mathscout.ui.login import CLIENT, LoginGuard
from mathscout.ui.redact import PathRedactor

MIB = MAX_REQUEST_BYTES / 2**20
DRAIN_BYTES = 64 * MAX_REQUEST_BYTES  # an oversized body is read and dropped up to here before its 413
DOCS_ASSETS = ("swagger-ui-bundle.js", "swagger-ui.css", "favicon.png")  # shipped by fastapi-offline
# Gradio routes that take in, fetch or stream files: the page has no file input or output, so they are closed
PAGE_FILE_ROUTES = re.compile(
    r"/gradio_api/(upload|process_recording|proxy=|stream/|vibe-|undo-vibe|run-history"
    r"|file[=/][a-z][a-z0-9+.-]*:)",
    re.IGNORECASE,
)

ERRORS: dict[int | str, dict[str, Any]] = {
    "4XX": {
        "model": ErrorRecord,
        "description": "refused: bad input (400), no login (401), unknown document or "
        f"route (404), wrong method (405), body over {MIB:g} MiB (413), URL or headers too long (414, 431), a "
        "host this server is not for (421), failed logins being slowed or the LLM's rate or budget spent (429), "
        "an LLM reranker this client may not use (403)",
    },
    "5XX": {"model": ErrorRecord, "description": "internal error (500, one line) or a missing optional part (501)"},
}


class AskBody(BaseModel):
    question: str = Field(description="words and LaTeX, e.g. 'Why is $\\cos^2 x + \\sin^2 x = 1$?'")
    mode: str = Field(options.MODE.default, description=options.MODE.help)
    k: int | str = Field(options.K.default, description=options.K.help)
    rerank: str | bool | None = Field(options.RERANK.default, description=rerank_help())
    rerank_depth: int | str = Field(options.RERANK_DEPTH.default, description=options.RERANK_DEPTH.help)
    use_llm: bool | None = Field(options.USE_LLM.default, description=options.USE_LLM.help)
    index: str | None = Field(options.INDEX.default, description=options.INDEX.help)

    @field_validator("k", "rerank", "rerank_depth", mode="before")
    @classmethod
    def _checked(cls, value: Any, info: ValidationInfo) -> Any:
        """Checked once, here, as the Python API checks it (`mathscout.tools.searching.check_options`), before
        pydantic would read JSON's true as 1; the reranker as its name (`true` is auto, `none` is null)."""
        name = str(info.field_name)
        try:
            checked = check_options(**{name: value})
        except MathScoutError as exc:
            raise ValueError(str(exc)) from None
        return dict(zip(("k", "rerank", "rerank_depth"), checked))[name]

    @field_validator("*")
    @classmethod
    def _unicode(cls, value: Any) -> Any:
        """A lone surrogate (JSON "\\ud800") is not text: refused here, not when the answer is written."""
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise ValueError("not valid Unicode text (it holds a lone surrogate such as \\ud800)") from None
        return value


def _error(status: int, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": " ".join(str(message).split())}, status_code=status, headers=headers)


class AnyText(Convertor):
    """A path parameter that may hold any character, a newline too (starlette's `path` stops at one): a document id
    is any text (`GET /api/documents/a%0Ab`)."""

    regex = r"[\s\S]*"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("text", AnyText())


class Gate:
    """ASGI middleware before every route (API, docs and page): notes the client's address for the login guard,
    refuses the page's file routes (404), reads no request body past MAX_REQUEST_BYTES (413) and refuses a URL or
    head over MAX_REQUEST_HEAD_BYTES (414, 431: the protocol refuses those that arrive in pieces)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        CLIENT.set(scope["client"][0] if scope.get("client") else "")
        if PAGE_FILE_ROUTES.match(scope["path"]):
            return await _error(404, "this server takes in and serves no files")(scope, receive, send)
        body = await _body(scope, receive)
        if body is None:
            return await _error(413, f"the request body is over {MIB:g} MiB ({MAX_REQUEST_BYTES:,} bytes): send less")(
                scope, receive, send
            )
        too_long = head_refusal(scope)
        if too_long is not None:
            return await _error(*too_long)(scope, receive, send)
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


async def _body(scope, receive) -> bytes | None:
    """The request's body, or None when it is over MAX_REQUEST_BYTES: the rest is then read and dropped (at most
    DRAIN_BYTES, never kept) so that the client, still sending, gets the 413 instead of a reset connection."""
    declared = dict(scope["headers"]).get(b"content-length", b"")
    if declared.isdigit() and int(declared) > DRAIN_BYTES:
        return None  # not worth reading: the connection closes after the 413
    body, seen, more = bytearray(), 0, True
    while more and seen <= DRAIN_BYTES:
        message = await receive()
        seen += len(message.get("body", b""))
        if seen <= MAX_REQUEST_BYTES:
            body += message.get("body", b"")
        more = message["type"] == "http.request" and message.get("more_body", False)
    return bytes(body) if seen <= MAX_REQUEST_BYTES else None


def _login_check(guard: LoginGuard | None):
    """A dependency: with a guard, HTTP Basic credentials must be the page's login. The token of this server's
    service record (`Authorization: Bearer …`, readable by its OS user only: mathscout.ui.services) is a login as
    well, with or without a guard; a wrong token is a failed login (counted and slowed by the guard)."""

    async def check(request: Request) -> None:
        scheme, _, encoded = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer":
            if services.token_accepted(encoded.strip()):
                return
            if guard is not None:
                await guard.check(services.TOKEN_LOGIN, "")
            raise HTTPException(
                401,
                "this server does not know that token: it is in the record of the "
                "MathScout service that 'mathscout serve' writes",
                headers={"WWW-Authenticate": 'Bearer realm="MathScout"'},
            )
        if guard is None:
            return
        user, password = "", ""
        if scheme.lower() == "basic":
            try:
                user, _, password = base64.b64decode(encoded, validate=True).decode("utf-8").partition(":")
            except (ValueError, UnicodeDecodeError):
                user, password = "", ""
        if not (user or password) or not await guard.check(user, password):  # no credentials: nothing guessed
            raise HTTPException(
                401,
                "this server wants a login: HTTP Basic with the USER:PASSWORD of 'mathscout serve --auth'",
                headers={"WWW-Authenticate": 'Basic realm="MathScout"'},
            )

    return check


def create_api(pool: AssistantPool, guard: LoginGuard | None = None, llm: LlmAllowance | None = None) -> FastAPI:
    """The API over the pool's indexes (the page's own assistants, so both share opened retrievers); `llm` says who
    may have the LLM answer (default: the settings' policy)."""
    allowance = llm or LlmAllowance()

    def public(text: str) -> str:
        return PathRedactor.of_pool(pool)(text)

    app = FastAPI(
        title="MathScout API",
        version=__version__,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        responses=ERRORS,
        description="Math-aware search and a cited assistant over math Q&A. Every "
        'failure answers {"error": "one line"}.',
    )
    app.add_middleware(Gate)
    login = [Depends(_login_check(guard))]

    @app.exception_handler(HTTPException)
    async def http_error(_request: Request, exc: HTTPException) -> JSONResponse:
        return _error(exc.status_code, exc.detail, exc.headers)

    @app.exception_handler(RequestValidationError)
    async def bad_request(_request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(
            str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path") and not isinstance(p, int)
        )
        message = str(first.get("msg", "invalid request")).removeprefix("Value error, ")
        if where and message.startswith(where.replace("_", " ") + " "):  # mathscout.limits names the option itself
            return _error(400, message)
        return _error(400, f"{where or 'request body'}: {message}")

    @app.exception_handler(Exception)
    async def internal_error(_request: Request, exc: Exception) -> JSONResponse:
        return _error(500, f"internal error: {type(exc).__name__} (the details are in the server's log)")

    @app.get("/api/health", dependencies=login, summary="version and the offered indexes with their modes")
    def health() -> dict[str, Any]:
        indexes = [_index_entry(pool, key, public) for key in pool.choices]
        return {"status": "ok", "version": __version__, "default_index": pool.default_key, "indexes": indexes}

    @app.get(
        "/api/search",
        dependencies=login,
        summary="search an index (as `mathscout search --json`)",
        response_model=SearchRecord,
    )
    def search(
        request: Request,
        q: str,
        mode: str = options.MODE.default,
        k: str = str(options.K.default),
        rerank: str = "none",
        rerank_depth: str = str(options.RERANK_DEPTH.default),
        index: str | None = options.INDEX.default,
    ):
        def run() -> dict[str, Any]:
            checked = SearchRequest.parse(q, mode, k, rerank, rerank_depth)  # checked once, here
            assistant = pool.assistant(index)
            llm, notice = allowance.search(address_of(request), assistant, checked.rerank)
            return _told(assistant.run_search(checked, llm=llm).to_dict(), notice, public)

        return _call(run, public)

    @app.post(
        "/api/ask",
        dependencies=login,
        summary="ask the assistant (as `mathscout ask --json`)",
        response_model=AnswerRecord,
    )
    def ask(request: Request, body: AskBody):
        def run() -> dict[str, Any]:
            if not body.question.strip():
                raise MathScoutError("the question is empty: ask in words and/or LaTeX like $x^2+1$")
            assistant = pool.assistant(body.index)  # the options were checked once, by AskBody's validators
            use_llm, notice = allowance.question(address_of(request), assistant, body.use_llm, body.rerank)
            answer = assistant.ask(
                body.question,
                mode=body.mode,
                k=body.k,
                rerank=body.rerank,
                rerank_depth=body.rerank_depth,
                use_llm=use_llm,
            )
            return _told(answer.to_dict(), notice, public)

        return _call(run, public)

    @app.get(
        "/api/documents/{doc_id:text}",
        dependencies=login,
        summary="one document of an index",
        response_model=DocumentRecord,
    )
    def document(doc_id: str, index: str | None = options.INDEX.default):
        def run() -> dict[str, Any]:
            found = pool.index(index).store.get(doc_id)
            if found is None:
                raise HTTPException(404, f"no document with id {doc_id!r} in index '{pool.choice(index).key}'")
            return document_record(found).to_dict()

        return _call(run, public)

    _add_docs(app, login)
    return app


def _index_entry(pool: AssistantPool, key: str, public: Callable[[str], str]) -> dict[str, Any]:
    """One offered index as its current build describes it: key, label, modes and the build's generation."""
    from mathscout.ui.indexes import index_label

    assistant = _call(lambda: pool.assistant(key), public)
    return {
        "key": key,
        "label": index_label(key, assistant.index),
        "modes": assistant.modes(),
        "generation": assistant.index.manifest.generation,
    }


def _add_docs(app: FastAPI, login: list) -> None:
    """/openapi.json and /docs behind the login, Swagger UI from this server (no CDN), and the API's error shape
    for unknown routes and methods under /api and /docs (they would otherwise reach the page)."""
    import fastapi_offline

    assets = Path(fastapi_offline.__file__).parent / "static"

    @app.get("/openapi.json", dependencies=login, include_in_schema=False)
    def openapi() -> JSONResponse:
        return JSONResponse(app.openapi())

    @app.get("/docs", dependencies=login, include_in_schema=False)
    def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="MathScout API",
            swagger_js_url=f"/docs/{DOCS_ASSETS[0]}",
            swagger_css_url=f"/docs/{DOCS_ASSETS[1]}",
            swagger_favicon_url=f"/docs/{DOCS_ASSETS[2]}",
        )

    @app.get("/docs/{name}", dependencies=login, include_in_schema=False)
    def docs_asset(name: str) -> FileResponse:
        if name not in DOCS_ASSETS:
            raise HTTPException(404, f"no file /docs/{name}: the API's routes are listed at /docs")
        return FileResponse(assets / name)

    for path in ("/api", "/api/{rest:text}", "/docs", "/docs/{rest:text}", "/openapi.json"):
        # every method; after the real routes (an ASGI app as the endpoint: starlette's annotation names request handlers)
        app.router.add_route(path, Unknown(app), include_in_schema=False)  # type: ignore[arg-type]


class Unknown:
    """An ASGI endpoint for any method: 405 when another method of the path is an API route, else 404."""

    def __init__(self, app: FastAPI):
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        path, method = scope["path"], scope["method"]
        allowed = sorted(
            {
                m
                for r in self.app.routes
                if isinstance(r, APIRoute) and r.path_regex.match(path)
                for m in r.methods or ()
            }
        )
        if allowed:
            response = _error(
                405, f"{method} is not allowed on {path}: use {', '.join(allowed)}", {"Allow": ", ".join(allowed)}
            )
        else:
            response = _error(404, f"no route {path}: the API's routes are listed at /docs")
        await response(scope, receive, send)


def _told(record: dict[str, Any], notice: str | None, public: Callable[[str], str]) -> dict[str, Any]:
    """A search's or an answer's record as a client reads it: the allowance's notice first, no server path in its
    notices or failed tool calls."""
    record["notices"] = [public(n) for n in ([notice] if notice else []) + record.get("notices", [])]
    for call in record.get("trace", []):
        if call.get("error"):
            call["error"] = public(call["error"])
    return record


def _call(work, public: Callable[[str], str]):
    """Run `work`, turning MathScout's errors into 400, a missing optional part into 501 and a refused LLM
    reranker into its 403 / 429, each message without the server's paths (anything else is the one-line 500 of the
    app's handler; the traceback goes to the server's log only)."""
    try:
        return work()
    except MathScoutError as exc:
        raise HTTPException(400, public(str(exc))) from None
    except LlmRefused as exc:
        refusal = exc.refusal
        wait = {"Retry-After": str(refusal.retry_after)} if refusal.retry_after else None
        raise HTTPException(refusal.status, refusal.notice("rerank with embedding or cross instead"), wait) from None
    except ImportError as exc:
        from mathscout.extras import missing_extra

        raise HTTPException(501, public(missing_extra(exc) or f"a module is missing on the server ({exc})")) from None
