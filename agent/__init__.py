"""The MathScout agent (tool-calling planner over the retrievers): arrives with the agent issue."""
