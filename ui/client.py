"""`mathscout search|ask --server URL`: the JSON HTTP API of a running `mathscout serve`, over stdlib urllib; also
how the command line reaches a service of its own user (`mathscout.ui.services`, with the service's token).

Errors come back as one line: the server's own message for 4xx answers, a hint to start the server when
nothing listens (`Unreachable`), a hint to log in for 401.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

from mathscout.errors import MathScoutError
from mathscout.settings import settings

TIMEOUT = 600.0  # seconds; an LLM-planned answer can take minutes


class Unreachable(MathScoutError):
    """Nothing answered at the server's address; `refused`: nothing listens there."""

    def __init__(self, message: str, refused: bool):
        super().__init__(message)
        self.refused = refused


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is an error: the token goes to the service's own address only."""

    def redirect_request(self, *_args, **_kwargs):
        return None


class Client:
    """The API of one server; `auth` is USER:PASSWORD (default: MATHSCOUT_AUTH), or `token` the token of a service
    record (sent as a bearer token, never through a proxy)."""

    def __init__(self, url: str, auth: str | None = None, timeout: float = TIMEOUT, token: str | None = None):
        parsed = urllib.parse.urlparse(url if "://" in url else f"http://{url}")
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise MathScoutError(f"--server wants a URL like http://127.0.0.1:7860 (got {url!r})")
        self.base = f"{parsed.scheme}://{parsed.netloc}{parsed.path.rstrip('/')}"
        self.timeout = timeout
        auth = auth or settings().auth
        self.headers = {"Accept": "application/json"}
        self._open: Callable[..., Any] = urllib.request.urlopen
        if token:
            self.headers["Authorization"] = "Bearer " + token
            self._open = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect).open
        elif auth:
            self.headers["Authorization"] = "Basic " + base64.b64encode(auth.encode()).decode()

    def health(self) -> dict[str, Any]:
        return self._call("GET", "/api/health")

    def search(
        self,
        query: str,
        *,
        mode: str,
        k: int,
        rerank: str | None = None,
        rerank_depth: int = 10,
        index: str | None = None,
    ) -> dict[str, Any]:
        params = {"q": query, "mode": mode, "k": k, "rerank": rerank or "none", "rerank_depth": rerank_depth}
        if index:
            params["index"] = index
        return self._call("GET", "/api/search?" + urllib.parse.urlencode(params))

    def ask(self, question: str, **options) -> dict[str, Any]:
        body = {"question": question, **{k: v for k, v in options.items() if v is not None}}
        return self._call("POST", "/api/ask", body)

    def document(self, doc_id: str) -> dict[str, Any]:
        return self._call("GET", "/api/documents/" + urllib.parse.quote(doc_id, safe=""))

    def _call(self, method: str, path: str, body: dict | None = None) -> dict[str, Any]:
        data = json.dumps(body).encode() if body is not None else None
        headers = dict(self.headers, **({"Content-Type": "application/json"} if data else {}))
        request = urllib.request.Request(self.base + path, data=data, headers=headers, method=method)
        try:
            with self._open(request, timeout=self.timeout) as response:
                return json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            raise MathScoutError(self._error(exc)) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise Unreachable(
                f"cannot reach the MathScout server at {self.base} ({reason}): start it with "
                "'mathscout serve' or check --server",
                isinstance(reason, ConnectionRefusedError),
            ) from None
        except ValueError as exc:
            raise MathScoutError(
                f"the server at {self.base} did not answer with JSON ({exc}): is it MathScout?"
            ) from None

    def _error(self, exc: urllib.error.HTTPError) -> str:
        if exc.code == 401:
            return f"the server at {self.base} wants a login: add --auth USER:PASSWORD (or set MATHSCOUT_AUTH)"
        try:
            message = json.loads(exc.read().decode("utf-8")).get("error")
        except (ValueError, AttributeError, OSError):
            message = None
        return f"server: {message}" if message else f"the server at {self.base} answered HTTP {exc.code} {exc.reason}"
