"""The login check of the page and of the HTTP API: constant-time comparison, and failed attempts slowed per
client address and per user name, never the right credentials.

A wrong attempt is answered after base · 2^(failures − free) seconds (at most `ceiling`), where failures is the
larger count of its client address and of its user name (guessing one name from many addresses is slowed too).
The right credentials are answered at once, whatever others failed. While one of a client's wrong attempts is
being slowed, its further attempts are refused at once with 429, before their password is looked at, so
parallel requests guess no faster. Gradio gives the auth callable only the name and password: the server's
middleware (`mathscout.ui.http_api.Gate`) puts each request's client address in `CLIENT`.
"""

from __future__ import annotations

import asyncio
import math
import secrets
import time
from dataclasses import dataclass, field

from starlette.exceptions import HTTPException

from mathscout.clients import CLIENT  # the request's client address (re-exported for the middleware)

MAX_TRACKED = 10_000  # failure counts kept (addresses and names); the oldest are forgotten beyond this
NAME_CHARS = 256  # a user name is counted by its first characters (a long name cannot fill the memory)


@dataclass
class LoginGuard:
    """The login of one USER:PASSWORD; `check` is the async Gradio auth callable."""

    user: str
    password: str
    free: int = 3
    base: float = 1.0
    ceiling: float = 30.0
    forget_after: float = 900.0  # seconds without a failure after which a count starts again
    failures: dict[str, tuple[int, float]] = field(default_factory=dict)  # "addr:…" / "name:…" → (count, last)
    slowed: dict[str, float] = field(default_factory=dict)  # client → when its slowed attempt is answered

    @staticmethod
    def _keys(user: str, client: str) -> tuple[str, str]:
        return f"addr:{client}", f"name:{user[:NAME_CHARS]}"

    def delay(self, user: str, client: str = "") -> float:
        """Seconds the next wrong attempt of `user` from `client` waits."""
        now = time.monotonic()
        counts = (self.failures.get(key, (0, now)) for key in self._keys(user, client))
        failed = max((n for n, last in counts if now - last < self.forget_after), default=0)
        return 0.0 if failed < self.free else min(self.base * 2 ** (failed - self.free), self.ceiling)

    def _failed(self, user: str, client: str) -> None:
        now = time.monotonic()
        for key in self._keys(user, client):
            count, last = self.failures.pop(key, (0, now))
            self.failures[key] = (1 if now - last >= self.forget_after else count + 1, now)  # re-added: newest last
        while len(self.failures) > MAX_TRACKED:
            del self.failures[next(iter(self.failures))]

    async def check(self, user: str, password: str, client: str | None = None) -> bool:
        """The auth callable (a coroutine function, so Gradio awaits it: pass `guard.check`, not `guard`);
        `client` defaults to the request's address in CLIENT. Raises HTTPException 429 while this client's
        previous wrong attempt is still being slowed."""
        client = CLIENT.get() if client is None else client
        if client in self.slowed:
            retry = max(1, math.ceil(self.slowed[client] - time.monotonic()))
            raise HTTPException(
                429,
                f"too many login attempts from this address: try again in {retry} s",
                headers={"Retry-After": str(retry)},
            )
        if secrets.compare_digest(user.encode(), self.user.encode()) & secrets.compare_digest(
            password.encode(), self.password.encode()
        ):
            self.failures.pop(self._keys(user, client)[0], None)  # the name's count stays: others may guess it
            return True
        wait = self.delay(user, client)
        self._failed(user, client)
        if wait:
            self.slowed[client] = time.monotonic() + wait
            try:
                await asyncio.sleep(wait)
            finally:
                self.slowed.pop(client, None)
        return False
