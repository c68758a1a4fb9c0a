"""Which LLM the agent talks to: an OpenAI-compatible endpoint from the environment or a config file.

Environment (wins): OPENAI_API_KEY, OPENAI_BASE_URL, MATHSCOUT_LLM_MODEL, MATHSCOUT_LLM_TIMEOUT.
Config file: `$MATHSCOUT_HOME/config.toml` (or MATHSCOUT_CONFIG), section `[llm]` with `model`, `base_url`,
`api_key`, `timeout`, `max_retries`. A base URL alone (a local server such as vLLM or Ollama) is enough.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mathscout.settings import LOCAL_KEY, settings

DEFAULT_MODEL = "gpt-4o"
DEFAULT_TIMEOUT = 60.0  # seconds per LLM request
DEFAULT_MAX_RETRIES = 1


def config_path() -> Path:
    return settings().config_file


@dataclass(frozen=True)
class LLMConfig:
    """An OpenAI-compatible chat endpoint. `configured` is False when neither a key nor a base URL is set."""

    api_key: str | None = None
    base_url: str | None = None
    model: str = DEFAULT_MODEL
    timeout: float = DEFAULT_TIMEOUT
    max_retries: int = DEFAULT_MAX_RETRIES

    @classmethod
    def from_env(cls) -> LLMConfig:
        """The endpoint of the settings (`mathscout.settings`: the environment over the config file's [llm])."""
        config = settings()
        return cls(
            api_key=config.llm_api_key or None,
            base_url=config.llm_base_url or None,
            model=config.llm_model or DEFAULT_MODEL,
            timeout=max(0.1, config.llm_timeout),
            max_retries=config.llm_max_retries,
        )

    @property
    def configured(self) -> bool:
        return bool(self.api_key or self.base_url)

    @property
    def key(self) -> str:
        return self.api_key or LOCAL_KEY

    def describe(self) -> str:
        where = self.base_url or "api.openai.com"
        return f"{self.model} at {where}"
