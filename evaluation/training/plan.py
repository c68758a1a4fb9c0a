"""The plan of a resumable training that stores its model with an index (`mathscout train cross-encoder`, `mathscout
train colbert`): work/plan.json holds the settings, the source files, the topics chosen for training and held out, and
the seconds spent per step over every run; a rerun with the same settings and sources resumes it, another is refused."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mathscout.errors import MathScoutError
from mathscout.evaluation.topics import require_train_topics
from mathscout.index.layout import write_json_atomic


def require_train_files(topics: Path, qrels: Path, what: str) -> None:
    """Train topic and qrels files only (dev is refused), and both there."""
    require_train_topics(topics, qrels, what=what)
    for path in (topics, qrels):
        if not path.is_file():
            raise MathScoutError(f"training data not found: {path}")


class TrainingPlan:
    """work/plan.json: `data` holds "settings", "source", "train" and "held_out" (topic ids), "seconds" (per step)
    and what the trainer adds."""

    def __init__(
        self,
        work: Path,
        settings: dict[str, Any],
        source: dict[str, Any],
        choose: Callable[[], tuple[list[str], list[str]]],
    ):
        """The plan in `work` (created), or a new one with the topics `choose()` gives (training, held out)."""
        work.mkdir(exist_ok=True)
        self.path = work / "plan.json"
        if self.path.is_file():
            self.data = json.loads(self.path.read_text(encoding="utf-8"))
            if self.data["settings"] != settings or self.data["source"] != source:
                raise MathScoutError(
                    f"{work} holds a training with other settings ({self.data['settings']}, {self.data['source']}): "
                    f"rerun with them, or delete {work} to start afresh"
                )
        else:
            train, held_out = choose()
            self.data = {"settings": settings, "source": source, "train": train, "held_out": held_out, "seconds": {}}
            self.save()

    def save(self) -> None:
        write_json_atomic(self.path, self.data)

    def spent(self, step: str, since: float) -> None:
        """Add the seconds since `since` (time.time()) to `step`'s, summed over the runs of a resumed training."""
        seconds = self.data["seconds"]
        seconds[step] = round(seconds.get(step, 0.0) + time.time() - since, 1)
        self.save()

    @property
    def minutes(self) -> float:
        return round(sum(self.data["seconds"].values()) / 60, 1)
