"""Which `Host` a request may name (issue 42, item 2: DNS rebinding).

A page at `http://evil.example:PORT` whose name an attacker rebinds to 127.0.0.1 talks to this server from the
visitor's browser as its own origin: same-origin requests, answers readable. The browser still sends
`Host: evil.example:PORT`, so the server answers only requests for the names it is for: localhost, 127.0.0.1 and
[::1] (any port), the address it binds (`--host`, unless 0.0.0.0 or ::) and the names its owner adds
(`--allow-host NAME`, `serve.allow_hosts`). A server that listens beyond loopback also answers any IP address as
Host: a rebinding page needs a DNS name, and a browser that asks for an IP address asks this server. A request
without a Host header (HTTP/1.0 tools; every browser sends one) is answered. Anything else gets one JSON error,
421, on every route: the API, the docs and the page (`HostCheck` wraps the whole site).
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

from mathscout.errors import MathScoutError

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARDS = frozenset({"0.0.0.0", "::", ""})  # binding every interface
_NAME = re.compile(r"[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*")
_AUTHORITY = re.compile(r"(?:\[(?P<ip6>[0-9a-f:.%a-z_-]+)\]|(?P<host>[^:\[\]]*))(?::(?P<port>[0-9]{1,5}))?")
SHOWN_CHARS = 100  # of a refused Host header in the error


def _ip(text: str) -> str | None:
    """`text` as an IP address in its one spelling (IPv6 compressed), or None."""
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return None


def host_name(text: str) -> str | None:
    """The host of a Host header or of a name the owner gives (port and a final dot dropped, lower case, an IP
    address in one spelling, IPv6 with or without brackets), or None when it is no host name or IP address."""
    text = text.strip().lower()
    if _ip(text):  # a bare IPv6 address (`--host ::1`) holds colons that are no port
        return _ip(text)
    match = _AUTHORITY.fullmatch(text)
    if match is None:
        return None
    if match.group("ip6") is not None:
        return _ip(match.group("ip6")) if ":" in match.group("ip6") else None
    host = match.group("host").rstrip(".")
    return _ip(host) or (host if _NAME.fullmatch(host) else None)


@dataclass(frozen=True)
class HostPolicy:
    """The host names a server answers for; `ip_literals`: any IP address too (a server bound beyond loopback)."""

    names: frozenset[str] = LOOPBACK_NAMES
    ip_literals: bool = False

    @classmethod
    def for_server(cls, bound: str, allowed: Iterable[str] = ()) -> HostPolicy:
        """The policy of a server bound to `bound` (--host) whose owner allows `allowed` (--allow-host) too; a
        name that is no host name is a MathScoutError."""
        names = set(LOOPBACK_NAMES)
        for given in allowed:
            name = host_name(given)
            if name is None or name in WILDCARDS:
                raise MathScoutError(
                    f"--allow-host {given!r} is not a host name or IP address (write one name per --allow-host, "
                    "e.g. --allow-host scout.example.org)"
                )
            names.add(name)
        own = host_name(bound) if bound.strip() not in WILDCARDS else None
        if own:
            names.add(own)
        return cls(frozenset(names), ip_literals=own not in LOOPBACK_NAMES)

    def accepts(self, header: str | None) -> bool:
        if header is None:
            return True
        name = host_name(header)
        return name is not None and (name in self.names or (self.ip_literals and _ip(name) is not None))

    def refusal(self, header: str) -> str:
        shown = header if len(header) <= SHOWN_CHARS else header[:SHOWN_CHARS] + "…"
        return (
            f"this server does not answer for the host {shown!r}: open it as http://127.0.0.1:PORT or "
            "http://localhost:PORT, or its owner adds the name with 'mathscout serve --allow-host NAME'"
        )


class HostCheck:
    """ASGI middleware around the whole site: a request for a host the policy does not accept gets 421 and one
    JSON error line (a WebSocket is closed before it opens), before any route, login or body is looked at."""

    def __init__(self, app, policy: HostPolicy):
        self.app, self.policy = app, policy

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        hosts = header_values(scope, b"host")
        if len(hosts) <= 1 and self.policy.accepts(hosts[0] if hosts else None):
            return await self.app(scope, receive, send)
        await send_refusal(scope, send, 421, self.policy.refusal(" ".join(hosts)))


def header_values(scope, name: bytes) -> list[str]:
    """Every value of the request header `name` (lower case, as ASGI gives names), in order."""
    return [v.decode("latin-1") for k, v in scope["headers"] if k == name]


async def send_refusal(scope, send, status: int, message: str) -> None:
    """A request refused before any route: `status` and one JSON error line (a WebSocket closed before it opens)."""
    if scope["type"] == "websocket":
        return await send({"type": "websocket.close", "code": 1008, "reason": message[:120]})
    body = json.dumps({"error": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
