"""Which topics a mean is over: `mathscout eval --topics`, `train fusion --topics` and `Experiment(over=…)`.

- `qrels` (the default of `eval` and `train fusion`): every judged topic; a topic the run does not answer counts 0
  (trec_eval -c, the official ARQMath evaluation). A run over a few topics of large qrels then averages mostly
  zeros, so more than half of the judged topics missing from a run is said in a warning.
- `run`: the judged topics the run answers (several runs: any of them, so that they are compared on one set), as
  trec_eval without -c and ir-measures do.
- a topic file (any format `load_topics` reads) or a list of topic ids: its judged topics.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from mathscout.errors import MathScoutError

SCOPES = ("qrels", "run")
MOSTLY_MISSING = 0.5  # warn when more than this share of the scored topics is missing from a run

TOPICS_HELP = (
    "which topics the mean is over: 'qrels' (default: every judged topic, one missing from the run counts 0, as "
    "trec_eval -c and ARQMath do; more than half of them missing is warned about), 'run' (the judged topics the "
    "run answers, any of the runs when several: trec_eval without -c, ir-measures), or a topic FILE (its judged "
    "topics; ./run for a file named run)"
)


@dataclass(frozen=True)
class TopicScope:
    """`name` says what the mean is over; `ids` restricts the qrels' topics to these (None: every judged topic)."""

    name: str = "qrels"
    ids: frozenset[str] | None = None


def topic_scope(choice: str | Path | Iterable[str] | TopicScope | None, run_topics: Iterable[str] = ()) -> TopicScope:
    """The scope `choice` names: "qrels" or None, "run" (the topics of `run_topics`), a topic file, or topic ids."""
    if choice is None or choice == "qrels":
        return TopicScope()
    if isinstance(choice, TopicScope):
        return choice
    if choice == "run":
        return TopicScope("the topics the runs answer", frozenset(run_topics))
    if isinstance(choice, (str, Path)):
        from mathscout.evaluation.topics import load_topics  # here: the command line's parser imports this module

        return TopicScope(f"the topics of {choice}", frozenset(t.id for t in load_topics(choice)))
    ids = frozenset(str(t) for t in choice)
    if not ids:
        raise MathScoutError("the topics to average over are an empty list")
    return TopicScope(f"{len(ids)} given topics", ids)


def add_topics_argument(parser: argparse.ArgumentParser) -> None:
    """`--topics qrels|run|FILE`, the same on every command that averages over topics."""
    parser.add_argument("--topics", default="qrels", metavar="qrels|run|FILE", help=TOPICS_HELP)


def coverage_warning(scored: int, missing: int, run: str, option: str = "--topics run") -> str | None:
    """A loud line when most of the `scored` topics are `missing` from `run` (each counts 0 in the mean)."""
    if scored == 0 or missing <= MOSTLY_MISSING * scored:
        return None
    return (
        f"warning: {missing:,} of the {scored:,} judged topics are missing from {run} and count as 0: the mean is "
        f"over all {scored:,}; {option} averages over the {scored - missing:,} answered topics"
    )
