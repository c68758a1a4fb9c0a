"""The OpenAI-protocol test server speaks the protocol the real clients expect (openai, langchain-openai)."""

from __future__ import annotations

import openai
import pytest

from tests.support.fake_openai import FakeOpenAI, Fault, RawToolCalls, Slow, Text, ToolCalls, hashed_embedding


def _client(server: FakeOpenAI, **options) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0, **options)


def test_chat_text_tool_calls_and_streaming_reach_the_real_client():
    script = [
        Text("The answer is [42]."),
        ToolCalls([("structure_search", {"formula": "x^2", "k": 5})]),
        Text("Streamed words arrive in order."),
    ]
    with FakeOpenAI(script) as server:
        client = _client(server)
        reply = client.chat.completions.create(model="fake-gpt", messages=[{"role": "user", "content": "hi"}])
        assert reply.choices[0].message.content == "The answer is [42]."
        reply = client.chat.completions.create(
            model="fake-gpt",
            messages=[{"role": "user", "content": "search"}],
            tools=[{"type": "function", "function": {"name": "structure_search", "parameters": {"type": "object"}}}],
        )
        call = reply.choices[0].message.tool_calls[0]
        assert (call.function.name, call.function.arguments) == ("structure_search", '{"formula": "x^2", "k": 5}')
        chunks = client.chat.completions.create(
            model="fake-gpt", messages=[{"role": "user", "content": "s"}], stream=True
        )
        assert (
            "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Streamed words arrive in order."
        )
    assert [r.last_user for r in server.requests] == ["hi", "search", "s"]
    assert server.requests[1].tools == ["structure_search"]


def test_langchain_sees_malformed_tool_arguments_streamed_and_not():
    """Streamed, LangChain's partial-JSON parser turns unreadable arguments into a call with empty args
    (so tool schemas must reject them); not streamed, they arrive as an invalid tool call."""
    from langchain_openai import ChatOpenAI

    with FakeOpenAI([RawToolCalls([("get_document", "{not json")])] * 2) as server:
        model = ChatOpenAI(base_url=server.base_url, api_key="test", model="fake-gpt", max_retries=0)
        chunks = list(model.stream("go"))
        merged = chunks[0]
        for chunk in chunks[1:]:
            merged = merged + chunk
        assert merged.tool_call_chunks[0]["args"] == "{not json"
        assert merged.tool_calls == [
            {"name": "get_document", "args": {}, "id": merged.tool_calls[0]["id"], "type": "tool_call"}
        ]
        invoked = model.invoke("again")
        assert not invoked.tool_calls and invoked.invalid_tool_calls[0]["args"] == "{not json"


def test_faults_and_time_outs_surface_as_client_errors():
    with FakeOpenAI([Fault(500, "boom"), Fault(429, "slow down"), Slow(2.0, Text("late"))]) as server:
        client = _client(server, timeout=0.5)
        with pytest.raises(openai.InternalServerError, match="boom"):
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "a"}])
        with pytest.raises(openai.RateLimitError):
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "b"}])
        with pytest.raises(openai.APITimeoutError):
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "c"}])


def test_embeddings_are_deterministic_in_float_and_base64():
    with FakeOpenAI(lambda request: Text("")) as server:
        client = _client(server)
        default = client.embeddings.create(model="e", input=["abelian group", "abelian group"]).data
        floats = client.embeddings.create(model="e", input="abelian group", encoding_format="float").data[0].embedding
    assert default[0].embedding == pytest.approx(default[1].embedding)
    assert floats == pytest.approx(hashed_embedding("abelian group"), abs=1e-6)
    assert default[0].embedding == pytest.approx(floats, abs=1e-6)
