"""The page's login check: constant-time comparison, and repeated failures slowed down.

Gradio calls the check with the user name and password only (no client address), so failures are counted
per user name and over all names together: after `free` failures each further attempt waits
base · 2^(failures − free) seconds (at most `ceiling`) before it is checked, whatever the password, so
guessing costs time. A success resets its user name's count.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import dataclass, field


@dataclass
class LoginGuard:
    """The login of one USER:PASSWORD; `check` is the async Gradio auth callable."""

    user: str
    password: str
    free: int = 3
    base: float = 1.0
    ceiling: float = 30.0
    forget_after: float = 900.0  # seconds without a failure after which a count starts again
    failures: dict[str, tuple[int, float]] = field(default_factory=dict)

    def delay(self, user: str) -> float:
        """Seconds the next attempt for `user` waits."""
        now = time.monotonic()
        counts = [n for name, (n, last) in self.failures.items() if now - last < self.forget_after and name in (user, "*")]
        failed = max(counts, default=0)
        return 0.0 if failed < self.free else min(self.base * 2 ** (failed - self.free), self.ceiling)

    def _failed(self, user: str) -> None:
        now = time.monotonic()
        for name in (user, "*"):
            count, last = self.failures.get(name, (0, now))
            self.failures[name] = (1 if now - last >= self.forget_after else count + 1, now)

    async def check(self, user: str, password: str) -> bool:
        """The auth callable (a coroutine function, so Gradio awaits it: pass `guard.check`, not `guard`)."""
        wait = self.delay(user)
        if wait:
            await asyncio.sleep(wait)
        ok = secrets.compare_digest(user.encode(), self.user.encode()) & secrets.compare_digest(
            password.encode(), self.password.encode())
        if ok:
            self.failures.pop(user, None)
        else:
            self._failed(user)
        return bool(ok)
