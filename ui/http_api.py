"""The JSON HTTP API that `mathscout serve` serves beside the chat page (FastAPI; the page is mounted on it).

    GET  /api/health                       version and the offered indexes with their search modes
    GET  /api/search?q=…&mode=bm25&k=10    hits (the same JSON as `mathscout search --json`); also rerank,
                                           rerank_depth, index
    POST /api/ask   {"question": …}        an answer with citations, hits and trace (as `mathscout ask --json`);
                                           also mode, k, rerank, use_llm, index
    GET  /api/documents/{doc_id}?index=…   one document: id, title, text, formulas, metadata
    GET  /docs, /openapi.json              the OpenAPI description

Options are checked by mathscout.limits as on the command line. Errors are JSON `{"error": "…"}`: 400 for bad
input, 401 without the page's login (HTTP Basic, when `--auth` is set; failures slowed as on the page), 404 for
an unknown document, 500 for anything unforeseen (one line, never a traceback).
"""

from __future__ import annotations

import base64
import logging
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from mathscout import __version__
from mathscout.errors import MathScoutError
from mathscout.tools.searching import SearchRequest, run_search
from mathscout.ui.chat import AssistantPool
from mathscout.ui.login import LoginGuard

log = logging.getLogger("mathscout.api")


class AskBody(BaseModel):
    question: str = Field(description="words and LaTeX, e.g. 'Why is $\\cos^2 x + \\sin^2 x = 1$?'")
    mode: str = Field("auto", description="auto (the assistant plans) or a search mode of the index")
    k: int | str = Field(10, description="hits (1–10,000; the assistant shows at most 50, with a notice)")
    rerank: str | bool | None = Field(None, description="auto, embedding, openai-embedding, llm, or none")
    use_llm: bool | None = Field(None, description="false: the offline planner; null: the LLM when configured")
    index: str | None = Field(None, description="an offered index (GET /api/health lists them)")


class ApiError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def _login_check(guard: LoginGuard | None):
    """A dependency: with a guard, HTTP Basic credentials must be the page's login."""

    async def check(request: Request) -> None:
        if guard is None:
            return
        scheme, _, encoded = request.headers.get("authorization", "").partition(" ")
        user, password = "", ""
        if scheme.lower() == "basic":
            try:
                user, _, password = base64.b64decode(encoded, validate=True).decode("utf-8").partition(":")
            except (ValueError, UnicodeDecodeError):
                user, password = "", ""
        if not await guard.check(user, password):
            raise ApiError(401, "this server wants a login: HTTP Basic with the USER:PASSWORD of 'mathscout serve --auth'")

    return check


def create_api(pool: AssistantPool, guard: LoginGuard | None = None) -> FastAPI:
    """The API over the pool's indexes (the page's own assistants, so both share opened retrievers)."""
    app = FastAPI(title="MathScout API", version=__version__, docs_url="/docs", redoc_url=None,
                  openapi_url="/openapi.json",
                  description="Math-aware search and a cited assistant over math Q&A. Errors: {\"error\": …}.")
    login = [Depends(_login_check(guard))]

    @app.exception_handler(ApiError)
    async def api_error(_request: Request, exc: ApiError) -> JSONResponse:
        headers = {"WWW-Authenticate": 'Basic realm="MathScout"'} if exc.status == 401 else None
        return _error(exc.status, exc.message, headers)

    @app.exception_handler(RequestValidationError)
    async def bad_request(_request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path") and not isinstance(p, int))
        return _error(400, f"{where or 'request body'}: {first.get('msg', 'invalid request')}")

    @app.get("/api/health", dependencies=login, summary="version and the offered indexes with their modes")
    def health() -> dict[str, Any]:
        indexes = [_index_entry(pool, key) for key in pool.choices]
        return {"status": "ok", "version": __version__, "default_index": pool.default_key, "indexes": indexes}

    @app.get("/api/search", dependencies=login, summary="search an index (as `mathscout search --json`)")
    def search(q: str, mode: str = "bm25", k: str = "10", rerank: str = "none", rerank_depth: str = "10",
               index: str | None = None) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            request = SearchRequest(q, mode, k, rerank, rerank_depth).checked()
            assistant = pool.assistant(index)
            auto = lambda query, count: assistant.search(query, mode="auto", k=count)  # noqa: E731
            return run_search(request, assistant.toolbox, auto).to_json()

        return _call(run)

    @app.post("/api/ask", dependencies=login, summary="ask the assistant (as `mathscout ask --json`)")
    def ask(body: AskBody) -> dict[str, Any]:
        from mathscout.ui.ask import answer_json

        def run() -> dict[str, Any]:
            if not body.question.strip():
                raise MathScoutError("the question is empty: ask in words and/or LaTeX like $x^2+1$")
            answer = pool.assistant(body.index).ask(body.question, mode=body.mode, k=body.k, rerank=body.rerank,
                                                    use_llm=body.use_llm)
            return answer_json(answer)

        return _call(run)

    @app.get("/api/documents/{doc_id:path}", dependencies=login, summary="one document of an index")
    def document(doc_id: str, index: str | None = None) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            found = pool.index(index).store.get(doc_id)
            if found is None:
                raise ApiError(404, f"no document with id {doc_id!r} in index '{pool.choice(index).key}'")
            return {"id": found.id, "title": found.title, "text": found.text, "metadata": found.metadata,
                    "formulas": [{"id": f.id, "latex": f.latex, "display": f.display} for f in found.formulas]}

        return _call(run)

    return app


def _index_entry(pool: AssistantPool, key: str) -> dict[str, Any]:
    """One offered index as its current build describes it: key, label, modes and the build's generation."""
    from mathscout.ui.indexes import index_label

    assistant = _call(lambda: pool.assistant(key))
    return {"key": key, "label": index_label(key, assistant.index), "modes": assistant.modes(),
            "generation": assistant.index.manifest.generation}


def _call(work):
    """Run `work`, turning MathScout's errors into 400, a missing optional part into 501 and anything else into a
    one-line 500 (the traceback goes to the server's log only)."""
    try:
        return work()
    except ApiError:
        raise
    except MathScoutError as exc:
        raise ApiError(400, str(exc)) from None
    except ImportError as exc:
        from mathscout.extras import missing_extra

        raise ApiError(501, missing_extra(exc) or f"a module is missing on the server ({exc})") from None
    except Exception as exc:  # a defect: one line to the client, the details in the server's log
        log.exception("API request failed")
        raise ApiError(500, f"internal error: {type(exc).__name__}") from None
