"""The tiny trainings the tests share: the cross-encoder's (tests/conftest.py: cross_train_files, cross_index), a few
steps from the MiniLM weights on a handful of train topics (~50 s)."""

from __future__ import annotations

CROSS_TRAIN_TOPICS = 8  # train topics the tiny cross-encoder learns from…
CROSS_HELD_OUT = 4  # …and those its weight and backend are chosen on
CROSS_MAX_LENGTH = 64  # word pieces of a (question, passage) pair
TINY_CROSS_ENCODER = [
    "--train-topics",
    str(CROSS_TRAIN_TOPICS),
    "--held-out",
    str(CROSS_HELD_OUT),
    "--group",
    "2",
    "--depth",
    "5",
    "--max-length",
    str(CROSS_MAX_LENGTH),
    "--batch",
    "4",
    "--eval-every",
    "1",
]
