"""One-line notices and progress on stderr, silenced by `--quiet` (MATHSCOUT_QUIET=1).

stdout carries results only (hits, answers, JSON); everything said along the way goes through `notice`.
"""

from __future__ import annotations

import os
import sys


def quiet() -> bool:
    return os.environ.get("MATHSCOUT_QUIET", "") not in ("", "0")


def set_quiet() -> None:
    """Silence notices and progress bars in this process and the ones it starts (tqdm reads TQDM_DISABLE)."""
    os.environ["MATHSCOUT_QUIET"] = "1"
    os.environ["TQDM_DISABLE"] = "1"
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"  # model loading bars of transformers / sentence-transformers
    os.environ["TRANSFORMERS_VERBOSITY"] = "error"


def notice(message: str) -> None:
    """Print one line on stderr unless quiet."""
    if not quiet():
        print(message, file=sys.stderr, flush=True)
