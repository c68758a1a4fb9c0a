"""The server's HTTP/1.1 connections (uvicorn's h11 protocol) with the API's error shape for requests it cannot
parse (issue 42, item 7).

uvicorn answers a request line or headers longer than its parser keeps, or anything that is not HTTP, with a
plain-text 400 and closes the socket while the client is still sending, so the client sees a reset connection
instead of an answer (a 1 MB GET did). Here the head may hold MAX_REQUEST_HEAD_BYTES (a longer one is 414 for the
URL, 431 for the headers; `head_refusal` says the same of a head that arrived whole), any other unparsable request
is 400, each one JSON line `{"error": …}`; then the server stops sending and reads and drops what the client still
sends (at most DRAIN_BYTES, for at most DRAIN_SECONDS), so the answer arrives before the connection closes.
"""

from __future__ import annotations

import http
import json
import sys
from collections.abc import Mapping
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from mathscout.limits import MAX_REQUEST_BYTES, MAX_REQUEST_HEAD_BYTES

DRAIN_BYTES = 64 * MAX_REQUEST_BYTES  # what a refused client may still send before the connection closes
DRAIN_SECONDS = 10.0
_KIB = MAX_REQUEST_HEAD_BYTES // 1024


def url_too_long() -> tuple[int, str]:
    return 414, (
        f"the request's URL is over {_KIB} KiB ({MAX_REQUEST_HEAD_BYTES:,} bytes): send a shorter query "
        "(a query is searched up to 10,000 characters)"
    )


def headers_too_long() -> tuple[int, str]:
    return 431, f"the request's headers are over {_KIB} KiB ({MAX_REQUEST_HEAD_BYTES:,} bytes) in all: send fewer"


def head_refusal(scope: Mapping[str, Any]) -> tuple[int, str] | None:
    """(status, message) for a parsed request whose URL or head is over MAX_REQUEST_HEAD_BYTES (the parser's bound
    only holds while a head arrives in pieces), else None."""
    url = len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"") + 1
    if url > MAX_REQUEST_HEAD_BYTES:
        return url_too_long()
    if url + sum(len(name) + len(value) + 4 for name, value in scope["headers"]) > MAX_REQUEST_HEAD_BYTES:
        return headers_too_long()
    return None


class JsonErrorsH11Protocol(H11Protocol):
    """uvicorn's h11 protocol whose refusals of unparsable requests are the API's JSON errors, read to the end.
    Use with `h11_max_incomplete_event_size=MAX_REQUEST_HEAD_BYTES` (`serve` does)."""

    dropped: int | None = None  # bytes read and dropped after a refusal; None before one

    def send_400_response(self, msg: str) -> None:
        """Called by uvicorn inside its `except h11.RemoteProtocolError`: the error being handled says why."""
        error = sys.exc_info()[1]
        if getattr(error, "error_status_hint", 400) == 431:  # h11: the head outgrew the parser's buffer
            buffered, _ = self.conn.trailing_data
            status, message = url_too_long() if b"\r\n" not in buffered else headers_too_long()
        else:
            status, message = 400, "this is not a valid HTTP/1.1 request: check its request line and headers"
        body = json.dumps({"error": " ".join(message.split())}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        reason = http.HTTPStatus(status).phrase.encode()
        response = h11.Response(status_code=status, headers=headers, reason=reason)
        for event in (response, h11.Data(data=body), h11.EndOfMessage()):
            self.transport.write(self.conn.send(event) or b"")
        self.dropped = 0
        if self.transport.can_write_eof():
            self.transport.write_eof()  # the answer is complete; the client's rest is read below, then closed
            self.loop.call_later(DRAIN_SECONDS, self.transport.close)
        else:  # pragma: no cover - TCP transports can
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self.dropped is None:
            return super().data_received(data)
        self.dropped += len(data)
        if self.dropped > DRAIN_BYTES:
            self.transport.close()
