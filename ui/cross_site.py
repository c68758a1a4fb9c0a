"""Requests another website makes a visitor's browser send (cross-site request forgery).

A page at `https://evil.example` cannot read this server's answers (no CORS header allows it), but it can make the
browser of someone who runs MathScout send requests to `http://127.0.0.1:7860`: an `<img>` or a `fetch(…, {mode:
"no-cors"})` of `/api/search?q=…` runs a search (and, with an LLM configured, spends its allowance), a form posts
to the page's routes. The Host header is ours then (`hosts.py` does not see it), but the browser says where the
request comes from, and that is refused here:

- `Sec-Fetch-Site: cross-site` (every current browser sends it): refused, except a top-level navigation to the page
  (a link to `http://127.0.0.1:7860/` on another site opens it; a link to an API route does not run it);
- an `Origin` header naming a host the server is not for (`HostPolicy`: older browsers send it on every request
  but a plain GET), or `Origin: null` (a sandboxed frame, a file): refused.

Requests from the page itself (same origin), from another port of this machine (same site) and from programs
(curl, `mathscout --server`, the Python client: no such headers) are answered. A refusal is 403 with one JSON
error line (a WebSocket is closed before it opens), before any route, login or body is looked at.
"""

from __future__ import annotations

from mathscout.ui.hosts import HostPolicy, header_values, send_refusal

API_PREFIXES = ("/api/", "/gradio_api/")  # routes that run something: never by a navigation from another site


def _header(scope, name: bytes) -> str | None:
    """The header's last value (None without one)."""
    return next(reversed(header_values(scope, name)), None)


def refusal(scope, policy: HostPolicy) -> str | None:
    """Why this request comes from another website, or None when it does not (or says nothing of it)."""
    site = (_header(scope, b"sec-fetch-site") or "").strip().lower()
    if site == "cross-site":
        navigation = (_header(scope, b"sec-fetch-mode") or "").lower() == "navigate"
        top_level = (_header(scope, b"sec-fetch-dest") or "").lower() == "document"
        path = scope.get("path", "")
        if not (navigation and top_level and scope.get("method") == "GET" and not path.startswith(API_PREFIXES)):
            return "another website's page sent this request (Sec-Fetch-Site: cross-site)"
    origin = _header(scope, b"origin")
    if origin is not None:
        scheme, separator, authority = origin.strip().partition("://")
        if origin.strip().lower() == "null" or not separator or scheme.lower() not in ("http", "https"):
            return f"a request from the origin {origin[:100]!r}"
        if not policy.accepts(authority):
            return f"another website's page sent this request (Origin {origin[:100]!r})"
    return None


class CrossSiteCheck:
    """ASGI middleware around the whole site: a request another website's page sent gets 403 and one JSON error line."""

    def __init__(self, app, policy: HostPolicy):
        self.app, self.policy = app, policy

    async def __call__(self, scope, receive, send) -> None:
        reason = refusal(scope, self.policy) if scope["type"] in ("http", "websocket") else None
        if reason is None:
            return await self.app(scope, receive, send)
        message = f"refused: {reason}; MathScout answers its own page and programs, not other websites"
        await send_refusal(scope, send, 403, message)
