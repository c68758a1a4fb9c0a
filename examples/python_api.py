"""MathScout's Python API: search, ask, and the agent's tools in your own code.

python examples/python_api.py            # over the embedded demo index (built on first use)
python examples/python_api.py INDEX_DIR  # over your own index
"""

import sys

from mathscout import MathScout

scout = MathScout(sys.argv[1] if len(sys.argv) > 1 else None, use_llm=False)  # use_llm=None: the LLM when configured
print("modes:", ", ".join(scout.modes()))

# 1. Search: any mode of the index, or "auto" (formula rewriting + structure search + text search, fused).
for hit in scout.search("$x^2+y^2=z^2$", mode="structure", k=3):
    formula = hit.formulas[0].latex if hit.formulas else ""
    print(f"{hit.rank}. {hit.doc_id}  {hit.score:.3f}  ${formula}$")

# 2. Ask: a cited answer, streamed as events (plan, tool calls, tokens) or returned whole.
answer = scout.ask("How do I simplify $\\frac{t+1}{t}$?", k=5)
print(answer.text)
print("cited:", answer.citations)
for call in answer.trace:
    print(f"  {call.tool} {call.arguments} -> {call.error or call.summary} ({call.seconds:.2f} s)")
for rewrite in answer.rewrites:
    print(f"  rewrite: {rewrite.original} -> {rewrite.rewritten} ({rewrite.rule})")

# 3. Tools: LangChain StructuredTools for your own agent, e.g. langchain.agents.create_agent(model, scout.tools).
tools = {tool.name: tool for tool in scout.tools}
print("tools:", ", ".join(tools))
print(tools["structure_search"].invoke({"formula": "\\sin^2 x + \\cos^2 x = 1", "k": 2})[:300], "…")
