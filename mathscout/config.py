"""Where MathScout keeps its files, and the embedded demo corpus."""

from __future__ import annotations

import os
from pathlib import Path

DEMO_CORPUS = Path(__file__).parent / "data" / "demo"  # a folder of JSONL files, one per area
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"  # the shared data beside a checkout
SHARED_COLLECTION = SHARED_DATA / "collection"  # docs.jsonl, topics.{train,dev}.jsonl, qrels.{train,dev}.txt


def home() -> Path:
    """MATHSCOUT_HOME, or ~/.cache/mathscout."""
    return Path(os.environ.get("MATHSCOUT_HOME") or Path.home() / ".cache" / "mathscout")


def default_index_path() -> Path:
    """MATHSCOUT_INDEX, or the demo index under home()."""
    return Path(os.environ.get("MATHSCOUT_INDEX") or home() / "indexes" / "demo")
