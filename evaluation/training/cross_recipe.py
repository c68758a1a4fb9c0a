"""The cross-encoder's training recipe (`mathscout train cross-encoder`, cross_encoder.py): its losses over a group of
1 positive + N hard negatives per question, the frozen lower layers, the weights it starts from and the first stages
it mines negatives from and is validated on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mathscout.dense.model import default_model_path
from mathscout.errors import MathScoutError
from mathscout.index.layout import IndexDir
from mathscout.notices import notice, warning
from mathscout.retrievers.registry import servable_modes

LOSSES = ("listwise", "pointwise")
# first stages, strongest first (dev nDCG@10: dense-ft 0.651, then the untrained bi-encoder, bm25 0.430, structure)
FIRST_STAGES = ("dense-ft", "dense", "bm25", "structure")
INITS = ("base", "dense-ft")  # or a model folder


def default_miners(index: IndexDir) -> str:
    """The strongest first stage the index has (dense-ft, else dense), else bm25 and structure: "a,b"."""
    servable = servable_modes(index, FIRST_STAGES)
    for name in ("dense-ft", "dense"):
        if name in servable:
            return name
    return ",".join(n for n in ("bm25", "structure") if n in servable)


def check_miners(index: IndexDir, choice: str) -> tuple[str, ...]:
    """The first stages `choice` names ("a,b"), each one the index serves; one line naming what it lacks otherwise."""
    names = tuple(dict.fromkeys(n.strip() for n in choice.split(",") if n.strip()))
    unknown = [n for n in names if n not in FIRST_STAGES]
    if unknown or not names:
        raise MathScoutError(f"--negatives-from: choose from {', '.join(FIRST_STAGES)} (not {choice!r})")
    missing = [n for n in names if n not in servable_modes(index, names)]
    if missing:
        raise MathScoutError(f"--negatives-from: the index {index.path} cannot search {', '.join(missing)}")
    return names


def strongest_stage(index: IndexDir) -> str:
    """The first stage `--rerank cross` will mostly reorder: the strongest one the index serves (validation's)."""
    servable = servable_modes(index, FIRST_STAGES)
    if not servable:
        raise MathScoutError(f"the index {index.path} has no first stage to rerank ({', '.join(FIRST_STAGES)})")
    return next(n for n in FIRST_STAGES if n in servable)


def report_stages(index: IndexDir) -> tuple[str, ...]:
    """The first stages the held-out report measures before and after reranking: every one the index serves."""
    return tuple(servable_modes(index, FIRST_STAGES))


TRAINED_STAGE = "dense-ft"  # the one first stage fit on train topics (its model records the ones it held out)


def dense_ft_folder(index: IndexDir) -> Path:
    """The model folder the index's dense-ft component was built with (the index has one)."""
    from mathscout.dense.build import read_meta

    return Path(read_meta(index.component_path(TRAINED_STAGE))["model"])


def unseen_topics(index: IndexDir, stage: str) -> set[str] | None:
    """The train topics `stage` was not fit on, where the cross-encoder's held-out topics (its validation and its
    interpolation weight) are drawn from, so that neither flatters a first stage on questions it was trained on. None:
    no limit (an untrained first stage), or not known (a dense-ft model that does not record its held-out topics; a
    warning)."""
    if stage != TRAINED_STAGE:
        return None
    from mathscout.index.stored import StoredFile

    folder = dense_ft_folder(index)
    path = folder / "training.json"
    if path.is_file():
        stored = StoredFile(path, "the dense-ft model's training record", "retrain it with 'mathscout train dense'")
        held = stored.load().get("held_out_ids")
        if held is not None:
            return {stored.text(t, "a held-out topic") for t in stored.items(held, "held_out_ids")}
    warning(
        f"the dense-ft model {folder} does not record the topics it held out (retrain it with 'mathscout train "
        "dense'): the cross-encoder's held-out topics may be ones it was fit on, which favours dense-ft in the "
        "interpolation weight"
    )
    return None


def held_out_unseen(stage: str, unseen: set[str] | None, held_out: list[str]) -> bool:
    """Whether `held_out` are topics `stage` was not fit on (`unseen`: unseen_topics' answer)."""
    return stage != TRAINED_STAGE or (unseen is not None and unseen >= set(held_out))


def resolve_init(choice: str, index: IndexDir) -> Path:
    """The weights a training starts from: `base` (the packaged all-MiniLM-L6-v2), `dense-ft` (the folder the index's
    dense-ft component records) or a model folder; a new one-logit head is put on any of them."""
    if choice == "base":
        return default_model_path()
    if choice == "dense-ft":
        if TRAINED_STAGE not in index.components:
            raise MathScoutError(f"--init dense-ft: the index {index.path} has no dense-ft component")
        folder = dense_ft_folder(index)
        if (folder / "query_adapter.npz").is_file():
            notice(
                f"notice: dense-ft ({folder}) was fine-tuned on the query side only: its transformer is the base "
                "model's, so --init dense-ft starts from the same weights as --init base"
            )
        return folder
    folder = Path(choice)
    if not (folder / "config.json").is_file():
        raise MathScoutError(f"--init: choose base, dense-ft or a model folder ({folder} holds no config.json)")
    return folder


def freeze_layers(model: Any, count: int) -> int:
    """Freeze the embeddings and the lower `count` transformer layers of a CrossEncoder (requires_grad False: no
    gradient is computed below the first trained layer, so a step's backward pass is shorter); the number of
    parameters frozen. 0 freezes nothing."""
    if count <= 0:
        return 0
    base = model.model.base_model
    layers = base.encoder.layer
    if count > len(layers):
        raise MathScoutError(f"--freeze-layers {count}: the model has {len(layers)} transformer layers")
    frozen = 0
    for module in (base.embeddings, *layers[:count]):
        for parameter in module.parameters():
            parameter.requires_grad = False
            frozen += parameter.numel()
    return frozen


def group_loss(model: Any, kind: str, in_batch: int):
    """The loss over each question's group (positive, negative_1 … negative_N) and `in_batch` other questions'
    positives: `listwise`, the softmax cross-entropy of the positive's logit against the group's
    (Zhong 2023 thesis §5.2.2 Eq. 5.18 with the cross-encoder's raw logit as S(q, p)); `pointwise`, binary
    cross-entropy of every pair (positive 1, negatives 0) over the same pairs, for the ablation."""
    import torch

    if kind not in LOSSES:
        raise MathScoutError(f"--loss: choose from {', '.join(LOSSES)} (not {kind!r})")

    class GroupLoss(torch.nn.Module):
        def __init__(self, model: Any):
            super().__init__()
            self.model = model
            self.kind, self.in_batch = kind, in_batch

        def forward(self, inputs: list[list[str]], labels: Any = None, prompt: Any = None, task: Any = None):
            from sentence_transformers.util import batch_to_device

            queries, columns = inputs[0], inputs[1:]  # columns[0]: the positives, then one column per negative
            size = len(queries)
            shifts = range(1, min(self.in_batch, size - 1) + 1)  # in-batch: the positives of the next rows
            columns = [*columns, *([columns[0][(i + s) % size] for i in range(size)] for s in shifts)]
            pairs = [(queries[i], column[i]) for column in columns for i in range(size)]
            features = batch_to_device(self.model.preprocess(pairs), self.model.device)
            logits = self.model(features)["scores"].view(len(columns), size).T.float()  # (questions, group)
            if self.kind == "listwise":
                target = torch.zeros(size, dtype=torch.long, device=logits.device)  # the positive is column 0
                return torch.nn.functional.cross_entropy(logits, target)
            truth = torch.zeros_like(logits)
            truth[:, 0] = 1.0
            return torch.nn.functional.binary_cross_entropy_with_logits(logits, truth)

        def get_config_dict(self) -> dict[str, Any]:
            return {"kind": self.kind, "in_batch": self.in_batch}

    return GroupLoss(model)


def describe_loss(kind: str, group: int, in_batch: int) -> str:
    """The loss as recorded with the model."""
    extra = f" + {in_batch} in-batch" if in_batch else ""
    if kind == "listwise":
        return (
            f"listwise softmax cross-entropy over 1 positive + {group} hard negatives{extra}, raw logits "
            "(Zhong 2023 thesis §5.2.2, Eq. 5.18)"
        )
    return f"pointwise binary cross-entropy over the same pairs: 1 positive + {group} hard negatives{extra}"
