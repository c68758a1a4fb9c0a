"""Where MathScout keeps its files, and the embedded demo corpus."""

from __future__ import annotations

from pathlib import Path

from mathscout.settings import settings

DEMO_CORPUS = Path(__file__).parent / "data" / "demo"  # a folder of JSONL files, one per area
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"  # the shared data beside a checkout
SHARED_COLLECTION = SHARED_DATA / "collection"  # docs.jsonl, topics.{train,dev}.jsonl, qrels.{train,dev}.txt


def shared_data() -> Path:
    """MATHSCOUT_SHARED_DATA, or the shared data beside the checkout (SHARED_DATA)."""
    return settings().shared_data or SHARED_DATA


def home() -> Path:
    """MATHSCOUT_HOME, or ~/.cache/mathscout."""
    return settings().home_folder


def default_index_path() -> Path:
    """MATHSCOUT_INDEX, or the demo index under home()."""
    return settings().index or home() / "indexes" / "demo"
