"""Who may have this server call its LLM, and how often (issue 42, item 6): the owner's tokens are spent only for
the clients and at the rate the owner allows.

- **Who**: clients on the server's own machine (a loopback address; behind a local proxy, the address it forwards
  in X-Forwarded-For), unless the owner opens the LLM to everyone with `--llm-public`. Under `--share` every
  visitor arrives from this machine through the tunnel, so there only `--llm-public` opens it.
- **How often**: each client address at most `--llm-rate` questions a minute (a bucket of that many that fills up
  again over a minute), and all clients together at most `--llm-budget` questions in any 24 hours.

One question answered by the LLM agent (its tool calls and listwise reranking included), or one reranking by an
LLM or OpenAI embeddings, takes one. A question the allowance refuses is answered by the offline planner, with a
notice saying why and when the LLM answers again; `rerank: auto` then reranks locally, with a notice; an
LLM reranker asked for by name is refused (403 when this client may not use the LLM, 429 with Retry-After when
its rate or the budget is spent), since another reranker would give other results than the one asked for.
"""

from __future__ import annotations

import ipaddress
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mathscout.retrievers.registry import AUTO_RERANK, llm_rerankers
from mathscout.ui.login import MAX_TRACKED

LLM_RERANKERS = llm_rerankers()  # rerankers that call the LLM's endpoint (the reranker table's `llm` column)
DAY_MINUTES = 24 * 60


def is_loopback(client: str) -> bool:
    """True for an address of this machine's loopback (127.0.0.0/8, ::1, and 127.x mapped into IPv6)."""
    try:
        address = ipaddress.ip_address(client)
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return bool(address.is_loopback or (mapped is not None and mapped.is_loopback))


@dataclass(frozen=True)
class LlmPolicy:
    """The owner's rules: `public` (--llm-public), `rate` per client a minute (--llm-rate), `budget` in any 24 hours
    (--llm-budget); `local_is_owner`: False under --share (every visitor comes from this machine)."""

    public: bool
    rate: int
    budget: int
    local_is_owner: bool = True

    @classmethod
    def configured(
        cls, public: bool | None = None, rate: int | None = None, budget: int | None = None, share: bool = False
    ) -> LlmPolicy:
        """The options given, the settings (serve.llm_public, serve.llm_rate, serve.llm_budget) for the others."""
        from mathscout.settings import settings

        found = settings()
        return cls(
            public=found.llm_public if public is None else public,
            rate=found.llm_rate if rate is None else rate,
            budget=found.llm_budget if budget is None else budget,
            local_is_owner=not share,
        )

    def who(self) -> str:
        if self.public:
            return "every client"
        if self.local_is_owner:
            return "clients on this machine only (--llm-public opens it to others)"
        return "no client (with --share every visitor comes through this machine: --llm-public opens it)"


@dataclass(frozen=True)
class Refusal:
    """Why a client may not have the LLM answer now: 403 (not this client) or 429 (rate or budget spent)."""

    status: int
    reason: str
    retry_after: int | None = None

    def notice(self, instead: str) -> str:
        again = f"; the LLM answers this client again in {self.retry_after:,} s" if self.retry_after else ""
        return f"{self.reason}: {instead}{again}"


class LlmRefused(Exception):
    """An LLM reranker asked for by name that the allowance refuses (the HTTP API answers `refusal.status`)."""

    def __init__(self, refusal: Refusal):
        super().__init__(refusal.reason)
        self.refusal = refusal


NO_LLM = Refusal(403, "this server calls no LLM (it was started with --no-llm)")


class LlmAllowance:
    """The owner's policy (default: the settings'), applied per request (thread-safe): `take(client)` spends one
    question or says why not."""

    def __init__(self, policy: LlmPolicy | None = None, clock: Callable[[], float] = time.monotonic):
        self.policy, self.clock = policy or LlmPolicy.configured(), clock
        self._buckets: dict[str, tuple[float, float]] = {}  # client → (questions left, when counted)
        self._minutes: deque[list[int]] = deque()  # [minute, questions granted in it], the last 24 hours
        self._lock = threading.Lock()

    def take(self, client: str) -> Refusal | None:
        """One question of the LLM for `client` (its address), or the Refusal."""
        policy, now = self.policy, self.clock()
        if not policy.public and not (policy.local_is_owner and is_loopback(client)):
            return Refusal(
                403,
                "this server's LLM answers only clients on its own machine (its owner may open it to others with "
                "'mathscout serve --llm-public')",
            )
        minute = int(now // 60)
        with self._lock:
            while self._minutes and self._minutes[0][0] <= minute - DAY_MINUTES:
                self._minutes.popleft()
            if sum(count for _, count in self._minutes) >= policy.budget:
                wait = (self._minutes[0][0] + DAY_MINUTES) * 60 - now
                return Refusal(
                    429,
                    f"this server's LLM budget of {policy.budget:,} questions in 24 hours is spent (--llm-budget)",
                    max(1, math.ceil(wait)),
                )
            left, counted = self._buckets.pop(client, (float(policy.rate), now))
            left = min(float(policy.rate), left + (now - counted) * policy.rate / 60)
            if left < 1:
                self._buckets[client] = (left, now)
                return Refusal(
                    429,
                    f"this client has had the LLM answer {policy.rate} questions in the last minute (--llm-rate)",
                    max(1, math.ceil((1 - left) * 60 / policy.rate)),
                )
            self._buckets[client] = (left - 1, now)  # re-added: the least recently seen client is first
            while len(self._buckets) > MAX_TRACKED:
                del self._buckets[next(iter(self._buckets))]
            if self._minutes and self._minutes[-1][0] == minute:
                self._minutes[-1][1] += 1
            else:
                self._minutes.append([minute, 1])
        return None

    def describe(self, usable: bool, why: str) -> str:
        """Who may use the LLM, for the start-up message; `usable, why` as `Assistant.llm_status`."""
        if not usable:
            return f"LLM: none ({why})"
        policy = self.policy
        return (
            f"LLM: {why.removeprefix('LLM agent: ')}; for {policy.who()}; at most {policy.rate} questions a minute "
            f"per client and {policy.budget:,} in any 24 hours in all (--llm-rate, --llm-budget)"
        )

    def question(
        self, client: str, assistant: Any, use_llm: bool | None, rerank: str | bool | None
    ) -> tuple[bool | None, str | None]:
        """(use_llm, notice) for one question of `client` to `assistant` (`use_llm` and `rerank` as asked, the
        reranker's kind checked): False with the refusal as a notice when the LLM would answer but may not.
        Raises LlmRefused for an LLM reranker asked for by name that is refused."""
        agent = use_llm is not False and assistant.llm_status[0]
        named = rerank in LLM_RERANKERS
        if named and assistant.use_llm is False:
            raise LlmRefused(NO_LLM)
        refusal = self.take(client) if agent or named else None
        if refusal is None:
            return use_llm, None
        if named:
            raise LlmRefused(refusal)
        return False, refusal.notice("the offline planner answered")

    def search(self, client: str, assistant: Any, rerank: str | None) -> tuple[bool, str | None]:
        """(may the LLM rerank, notice) for one search of `client`: for "auto", True when the LLM answers and this
        client may use it now, else False (the search's one rule, `mathscout.tools.searching.resolve_rerank`, then
        picks the index's local reranker; with a notice when refused); an LLM reranker asked for by name that is
        refused raises LlmRefused."""
        if rerank == AUTO_RERANK and not assistant.llm_status[0]:
            return False, None
        if rerank != AUTO_RERANK and rerank not in LLM_RERANKERS:
            return False, None
        if rerank != AUTO_RERANK and assistant.use_llm is False:
            raise LlmRefused(NO_LLM)
        refusal = self.take(client)
        if refusal is None:
            return True, None
        if rerank != AUTO_RERANK:
            raise LlmRefused(refusal)
        return False, refusal.notice(f"reranked by {assistant.toolbox.local_reranker()} instead")
