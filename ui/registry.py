"""What the entry points add to the retriever registry (`mathscout.retrievers.registry`, which lists only
retrievers/'s own retrievers): the agent's `auto` mode, first in the page's menu, and the `mathscout train` commands.
Trainers are named as `"module:function"` targets, imported only when one runs (tests/codebase/test_layers.py checks that
every target points down the layers)."""

from __future__ import annotations

from dataclasses import dataclass

from mathscout.retrievers.registry import ModeSpec, available_modes


@dataclass(frozen=True)
class Trainer:
    """`mathscout train COMMAND …`: `target` names a `main(argv)` function."""

    command: str
    target: str
    description: str


TRAINERS: tuple[Trainer, ...] = (
    Trainer(
        "structure",
        "mathscout.evaluation.structure_tuning:main",
        "Zhong 2023 thesis Eq. 3.18 λ_m / formulas / text part tuned on train topics, stored with an index "
        "(structure.json)",
    ),
    Trainer(
        "types",
        "mathscout.retrievers.types:main",
        "type dictionary detection + word2vec type embeddings into an index (adds 'types')",
    ),
    Trainer(
        "fusion",
        "mathscout.evaluation.tuning:main",
        "MABOWDOR fusion weights by k-fold CV over topics, stored with an index (fusion.json)",
    ),
    Trainer(
        "dense",
        "mathscout.evaluation.training.dense:main",
        "contrastive fine-tuning of the bi-encoder on the train topics",
    ),
    Trainer(
        "ranker",
        "mathscout.evaluation.ranker_training:main",
        "LambdaMART (LightGBM) over the retrievers' candidates, k-fold CV over train topics, stored with an index "
        "(ranker.json)",
    ),
    Trainer(
        "cross-encoder",
        "mathscout.evaluation.training.cross_encoder:main",
        "a cross-encoder (question, answer → relevance) from all-MiniLM-L6-v2 on the train topics with hard negatives "
        "from the index's own candidates, stored with an index (cross-encoder/) for --rerank cross",
    ),
    Trainer(
        "colbert",
        "mathscout.evaluation.training.colbert:main",
        "the late-interaction (colbert) model's query and document sides (--query-side-only: the query side) on the "
        "train topics, MaxSim contrastive loss with hard negatives from the index's own candidates, stored with an "
        "index (colbert/)",
    ),
)


def trainers() -> dict[str, Trainer]:
    """`mathscout train` commands, in table order."""
    return {trainer.command: trainer for trainer in TRAINERS}


def all_modes() -> dict[str, ModeSpec]:
    """Every mode the entry points offer: the registry's, then `auto` (`mathscout.agent.planned.AUTO_SPEC`)."""
    from mathscout.agent.planned import AUTO_SPEC

    return {**available_modes(), AUTO_SPEC.name: AUTO_SPEC}
