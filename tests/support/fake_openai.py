"""A real HTTP server on 127.0.0.1 speaking the OpenAI protocol, for tests of the LLM paths.

It answers `POST /v1/chat/completions` (JSON, or server-sent events with `"stream": true`, tool calls
included), `POST /v1/embeddings` (float or base64 vectors) and `GET /v1/models`. A test decides each
chat reply with a *responder*: a function of the parsed request, or a list of replies used in order.

    with FakeOpenAI(lambda request: Text("Hello [42].")) as server:
        ChatOpenAI(base_url=server.base_url, api_key="test", model="fake-gpt")
        ...
        server.requests  # every ChatRequest the server saw, in order

Replies: `Text`, `ToolCalls`, `RawToolCalls` (arguments that are not JSON), `Fault` (an HTTP error),
`Slow` (a delay before another reply, to trigger client time-outs).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import struct
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

EMBEDDING_DIM = 64


@dataclass(frozen=True)
class Text:
    """An assistant message with text content (streamed word by word when the client streams)."""

    content: str


@dataclass(frozen=True)
class ToolCalls:
    """An assistant message calling tools: [(name, arguments dict), …]; optional text alongside."""

    calls: Sequence[tuple[str, dict[str, Any]]]
    content: str = ""


@dataclass(frozen=True)
class RawToolCalls:
    """Tool calls whose `arguments` are sent verbatim (e.g. malformed JSON)."""

    calls: Sequence[tuple[str, str]]


@dataclass(frozen=True)
class Fault:
    """An HTTP error with an OpenAI-style error body (429 = rate limit, 500 = server error, …)."""

    status: int = 500
    message: str = "internal server error"


@dataclass(frozen=True)
class Slow:
    """Wait `seconds`, then send `reply` (a client with a shorter time-out gives up first)."""

    seconds: float
    reply: Reply


Reply = Text | ToolCalls | RawToolCalls | Fault | Slow
Responder = Callable[["ChatRequest"], Reply] | Sequence[Reply]


@dataclass
class ChatRequest:
    """One chat-completions request as the server received it."""

    body: dict[str, Any]

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])

    @property
    def model(self) -> str:
        return str(self.body.get("model", ""))

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))

    @property
    def tools(self) -> list[str]:
        """Names of the tools offered to the model."""
        return [t.get("function", {}).get("name", "") for t in self.body.get("tools") or []]

    @property
    def last_user(self) -> str:
        users = [m for m in self.messages if m.get("role") == "user"]
        return _content_text(users[-1].get("content")) if users else ""

    @property
    def tool_results(self) -> list[str]:
        """The contents of the tool messages sent back to the model, in order."""
        return [_content_text(m.get("content")) for m in self.messages if m.get("role") == "tool"]

    @property
    def system(self) -> str:
        return "\n".join(
            _content_text(m.get("content")) for m in self.messages if m.get("role") in ("system", "developer")
        )


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


def hashed_embedding(text: str, dim: int = EMBEDDING_DIM) -> list[float]:
    """A deterministic bag-of-words vector: texts sharing words point the same way (unit length)."""
    vector = [0.0] * dim
    for word in re.findall(r"\w+", text.lower()):
        digest = hashlib.sha1(word.encode("utf-8")).digest()
        vector[digest[0] % dim] += 1.0 if digest[1] % 2 else -1.0
    norm = sum(v * v for v in vector) ** 0.5 or 1.0
    return [v / norm for v in vector]


@dataclass
class FakeOpenAI:
    """The server (a context manager): `base_url`, and `requests` / `embedding_requests` it received."""

    responder: Responder
    requests: list[ChatRequest] = field(default_factory=list)
    embedding_requests: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._script = None if callable(self.responder) else list(self.responder)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._ids = 0

    @property
    def base_url(self) -> str:
        assert self._server is not None, "the server is not running (use it in a with block)"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> FakeOpenAI:
        handler = type("Handler", (_Handler,), {"owner": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-openai", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    # --- used by the handler ------------------------------------------------------------------------------

    def _next_reply(self, request: ChatRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            self._ids += 1
            if self._script is None:
                responder = self.responder
            elif self._script:
                reply = self._script.pop(0)
                return reply
            else:
                return Fault(500, "the test script has no more replies")
        return responder(request)  # type: ignore[operator]

    def _new_id(self, prefix: str) -> str:
        with self._lock:
            self._ids += 1
            return f"{prefix}-{self._ids}"


class _Handler(BaseHTTPRequestHandler):
    owner: FakeOpenAI
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._json(200, {"object": "list", "data": [{"id": "fake-gpt", "object": "model", "owned_by": "tests"}]})
        else:
            self._json(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            self._json(400, {"error": {"message": "request body is not JSON", "type": "invalid_request_error"}})
            return
        if self.path.rstrip("/").endswith("/chat/completions"):
            self._chat(ChatRequest(body))
        elif self.path.rstrip("/").endswith("/embeddings"):
            self._embeddings(body)
        else:
            self._json(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})

    # --- chat ---------------------------------------------------------------------------------------------

    def _chat(self, request: ChatRequest) -> None:
        reply = self.owner._next_reply(request)
        while isinstance(reply, Slow):
            time.sleep(reply.seconds)
            reply = reply.reply
        if isinstance(reply, Fault):
            kind = "rate_limit_error" if reply.status == 429 else "server_error"
            self._json(reply.status, {"error": {"message": reply.message, "type": kind, "code": reply.status}})
            return
        content, calls = _message_parts(reply, self.owner)
        finish = "tool_calls" if calls else "stop"
        completion_id = self.owner._new_id("chatcmpl")
        if request.stream:
            self._stream(request, completion_id, content, calls, finish)
            return
        message: dict[str, Any] = {"role": "assistant", "content": content or (None if calls else "")}
        if calls:
            message["tool_calls"] = calls
        self._json(
            200,
            {
                "id": completion_id,
                "object": "chat.completion",
                "created": int(time.time()),
                "model": request.model or "fake-gpt",
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
            },
        )

    def _stream(self, request: ChatRequest, completion_id: str, content: str, calls: list[dict], finish: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        base = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": request.model or "fake-gpt",
        }

        def send(delta: dict, finish_reason: str | None = None) -> None:
            chunk = dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": finish_reason}])
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()

        send({"role": "assistant", "content": ""})
        for piece in re.findall(r"\S+\s*|\s+", content):
            send({"content": piece})
        for index, call in enumerate(calls):
            arguments = call["function"]["arguments"]
            half = len(arguments) // 2
            send(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": call["function"]["name"], "arguments": arguments[:half]},
                        }
                    ]
                }
            )
            send({"tool_calls": [{"index": index, "function": {"arguments": arguments[half:]}}]})
        send({}, finish)
        if (request.body.get("stream_options") or {}).get("include_usage"):
            usage = dict(base, choices=[], usage={"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20})
            self.wfile.write(f"data: {json.dumps(usage)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True

    # --- embeddings ---------------------------------------------------------------------------------------

    def _embeddings(self, body: dict[str, Any]) -> None:
        with self.owner._lock:
            self.owner.embedding_requests.append(body)
        inputs = body.get("input")
        if isinstance(inputs, str) or (isinstance(inputs, list) and inputs and isinstance(inputs[0], int)):
            inputs = [inputs]
        data = []
        for n, item in enumerate(inputs or []):
            text = item if isinstance(item, str) else " ".join(f"t{token}" for token in item)
            vector = hashed_embedding(text)
            if body.get("encoding_format") == "base64":
                encoded: Any = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
            else:
                encoded = vector
            data.append({"object": "embedding", "index": n, "embedding": encoded})
        self._json(
            200,
            {
                "object": "list",
                "data": data,
                "model": body.get("model", "fake-embedding"),
                "usage": {"prompt_tokens": len(data), "total_tokens": len(data)},
            },
        )

    def _json(self, status: int, payload: dict[str, Any]) -> None:
        raw = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


def _message_parts(reply: Reply, owner: FakeOpenAI) -> tuple[str, list[dict[str, Any]]]:
    """(text content, OpenAI tool_calls list) of a reply."""
    if isinstance(reply, Text):
        return reply.content, []
    if isinstance(reply, ToolCalls):
        return reply.content, [
            {"id": owner._new_id("call"), "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            for name, args in reply.calls
        ]
    if isinstance(reply, RawToolCalls):
        return "", [
            {"id": owner._new_id("call"), "type": "function", "function": {"name": name, "arguments": arguments}}
            for name, arguments in reply.calls
        ]
    raise TypeError(f"not a reply: {reply!r}")
