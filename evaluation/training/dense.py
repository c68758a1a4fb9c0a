"""`mathscout train dense`: contrastive fine-tuning of the bi-encoder on the collection's train topics.

This module is `--method full` (every weight) and the command line; `--method query-side` (the default) is
mathscout.evaluation.training.dense_query_side.

Zhong 2023 thesis §5.3 ("Fine-tuning", Eq. 5.18): each training triplet is (question, relevant answer, hard negative);
the loss is the cross-entropy of the question's score for its positive against every positive and
every hard negative in the batch (in-batch negatives):

    L = −1/|B| Σ_i log exp(S(q_i, p_i⁺)) / (Σ_j exp(S(q_i, p_j⁺)) + Σ_j exp(S(q_i, p_j⁻)))

with S = cosine × 20 (temperature 0.05, the sentence-transformers default for this model). The positive
is the best-graded answer of the question (grade 3 = accepted/top, else 2); the hard negative is an
answer of a *different* train thread that shares a tag with the question (MATH's "Level n" tags are
not topical and are ignored; questions without tags draw from the same source). Only
`topics.train.jsonl` + `qrels.train.txt` are read — never dev.

CPU schedule (thesis: AdamW, lr 2·10⁻⁵, linear warm-up): `--pairs` triplets (default 2,400) sampled
with the dev set's mix of sources (half MSE, a quarter MATH, …), one epoch, batch 32, linear warm-up
over the first 10 % of steps then linear decay, queries cut to 96 word pieces and answers to 160.
Checkpoints every `--checkpoint-every` steps (model, optimiser, scheduler, sampler position, losses)
make it resumable: rerun the same command. The loss curve is saved as loss.png next to the model.

    mathscout train dense --method full [--output DIR] [--base MODEL] [--pairs N] [--batch 32] [--max-minutes M] [--no-hard-negatives]

The default method is query-side (mathscout.evaluation.training.dense_query_side): it trains only a query adapter over an
index's document vectors, with the whole collection as negatives — minutes instead of an hour, no
re-encoding, and (unlike every full fine-tuning tried here) better than the base model on dev.

`--no-hard-negatives` drops the tag-sharing negative (in-batch negatives only: the plain MultipleNegativesRanking
objective the base model was trained with).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from mathscout.config import SHARED_COLLECTION, default_index_path
from mathscout.dense.device import add_device_argument, resolve_device
from mathscout.dense.model import default_model_path, model_input_text
from mathscout.errors import MathScoutError
from mathscout.evaluation.topics import COLLECTION_MIX, add_train_topic_arguments, require_train_topics, source_of
from mathscout.evaluation.training.contrastive import SCALE, SEED, plot_losses, read_checkpoint
from mathscout.evaluation.training.dense_query_side import QuerySideSettings, train_query_side


@dataclass(frozen=True)
class Triplet:
    query: str
    positive: str
    negative: str
    source: str
    ids: tuple[str, str, str] = ("", "", "")  # (topic, positive answer, negative answer)


def _topical(tags: list[str]) -> list[str]:
    return [t for t in tags or [] if not t.lower().startswith("level ")]


def load_triplets(topics_path: Path, qrels_path: Path, docs_path: Path, pairs: int, seed: int = SEED) -> list[Triplet]:
    """Sample `pairs` triplets (question, best answer, tag-sharing answer of another train thread)."""
    require_train_topics(topics_path, qrels_path, what="fine-tuning")
    topics = {}
    with open(topics_path, encoding="utf-8") as f:
        for line in f:
            t = json.loads(line)
            topics[t["id"]] = t
    best: dict[str, tuple[int, str]] = {}
    judged: dict[str, set[str]] = defaultdict(set)
    with open(qrels_path, encoding="utf-8") as f:
        for line in f:
            qid, _, doc, grade = line.split()
            judged[qid].add(doc)
            if qid in topics and int(grade) >= 2 and (qid not in best or int(grade) > best[qid][0]):
                best[qid] = (int(grade), doc)
    texts: dict[str, str] = {}
    answers_by_tag: dict[tuple[str, str], list[str]] = defaultdict(list)
    answers_by_source: dict[str, list[str]] = defaultdict(list)
    thread_of: dict[str, str] = {}
    with open(docs_path, encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            thread = d.get("thread_id")
            if d.get("kind") != "answer" or thread not in topics:  # only answers of train threads
                continue
            thread_of[d["id"]] = thread
            texts[d["id"]] = d["text"]
            source = source_of(thread)
            answers_by_source[source].append(d["id"])
            for tag in _topical(topics[thread].get("tags")):
                answers_by_tag[(source, tag)].append(d["id"])
    rng = random.Random(seed)
    by_source: dict[str, list[str]] = defaultdict(list)
    for qid in sorted(best):
        if best[qid][1] in texts:
            by_source[source_of(qid)].append(qid)
    chosen: list[str] = []
    for source, share in COLLECTION_MIX.items():
        pool = by_source.get(source, [])
        rng.shuffle(pool)
        chosen += pool[: round(pairs * share)]
    rng.shuffle(chosen)
    triplets = []
    for qid in chosen:
        topic, positive = topics[qid], best[qid][1]
        source = source_of(qid)
        candidates = [doc for tag in _topical(topic.get("tags")) for doc in answers_by_tag.get((source, tag), [])]
        candidates = [doc for doc in candidates if thread_of[doc] != qid and doc not in judged[qid]] or [
            doc for doc in answers_by_source[source] if thread_of[doc] != qid and doc not in judged[qid]
        ]
        if not candidates:
            continue
        negative = rng.choice(candidates)
        query = model_input_text(f"{topic.get('title', '')}\n{topic.get('body', '')}")
        triplets.append(
            Triplet(
                query,
                model_input_text(texts[positive]),
                model_input_text(texts[negative]),
                source,
                (qid, positive, negative),
            )
        )
    return triplets


def _save_checkpoint(model, optimizer, scheduler, step: int, losses: list[float], folder: Path) -> None:
    import torch

    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save(str(tmp / "model"))
    torch.save(
        {"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "step": step, "losses": losses},
        tmp / "state.pt",
    )
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)


def train(
    triplets: list[Triplet],
    base: Path,
    output: Path,
    batch: int,
    lr: float,
    warmup: float,
    query_len: int,
    doc_len: int,
    checkpoint_every: int,
    max_minutes: float | None,
    hard_negatives: bool = True,
    device: str = "cpu",
) -> Path:
    import torch

    from mathscout.dense.device import autocast
    from mathscout.dense.model import load_sentence_model

    torch.manual_seed(SEED)
    checkpoint = output.with_name(output.name + ".checkpoint")
    resume = checkpoint / "state.pt"
    model_folder = checkpoint / "model" if resume.is_file() else base
    from sentence_transformers import SentenceTransformer

    load_sentence_model(base)  # a clear error for a bad base folder
    model = SentenceTransformer(str(model_folder), device=device, local_files_only=True)
    model.train()
    steps = len(triplets) // batch
    if steps < 1:
        raise MathScoutError(f"{len(triplets)} triplets make no batch of {batch}")
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    warm = max(1, int(steps * warmup))
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: (s + 1) / warm if s < warm else max(0.0, (steps - s) / max(1, steps - warm))
    )
    step, losses = 0, []
    if resume.is_file():
        state = read_checkpoint(resume, f"delete {checkpoint} and train again")
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        step, losses = state["step"], state["losses"]
        print(f"resuming from step {step} of {steps} ({checkpoint})", file=sys.stderr)
    started = time.perf_counter()

    def encode(texts: list[str], length: int):
        model.max_seq_length = length
        features = {k: v.to(device) for k, v in model.tokenize(texts).items() if hasattr(v, "to")}
        with autocast(device):  # bf16 on CUDA; the weights and the loss stay fp32
            return model(features)["sentence_embedding"].float()

    while step < steps:
        chunk = triplets[step * batch : (step + 1) * batch]
        q = torch.nn.functional.normalize(encode([t.query for t in chunk], query_len), dim=-1)
        documents = [t.positive for t in chunk] + ([t.negative for t in chunk] if hard_negatives else [])
        d = torch.nn.functional.normalize(encode(documents, doc_len), dim=-1)
        scores = (
            SCALE * q @ d.T
        )  # (B, 2B): positives then hard negatives (B, B without), Zhong 2023 thesis Eq. 5.18's denominator
        loss = torch.nn.functional.cross_entropy(scores, torch.arange(len(chunk), device=scores.device))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        step += 1
        losses.append(loss.item())
        elapsed = time.perf_counter() - started
        print(
            f"step {step}/{steps} loss {losses[-1]:.4f} lr {scheduler.get_last_lr()[0]:.2e} ({elapsed / 60:.1f} min)",
            file=sys.stderr,
            flush=True,
        )
        out_of_time = max_minutes is not None and elapsed > max_minutes * 60 and step < steps
        if step % checkpoint_every == 0 or out_of_time:
            _save_checkpoint(model, optimizer, scheduler, step, losses, checkpoint)
            plot_losses(losses, output.parent / f"{output.name}.loss.png", f"{output.name}: step {step}/{steps}")
        if out_of_time:
            print(f"stopped after {max_minutes} min at step {step}/{steps}; rerun to resume", file=sys.stderr)
            return checkpoint
    model.max_seq_length = 256
    model.to("cpu")  # fp32 weights (autocast never cast them), stored from the CPU whatever the device
    output.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(output.name + ".saving")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save(str(tmp))
    plot_losses(losses, tmp / "loss.png", f"{output.name}: {steps} steps of {batch}, lr {lr:g}")
    (tmp / "training.json").write_text(
        json.dumps(
            {
                "base": str(base),
                "triplets": len(triplets),
                "batch": batch,
                "steps": steps,
                "lr": lr,
                "warmup": warmup,
                "query_len": query_len,
                "doc_len": doc_len,
                "hard_negatives": hard_negatives,
                "losses": losses,
                "loss": "Zhong 2023 thesis Eq. 5.18, cosine x 20",
                "sources": {s: sum(1 for t in triplets if t.source == s) for s in COLLECTION_MIX},
            },
            indent=1,
        ),
        encoding="utf-8",
    )
    shutil.rmtree(output, ignore_errors=True)
    tmp.rename(output)
    shutil.rmtree(checkpoint, ignore_errors=True)
    return output


def main(argv: list[str] | None = None) -> None:
    from mathscout.retrievers.dense import fine_tuned_model_path

    parser = argparse.ArgumentParser(prog="mathscout train dense", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="the fine-tuned model folder (default: $MATHSCOUT_DENSE_FT_MODEL or MATHSCOUT_HOME/models/dense-ft)",
    )
    parser.add_argument("--base", type=Path, default=None, help="the model to start from (default all-MiniLM-L6-v2)")
    add_train_topic_arguments(parser)
    parser.add_argument("--docs", type=Path, default=SHARED_COLLECTION / "docs.jsonl")
    parser.add_argument(
        "--method",
        choices=("query-side", "full"),
        default="query-side",
        help="query-side (default): train a query adapter over the index's document vectors, all "
        "documents as negatives, no re-encoding (mathscout.evaluation.training.dense_query_side); full: fine-tune "
        "every weight on triplets (re-encode the collection afterwards)",
    )
    parser.add_argument(
        "--index",
        type=Path,
        default=None,
        help="query-side: the index whose 'dense' vectors are "
        "trained against (default $MATHSCOUT_INDEX or the demo index)",
    )
    parser.add_argument(
        "--epochs",
        type=int,
        default=QuerySideSettings.epochs,
        help="query-side: epochs (the best held-out one is kept)",
    )
    parser.add_argument(
        "--negatives",
        choices=("collection", "batch"),
        default=QuerySideSettings.negatives,
        help="query-side: every document of the index (default) or Zhong 2023 thesis Eq. 5.18's in-batch positives",
    )
    parser.add_argument(
        "--held-out",
        type=int,
        default=QuerySideSettings.held_out,
        help="query-side: train questions held out to pick the epoch",
    )
    parser.add_argument("--pairs", type=int, default=2400, help="full: triplets sampled")
    parser.add_argument("--batch", type=int, default=None, help="default 256 (query-side), 32 (full)")
    parser.add_argument("--lr", type=float, default=None, help="default 1e-3 (query-side), 2e-5 (full)")
    parser.add_argument("--warmup", type=float, default=0.1, help="share of steps with linear warm-up")
    parser.add_argument("--query-len", type=int, default=96)
    parser.add_argument("--doc-len", type=int, default=160)
    parser.add_argument("--checkpoint-every", type=int, default=10)
    parser.add_argument("--max-minutes", type=float, default=None, help="stop (resumably) after this long")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument(
        "--no-hard-negatives", action="store_true", help="in-batch negatives only (no tag-sharing negative)"
    )
    # where the model (full) or the query adapter against every document (query-side) trains
    add_device_argument(parser)
    args = parser.parse_args(argv)
    for path in (args.topics, args.qrels, *((args.docs,) if args.method == "full" else ())):
        if not path.is_file():
            raise MathScoutError(f"training data not found: {path}")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    output = args.output or fine_tuned_model_path()
    started = time.perf_counter()
    if args.method == "query-side":
        if args.base is not None:
            raise MathScoutError(
                "--base is for --method full: query-side training starts from the model the "
                "index's documents were encoded with"
            )
        settings = QuerySideSettings(
            epochs=args.epochs,
            batch=args.batch or QuerySideSettings.batch,
            lr=args.lr or QuerySideSettings.lr,
            negatives=args.negatives,
            held_out=args.held_out,
            device=resolve_device(args.device),
        )
        result = train_query_side(args.index or default_index_path(), args.topics, args.qrels, output, settings)
        print(f"fine-tuned model: {result} ({(time.perf_counter() - started) / 60:.1f} min)")
        return
    base = args.base or default_model_path()
    triplets = load_triplets(args.topics, args.qrels, args.docs, args.pairs)
    print(
        f"{len(triplets):,} triplets from {args.topics.name} in {time.perf_counter() - started:.1f} s; "
        f"{len(triplets) // args.batch} steps of {args.batch}",
        file=sys.stderr,
    )
    result = train(
        triplets,
        base,
        output,
        args.batch or 32,
        args.lr or 2e-5,
        args.warmup,
        args.query_len,
        args.doc_len,
        args.checkpoint_every,
        args.max_minutes,
        hard_negatives=not args.no_hard_negatives,
        device=resolve_device(args.device),
    )
    print(f"fine-tuned model: {result} ({(time.perf_counter() - started) / 60:.1f} min)")
