"""Tests of mathscout.tools (tools/): the agent's tools and one question's tool session."""
