"""Tests of mathscout.agent (agent/): the offline planner, the LLM agent, the answers."""
