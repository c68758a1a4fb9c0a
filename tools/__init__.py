"""Agent tools: structure search, hybrid search, type expansion, formula rewriting, reranking, document look-up.

`ToolBox` does the work over one index; `ToolSession` runs one question's calls (validation, budget, trace);
`langchain_tools(session)` offers them to a LangChain agent.
"""

from mathscout.tools.session import ToolSession
from mathscout.tools.toolbox import TOOL_NAMES, ToolBox, ToolOutput

__all__ = ["TOOL_NAMES", "ToolBox", "ToolOutput", "ToolSession", "langchain_tools"]


def langchain_tools(session, names=None, search_mode=None):
    """The session's tools as LangChain StructuredTools (imported lazily: LangChain is slow to import)."""
    from mathscout.tools.langchain_adapter import langchain_tools as build

    return build(session, names, search_mode)
