"""`mathscout train colbert`: the late-interaction (`colbert`) model's query and document sides trained on the train
topics, stored with the index (mathscout.retrievers.colbert reads it).

    mathscout train colbert --index DIR [--topics T --qrels Q] [--train-topics N] [--held-out H] [--epochs E]
                            [--negatives n] [--depth D] [--batch B] [--lr LR] [--scale S] [--query-side-only]
                            [--max-minutes M]

Zhong 2023 thesis §5.3.1 trains its ColBERT end to end (both towers, 594,000 triplets, batch 54, 7 epochs, on GPUs)
with the contrastive loss of Zhong 2023 thesis §5.2.2. Scaled to a CPU, as `mathscout train dense` does
(dense_query_side.py), the encoder stays as it is (re-encoding the collection costs ~25 min) and residual maps in the
128-d token space are trained instead: each query token vector t (the same encoder and projection the colbert search
uses) becomes t' = normalise(t + t·A) (query-side fine-tuning, Lee et al. 2021 §4.3; mathscout.dense.query_adapter),
and each of the documents' token vectors d, as the `dense` component stored them (PCA-projected, L2-normalised,
float16), becomes d' = normalise(d + d·B); A = B = 0 at the start (the untrained model exactly). `--query-side-only`
trains A alone (B stays 0: the documents' vectors as built), for comparison.

Loss, Zhong 2023 thesis §5.2.2 Eq. 5.18, with S = MaxSim (Zhong et al. 2022 Eq. 3) divided by the query's token count
(the same order for one query) and multiplied by `--scale` (the dense trainers' SCALE, temperature 0.05):

    L = −1/|B| Σ_i log exp(S(q_i, p_i⁺)) / (Σ_j exp(S(q_i, p_j⁺)) + Σ_j Σ_k exp(S(q_i, p_jk⁻)))

over a batch of (question, answer graded ≥ 2) pairs; each question's n hard negatives are drawn (seeded) from the
index's own candidates for it (the untrained colbert search's top D and bm25's top D), and every other pair's positive
and negatives are in-batch negatives. A document relevant to the question (graded ≥ 1) is never a negative: it is left
out of that question's denominator. The gradient of the max over a document's tokens is that of the token it picks:
through that token's d' it reaches B.

1. Topics: a seeded sample of N train topics with a relevant answer in the index, and H others held out (the cross-
   encoder trainer's `choose`; `--topics/--qrels`: train files only, dev is refused).
2. Questions: each one's token vectors through the untrained model and its candidates (colbert top D, bm25 top D;
   for the held-out questions top `held_out_depth`), cached in chunks.
3. Training: `--epochs` epochs of AdamW on A and B; after each epoch (and before the first) the held-out nDCG@10 of
   the held-out questions' candidates (colbert ∪ bm25) re-scored by exact MaxSim with the current A and B; the best
   epoch's A and B are kept.
4. The document side (mathscout.retrievers.colbert_model): the norms of every mapped token vector and the IVF-PQ
   candidate stage rebuilt over the mapped vectors. Then the held-out questions are searched for real (ANN
   candidates, exact MaxSim) with the kept model, beside the untrained search's figure.
5. Stored: DIR/colbert/query_adapter.npz, document_adapter.npz, document_norms.npy, document_ivfpq.faiss, loss.png
   and trained.json (mathscout.retrievers.colbert_model.ColbertTraining: the dense build, the files' CRC-32,
   settings, topics, counts, held-out curve, seconds), each file written beside and renamed, trained.json last (until
   then the search uses the untrained model). The `colbert` mode then searches with it (`--set trained=false`: the
   untrained model: colbert/ivfpq.faiss and the stored token vectors, untouched).

Resumable: the work lives in DIR/colbert.work/ (the plan, the question chunks, a checkpoint after every epoch and at
`--max-minutes`, the document side's files); rerun the same command.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from mathscout.dense.device import add_device_argument, resolve_device
from mathscout.dense.query_adapter import QueryAdapter
from mathscout.errors import IndexMissingError, MathScoutError, QueryError
from mathscout.evaluation.measures import read_qrels
from mathscout.evaluation.topics import add_train_topic_arguments, load_topics
from mathscout.evaluation.training.contrastive import SCALE, SEED, mean_ndcg_at_10, plot_losses, read_checkpoint
from mathscout.evaluation.training.cross_encoder import Settings as CrossSettings
from mathscout.evaluation.training.cross_encoder import choose
from mathscout.evaluation.training.plan import TrainingPlan, require_train_files
from mathscout.index.integrity import record_file, record_folder
from mathscout.index.layout import IndexDir
from mathscout.progress import bar as progress_bar
from mathscout.retrievers.base import prepare_query
from mathscout.retrievers.colbert import ColbertRetriever
from mathscout.retrievers.colbert_model import (
    DOCUMENT_FILES,
    DOCUMENT_IVFPQ,
    ColbertTraining,
    DocumentMap,
    build_document_side,
)
from mathscout.retrievers.dense import load_faiss
from mathscout.retrievers.registry import open_retriever
from mathscout.types import Query

WORK = "colbert.work"
CHUNK = 256  # questions per cached chunk
MINERS = ("colbert", "bm25")
BUILD_COMMAND = "mathscout index --index {index} --components dense,colbert"


@dataclass(frozen=True)
class Settings:
    """What the training depends on (a rerun must give the same, or start afresh). Defaults fit ~15 min on the
    2-core machine over the full collection (see docs/results.md)."""

    train_topics: int = 3000
    held_out: int = 500
    negatives: int = 4  # hard negatives per pair (+ the batch's other pairs' documents)
    depth: int = 30  # hits per miner (colbert, bm25) of each training question
    held_out_depth: int = 100  # hits per miner of each held-out question, re-scored after each epoch
    mining_candidates: int = 200  # the colbert search's exactly re-scored candidates when mining training questions
    batch: int = 32
    epochs: int = 3
    lr: float = 1e-3
    scale: float = SCALE
    min_grade: int = 2  # positives: answers graded ≥ this
    seed: int = SEED
    document_side: bool = True  # B trained with A (False: `--query-side-only`)


DEFAULTS = Settings()


@dataclass
class Questions:
    """The training and held-out questions: untrained token vectors (`start` offsets into `vectors`) and mined
    candidates (document ordinals, best first, -1 padded), per miner."""

    ids: list[str]
    vectors: np.ndarray
    start: np.ndarray
    mined: dict[str, np.ndarray]

    def tokens(self, row: int) -> np.ndarray:
        return self.vectors[self.start[row] : self.start[row + 1]]

    def candidates(self, row: int, depth: int) -> list[int]:
        """The union of the miners' top `depth`, in order of first appearance."""
        found: dict[int, None] = {}
        for miner in MINERS:
            for doc in self.mined[miner][row, :depth].tolist():
                if doc >= 0:
                    found.setdefault(doc)
        return list(found)


def open_index(path: Path) -> IndexDir:
    """The index, with its dense and colbert components (one line naming the build command otherwise)."""
    try:
        index = IndexDir(path)
    except IndexMissingError:
        raise IndexMissingError(
            f"no index at {path} to train colbert on: build one with 'mathscout index --input PATH --index {path} "
            "--components bm25,dense,colbert'"
        ) from None
    missing = [name for name in ("dense", "colbert") if name not in index.components]
    if missing:
        raise IndexMissingError(
            f"the index {path} has no {' or '.join(repr(m) for m in missing)} component to train colbert on: "
            f"add them with '{BUILD_COMMAND.format(index=path)}'"
        )
    return index


def fitted_topics(index: IndexDir) -> set[str]:
    """The topics the index's trained colbert query side was trained or tuned on (none without one): its scores there
    are fitted, so a ranker over them leaves these topics out (as the cross-encoder's `fitted_topics`)."""
    info = ColbertTraining.read(index)
    return set(info.training.get("topic_ids", [])) if info is not None else set()


# ---- 2. questions ---------------------------------------------------------------------------------------------------


def encode_and_mine(
    retriever: ColbertRetriever, index: IndexDir, topics: list[Query], held: set[str], work: Path, settings: Settings
) -> Questions:
    """Each question's untrained token vectors and candidates, computed in chunks of CHUNK questions saved to
    work/questions.NNNNN.npz (a rerun reads them back). A question the model cannot read is dropped."""
    ordinal = {doc: n for n, doc in enumerate(retriever.doc_ids)}
    width = max(settings.depth, settings.held_out_depth)
    bm25 = open_retriever(index, "bm25") if "bm25" in index.components else None
    chunks = []
    progress = progress_bar(
        total=len(topics), desc="questions (encode, mine colbert + bm25)", unit="q", file=sys.stderr
    )
    for number, begin in enumerate(range(0, len(topics), CHUNK)):
        path = work / f"questions.{number:05d}.npz"
        part = topics[begin : begin + CHUNK]
        if not path.is_file():
            ids: list[str] = []
            vectors: list[np.ndarray] = []
            lengths: list[int] = []
            mined = {name: np.full((len(part), width), -1, dtype=np.int64) for name in MINERS}
            lexical = bm25_hits(bm25, part, width) if bm25 is not None else {}
            for topic in part:
                try:
                    tokens = retriever.query_vectors(prepare_query(topic))  # as the search reads it
                except QueryError:  # nothing to encode: not a question to train on
                    progress.update()
                    continue
                row = len(ids)
                depth = settings.held_out_depth if topic.id in held else settings.depth
                candidates = None if topic.id in held else settings.mining_candidates  # held out: as the search
                docs, _ = retriever.rank_vectors(tokens, depth, candidates)
                mined["colbert"][row, : len(docs)] = docs
                if bm25 is not None:
                    hits = lexical.get(topic.id, [])[:depth]
                    found = [ordinal[h.doc_id] for h in hits if h.doc_id in ordinal]
                    mined["bm25"][row, : len(found)] = found
                ids.append(topic.id)
                vectors.append(tokens)
                lengths.append(len(tokens))
                progress.update()
            arrays: dict[str, Any] = {
                "ids": np.array(ids, dtype=str),
                "vectors": np.concatenate(vectors) if vectors else np.zeros((0, retriever.matrix.shape[1]), np.float32),
                "lengths": np.array(lengths, dtype=np.int64),
                **{name: array[: len(ids)] for name, array in mined.items()},
            }
            np.savez(path.with_suffix(".tmp.npz"), **arrays)
            path.with_suffix(".tmp.npz").rename(path)
        else:
            progress.update(len(part))
        with np.load(path, allow_pickle=False) as data:
            chunks.append({key: data[key] for key in data.files})
    progress.close()
    counts = np.concatenate([c["lengths"] for c in chunks])
    return Questions(
        ids=[str(i) for c in chunks for i in c["ids"]],
        vectors=np.concatenate([c["vectors"] for c in chunks]).astype(np.float32),
        start=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        mined={name: np.concatenate([c[name] for c in chunks]) for name in MINERS},
    )


def bm25_hits(bm25, topics: list[Query], depth: int) -> dict[str, list]:
    """bm25's top `depth` of each topic, searched together (one by one after an error: a topic bm25 cannot search
    has none)."""
    try:
        return bm25.batch_search(topics, k=depth)
    except MathScoutError:
        found = {}
        for topic in topics:
            try:
                found.update(bm25.batch_search([topic], k=depth))
            except MathScoutError:  # nothing bm25 can search (a formula of no tokens)
                found[topic.id] = []
        return found


# ---- 3. training ----------------------------------------------------------------------------------------------------


class DocumentTokens:
    """Documents' stored float16 token vectors, read by their offsets (as the colbert search does) into one float32
    tensor per batch of documents."""

    def __init__(self, retriever: ColbertRetriever):
        self.vectors, self.offsets = retriever.vectors, retriever.offsets

    def has_tokens(self, doc: int) -> bool:
        return bool(self.offsets[doc + 1] > self.offsets[doc])

    def read(self, docs: list[int]):
        """(every token vector of `docs`, in order; the position in `docs` of each token's document)."""
        import torch

        lengths = [int(self.offsets[d + 1] - self.offsets[d]) for d in docs]
        vectors = np.concatenate([self.vectors[self.offsets[d] : self.offsets[d + 1]] for d in docs])
        owner = np.repeat(np.arange(len(docs)), lengths)
        return torch.from_numpy(vectors.astype(np.float32)), torch.from_numpy(owner)


def maxsim_logits(queries: list, documents, owner, scale: float):
    """Zhong et al. 2022 Eq. 3 of each query (its token vectors) against each document of the batch (`documents`:
    their token vectors, `owner`: each one's document; both with gradient), divided by the query's token count and
    times `scale`: a (queries × documents) tensor."""
    import torch

    tokens = torch.cat(queries)
    device = tokens.device  # where the step runs (--device): every tensor made here goes there too
    lengths = torch.tensor([len(q) for q in queries], device=device)
    row_query = torch.repeat_interleave(torch.arange(len(queries), device=device), lengths)
    sims = tokens @ documents.T  # every query token against every document token
    count = int(owner.max()) + 1
    best = torch.zeros(len(tokens), count, device=device, dtype=sims.dtype).scatter_reduce(  # max over doc tokens
        1, owner.expand(len(tokens), -1), sims, reduce="amax", include_self=False
    )
    summed = torch.zeros(len(queries), count, device=device, dtype=best.dtype).index_add(0, row_query, best)
    return scale * summed / lengths[:, None]


def held_out_ndcg(
    retriever: ColbertRetriever,
    questions: Questions,
    held: list[int],
    relevant: list[dict[int, int]],
    adapter: QueryAdapter | None,
    depth: int,
) -> float | None:
    """Mean nDCG@10 of the held-out questions' candidates (the miners' top `depth`) re-scored by exact MaxSim
    (Zhong et al. 2022 Eq. 3) with the query side `adapter` (None: untrained) and `retriever`'s document side."""
    if not held:
        return None
    rankings = []
    for row in held:
        tokens = questions.tokens(row)
        q = tokens if adapter is None else adapter.apply(tokens)
        pool = np.array(
            [d for d in questions.candidates(row, depth) if retriever.offsets[d + 1] > retriever.offsets[d]],
            dtype=np.int64,
        )
        rankings.append(dict(zip(pool.tolist(), retriever.maxsim(q, pool).tolist())) if len(pool) else {})
    return mean_ndcg_at_10(rankings, [relevant[row] for row in held])


def searched_ndcg(
    retriever: ColbertRetriever, questions: Questions, held: list[int], relevant: list[dict[int, int]], adapter
) -> dict[str, float]:
    """The held-out questions searched for real (ANN candidates, exact MaxSim): untrained (the mined colbert ranking)
    and with the trained query side `adapter` and `retriever` (the trained document side and its candidate stage)."""
    untrained = [
        {d: -float(rank) for rank, d in enumerate(questions.mined["colbert"][row, :10].tolist()) if d >= 0}
        for row in held
    ]
    trained = []
    for row in progress_bar(held, desc="held-out questions searched with the trained model", unit="q", file=sys.stderr):
        docs, scores = retriever.rank_vectors(adapter.apply(questions.tokens(row)), 10)
        trained.append(dict(zip(docs.tolist(), scores.tolist())))
    grades = [relevant[row] for row in held]
    return {
        "untrained": round(mean_ndcg_at_10(untrained, grades), 4),
        "trained": round(mean_ndcg_at_10(trained, grades), 4),
    }


def fit(
    retriever: ColbertRetriever,
    questions: Questions,
    train: list[int],
    held: list[int],
    relevant: list[dict[int, int]],
    settings: Settings,
    checkpoint: Path,
    deadline: float | None,
    device: str = "cpu",
) -> dict[str, Any] | None:
    """Train A and (`settings.document_side`) B on `device`, resuming from `checkpoint`; the state with the best
    held-out epoch's ("best": {"query": A, "document": B or None}, on the CPU), or None when `deadline` (time.time())
    stopped it (checkpointed)."""
    import torch

    documents = DocumentTokens(retriever)
    pairs = [
        (row, doc)
        for row in train
        for doc, grade in relevant[row].items()
        if grade >= settings.min_grade and documents.has_tokens(doc)
    ]
    pools = {  # hard negatives: the question's candidates that are not relevant to it
        row: [
            d for d in questions.candidates(row, settings.depth) if d not in relevant[row] and documents.has_tokens(d)
        ]
        for row in train
    }
    steps = len(pairs) // settings.batch
    if steps < 1:
        raise MathScoutError(f"{len(pairs)} training pairs make no batch of {settings.batch}")
    dim = questions.vectors.shape[1]
    matrix = torch.nn.Parameter(torch.zeros(dim, dim, device=device))  # A
    document_matrix = torch.nn.Parameter(torch.zeros(dim, dim, device=device)) if settings.document_side else None  # B
    trained = [matrix] if document_matrix is None else [matrix, document_matrix]
    optimizer = torch.optim.AdamW(trained, lr=settings.lr, weight_decay=0.0)
    state: dict[str, Any] = {"epoch": 0, "step": 0, "losses": [], "curve": [], "best_epoch": 0, "best": None}
    if checkpoint.is_file():
        saved = read_checkpoint(checkpoint, f"delete {checkpoint.parent} and train again")
        with torch.no_grad():
            for parameter, values in zip(trained, saved["matrices"]):
                parameter.copy_(values)
        optimizer.load_state_dict(saved["optimizer"])
        state = saved["state"]
        print(f"resuming at epoch {state['epoch'] + 1}, step {state['step']} ({checkpoint})", file=sys.stderr)

    def save() -> None:
        matrices = [p.detach().cpu().clone() for p in trained]  # a checkpoint a CPU can resume
        torch.save({"matrices": matrices, "optimizer": optimizer.state_dict(), "state": state}, checkpoint)

    def current() -> dict[str, Any]:
        return {
            "query": matrix.detach().cpu().clone(),
            "document": None if document_matrix is None else document_matrix.detach().cpu().clone(),
        }

    def evaluate() -> float | None:
        adapter = QueryAdapter(matrix.detach().cpu().numpy().copy())
        scorer = retriever
        if document_matrix is not None and bool(document_matrix.detach().any()):  # B = 0: the stored vectors exactly
            scorer = retriever.with_documents(DocumentMap.of(document_matrix.detach().cpu().numpy(), retriever.vectors))
        value = held_out_ndcg(scorer, questions, held, relevant, adapter, settings.held_out_depth)
        return None if value is None else float(value)  # a plain float: the checkpoint is read weights-only

    def fmt(value: float | None) -> str:
        return "-" if value is None else f"{value:.4f}"

    if not state["curve"]:
        state["curve"].append(evaluate())
        state["best"] = current()
        save()
    print(
        f"{len(pairs):,} pairs ({steps} steps of {settings.batch} per epoch, {settings.negatives} hard negatives each), "
        f"{len(held):,} held-out questions; held-out nDCG@10 before: {fmt(state['curve'][0])}",
        file=sys.stderr,
        flush=True,
    )
    while state["epoch"] < settings.epochs:
        epoch = state["epoch"] + 1
        order = list(pairs)
        random.Random(f"{settings.seed}-{epoch}").shuffle(order)
        started = time.perf_counter()
        bar = progress_bar(
            total=steps, initial=state["step"], desc=f"epoch {epoch}/{settings.epochs}", unit="step", file=sys.stderr
        )
        while state["step"] < steps:
            step = state["step"]
            chunk = order[step * settings.batch : (step + 1) * settings.batch]
            rng = random.Random(f"{settings.seed}-{epoch}-{step}")
            column: dict[int, int] = {}
            for _, positive in chunk:
                column.setdefault(positive, len(column))
            for row, _ in chunk:
                pool = pools[row]
                for doc in rng.sample(pool, min(settings.negatives, len(pool))):
                    column.setdefault(doc, len(column))
            vectors, owner = (tensor.to(device) for tensor in documents.read(list(column)))
            if document_matrix is not None:  # d' = normalise(d + d·B): each max's gradient reaches B through its token
                vectors = torch.nn.functional.normalize(vectors + vectors @ document_matrix, dim=-1)
            q = [
                torch.nn.functional.normalize(t + t @ matrix, dim=-1)  # t' = normalise(t + t·A), Lee et al. 2021 §4.3
                for t in (torch.from_numpy(questions.tokens(row)).to(device) for row, _ in chunk)
            ]
            logits = maxsim_logits(q, vectors, owner, settings.scale)
            targets = torch.tensor([column[positive] for _, positive in chunk], device=device)
            for r, (row, positive) in enumerate(chunk):  # relevant documents are never negatives
                others = [column[d] for d in relevant[row] if d in column and d != positive]
                if others:
                    logits[r, others] = -1e4
            loss = torch.nn.functional.cross_entropy(logits, targets)  # Zhong 2023 thesis §5.2.2, Eq. 5.18
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            state["losses"].append(loss.item())
            state["step"] += 1
            bar.update()
            bar.set_postfix(loss=f"{loss.item():.3f}")
            if deadline is not None and time.time() > deadline and state["step"] < steps:
                bar.close()
                save()
                return None
        bar.close()
        state["curve"].append(evaluate())
        latest, best_so_far = state["curve"][-1], state["curve"][state["best_epoch"]]
        if latest is None or best_so_far is None or latest > best_so_far:  # nothing held out: the last epoch
            state["best"], state["best_epoch"] = current(), epoch
        print(
            f"epoch {epoch}/{settings.epochs}: loss {np.mean(state['losses'][-steps:]):.4f}, held-out nDCG@10 "
            f"{fmt(latest)} ({time.perf_counter() - started:.0f} s)",
            file=sys.stderr,
            flush=True,
        )
        state["epoch"], state["step"] = epoch, 0
        save()
    state["pairs"], state["steps_per_epoch"] = len(pairs), steps
    return state


# ---- 4. storing -----------------------------------------------------------------------------------------------------


def store(
    index: IndexDir,
    adapter: QueryAdapter,
    documents: Path | None,
    dense_build_id: str,
    work: Path,
    training: dict[str, Any],
) -> Path:
    """DIR/colbert/query_adapter.npz, loss.png and the document side's files (in the folder `documents`; None: none),
    renamed into place from the work folder, then trained.json recording their CRC-32 (until it is written, the
    search finds no trained.json and uses the untrained model)."""
    folder = index.path / "colbert"
    ColbertTraining.path(index).unlink(missing_ok=True)
    staging = work / "stored"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    adapter.save(staging)
    if (work / "loss.png").is_file():
        shutil.copy2(work / "loss.png", staging / "loss.png")
    sources = {name: staging / name for name in record_folder(staging)}
    sources |= {name: documents / name for name in DOCUMENT_FILES} if documents is not None else {}
    files = {name: record_file(path).to_json() for name, path in sorted(sources.items())}
    for name in DOCUMENT_FILES:  # an earlier model's document side
        if name not in files:
            (folder / name).unlink(missing_ok=True)
    for name, path in sources.items():
        path.replace(folder / name)
    info = ColbertTraining(dense_build_id=dense_build_id, dimension=adapter.dimension, files=files, training=training)
    return info.write(index)


def train(args: argparse.Namespace) -> Path | None:
    started = time.time()
    deadline = started + args.max_minutes * 60 if args.max_minutes is not None else None
    require_train_files(args.topics, args.qrels, "training colbert")
    index = open_index(args.index)
    settings = Settings(**{f.name: getattr(args, f.name) for f in fields(Settings) if hasattr(args, f.name)})
    retriever = ColbertRetriever(index, trained=False)
    dense_build_id = str(retriever.dense_meta.get("build_id"))
    work = index.path / WORK
    source = {"topics": str(args.topics.resolve()), "qrels": str(args.qrels.resolve()), "dense_build": dense_build_id}
    crossing = CrossSettings(train_topics=settings.train_topics, held_out=settings.held_out, seed=settings.seed)
    plan = TrainingPlan(work, asdict(settings), source, lambda: choose(args.topics, args.qrels, index, crossing))
    chosen = plan.data
    sides = "query side t' = normalise(t + t·A)"
    sides += " and document side d' = normalise(d + d·B)" if settings.document_side else " (query side only)"
    print(
        f"colbert: {len(chosen['train'])} training and {len(chosen['held_out'])} held-out topics; {sides} over the "
        f"index's token vectors, {settings.epochs} epoch(s) of batches of {settings.batch}, {settings.negatives} hard "
        f"negatives from colbert + bm25 top {settings.depth}",
        file=sys.stderr,
    )
    wanted = set(chosen["train"]) | set(chosen["held_out"])
    by_id = {t.id: t for t in load_topics(args.topics) if t.id in wanted}
    t0 = time.time()
    questions = encode_and_mine(
        retriever,
        index,
        [by_id[q] for q in chosen["train"] + chosen["held_out"]],
        set(chosen["held_out"]),
        work,
        settings,
    )
    plan.spent("questions", t0)
    qrels = read_qrels(args.qrels)
    ordinal = {doc: n for n, doc in enumerate(retriever.doc_ids)}
    relevant = [{ordinal[d]: g for d, g in qrels.get(q, {}).items() if d in ordinal and g >= 1} for q in questions.ids]
    held_set = set(chosen["held_out"])
    train_rows = [row for row, q in enumerate(questions.ids) if q not in held_set]
    held_rows = [row for row, q in enumerate(questions.ids) if q in held_set]
    t0 = time.time()
    device = resolve_device(args.device)
    state = fit(
        retriever, questions, train_rows, held_rows, relevant, settings, work / "checkpoint.pt", deadline, device
    )
    plan.spent("training", t0)
    if state is None:
        print(f"stopped after {args.max_minutes} min; rerun the same command to resume from {work}", file=sys.stderr)
        return None
    best = state["best"]
    adapter = QueryAdapter(best["query"].numpy())
    document = best["document"]  # None, or 0 when the untrained model's epoch was kept: no document side then
    document = document.numpy() if document is not None and bool(document.any()) else None
    curve = [round(v, 4) for v in state["curve"] if v is not None]
    plot_losses(
        state["losses"],
        work / "loss.png",
        f"colbert {'query and document sides' if settings.document_side else 'query side'}: {settings.epochs} "
        f"epoch(s) of {settings.batch}, lr {settings.lr:g}, {settings.negatives} hard negatives, best epoch "
        f"{state['best_epoch']}",
        curve,
        state["steps_per_epoch"],
    )
    searcher, staged = retriever, None
    if document is not None:
        t0 = time.time()
        staged = work / "documents"
        documents = build_document_side(retriever.vectors, document, staged)
        searcher = retriever.with_documents(documents, load_faiss(staged / DOCUMENT_IVFPQ, index.path, "colbert"))
        plan.spent("documents", t0)
    t0 = time.time()
    searched = searched_ndcg(searcher, questions, held_rows, relevant, adapter) if held_rows else {}
    plan.spent("held_out_search", t0)
    training = {
        "index": str(index.path.resolve()),
        "documents": index.manifest.documents,
        "topics": str(args.topics),
        "qrels": str(args.qrels),
        "settings": asdict(settings),
        "device": device,
        "topic_ids": chosen["train"]
        + chosen["held_out"],  # trained or tuned on: a ranker over its scores leaves them out
        "loss": "Zhong 2023 thesis §5.2.2 Eq. 5.18, S = scale x MaxSim (Zhong et al. 2022 Eq. 3) / query tokens",
        "counts": {
            "training_topics": len(train_rows),
            "held_out_topics": len(held_rows),
            "pairs": state["pairs"],
            "steps_per_epoch": state["steps_per_epoch"],
            "mined_from": [m for m in MINERS if m == "colbert" or "bm25" in index.components],
        },
        "held_out_ndcg10": curve,
        "best_epoch": state["best_epoch"],
        "held_out_search_ndcg10": searched,
        "losses": [round(x, 5) for x in state["losses"]],
        "seconds": chosen["seconds"],
        "minutes": plan.minutes,
    }
    stored = store(index, adapter, staged, dense_build_id, work, training)
    shutil.rmtree(work, ignore_errors=True)
    return stored


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="mathscout train colbert", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--index",
        type=Path,
        required=True,
        help="the index whose token vectors and candidates it trains on and which stores the model (DIR/colbert/)",
    )
    add_train_topic_arguments(parser)
    parser.add_argument("--train-topics", type=int, default=DEFAULTS.train_topics, help="questions trained on")
    parser.add_argument(
        "--held-out", type=int, default=DEFAULTS.held_out, help="train questions held out to pick the epoch"
    )
    parser.add_argument("--negatives", type=int, default=DEFAULTS.negatives, help="hard negatives per pair")
    parser.add_argument("--depth", type=int, default=DEFAULTS.depth, help="hits per miner of a training question")
    parser.add_argument(
        "--held-out-depth", type=int, default=DEFAULTS.held_out_depth, help="hits per miner of a held-out question"
    )
    parser.add_argument(
        "--mining-candidates",
        type=int,
        default=DEFAULTS.mining_candidates,
        help="candidates the colbert search re-scores when mining a training question",
    )
    parser.add_argument("--batch", type=int, default=DEFAULTS.batch, help="pairs per step")
    parser.add_argument("--epochs", type=int, default=DEFAULTS.epochs, help="epochs (the best held-out one is kept)")
    parser.add_argument("--lr", type=float, default=DEFAULTS.lr)
    parser.add_argument("--scale", type=float, default=DEFAULTS.scale, help="softmax scale of the mean token MaxSim")
    parser.add_argument("--seed", type=int, default=DEFAULTS.seed)
    parser.add_argument(
        "--query-side-only",
        dest="document_side",
        action="store_false",
        help="train the query side alone (the documents' token vectors stay as built), for comparison",
    )
    parser.add_argument("--max-minutes", type=float, default=None, help="stop (resumably) after this long")
    add_device_argument(parser)  # where the adapters train (the questions' encoding follows the index's backend)
    args = parser.parse_args(argv)
    for name in ("train_topics", "negatives", "depth", "held_out_depth", "mining_candidates", "batch", "epochs"):
        if getattr(args, name) < 1:
            raise MathScoutError(f"--{name.replace('_', '-')} must be at least 1")
    if args.held_out < 0:
        raise MathScoutError("--held-out must be at least 0")
    started = time.perf_counter()
    stored = train(args)
    if stored is None:
        return
    info = ColbertTraining.read_file(stored)
    record = info.training
    print(
        f"colbert model stored in {stored.parent} ({', '.join(n for n in info.files if n != 'loss.png')}; "
        f"{(time.perf_counter() - started) / 60:.1f} min this run, {record['minutes']} min in all)"
    )
    curve = " -> ".join(f"{v:.4f}" for v in record["held_out_ndcg10"])
    print(
        f"  held-out nDCG@10 per epoch (re-scored candidates): {curve} (best epoch {record['best_epoch']}, "
        f"{record['counts']['held_out_topics']} questions)"
    )
    if record["held_out_search_ndcg10"]:
        searched = record["held_out_search_ndcg10"]
        print(
            f"  held-out nDCG@10 of the colbert search: untrained {searched['untrained']:.4f}, "
            f"trained {searched['trained']:.4f}"
        )
