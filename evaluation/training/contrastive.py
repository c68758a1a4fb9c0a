"""What the contrastive trainers share (dense.py: every weight; dense_query_side.py: the dense query adapter;
colbert.py: the late-interaction query adapter): the score scale of Zhong 2023 thesis Eq. 5.18's softmax, the seed, the
held-out nDCG@10, the loss-curve plot and reading a resume checkpoint back (weights only: no pickle runs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mathscout.errors import MathScoutError

SCALE = 20.0  # cosine × 20: MultipleNegativesRankingLoss's default (temperature 0.05)
SEED = 13


def read_checkpoint(path: Path, remedy: str) -> Any:
    """A resume checkpoint written by torch.save (tensors, numbers, text, lists and dicts of them), read with torch's
    weights-only unpickler: the work folder lies in the index, so whoever made the folder made the file, and nothing
    in it may run. A file that reader refuses is one line ending in `remedy`."""
    import torch

    try:
        return torch.load(path, weights_only=True)
    except Exception as exc:  # pickle's, zip's and torch's errors alike (torch's text would advise trusting the file)
        raise MathScoutError(
            f"the checkpoint {path} holds more than tensors and numbers, or is damaged ({type(exc).__name__}); "
            f"MathScout reads checkpoints weights-only: {remedy}"
        ) from exc


def mean_ndcg_at_10(rankings: list[dict[int, float]], relevant: list[dict[int, int]]) -> float:
    """Mean nDCG@10 (ir_measures, as `mathscout eval` scores collection qrels) of each question's scored documents
    (document → score; its top 10 count) against its relevant documents (document → grade)."""
    import ir_measures

    run = {str(row): {str(d): float(s) for d, s in scores.items()} for row, scores in enumerate(rankings)}
    qrels = {str(row): {str(d): g for d, g in grades.items()} for row, grades in enumerate(relevant)}
    return ir_measures.calc_aggregate([ir_measures.nDCG @ 10], qrels, run)[ir_measures.nDCG @ 10]


def plot_losses(
    losses: list[float],
    path: Path,
    title: str,
    held_out: list[float] | None = None,
    steps_per_epoch: int = 0,
    held_out_steps: list[int] | None = None,
) -> None:
    """Batch losses and their running mean; with `held_out`, the held-out nDCG@10 after each epoch (right axis), or at
    `held_out_steps`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(range(1, len(losses) + 1), losses, lw=0.8, alpha=0.5, label="batch loss")
    window = max(1, len(losses) // 20)
    if len(losses) >= window:
        smooth = [
            sum(losses[max(0, i - window + 1) : i + 1]) / len(losses[max(0, i - window + 1) : i + 1])
            for i in range(len(losses))
        ]
        ax.plot(range(1, len(losses) + 1), smooth, lw=1.8, label=f"mean of {window}")
    ax.set_xlabel("step")
    ax.set_ylabel("contrastive loss (Zhong 2023 thesis, Eq. 5.18)")
    ax.set_title(title, fontsize=9)
    if held_out:
        right = ax.twinx()
        right.plot(
            held_out_steps or [e * steps_per_epoch for e in range(len(held_out))],
            held_out,
            "o-",
            color="tab:red",
            label="held-out nDCG@10",
        )
        right.set_ylabel("held-out nDCG@10")
        fig.legend(loc="center right", fontsize=8, bbox_to_anchor=(0.88, 0.5))
    else:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
