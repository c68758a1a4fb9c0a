"""Prompt files (`prompts/*.md`), read once and filled in."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from mathscout.errors import MathScoutError

PROMPTS = Path(__file__).resolve().parents[1] / "prompts"


@lru_cache(maxsize=16)
def load_prompt(name: str) -> str:
    """The text of `prompts/<name>.md`; a clear error when the file is missing."""
    path = PROMPTS / f"{name}.md"
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise MathScoutError(f"the prompt file {path} is missing ({exc.strerror}); reinstall MathScout") from exc


def user_prompt(question: str, mode: str, k: int, tools: list[str]) -> str:
    """The user turn: the question and the run's settings (plain replacement: questions may contain braces)."""
    text = load_prompt("agent_user")
    for key, value in (
        ("{mode}", mode),
        ("{k}", str(k)),
        ("{tools}", ", ".join(tools) or "none"),
        ("{question}", question),
    ):
        text = text.replace(key, value)
    return text
