"""Who a request is for: the HTTP server's client address, set by its middleware for every request
(`mathscout.ui.http_api.Gate`); "" in a process of its own. Read where one client must not crowd out the others:
the login's slowing of failed attempts (`mathscout.ui.login`) and the SymPy workers' turns (`mathscout.rewrite.pool`).
"""

from __future__ import annotations

from contextvars import ContextVar

CLIENT: ContextVar[str] = ContextVar("mathscout_client", default="")

__all__ = ["CLIENT"]
