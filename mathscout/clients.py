"""Who a request is for: the HTTP server's client address, set by its middleware for every request
(`mathscout.ui.http_api.Gate`); "" in a process of its own. Read where one client must not crowd out the others:
the login's slowing of failed attempts (`mathscout.ui.login`) and the SymPy workers' turns (`mathscout.rewrite.pool`).
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

CLIENT: ContextVar[str] = ContextVar("mathscout_client", default="")


def address_of(request: Any) -> str:
    """The client address of an HTTP request (Starlette's or Gradio's); "" when there is none (no request, a test
    client without one)."""
    client = getattr(request, "client", None) if request is not None else None
    return client.host if client else ""


__all__ = ["CLIENT", "address_of"]
