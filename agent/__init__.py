"""The MathScout agent: a tool-calling planner over the retrievers.

    from mathscout import MathScout           # the public name (this package's MathScout is the same class)
    scout = MathScout()                      # the demo index (built on first use), or MathScout("path/to/index")
    scout.search("sum of $\\frac{1}{n^2}$", mode="structure", k=5)   # -> SearchResult: list[Hit], .notices
    answer = scout.ask("Why is $\\cos^2 x + \\sin^2 x = 1$?")       # -> Answer (text with [doc-id] citations)
    tools = scout.tools                      # LangChain tools for your own agent

Names are imported lazily: importing a submodule (e.g. `mathscout.agent.planned`) does not load the LLM agent.
"""

from __future__ import annotations

__all__ = ["Assistant", "MathScout"]


def __getattr__(name: str):
    if name == "MathScout":
        from mathscout.agent.api import MathScout

        return MathScout
    if name == "Assistant":
        from mathscout.agent.assistant import Assistant

        return Assistant
    raise AttributeError(f"module 'agent' has no attribute {name!r}")
