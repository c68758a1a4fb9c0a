"""`mathscout train dense --method query-side`: fine-tune the bi-encoder's query tower over an index's vectors.

The documents' passage vectors of an index's `dense` component stay fixed (query-side fine-tuning,
Lee et al. 2021 §4.3), which makes two things cheap on a CPU: no re-encoding of the collection (its vectors are
reused as they are), and a contrastive loss whose negatives are *every* document of the index —
Zhong 2023 thesis, Eq. 5.18 with its denominator (in-batch positives + hard negatives) widened to the whole collection:

    L = −1/|B| Σ_i log exp(S(q_i, d_i⁺)) / Σ_{d ∈ collection, d ∉ R(q_i) \\ {d_i⁺}} exp(S(q_i, d))

S = 20 · cos(normalise(q + q·A), d) with d's score the max over its passages (as in search); R(q) are the
question's other relevant answers, left out of the denominator. `--negatives batch` keeps Zhong 2023 thesis Eq. 5.18's
in-batch denominator instead. The trainable part is the residual map A (mathscout.dense.query_adapter).

Steps: encode the train questions with the index's query encoder (cached in the checkpoint folder, so an
interrupted run resumes), hold out `--held-out` questions, train `--epochs` epochs of AdamW and keep the
epoch with the best held-out nDCG@10. The output folder is the base model's files plus query_adapter.npz,
training.json and loss.png: point `dense-ft` (MATHSCOUT_DENSE_FT_MODEL) or a search's `model=` at it.
"""

from __future__ import annotations

import json
import random
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mathscout.dense.query_adapter import QueryAdapter
from mathscout.errors import MathScoutError, QueryError
from mathscout.evaluation.measures import read_qrels
from mathscout.evaluation.topics import load_topics, require_train_topics
from mathscout.evaluation.training.contrastive import SCALE, SEED, mean_ndcg_at_10, plot_losses
from mathscout.index.layout import IndexDir, write_json_atomic
from mathscout.retrievers.base import prepare_query


@dataclass(frozen=True)
class QuerySideSettings:
    """The schedule (defaults measured on the shared collection's train topics, see docs/results.md)."""

    epochs: int = 4
    batch: int = 256
    lr: float = 1e-3
    negatives: str = "collection"  # or "batch" (Zhong 2023 thesis, Eq. 5.18's in-batch denominator)
    held_out: int = 1000
    min_grade: int = 2  # pairs: (question, answer graded ≥ this)
    device: str = "cpu"  # where A trains against every document (resolved --device: cpu or cuda)


@dataclass
class TrainingData:
    """Question vectors, their relevant documents (index ordinal → grade) and the (question, answer) pairs."""

    ids: list[str]
    vectors: np.ndarray
    relevant: list[dict[int, int]]
    pairs: list[tuple[int, int]]


def _encode_questions(retriever, topics, cache: Path) -> np.ndarray:
    """The train questions through the index's query encoder, cached by chunks (a rerun of the same job resumes;
    a cache left by another index or topic list is discarded)."""
    key = {
        "index_build": retriever.meta.get("build_id"),
        "model": str(retriever.encoder.folder),
        "questions": [t.id for t in topics],
    }
    try:
        stale = json.loads((cache / "questions.json").read_text(encoding="utf-8")) != key
    except (OSError, ValueError):
        stale = True
    if stale:
        shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir(parents=True, exist_ok=True)
    write_json_atomic(cache / "questions.json", key)
    chunks, size, started = [], 512, time.perf_counter()
    for n, start in enumerate(range(0, len(topics), size)):
        path = cache / f"questions.{n:05d}.npy"
        if not path.is_file():
            vectors = np.concatenate(
                [retriever.encode(topics[at : at + 64]) for at in range(start, min(start + size, len(topics)), 64)]
            )
            np.save(path.with_suffix(".tmp.npy"), vectors)
            path.with_suffix(".tmp.npy").rename(path)
            done = min(start + size, len(topics))
            print(
                f"encoded {done:,}/{len(topics):,} questions ({done / (time.perf_counter() - started):.0f}/s)",
                file=sys.stderr,
                flush=True,
            )
        chunks.append(np.load(path, allow_pickle=False))
    return np.concatenate(chunks)


def load_training_data(retriever, topics_path: Path, qrels_path: Path, cache: Path, min_grade: int) -> TrainingData:
    require_train_topics(topics_path, qrels_path, what="fine-tuning")
    qrels = read_qrels(qrels_path)
    ordinal = {doc: n for n, doc in enumerate(retriever.doc_ids)}
    topics = []
    for topic in load_topics(topics_path):
        if any(d in ordinal for d in qrels.get(topic.id, {})):
            try:
                topics.append(prepare_query(topic))
            except QueryError:  # nothing to encode: not a training question
                continue
    if not topics:
        raise MathScoutError(f"no topic of {topics_path} has a judged document in the index: nothing to train on")
    relevant = [{ordinal[d]: g for d, g in qrels[t.id].items() if d in ordinal and g >= 1} for t in topics]
    pairs = [
        (n, ordinal[d]) for n, t in enumerate(topics) for d, g in qrels[t.id].items() if d in ordinal and g >= min_grade
    ]
    vectors = _encode_questions(retriever, topics, cache)
    return TrainingData([t.id for t in topics], vectors, relevant, pairs)


class PassageScorer:
    """Every document's score for a batch of queries: the max over its passages (as the dense search does)."""

    def __init__(self, passages: np.ndarray, passage_doc: np.ndarray, documents: int, device: str = "cpu"):
        import torch

        order = np.argsort(passage_doc, kind="stable")
        doc_sorted = passage_doc[order]
        starts = np.searchsorted(doc_sorted, np.arange(documents))
        counts = np.bincount(passage_doc, minlength=documents)
        slots = []  # slot k: each document's k-th passage (its first when it has fewer)
        for k in range(int(counts.max())):
            rows = order[np.minimum(starts + np.minimum(k, np.maximum(counts - 1, 0)), len(order) - 1)]
            slots.append(torch.from_numpy(passages[rows]).to(device))
        self.slots = slots

    def __call__(self, queries):
        scores = queries @ self.slots[0].T
        for slot in self.slots[1:]:
            scores = scores.maximum(queries @ slot.T)
        return scores


def _ndcg_at_10(scores, relevant: list[dict[int, int]]) -> float:
    """Mean nDCG@10 of each row's top 10 (`mean_ndcg_at_10`)."""
    import torch

    top = torch.topk(scores, min(10, scores.shape[1]))
    rankings = [dict(zip(docs, values)) for docs, values in zip(top.indices.tolist(), top.values.tolist())]
    return mean_ndcg_at_10(rankings, relevant)


def fit(data: TrainingData, scorer: PassageScorer, settings: QuerySideSettings) -> tuple[np.ndarray, dict]:
    """Train A; return the best held-out epoch's A and the record (losses, held-out nDCG@10 per epoch)."""
    import torch

    torch.manual_seed(SEED)
    rng = random.Random(SEED)
    order = list(range(len(data.ids)))
    rng.shuffle(order)
    held = sorted(order[: min(settings.held_out, len(order) // 5)])  # ≤ 20 % of the questions
    held_set = set(held)
    pairs = [p for p in data.pairs if p[0] not in held_set]
    if len(pairs) < settings.batch:
        raise MathScoutError(f"{len(pairs)} training pairs make no batch of {settings.batch}")
    device = settings.device
    questions = torch.from_numpy(data.vectors).to(device)
    dim = questions.shape[1]
    matrix = torch.nn.Parameter(torch.zeros(dim, dim, device=device))
    optimizer = torch.optim.AdamW([matrix], lr=settings.lr, weight_decay=0.0)

    def mapped(q):
        return torch.nn.functional.normalize(q + q @ matrix, dim=-1)

    def held_out_ndcg() -> float | None:
        if not held:
            return None
        with torch.no_grad():
            return _ndcg_at_10(scorer(mapped(questions[held])), [data.relevant[i] for i in held])

    def fmt(value: float | None) -> str:
        return "-" if value is None else f"{value:.4f}"

    losses: list[float] = []
    curve = [held_out_ndcg()]
    best, best_epoch = matrix.detach().clone(), 0
    print(
        f"{len(pairs):,} pairs, {len(held):,} held-out questions; held-out nDCG@10 before: {fmt(curve[0])}",
        file=sys.stderr,
        flush=True,
    )
    for epoch in range(1, settings.epochs + 1):
        rng.shuffle(pairs)
        started = time.perf_counter()
        for start in range(0, len(pairs) - settings.batch + 1, settings.batch):
            chunk = pairs[start : start + settings.batch]
            rows = torch.tensor([q for q, _ in chunk], device=device)
            targets = torch.tensor([d for _, d in chunk], device=device)
            q = mapped(questions[rows])
            if settings.negatives == "collection":
                logits = SCALE * scorer(q)
                for r, (question, positive) in enumerate(chunk):  # the question's other answers are not negatives
                    others = [d for d in data.relevant[question] if d != positive]
                    if others:
                        logits[r, others] = -1e4
                loss = torch.nn.functional.cross_entropy(logits, targets)
            else:  # Zhong 2023 thesis, Eq. 5.18 in-batch: the batch's positives (max over their passages)
                in_batch = torch.stack([(q @ slot[targets].T) for slot in scorer.slots]).amax(dim=0)
                loss = torch.nn.functional.cross_entropy(SCALE * in_batch, torch.arange(len(chunk), device=device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        curve.append(held_out_ndcg())
        print(
            f"epoch {epoch}/{settings.epochs}: loss {np.mean(losses[-(len(pairs) // settings.batch) :]):.4f}, "
            f"held-out nDCG@10 {fmt(curve[-1])} ({time.perf_counter() - started:.0f} s)",
            file=sys.stderr,
            flush=True,
        )
        latest, best_so_far = curve[-1], curve[best_epoch]
        # without held-out questions (None each epoch): the last epoch
        if latest is None or best_so_far is None or latest > best_so_far:
            best, best_epoch = matrix.detach().clone(), epoch
    record = {
        "pairs": len(pairs),
        "held_out_questions": len(held),
        "held_out_ids": [data.ids[i] for i in held],  # topics it was not fit on (a later model tunes on them)
        "held_out_ndcg10": [round(v, 4) for v in curve if v is not None],
        "best_epoch": best_epoch,
        "losses": losses,
        "steps_per_epoch": len(pairs) // settings.batch,
    }
    return best.cpu().numpy(), record


def train_query_side(
    index_path: Path, topics_path: Path, qrels_path: Path, output: Path, settings: QuerySideSettings
) -> Path:
    """The whole job: index vectors + train questions → output model folder (base files + adapter)."""
    from mathscout.retrievers.dense import DenseRetriever

    if settings.negatives not in ("collection", "batch"):
        raise MathScoutError(f"unknown negatives '{settings.negatives}' (available: collection, batch)")
    started = time.perf_counter()
    retriever = DenseRetriever(IndexDir(index_path), "dense")
    if retriever.encoder.query_adapter is not None:
        raise MathScoutError(
            f"the index's dense model {retriever.encoder.folder} already has a query adapter: "
            "query-side training starts from the model the documents were encoded with"
        )
    checkpoint = output.with_name(output.name + ".checkpoint")
    data = load_training_data(retriever, topics_path, qrels_path, checkpoint, settings.min_grade)
    passages = np.asarray(retriever.passage_vectors())
    scorer = PassageScorer(passages, retriever.passage_doc, len(retriever.doc_ids), settings.device)
    matrix, record = fit(data, scorer, settings)
    tmp = output.with_name(output.name + ".saving")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(
        retriever.encoder.folder, tmp, ignore=shutil.ignore_patterns("query_adapter.npz", "training.json", "loss.png")
    )
    record = {
        "method": "query-side",
        "base": str(retriever.encoder.folder),
        "index": str(index_path),
        "topics": str(topics_path),
        "qrels": str(qrels_path),
        **settings.__dict__,
        **record,
        "seconds": round(time.perf_counter() - started, 1),
    }
    QueryAdapter(matrix).save(tmp)
    write_json_atomic(tmp / "training.json", record)
    plot_losses(
        record["losses"],
        tmp / "loss.png",
        f"query-side: {settings.epochs} epochs of {settings.batch}, lr {settings.lr:g}, {settings.negatives} negatives",
        record["held_out_ndcg10"],
        record["steps_per_epoch"],
    )
    shutil.rmtree(output, ignore_errors=True)
    tmp.rename(output)
    shutil.copy(output / "loss.png", output.parent / f"{output.name}.loss.png")
    shutil.rmtree(checkpoint, ignore_errors=True)
    return output
