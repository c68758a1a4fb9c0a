"""Who may spend the owner's LLM tokens through a real `mathscout serve` on 127.0.0.1 (issue 42, item 6).

One server runs for the module over the tiny index, its LLM a fake OpenAI-protocol server (tests/support/
fake_openai.py), with `--llm-rate 2 --llm-budget 5`. Clients speak from many addresses through X-Forwarded-For
(uvicorn trusts it from 127.0.0.1, a local proxy): 127.0.0.x are clients on the server's machine, 203.0.113.x
clients beyond it. The allowance's own arithmetic (a bucket that fills up over a minute, 24 hours of budget) runs
in-process on a fake clock at the end.
"""

from __future__ import annotations

import json
import re
import urllib.parse

import pytest

from tests.support.fake_openai import FakeOpenAI, Text, ToolCalls
from tests.support.harness import Server, assert_http_error, page_ask

RATE, BUDGET = 2, 5
FORWARDED = "X-Forwarded-For"
REMOTE = "203.0.113.10"
LLM_MARK = "LLM-ANSWERED"
QUESTION = "Why is $a^2+b^2=c^2$ true?"


def _responder(request):
    """The agent: structure-search the question's formula, then answer citing the first id; the listwise
    reranker: the passages in reverse."""
    if not request.tools:
        return Text("[PASSAGE2] > [PASSAGE1]")
    if not request.tool_results:
        formula = re.search(r"\$([^$]+)\$", request.last_user)
        return ToolCalls([("structure_search", {"formula": formula.group(1) if formula else "x", "k": 5})])
    ids = re.findall(r'"id":\s*"([^"]+)"', request.tool_results[-1])
    return Text(f"By Pythagoras [{ids[0]}]. {LLM_MARK}" if ids else LLM_MARK)


@pytest.fixture(scope="module")
def fake_llm():
    with FakeOpenAI(_responder) as server:
        yield server


@pytest.fixture(scope="module")
def server(tiny_index, fake_llm, tmp_path_factory):
    llm = {
        "OPENAI_BASE_URL": fake_llm.base_url,
        "OPENAI_API_KEY": "test-key",
        "MATHSCOUT_LLM_MODEL": "fake-gpt",
        "MATHSCOUT_LLM_TIMEOUT": "30",
    }
    home = tmp_path_factory.mktemp("llm-home")
    with Server(
        home, "--index", str(tiny_index), "--llm-rate", str(RATE), "--llm-budget", str(BUDGET), llm=True, extra_env=llm
    ) as running:
        yield running


def _ask(server, client: str, **body) -> dict:
    status, _, answer = server.request("POST", "/api/ask", {"question": QUESTION, **body}, headers={FORWARDED: client})
    assert status == 200, answer[:500]
    return json.loads(answer)


def _llm_answered(answer: dict) -> bool:
    return answer["planner"].startswith("llm:") and LLM_MARK in answer["text"]


def _questions_the_llm_saw(fake_llm) -> int:
    """Questions the agent brought to the LLM (each one's first request) and listwise reranks."""
    return sum(1 for r in fake_llm.requests if not r.tool_results)


def _search(server, client: str, rerank: str) -> tuple[int, dict, bytes]:
    query = urllib.parse.urlencode({"q": QUESTION, "mode": "bm25", "k": 3, "rerank": rerank, "rerank_depth": 2})
    return server.request("GET", f"/api/search?{query}", headers={FORWARDED: client})


def test_the_start_up_message_says_who_may_use_the_llm(server):
    log = server.log_text()
    assert "LLM: fake-gpt at " in log, log[-2000:]
    assert "for clients on this machine only (--llm-public opens it to others)" in log
    assert f"at most {RATE} questions a minute per client and {BUDGET} in any 24 hours" in log


def test_a_client_beyond_the_servers_machine_spends_no_token(server, fake_llm):
    before = len(fake_llm.requests)
    answer = _ask(server, REMOTE)
    assert answer["planner"] == "offline" and answer["hits"]
    assert "answers only clients on its own machine" in answer["notices"][0]
    assert "--llm-public" in answer["notices"][0] and "offline planner answered" in answer["notices"][0]
    assert _ask(server, REMOTE, use_llm=True)["planner"] == "offline"
    for kind in ("llm", "openai-embedding"):
        status, _, body = _search(server, REMOTE, kind)
        assert "answers only clients on its own machine" in assert_http_error(status, body, 403)
        status, _, body = server.request(
            "POST", "/api/ask", {"question": QUESTION, "rerank": kind}, headers={FORWARDED: REMOTE}
        )
        assert_http_error(status, body, 403)
    page = page_ask(server, QUESTION, use_llm=True, headers={FORWARDED: REMOTE})
    assert "answers only clients on its own machine" in page and LLM_MARK not in page
    assert len(fake_llm.requests) == before


def test_a_client_on_the_servers_machine_has_the_llm_answer_at_its_rate(server, fake_llm):
    client, other = "127.0.0.2", "127.0.0.3"
    assert all(_llm_answered(_ask(server, client)) for _ in range(RATE))
    third = _ask(server, client)
    assert third["planner"] == "offline" and third["hits"]
    notice = third["notices"][0]
    assert f"has had the LLM answer {RATE} questions in the last minute" in notice
    assert re.search(r"again in \d+ s", notice)
    status, headers, body = _search(server, client, "llm")
    assert "--llm-rate" in assert_http_error(status, body, 429) and int(headers["retry-after"]) <= 60 // RATE + 1
    assert _llm_answered(_ask(server, other))  # the rate is each client's own


def test_the_budget_bounds_every_client_together(server, fake_llm):
    for n in range(BUDGET + 1):  # a new client each time: only the budget stops them
        answer = _ask(server, f"127.0.1.{n}")
        if not _llm_answered(answer):
            break
    assert answer["planner"] == "offline" and "LLM budget of 5 questions in 24 hours is spent" in answer["notices"][0]
    status, headers, body = _search(server, "127.0.2.1", "llm")
    assert "--llm-budget" in assert_http_error(status, body, 429) and int(headers["retry-after"]) > 60
    page = page_ask(server, QUESTION, use_llm=True, headers={FORWARDED: "127.0.2.2"})
    assert "budget of 5 questions" in page and LLM_MARK not in page
    assert _questions_the_llm_saw(fake_llm) <= BUDGET  # the whole module's questions and reranks


# ---- the allowance on a fake clock -------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_the_rate_fills_up_over_a_minute_and_the_budget_over_a_day():
    from mathscout.ui.llm_allowance import LlmAllowance, LlmPolicy

    clock = Clock()
    allowance = LlmAllowance(LlmPolicy(public=True, rate=3, budget=7), clock=clock)
    assert [allowance.take(REMOTE) for _ in range(3)] == [None] * 3  # --llm-public: anyone
    refused = allowance.take(REMOTE)
    assert refused is not None and refused.status == 429 and refused.retry_after == 20
    clock.now += 20
    assert allowance.take(REMOTE) is None and allowance.take(REMOTE) is not None
    assert [allowance.take(f"198.51.100.{n}") for n in range(3)] == [None] * 3  # 7 in all
    spent = allowance.take("198.51.100.99")
    assert spent is not None and "budget" in spent.reason and 23 * 3600 < spent.retry_after <= 24 * 3600
    clock.now += 24 * 3600
    assert allowance.take("198.51.100.99") is None


def test_under_share_every_visitor_needs_llm_public():
    """With --share every visitor arrives through the tunnel from this machine: loopback proves nothing."""
    from mathscout.ui.llm_allowance import LlmAllowance, LlmPolicy

    shared = LlmAllowance(LlmPolicy(public=False, rate=5, budget=5, local_is_owner=False))
    refused = shared.take("127.0.0.1")
    assert refused is not None and refused.status == 403
    assert LlmAllowance(LlmPolicy(public=False, rate=5, budget=5)).take("::ffff:127.0.0.1") is None
