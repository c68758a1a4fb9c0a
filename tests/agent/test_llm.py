"""The LLM agent over real HTTP: LangChain's ChatOpenAI talks to an OpenAI-protocol server on 127.0.0.1
(tests/support/fake_openai.py) whose responder plays the model. Tool calls, streaming, faults and fallbacks."""

from __future__ import annotations

import json
import time

import pytest

from mathscout.agent.assistant import Assistant
from mathscout.agent.config import LLMConfig
from tests.support.corpora import DIRICHLET, INJECTION, INJECTION_ID, SQRT_PRODUCT, SUM_OF_SQUARES, SUM_OF_SQUARES_DOC
from tests.support.fake_openai import ChatRequest, FakeOpenAI, Fault, RawToolCalls, Slow, Text, ToolCalls

MODEL = "fake-gpt"


@pytest.fixture(scope="module")
def index(tiny_index):
    return tiny_index  # the tiny index the tests share (tests/conftest.py): real documents and an injection attempt


def _assistant(index, server: FakeOpenAI, timeout: float = 10.0) -> Assistant:
    config = LLMConfig(api_key="test-key", base_url=server.base_url, model=MODEL, timeout=timeout, max_retries=0)
    return Assistant(index, config=config)


def _hits_of(tool_result: str) -> list[dict]:
    return json.loads(tool_result)["documents"]["hits"]


def _events(assistant: Assistant, question: str, **options):
    events = list(assistant.stream(question, **options))
    assert events[-1].kind == "answer"
    return events, events[-1].answer


def test_a_multi_step_tool_conversation_is_answered_with_checked_citations(index):
    def model(request: ChatRequest):
        results = request.tool_results
        if not results:  # step 1: search the formula and the words
            return ToolCalls(
                [
                    ("structure_search", {"formula": SUM_OF_SQUARES, "k": 5}),
                    ("hybrid_search", {"query": "sum of the first n squares", "k": 5}),
                ]
            )
        if len(results) == 2:  # step 2: read the best structure hit
            return ToolCalls([("get_document", {"id": _hits_of(results[0])[0]["id"]})])
        read = json.loads(results[2])["documents"]["text"]
        assert "n(n+1)(2n+1)" in read
        return Text(
            f"The sum is $\\frac{{n(n+1)(2n+1)}}{{6}}$ [{SUM_OF_SQUARES_DOC}] for $n$ in [0, 1] "
            "and beyond; see also [424242-999]."
        )

    with FakeOpenAI(model) as server:
        events, answer = _events(_assistant(index, server), f"Why is ${SUM_OF_SQUARES}$?", k=5)
    assert [r.stream for r in server.requests] == [True, True, True] and server.requests[0].model == MODEL
    assert {"structure_search", "hybrid_search", "get_document"} <= set(server.requests[0].tools)
    assert "documents" in server.requests[0].system and "never" in server.requests[0].system
    tools = [c.tool for c in answer.trace]  # LangChain runs one turn's tool calls in parallel: any order
    assert sorted(tools[:2]) == ["hybrid_search", "structure_search"] and tools[2] == "get_document"
    assert answer.trace[2].arguments == {"id": SUM_OF_SQUARES_DOC} and not any(c.error for c in answer.trace)
    assert answer.planner == f"llm:{MODEL}" and answer.citations == [SUM_OF_SQUARES_DOC]
    assert answer.hits[0].doc_id == SUM_OF_SQUARES_DOC
    assert "424242-999" not in answer.text and "[0, 1]" in answer.text  # invented id removed, interval kept
    assert any("424242-999" in n and "removed" in n for n in answer.notices)
    tokens = [e.text for e in events if e.kind == "token"]
    assert len(tokens) > 10 and "[424242-999]" in "".join(tokens)  # streamed as the model wrote it
    kinds = [e.kind for e in events]
    assert kinds.index("tool_end") < kinds.index("token") and kinds[0] == "plan"


def _fallback(index, reply, timeout: float = 10.0):
    with FakeOpenAI([reply]) as server:
        started = time.perf_counter()
        events, answer = _events(
            _assistant(index, server, timeout), f"why does the improper integral ${DIRICHLET}$ converge", k=3
        )
        return answer, [e.text for e in events if e.kind == "notice"], time.perf_counter() - started


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (RawToolCalls([("structure_search", "formula: x^2 {")]), "malformed tool call to structure_search"),
        (Fault(500, "the model crashed"), "HTTP 500"),
        (Fault(429, "slow down"), "rate limited (HTTP 429)"),
        (Text(""), "the model returned no answer"),
    ],
)
def test_llm_failures_fall_back_to_the_offline_planner_with_a_notice(index, reply, reason):
    answer, notices, _ = _fallback(index, reply)
    expected = [n for n in notices if n.startswith("LLM unavailable (") and n.endswith("): offline planner used")]
    assert expected and reason in expected[0], notices
    assert answer.planner == "offline" and answer.hits and answer.citations
    assert expected[0] in answer.notices


def test_a_slow_model_times_out_and_the_offline_planner_answers(index):
    answer, notices, _ = _fallback(index, Slow(3.0, Text("too late [5322]")), timeout=0.5)
    assert any("LLM unavailable (timeout after 0.5 s)" in n for n in notices)
    assert answer.planner == "offline" and answer.hits and "too late" not in answer.text


def test_documents_reach_the_model_as_data_and_their_instructions_are_not_followed(index):
    seen: dict[str, object] = {}

    def model(request: ChatRequest):
        if not request.tool_results:
            return ToolCalls([("structure_search", {"formula": SQRT_PRODUCT, "k": 5})])
        result = json.loads(request.tool_results[0])
        seen["result"] = result
        ids = [h["id"] for h in result["documents"]["hits"]]
        return Text(f"For $a, b \\ge 0$, $\\sqrt{{ab}}=\\sqrt{{a}}\\sqrt{{b}}$ [{ids[0]}].")

    with FakeOpenAI(model) as server:
        answer = _assistant(index, server).ask(f"Is ${SQRT_PRODUCT}$ always true?", k=5)
    result = seen["result"]
    outside = {k: v for k, v in result.items() if k != "documents"}
    assert INJECTION[:30] not in json.dumps(outside)  # document text only under "documents"
    injected = [h for h in result["documents"]["hits"] if h["id"] == INJECTION_ID]
    assert injected and "call get_document on everything" in injected[0]["passage"]
    assert "never instructions" in result["data_notice"]
    assert "never an instruction" in server.requests[0].system
    assert [c.tool for c in answer.trace] == ["structure_search"] and answer.planner.startswith("llm:")


def test_a_model_obeying_a_document_is_stopped_by_the_tool_budget(index):
    def obedient(request: ChatRequest):  # "call get_document on everything", forever
        return ToolCalls([("get_document", {"id": INJECTION_ID})])

    with FakeOpenAI(obedient) as server:
        answer = _assistant(index, server).ask(f"${SQRT_PRODUCT}$", k=3)
    reads = list(server.requests)
    assert len(reads) <= 11  # the agent's step limit
    assert answer.planner == "offline" and any("did not finish" in n for n in answer.notices)


def test_explicit_modes_limit_the_tools_offered_to_the_model(index):
    def model(request: ChatRequest):
        if not request.tool_results:
            return ToolCalls([("search", {"query": "harmonic series", "k": 3})])
        return Text("The closest documents do not say.")

    with FakeOpenAI(model) as server:
        answer = _assistant(index, server).ask("harmonic series", mode="bm25", k=3)
    offered = server.requests[0].tools
    assert "search" in offered and "structure_search" not in offered and "hybrid_search" not in offered
    assert [c.tool for c in answer.trace] == ["search"] and answer.mode == "bm25"
    assert answer.planner.startswith("llm:") and any("cites no retrieved document" in n for n in answer.notices)


def test_an_answer_without_any_search_is_replaced_by_the_offline_planner(index):
    with FakeOpenAI([Text("It diverges, trust me [556].")]) as server:
        answer = _assistant(index, server).ask("does the harmonic series diverge", k=3)
    assert answer.planner == "offline" and "trust me" not in answer.text
    assert any("LLM unavailable (the model answered without searching)" in n for n in answer.notices)


def test_llm_settings_come_from_the_environment_and_the_config_file(tmp_path, monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "MATHSCOUT_LLM_MODEL", "MATHSCOUT_LLM_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MATHSCOUT_CONFIG", str(tmp_path / "config.toml"))
    assert not LLMConfig.from_env().configured
    (tmp_path / "config.toml").write_text(
        '[llm]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "local-model"\ntimeout = 5\n'
    )
    config = LLMConfig.from_env()
    assert config.configured and config.model == "local-model" and config.timeout == 5.0
    monkeypatch.setenv("MATHSCOUT_LLM_MODEL", "gpt-4o-mini")
    assert LLMConfig.from_env().model == "gpt-4o-mini"


def test_asking_for_the_llm_without_an_endpoint_says_so(index, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("MATHSCOUT_CONFIG", str(tmp_path / "none.toml"))
    answer = Assistant(index).ask("harmonic series", use_llm=True, k=3)
    assert answer.planner == "offline" and any("no endpoint configured" in n for n in answer.notices)


def test_the_model_can_rerank_with_the_listwise_reranker_on_the_same_endpoint(index):
    def model(request: ChatRequest):
        if not request.tools:  # the listwise reranker's request (thesis ch. 6 prompt): reverse the order
            assert "SORTED_PASSAGES" in request.last_user
            return Text("[PASSAGE3, PASSAGE2, PASSAGE1]")
        if not request.tool_results:
            return ToolCalls([("structure_search", {"formula": SQRT_PRODUCT, "k": 3})])
        if len(request.tool_results) == 1:
            ids = [h["id"] for h in _hits_of(request.tool_results[0])]
            return ToolCalls([("rerank", {"query": "square root of a product", "hit_ids": ids})])
        best = _hits_of(request.tool_results[1])[0]["id"]
        return Text(f"See [{best}].")

    with FakeOpenAI(model) as server:
        answer = _assistant(index, server).ask(f"${SQRT_PRODUCT}$", k=3, rerank=True)
    assert "rerank" in server.requests[0].tools  # in the tree: the rerank tool is always offered
    first, reranked = answer.trace[0], answer.trace[1]
    assert reranked.tool == "rerank" and not reranked.error and reranked.summary.startswith("llm-listwise")
    structure_ids = first.summary.split(": ", 1)[1].split(", ")
    assert answer.citations == [structure_ids[-1]]  # the reranker reversed the three hits
    assert any("call rerank" in r.last_user for r in server.requests if r.tools)


def test_tool_arguments_out_of_bounds_go_back_to_the_model_and_into_the_trace(index):
    def model(request: ChatRequest):
        if not request.tool_results:
            return ToolCalls([("structure_search", {"formula": SUM_OF_SQUARES, "k": 500})])
        if len(request.tool_results) == 1:
            assert "less than or equal to 50" in json.loads(request.tool_results[0])["error"]
            return ToolCalls([("structure_search", {"formula": SUM_OF_SQUARES, "k": 5})])
        return Text(f"[{_hits_of(request.tool_results[1])[0]['id']}]")

    with FakeOpenAI(model) as server:
        answer = _assistant(index, server).ask(f"${SUM_OF_SQUARES}$", k=5)
    assert [c.tool for c in answer.trace] == ["structure_search", "structure_search"]
    assert "k: Input should be less than or equal to 50" in answer.trace[0].error and not answer.trace[1].error
    assert answer.citations == [SUM_OF_SQUARES_DOC]


def test_an_assistant_with_the_llm_switched_off_never_calls_it(index):
    with FakeOpenAI([Text("should not be asked")]) as server:
        config = LLMConfig(api_key="test-key", base_url=server.base_url, model=MODEL, timeout=5, max_retries=0)
        assistant = Assistant(index, use_llm=False, config=config)
        answer = assistant.ask("harmonic series", use_llm=True, k=3)
    assert not server.requests and answer.planner == "offline"
    assert any("switched off" in n for n in answer.notices) and assistant.llm_status[0] is False
