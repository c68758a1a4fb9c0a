"""Which LLM the agent talks to: an OpenAI-compatible endpoint from the environment or a config file.

Environment (wins): OPENAI_API_KEY, OPENAI_BASE_URL, MATHSCOUT_LLM_MODEL, MATHSCOUT_LLM_TIMEOUT.
Config file: `$MATHSCOUT_HOME/config.toml` (or MATHSCOUT_CONFIG), section `[llm]` with `model`, `base_url`,
`api_key`, `timeout`, `max_retries`. A base URL alone (a local server such as vLLM or Ollama) is enough.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from mathscout.config import home
from mathscout.errors import MathScoutError

DEFAULT_MODEL = "gpt-4o"
DEFAULT_TIMEOUT = 60.0  # seconds per LLM request
DEFAULT_MAX_RETRIES = 1
LOCAL_KEY = "not-needed"  # local OpenAI-compatible servers ignore the key, the client requires one


def config_path() -> Path:
    return Path(os.environ.get("MATHSCOUT_CONFIG") or home() / "config.toml")


def _file_settings(path: Path) -> dict:
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise MathScoutError(f"the config file {path} is unreadable ({exc}): fix or delete it") from exc
    llm = data.get("llm", {})
    return llm if isinstance(llm, dict) else {}


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
        settings = _file_settings(config_path())
        env = os.environ
        try:
            timeout = float(env.get("MATHSCOUT_LLM_TIMEOUT") or settings.get("timeout") or DEFAULT_TIMEOUT)
            retries = int(settings.get("max_retries", DEFAULT_MAX_RETRIES))
        except (TypeError, ValueError) as exc:
            raise MathScoutError(f"the LLM timeout/max_retries setting is not a number ({exc})") from exc
        return cls(api_key=env.get("OPENAI_API_KEY") or settings.get("api_key") or None,
                   base_url=env.get("OPENAI_BASE_URL") or settings.get("base_url") or None,
                   model=env.get("MATHSCOUT_LLM_MODEL") or settings.get("model") or DEFAULT_MODEL,
                   timeout=max(0.1, timeout), max_retries=max(0, retries))

    @property
    def configured(self) -> bool:
        return bool(self.api_key or self.base_url)

    @property
    def key(self) -> str:
        return self.api_key or LOCAL_KEY

    def describe(self) -> str:
        where = self.base_url or "api.openai.com"
        return f"{self.model} at {where}"
