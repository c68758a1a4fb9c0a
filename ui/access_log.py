"""The server's access log: one line per HTTP request (client, method, path, status, seconds) to the
`mathscout.ui.access` logger at INFO, shown with `mathscout -v serve` or MATHSCOUT_LOG=info (a background service
writes it to its log file). The query string is left out (it may hold a question)."""

from __future__ import annotations

import logging
import time

log = logging.getLogger("mathscout.ui.access")


class AccessLog:
    """ASGI middleware around the whole site (outermost: refused requests are logged too)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or not log.isEnabledFor(logging.INFO):
            return await self.app(scope, receive, send)
        started, status = time.perf_counter(), [0]

        async def sending(message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            client = (scope.get("client") or ("-", 0))[0]
            seconds = time.perf_counter() - started
            log.info("%s %s %s %s %.3f s", client, scope.get("method", "-"), scope.get("path", "-"), status[0], seconds)
