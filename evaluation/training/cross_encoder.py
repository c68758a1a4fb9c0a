"""`mathscout train cross-encoder`: a cross-encoder (question, answer passage → relevance) trained on the train topics
with hard negatives from the index's own first stages, stored with the index (mathscout.dense.cross).

    mathscout train cross-encoder --index DIR [--topics T --qrels Q] [--budget-minutes B] [--max-minutes M]
                                  [--train-topics N|all] [--held-out H] [--topic-order mixed|seeded]
                                  [--group N] [--in-batch K]
                                  [--loss listwise|pointwise] [--negatives-from MINER[,MINER]] [--depth D]
                                  [--epochs E] [--max-length L] [--lr LR] [--batch B] [--freeze-layers K]
                                  [--init base|dense-ft|PATH] [--device auto|cpu|cuda] [--save DIR]
    mathscout train cross-encoder --index DIR --measure-backends    # step 5 again for the stored model (no training)

1. Topics: a seeded sample of N train topics (`all`: every one) whose best-graded relevant answer (grade ≥ 2) is in
   the index, and H others held out for validation (`--topics/--qrels`: train files only, dev is refused). The
   held-out ones are drawn from the topics the strongest first stage was not fit on (dense-ft's own held-out topics,
   recorded with its model), so that the validation and the interpolation weight are measured on questions no part
   of the ranking was fit on. `--topic-order mixed` (default) puts the seeded order in the shared collection's
   source mix (its dev questions' shares: half MSE; its train questions are 78 % MATH problems), so that the held-out
   topics and a budget that ends the pass early see each source in its share; `seeded` keeps the seeded order.
2. Hard negatives: each training topic's top D hits of `--negatives-from` (default the strongest first stage the
   index has: dense-ft, else dense, else bm25 and structure), its judged answers and the answers of its own thread
   removed; N of them drawn at random (seeded) per topic (`--group`). The held-out topics get every first stage's top
   CROSS_DEPTH (what `--rerank cross` reorders).
3. Training: sentence-transformers' CrossEncoder from `--init` (the packaged all-MiniLM-L6-v2, the index's dense-ft
   model folder, or a folder) with a new one-logit head, embeddings and the lower `--freeze-layers` layers frozen;
   CrossEncoderTrainer over (question, positive, N hard negatives) in the plan's topic order (step 1), learning
   rate constant after a short warm-up (stopping anywhere leaves a finished schedule), bf16 on CUDA. Loss
   (cross_recipe.py): `listwise`, the softmax cross-entropy of the positive against its group and `--in-batch`
   other questions' positives: Zhong 2023 thesis §5.2.2 Eq. 5.18 with the cross-encoder's raw logit in
   place of the bi-encoder's S(q, p); `pointwise`, binary cross-entropy over the same pairs. Both texts pass through
   `model_input_text` (formulas stay LaTeX); a pair is cut to L word pieces. Every `--eval-every` steps (auto: 100
   or more, so that validating takes at most a tenth of the time; and before the first) the library's
   CrossEncoderRerankingEvaluator gives the held-out nDCG@10 of the strongest first stage's reranked top CROSS_DEPTH;
   the best checkpoint is the model kept.
4. Held-out: nDCG@10 of each first stage's top CROSS_DEPTH on the held-out topics, before and after reranking,
   alone and interpolated (the cross-encoder's probability, `interpolate`); the weight is tuned per first stage, and
   the strongest one's is the stored default.
5. Backends: the held-out pairs scored by torch fp32, ONNX fp32 and ONNX int8: Kendall τ and top-10 agreement against
   fp32 per topic, ms per pair. The fastest backend that keeps the order (mean τ ≥ MIN_TAU and top-10 agreement ≥
   MIN_TOP10) is chosen and recorded; torch always qualifies.
6. Stored: DIR/cross-encoder/ (model/ in fp32 safetensors whatever the device, the chosen ONNX graph, loss.png,
   cross-encoder.json with the index build's hash, the topics and qrels files, the recipe (settings, loss, device),
   counts, held-out scores, backend measurements, times, pairs seen and ms per pair, and the topics the stored
   checkpoint trained on, which a ranker over its logits leaves out); `--save DIR` copies it there
   (to compare models: copy one back as DIR/cross-encoder/ and rerun `mathscout run --first-stage RUN --rerank cross`).

Every step is resumable: the work lives in DIR/cross-encoder.work/ (the plan, the mined candidates, the training rows,
the trainer's checkpoints at each validation); after a kill or `--max-minutes`, rerun the same command.

Time budget (`--budget-minutes`, default 60, over every run of a resumed training): training ends early, with a last
validation and the best checkpoint kept as the model, once the time left only covers that validation and steps 4-6 at
the seconds per pair its own validations took (a busy machine trains fewer steps rather than overrunning); the step
it stopped at is recorded (`stopped_early`).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from mathscout.dense.cross import (
    BACKENDS,
    CROSS_DEPTH,
    FOLDER,
    INFO_FILE,
    LOGIT,
    MODEL_DIR,
    ONNX_FILES,
    PROBABILITY,
    TRAIN_COMMAND,
    CrossEncoderInfo,
    CrossScorer,
    interpolate,
    load_cross_model,
    onnx_graph,
)
from mathscout.dense.device import add_device_argument, resolve_device
from mathscout.dense.encoder import export_onnx
from mathscout.dense.model import model_input_text
from mathscout.errors import MathScoutError
from mathscout.evaluation.measures import read_qrels
from mathscout.evaluation.topics import add_train_topic_arguments, in_collection_mix, load_topics
from mathscout.evaluation.training.contrastive import SEED, plot_losses
from mathscout.evaluation.training.cross_recipe import (
    INITS,
    LOSSES,
    check_miners,
    default_miners,
    describe_loss,
    freeze_layers,
    group_loss,
    held_out_unseen,
    report_stages,
    resolve_init,
    strongest_stage,
    unseen_topics,
)
from mathscout.evaluation.training.plan import TrainingPlan, require_train_files
from mathscout.evaluation.tuning import Scorer
from mathscout.index.integrity import record_folder
from mathscout.index.layout import IndexDir, write_json_atomic
from mathscout.retrievers.registry import open_retriever
from mathscout.retrievers.rerank import passage_text
from mathscout.types import Query

WORK = "cross-encoder.work"
WEIGHTS = tuple(round(0.05 * n, 2) for n in range(21))  # the cross-encoder's share in `interpolate`, tuned held out
MIN_TAU = 0.9  # a backend keeps the scores' order when its mean Kendall τ against torch fp32 is at least this …
MIN_TOP10 = 0.9  # … and its top 10 shares at least this share of fp32's, over the held-out topics
RELEVANT = 2  # the lowest grade taken as a positive
BUDGET_MINUTES = 60.0  # the bound issue 34 sets on the whole training
SAFETY = 1.5  # the time left must cover this many times the estimated validation and report


CPU_BATCH, CUDA_BATCH = 4, 32  # questions per step: 32 pairs at group 7 on 2 cores, 256 on a GPU


@dataclass(frozen=True)
class Settings:
    """What the training data and schedule depend on (a rerun must give the same, or start afresh). The defaults are
    for 2 CPU cores within the 60-minute budget: every train topic in a seeded order, the budget ending the training
    (~3 s a step of 4 questions × 8 pairs at 128 word pieces with 4 layers frozen, issue 43's timings)."""

    train_topics: int | str = "all"  # or a number
    held_out: int = 60
    group: int = 7  # hard negatives per question: the listwise softmax is over 1 + group (+ in_batch) pairs
    in_batch: int = 0  # other questions' positives added to each question's softmax (0: hard negatives only)
    loss: str = "listwise"  # or "pointwise" (cross_recipe.LOSSES)
    negatives_from: str = ""  # first stages mined, "a,b" ("" until resolved: cross_recipe.default_miners)
    depth: int = 50  # hits per miner whose unjudged ones are the negatives
    max_length: int = 128  # word pieces of a (question, passage) pair: what reranking 100 in 1 s allows (see below)
    batch: int = CPU_BATCH  # questions per step (CUDA_BATCH on a GPU unless given)
    epochs: int = 1
    lr: float = 5e-5  # Zhong 2023 thesis §5.3.1: 2·10⁻⁵ over 594,000 triplets; here a few hundred steps
    warmup: int = 50  # steps of linear warm-up (at most a tenth of the planned steps), then constant
    freeze_layers: int = 4  # embeddings and the lower 4 of 6 layers frozen: 96 instead of 191 ms a pair on 2 cores
    init: str = "base"  # or dense-ft or a model folder (cross_recipe.resolve_init)
    seed: int = SEED
    topic_order: str = "mixed"  # the seeded order in the collection's source mix (topics.in_collection_mix) or "seeded"

    @classmethod
    def recorded(cls, training: dict[str, Any]) -> Settings:
        """The settings a stored model's training record holds (fields it does not know are left out)."""
        known = {f.name for f in fields(cls)}
        given = {"topic_order": "seeded", **training.get("settings", {})}  # a model trained before the mix: seeded
        return cls(**{k: v for k, v in given.items() if k in known})


DEFAULTS = Settings()
TOPIC_ORDERS = ("mixed", "seeded")


@dataclass
class Mined:
    """One topic's first-stage hits: retriever → [(doc, score)], best first."""

    topic: str
    runs: dict[str, list[tuple[str, float]]]

    @property
    def docs(self) -> list[str]:
        return list(dict.fromkeys(doc for hits in self.runs.values() for doc, _ in hits))


# ---- 1. topics ------------------------------------------------------------------------------------------------------


def choose(
    topics_path: Path, qrels_path: Path, index: IndexDir, settings: Settings, unseen: set[str] | None = None
) -> tuple[list[str], list[str]]:
    """(training topic ids, held-out topic ids): a seeded sample of the topics whose positive is in the index; the
    held-out ones among `unseen` (the topics the strongest first stage was not fit on, cross_recipe.unseen_topics)."""
    qrels = read_qrels(qrels_path)
    topics = [t for t in load_topics(topics_path) if any(g >= RELEVANT for g in qrels.get(t.id, {}).values())]
    rng = random.Random(settings.seed)
    rng.shuffle(topics)
    if settings.topic_order == "mixed":  # a budget that ends the pass early sees each source in its share
        position = {topic_id: n for n, topic_id in enumerate(in_collection_mix([t.id for t in topics]))}
        topics.sort(key=lambda t: position[t.id])
    every = settings.train_topics == "all"
    wanted = len(topics) if every else int(settings.train_topics) + settings.held_out
    if unseen is not None:  # the first held-out candidates to the front (a stable sort: the order otherwise kept)
        front = set([t.id for t in topics if t.id in unseen][: settings.held_out * 2])
        topics.sort(key=lambda t: t.id not in front)
    stored = index.store.summaries(d for t in topics[: wanted * 2] for d in qrels[t.id])
    usable = [t.id for t in topics[: wanted * 2] if any(d in stored for d, g in qrels[t.id].items() if g >= RELEVANT)]
    if len(usable) < 2:
        raise MathScoutError(f"only {len(usable)} topic(s) of {topics_path} have a relevant answer in {index.path}")
    held = min(settings.held_out, max(1, len(usable) // 5))
    if unseen is not None:
        held = min(held, sum(t in unseen for t in usable)) or held
    return usable[held:] if every else usable[held : held + int(settings.train_topics)], usable[:held]


def fitted_topics(index: IndexDir) -> set[str]:
    """The topics the index's cross-encoder was trained or tuned on (none without a model): its recorded ids, or, for a
    model stored before they were recorded, the seeded choice recomputed from its settings and training files."""
    info = CrossEncoderInfo.read(index.path)
    if info is None:
        return set()
    training = info.training
    if "topic_ids" in training:
        return set(training["topic_ids"])
    settings = Settings.recorded(training)
    trained, held = choose(Path(training["topics"]), Path(training["qrels"]), index, settings)
    return set(trained) | set(held)


# ---- 2. hard negatives --------------------------------------------------------------------------------------------


MINE_CHUNK = 32  # topics searched together (one batch of query vectors for a dense first stage)


def mine(index: IndexDir, topics: list[Query], depth: int, path: Path, miners: tuple[str, ...]) -> dict[str, Mined]:
    """Each topic's top `depth` hits of each of `miners`, appended to `path` as they come (a rerun reads them back)."""
    done: dict[str, Mined] = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except ValueError:  # the line a kill cut short
                continue
            done[record["topic"]] = Mined(
                record["topic"], {k: [tuple(h) for h in v] for k, v in record["runs"].items()}
            )
    todo = [t for t in topics if t.id not in done]
    if not todo:
        return done
    retrievers = {name: open_retriever(index, name) for name in miners}

    def search(name: str, chunk: list[Query]) -> dict[str, list[tuple[str, float]]]:
        retriever = retrievers[name]
        try:
            found = retriever.batch_search(chunk, k=depth)
        except MathScoutError:  # a question it cannot search (no words, no formula): each topic alone
            found = {}
            for topic in chunk:
                try:
                    found.update(retriever.batch_search([topic], k=depth))
                except MathScoutError:
                    found[topic.id] = []
        return {t.id: [(h.doc_id, float(h.score)) for h in found.get(t.id, [])] for t in chunk}

    bar = tqdm(
        desc=f"first-stage hits ({', '.join(miners)}, top {depth})",
        unit="topic",
        file=sys.stderr,
        initial=len(topics) - len(todo),
        total=len(topics),
    )
    with open(path, "a", encoding="utf-8") as out, bar:
        for start in range(0, len(todo), MINE_CHUNK):
            chunk = todo[start : start + MINE_CHUNK]
            found = {name: search(name, chunk) for name in miners}
            for topic in chunk:
                runs = {name: found[name][topic.id] for name in miners}
                done[topic.id] = Mined(topic.id, runs)
                out.write(json.dumps({"topic": topic.id, "runs": runs}) + "\n")
            out.flush()
            bar.update(len(chunk))
    return done


def training_rows(
    topics: dict[str, Query],
    mined: dict[str, Mined],
    qrels: dict[str, dict[str, int]],
    index: IndexDir,
    settings: Settings,
) -> dict[str, list[str]]:
    """Topic id → (question, positive, negative × group) texts, in `topics`' order (the plan's: seeded, in the source
    mix; the trainer keeps it): its best-graded stored answer and `group` mined candidates that are neither judged for
    it nor from its own thread; topics without a stored positive or `group` such candidates are left out."""
    rng = random.Random(settings.seed)
    store = index.store
    threads = {
        doc: s.metadata.get("thread_id")
        for doc, s in store.summaries(
            {d for m in mined.values() for d in m.docs} | {d for t in topics for d in qrels[t]}
        ).items()
    }
    rows = {}
    for qid in topics:
        judged = qrels[qid]
        best = max((g for d, g in judged.items() if d in threads), default=0)
        if best < RELEVANT:
            continue
        positive = rng.choice(sorted(d for d, g in judged.items() if g == best and d in threads))
        pool = [d for d in mined[qid].docs if d not in judged and threads.get(d) != qid]
        if len(pool) < settings.group:
            continue
        negatives = rng.sample(pool, settings.group)
        texts = {
            d.id: model_input_text(passage_text(d.title, d.text))
            for d in store.get_many([positive, *negatives]).values()
        }
        rows[qid] = [model_input_text(topics[qid].text), texts[positive], *(texts[d] for d in negatives)]
    return rows


ROWS_FILE = "rows.json"  # the training rows, written once: a resumed training reads them instead of rebuilding


def cached_rows(path: Path, build: Callable[[], dict[str, list[str]]]) -> dict[str, list[str]]:
    """`build()`'s rows (topic id → texts, in order), written to `path` the first time and read back by a rerun (a
    resumed training: building them again from the store took 2.5 minutes of its budget on the full index); a damaged
    file is built again, being only a cache."""
    try:
        read = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(read, dict) and all(
            isinstance(t, list) and all(isinstance(x, str) for x in t) for t in read.values()
        ):
            return read
    except (OSError, ValueError):
        pass
    rows = build()
    write_json_atomic(path, rows)
    return rows


def topics_seen(row_topics: list[str], batch: int, step: int | None) -> list[str]:
    """The training topics the model at `step` has been trained on: the trainer takes the rows in order, `batch`
    at a time (an epoch past the first adds none); `step` None: every one."""
    return row_topics if step is None else row_topics[: step * batch]


# ---- 3. training ----------------------------------------------------------------------------------------------------


@dataclass
class Budget:
    """The time a training may take in all (`--budget-minutes`) and what it must keep for after its steps: a last
    validation of `validation_pairs` (question, passage) pairs, the held-out report's `report_pairs` and the model's
    export to ONNX, at the seconds per pair the latest validation took (measured on this machine at its load)."""

    minutes: float
    ends: float  # time.time() at which the budget is spent
    validation_pairs: int
    report_pairs: int
    export_seconds: float = 30.0  # the ONNX export and int8 quantisation of MiniLM took 8 s on this machine
    pair_seconds: float | None = None  # the latest validation's seconds per pair

    def validated(self, seconds: float) -> None:
        self.pair_seconds = seconds / max(self.validation_pairs, 1)

    def kept(self) -> float:
        """The seconds kept (with SAFETY) for a validation the schedule may run now, the last one and the report."""
        pair_seconds = self.pair_seconds or 0.0
        return SAFETY * (pair_seconds * (2 * self.validation_pairs + self.report_pairs) + self.export_seconds)

    def spent(self) -> bool:
        """True when the time left no longer covers what it keeps (the training validates at its start, so the seconds
        per pair are measured before any step)."""
        return self.pair_seconds is not None and time.time() + self.kept() > self.ends

    def steps_left(self, step_seconds: float) -> int:
        """The steps of `step_seconds` each (their validations' share included) that fit before the budget is spent."""
        return max(0, int((self.ends - time.time() - self.kept()) / step_seconds))


EVAL_EVERY = 100  # the fewest steps between validations (`--eval-every auto`; a number: exactly that many)
VALIDATION_SHARE = 0.1  # `auto`: a validation waits until it costs at most this share of the steps' time since the last
EXPECT_AFTER = 3  # training steps timed before the expected time is printed
EVALUATOR = "held-out"
METRIC = f"eval_{EVALUATOR}_ndcg@10"  # the trainer's name of the evaluator's nDCG@10


def validation_samples(
    topics: dict[str, Query], mined: dict[str, Mined], qrels: dict[str, dict[str, int]], index: IndexDir, stage: str
) -> list[dict]:
    """The held-out topics as the library's reranking evaluator reads them: `stage`'s top CROSS_DEPTH passages in its
    order (the strongest first stage: what `--rerank cross` reorders; only the relevant ones it found count:
    `always_rerank_positives=False`)."""
    samples = []
    for qid in sorted(topics):
        hits = mined[qid].runs.get(stage, [])[:CROSS_DEPTH]
        found = index.store.get_many(d for d, _ in hits)
        documents = [d for d, _ in hits if d in found]
        relevant = [d for d in documents if qrels.get(qid, {}).get(d, 0) >= RELEVANT]
        if documents:
            text = {d: model_input_text(passage_text(found[d].title, found[d].text)) for d in documents}
            samples.append(
                {
                    "query": model_input_text(topics[qid].text),
                    "positive": [text[d] for d in relevant],
                    "documents": [text[d] for d in documents],
                }
            )
    return samples


def batches_in_order(dataset: Any, **options: Any) -> Any:
    """The trainer's batches in the rows' own order (the plan's: seeded, in the source mix) instead of the library's
    random one, so that a budget ending the pass early has seen each source in its share. Module-level: the trainer
    stores its arguments with each checkpoint."""
    from sentence_transformers.base.sampler import DefaultBatchSampler
    from torch.utils.data import SequentialSampler

    return DefaultBatchSampler(SequentialSampler(dataset), **options)


def train_model(
    rows: list[list[str]],
    samples: list[dict],
    base: Path,
    work: Path,
    settings: Settings,
    deadline: float | None,
    every: int | None,
    budget: Budget | None = None,
    device: str = "cpu",
) -> tuple[bool, dict]:
    """Fine-tune from `base` on `device` with the library's trainer, validated on `samples` (held-out nDCG@10 of the
    first stage's reranked top hits) every `every` steps (None: `validation_due`'s spacing) and at the start, the best
    checkpoint kept; (finished, its history: batch losses, held-out curve, best step, pairs seen and ms per pair, and
    `stopped_early` when the budget ended it). Checkpoints go to work/trainer and a rerun resumes from the newest; at
    `deadline` (time.time()) it checkpoints and stops, unfinished."""
    from datasets import Dataset
    from sentence_transformers.cross_encoder import CrossEncoderTrainer, CrossEncoderTrainingArguments
    from sentence_transformers.cross_encoder.evaluation import CrossEncoderRerankingEvaluator
    from transformers import TrainerCallback
    from transformers.trainer_utils import get_last_checkpoint

    columns = ["query", "positive", *(f"negative_{n}" for n in range(1, settings.group + 1))]
    dataset = Dataset.from_dict({name: [row[i] for row in rows] for i, name in enumerate(columns)})
    model = load_cross_model(base, settings.max_length, cached=False, device=device)  # the trainer changes it
    frozen = freeze_layers(model, settings.freeze_layers)
    model.train()
    output = work / "trainer"
    spacing = every or EVAL_EVERY
    last = get_last_checkpoint(str(output)) if output.is_dir() else None
    planned = -(-len(rows) // settings.batch) * settings.epochs
    pairs_per_step = settings.batch * (1 + settings.group + min(settings.in_batch, settings.batch - 1))
    arguments = CrossEncoderTrainingArguments(
        output_dir=str(output),
        num_train_epochs=settings.epochs,
        per_device_train_batch_size=settings.batch,
        batch_sampler=batches_in_order,
        learning_rate=settings.lr,
        lr_scheduler_type="constant_with_warmup",  # a budget may end it anywhere: no decay left unfinished
        warmup_steps=min(settings.warmup, planned // 10),  # step 0 of a warm-up runs at lr 0: none on tiny runs
        save_strategy="steps",
        save_steps=spacing,
        eval_strategy="steps",
        eval_steps=spacing,
        eval_on_start=True,  # the curve's first point, and on a resumed run the budget's seconds per pair
        load_best_model_at_end=True,
        metric_for_best_model=METRIC,
        greater_is_better=True,
        save_total_limit=1,
        logging_steps=max(1, min(10, spacing)),
        report_to="none",
        seed=settings.seed,
        data_seed=settings.seed,
        dataloader_pin_memory=False,
        use_cpu=device == "cpu",
        bf16=device == "cuda",  # autocast; the weights stay fp32 (and are stored so)
        disable_tqdm=False,
    )

    stopped: list[int] = []
    # the steps' seconds (validations excluded), the last validation's, and the steps' since it
    timing = {"steps": 0, "seconds": 0.0, "began": 0.0, "validation": 0.0, "since_validation": 0.0}

    class TimedEvaluator(CrossEncoderRerankingEvaluator):
        def __call__(self, *args, **kwargs):
            started = time.perf_counter()
            metrics = super().__call__(*args, **kwargs)
            timing["validation"], timing["since_validation"] = time.perf_counter() - started, 0.0
            if budget is not None:
                budget.validated(timing["validation"])
            return metrics

    evaluator = TimedEvaluator(samples, always_rerank_positives=False, name=EVALUATOR, batch_size=32, write_csv=False)

    class StepTime(TrainerCallback):
        """Seconds of the training steps alone (validations excluded) and, after a few, the expected time."""

        def on_step_begin(self, args, state, control, **kwargs):
            timing["began"] = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            seconds = time.perf_counter() - timing["began"]
            timing["seconds"] += seconds
            timing["since_validation"] += seconds
            timing["steps"] += 1
            if timing["steps"] == EXPECT_AFTER:
                step = timing["seconds"] / timing["steps"]
                left = state.max_steps - state.global_step
                validated = step + validation_seconds_per_step(timing["validation"], step, every, left)
                note = f"about {left * validated / 60:.1f} min for the {left:,} steps left, validations included"
                if budget is not None:  # less the time kept for the last validation and the report
                    note += f"; the budget's time left covers about {min(budget.steps_left(validated), left):,} of them"
                print(
                    f"\ntraining: {step:.2f} s a step, {1000 * step / pairs_per_step:.0f} ms a pair; {note}",
                    file=sys.stderr,
                )

    class ValidationSpacing(TrainerCallback):
        """`--eval-every auto`: a scheduled validation (and its checkpoint) is skipped until it is due."""

        def on_step_end(self, args, state, control, **kwargs):
            if control.should_evaluate and state.global_step < state.max_steps:  # the last step always validates
                due = validation_due(timing["validation"], timing["since_validation"])
                control.should_evaluate = control.should_save = due
            return control

    class Deadline(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step >= state.max_steps:
                return control
            if deadline is not None and time.time() > deadline:
                control.should_save = control.should_training_stop = True
            elif budget is not None and budget.spent():
                stopped.append(state.global_step)
                control.should_evaluate = control.should_save = control.should_training_stop = True
            return control

    loss = group_loss(model, settings.loss, settings.in_batch)  # Zhong 2023 thesis §5.2.2, Eq. 5.18 (listwise)
    trainer = CrossEncoderTrainer(
        model=model,
        args=arguments,
        train_dataset=dataset,
        loss=loss,
        evaluator=evaluator,
        # in this order: the spacing reads the steps' time, and a deadline saves and validates whatever it decided
        callbacks=[StepTime(), *([ValidationSpacing()] if every is None else []), Deadline()],
    )
    if last:
        print(f"resuming from {last}", file=sys.stderr)
    trainer.train(resume_from_checkpoint=last)
    state = trainer.state
    history = {
        "losses": [float(e["loss"]) for e in state.log_history if "loss" in e],
        "held_out_curve": [  # a resumed run validates again at the step it resumed from: one point per step
            [step, score]
            for step, score in {e["step"]: round(float(e[METRIC]), 4) for e in state.log_history if METRIC in e}.items()
        ],
        "steps": state.global_step,
        "best_step": None,
        "best": state.best_metric,
        "frozen_parameters": frozen,
        "pairs_per_step": pairs_per_step,
        "pairs_seen": state.global_step * pairs_per_step,
        # this run's steps alone (a resumed training: the last run's)
        "ms_per_pair": round(1000 * timing["seconds"] / max(timing["steps"] * pairs_per_step, 1), 1),
        "warmup_steps": arguments.warmup_steps,
    }
    if state.best_model_checkpoint:
        history["best_step"] = int(Path(state.best_model_checkpoint).name.rpartition("-")[2])
    if stopped and budget is not None:
        history["stopped_early"] = {"step": stopped[0], "of": state.max_steps, "budget_minutes": budget.minutes}
    finished = state.global_step >= state.max_steps or bool(stopped)
    if finished:  # the best checkpoint's weights (load_best_model_at_end)
        save_fp32(model, work / MODEL_DIR)
    return finished, history


def validation_due(validation_seconds: float, steps_seconds: float, share: float = VALIDATION_SHARE) -> bool:
    """Whether a validation that took `validation_seconds` last time is due after `steps_seconds` of steps since:
    when it costs at most `share` of them (on 2 cores a validation of 1,800 pairs takes ~40 s and 100 steps ~100 s, so
    every 100 steps spent 30 % of a budget on validations; on a GPU every scheduled one is due)."""
    return validation_seconds <= share * steps_seconds


def validation_seconds_per_step(
    validation_seconds: float, step_seconds: float, every: int | None, steps_left: int
) -> float:
    """What validating adds to each of the `steps_left` steps on average: one validation every `every` steps, or under
    `auto` (None) one at the first scheduled step (a multiple of EVAL_EVERY) where `validation_due` allows it. The
    search stops at the steps left, whatever the rule says: past them only the last step's validation runs."""
    steps_left = max(steps_left, 1)
    if every is None:
        scheduled = range(EVAL_EVERY, steps_left, EVAL_EVERY)
        due = (n for n in scheduled if validation_due(validation_seconds, n * step_seconds))
        every = next(due, steps_left)
    return validation_seconds / min(every, steps_left)


def spacing_text(every: int | None) -> str:
    """How often the training validates, in words."""
    if every is not None:
        return f"every {every} steps"
    return f"every {EVAL_EVERY} steps or more, so that validating takes at most {VALIDATION_SHARE:.0%} of the time"


def save_fp32(model: Any, folder: Path) -> None:
    """The model on the CPU in fp32 safetensors, whatever device and precision trained it: a model trained on a GPU
    loads and ranks on a CPU as it does there."""
    model.eval()
    model.to("cpu")
    model.model.float()
    model.save(str(folder), safe_serialization=True)


# ---- 4-5. held-out scores and backends ------------------------------------------------------------------------------


def _kendall(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import kendalltau

    if len(a) < 2:
        return 1.0
    tau = kendalltau(a, b).statistic
    return 1.0 if np.isnan(tau) else float(tau)


def _top(scores: np.ndarray, n: int = 10) -> set[int]:
    return set(np.argsort(-scores, kind="stable")[:n].tolist())


def held_out_report(
    model_dir: Path,
    work: Path,
    topics: dict[str, Query],
    mined: dict[str, Mined],
    qrels_path: Path,
    index: IndexDir,
    settings: Settings,
    backends: tuple[str, ...],
    agreement_topics: int,
    stage: str | None = None,
) -> dict:
    """nDCG@10 of each first stage's top hits (`mined`: CROSS_DEPTH) and of them reranked by torch fp32 on every held-out
    topic, alone and interpolated with the weight tuned for each stage (`stage`'s is the stored default: the strongest
    first stage; None: the mean over the stages, as models before issue 43); each backend's Kendall τ, top-10
    agreement with fp32, reranked nDCG@10 and ms per pair on the first `agreement_topics` of them."""
    qrels = read_qrels(qrels_path)
    held_qrels = work / "qrels.held-out.txt"
    held_qrels.write_text(
        "".join(f"{q} 0 {d} {g}\n" for q in sorted(topics) for d, g in qrels.get(q, {}).items()), encoding="utf-8"
    )
    scorer = Scorer(held_qrels)
    store = index.store
    if set(backends) & set(ONNX_FILES):
        int8 = work / ONNX_FILES["onnx-int8"]
        export_onnx(
            onnx_graph(model_dir, settings.max_length),
            work / ONNX_FILES["onnx"],
            int8 if "onnx-int8" in backends and not int8.is_file() else None,
        )
    models = {
        b: CrossScorer(model_dir, settings.max_length, b, work / ONNX_FILES[b] if b in ONNX_FILES else None)
        for b in backends
    }
    compared = set(sorted(topics)[:agreement_topics])
    scores: dict[str, dict[str, dict[str, float]]] = {b: {} for b in backends}
    seconds, pairs = dict.fromkeys(backends, 0.0), dict.fromkeys(backends, 0)
    for qid in tqdm(sorted(topics), desc="held-out topics", unit="topic", file=sys.stderr):
        found = store.get_many(mined[qid].docs)
        docs = [d for d in mined[qid].docs if d in found]
        passages = [passage_text(found[d].title, found[d].text) for d in docs]
        for backend, model in models.items():
            if docs and (backend == "torch" or qid in compared):
                started = time.perf_counter()
                scores[backend][qid] = dict(zip(docs, (float(x) for x in model.scores(topics[qid].text, passages))))
                seconds[backend] += time.perf_counter() - started
                pairs[backend] += len(docs)
    runs = sorted({n for m in mined.values() for n in m.runs})

    def mean(results: dict[str, list[tuple[str, float]]], over: set[str]) -> float:
        return round(float(np.mean([v for q, v in scorer.per_topic(results).items() if q in over])), 4)

    def reranked(name: str, backend: str) -> dict[str, list[tuple[str, float]]]:
        return {
            q: sorted(
                ((d, scores[backend][q].get(d, -1e9)) for d, _ in mined[q].runs.get(name, [])), key=lambda x: -x[1]
            )
            for q in scores[backend]
        }

    def interpolated(name: str, weight: float) -> dict[str, list[tuple[str, float]]]:
        out = {}
        for q in scores["torch"]:
            hits = [(d, s) for d, s in mined[q].runs.get(name, []) if d in scores["torch"][q]]
            fused = interpolate([scores["torch"][q][d] for d, _ in hits], [s for _, s in hits], weight, PROBABILITY)
            out[q] = sorted(((d, float(f)) for (d, _), f in zip(hits, fused)), key=lambda x: -x[1])
        return out

    everyone = set(topics)
    grid = {w: {n: mean(interpolated(n, w), everyone) for n in runs} for w in WEIGHTS}
    weights = {n: max(WEIGHTS, key=lambda w: (grid[w][n], w)) for n in runs}  # Zhong 2023 thesis §5.2.4, per stage
    if stage in weights:
        weight = weights[stage]
    else:
        weight = max(WEIGHTS, key=lambda w: (round(float(np.mean(list(grid[w].values()))), 4), w))
    report: dict = {
        "topics": len(topics),
        "pairs": pairs["torch"],
        "measure": scorer.measure,
        "first_stage": {n: mean({q: mined[q].runs.get(n, []) for q in topics}, everyone) for n in runs},
        "reranked": {n: mean(reranked(n, "torch"), everyone) for n in runs},
        "interpolation": {
            "weight": weight,
            "scale": PROBABILITY,  # what the grid below was tuned on
            "stage": stage,
            "weights": weights,
            "reranked": {n: grid[weights[n] if stage in weights else weight][n] for n in runs},
            "grid": {f"{w:.2f}": grid[w] for w in WEIGHTS},
        },
        "agreement_topics": len(compared),
    }
    agreement: dict[str, dict[str, Any]] = {}
    for backend in backends:
        taus, tops = [], []
        for qid in sorted(compared & set(scores["torch"])):
            reference = scores["torch"][qid]
            a = np.array(list(reference.values()))
            b = np.array([scores[backend][qid][d] for d in reference])
            taus.append(_kendall(a, b))
            n = min(10, len(a))
            tops.append(len(_top(a, n) & _top(b, n)) / n)
        agreement[backend] = {
            "kendall_tau": round(float(np.mean(taus)), 4),
            "top10": round(float(np.mean(tops)), 4),
            "min_kendall_tau": round(float(np.min(taus)), 4),
            "reranked": {n: mean(reranked(n, backend), compared) for n in runs},
            "ms_per_pair": round(1000 * seconds[backend] / max(pairs[backend], 1), 2),
        }
    keeps = [
        b
        for b in backends
        if b == "torch" or (agreement[b]["kendall_tau"] >= MIN_TAU and agreement[b]["top10"] >= MIN_TOP10)
    ]
    report["backends"] = agreement
    report["rule"] = (
        f"fastest of the backends with mean Kendall tau >= {MIN_TAU} and top-10 agreement >= {MIN_TOP10} vs torch fp32"
    )
    report["chosen"] = min(keeps, key=lambda b: agreement[b]["ms_per_pair"])
    return report


# ---- 6. storing ---------------------------------------------------------------------------------------------------


def store_model(
    index: IndexDir, work: Path, backend: str, settings: Settings, training: dict, trained: Path | None = None
) -> Path:
    """DIR/cross-encoder/, written beside and renamed into place (a reader never sees half of it): the model and loss
    plot from `trained` (default `work`), the chosen ONNX graph from `work`."""
    trained = trained or work
    target = index.path / FOLDER
    staging = index.path / f".{FOLDER}.saving"
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(trained / MODEL_DIR, staging / MODEL_DIR)
    if backend in ONNX_FILES:
        shutil.copy2(work / ONNX_FILES[backend], staging / ONNX_FILES[backend])
    if (trained / "loss.png").is_file():
        shutil.copy2(trained / "loss.png", staging / "loss.png")
    interpolation = training["held_out"]["interpolation"]
    info = CrossEncoderInfo(
        backend=backend,
        max_length=settings.max_length,
        weight=interpolation["weight"],
        weights=interpolation.get("weights", {}) if interpolation.get("stage") else {},
        scale=interpolation.get("scale", LOGIT),
        files=record_folder(staging),
        training=training,
    )
    info.write_file(staging / INFO_FILE)
    old = index.path / f".{FOLDER}.old"
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        target.rename(old)
    staging.rename(target)
    shutil.rmtree(old, ignore_errors=True)
    return target


def _whole_or(word: str, meaning: int | str | None, noun: str):
    """An argparse type: a whole number of at least 1, or `word` (read as `meaning`)."""

    def parse(text: str) -> int | str | None:
        if text == word:
            return meaning
        try:
            number = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"a {noun} or {word}, not {text!r}") from None
        if number < 1:
            raise argparse.ArgumentTypeError("at least 1")
        return number

    return parse


_count_or_all = _whole_or("all", "all", "number")  # `--train-topics`: a number of topics, or all
_steps_or_auto = _whole_or("auto", None, "number of steps")  # `--eval-every`: a number of steps, or auto (None)


def resolve_settings(args: argparse.Namespace, index: IndexDir, device: str) -> Settings:
    """The command's settings with the index's defaults filled in: the miners (`default_miners`) and, on CUDA, the
    larger batch."""
    given = {f.name: getattr(args, f.name) for f in fields(Settings) if getattr(args, f.name, None) is not None}
    given["negatives_from"] = ",".join(check_miners(index, args.negatives_from or default_miners(index)))
    given.setdefault("batch", CUDA_BATCH if device == "cuda" else CPU_BATCH)
    return Settings(**given)


def train(args: argparse.Namespace) -> Path | None:
    started = time.time()
    deadline = started + args.max_minutes * 60 if args.max_minutes is not None else None
    require_train_files(args.topics, args.qrels, "training a cross-encoder")
    index = IndexDir(args.index)
    device = resolve_device(args.device)
    settings = resolve_settings(args, index, device)
    base = resolve_init(settings.init, index)
    miners, stage, stages = tuple(settings.negatives_from.split(",")), strongest_stage(index), report_stages(index)
    work = index.path / WORK
    source = {"topics": str(args.topics.resolve()), "qrels": str(args.qrels.resolve()), "base": str(base)}
    unseen = unseen_topics(index, stage)
    planned = TrainingPlan(
        work, asdict(settings), source, lambda: choose(args.topics, args.qrels, index, settings, unseen)
    )
    plan, spent = planned.data, planned.spent
    spent_before = sum(plan["seconds"].values())  # by earlier runs of a resumed training: the budget covers them
    plan.setdefault("devices", [])
    plan["devices"] = list(dict.fromkeys([*plan["devices"], device]))
    print(
        f"cross-encoder on {device}: {len(plan['train']):,} training and {len(plan['held_out'])} held-out topics, "
        f"{settings.loss} over 1 positive + {settings.group} hard negatives"
        f"{f' + {settings.in_batch} in-batch' if settings.in_batch else ''} from {', '.join(miners)}'s top "
        f"{settings.depth}, pairs cut to {settings.max_length} word pieces, {settings.freeze_layers} layers frozen, "
        f"from {settings.init}, batch {settings.batch} questions, lr {settings.lr:g}, {settings.epochs} epoch(s); "
        f"validated on {stage}'s top {CROSS_DEPTH}",
        file=sys.stderr,
    )
    topics = {t.id: t for t in load_topics(args.topics) if t.id in set(plan["train"]) | set(plan["held_out"])}
    qrels = read_qrels(args.qrels)
    t0 = time.time()
    mined = mine(index, [topics[q] for q in plan["train"]], settings.depth, work / "mined.jsonl", miners)
    held = mine(index, [topics[q] for q in plan["held_out"]], CROSS_DEPTH, work / "held-out.jsonl", stages)
    spent("mining", t0)
    t0 = time.time()
    finished = (work / MODEL_DIR / "config.json").is_file()
    if not finished:
        rows_by_topic = cached_rows(
            work / ROWS_FILE,
            lambda: training_rows({q: topics[q] for q in plan["train"]}, mined, qrels, index, settings),
        )
        rows = list(rows_by_topic.values())
        samples = validation_samples({q: topics[q] for q in plan["held_out"]}, held, qrels, index, stage)
        held_pairs = [len(held[q].docs) for q in sorted(plan["held_out"])]  # torch scores them all, ONNX a share
        budget = Budget(
            args.budget_minutes,
            ends=started + args.budget_minutes * 60 - spent_before,
            validation_pairs=sum(len(sample["documents"]) for sample in samples),
            report_pairs=sum(held_pairs) + sum(held_pairs[: args.agreement_topics]) * (len(args.backends) - 1),
        )
        plan["rows"] = len(rows)
        print(
            f"{len(rows):,} training questions; {-(-len(rows) // settings.batch) * settings.epochs:,} steps; "
            f"held-out nDCG@10 {spacing_text(args.eval_every)}; the {args.budget_minutes:g}-minute budget ends it "
            "early if need be",
            file=sys.stderr,
        )
        finished, history = train_model(
            rows, samples, base, work, settings, deadline, args.eval_every, budget, device=device
        )
        plan["history"] = history
        # the stored checkpoint's topics (a budget may end the pass early): what a ranker over its logits leaves out
        plan["trained_on"] = topics_seen(list(rows_by_topic), settings.batch, history["best_step"])
        spent("training", t0)
        if "stopped_early" in history:
            early = history["stopped_early"]
            print(
                f"training ended at step {early['step']} of {early['of']} to fit the {early['budget_minutes']:g}-minute "
                f"budget; the best checkpoint (step {history['best_step']}) is the model",
                file=sys.stderr,
            )
        if not finished:
            print(
                f"stopped after {args.max_minutes} min; rerun the same command to resume from {work / 'trainer'}",
                file=sys.stderr,
            )
            return None
        curve = [score for _, score in history["held_out_curve"]]  # at the steps validated
        plot_losses(
            history["losses"],
            work / "loss.png",
            f"cross-encoder: {plan['rows']} questions, {settings.epochs} epoch(s), best step {history['best_step']}",
            held_out=curve,
            held_out_steps=[step for step, _ in history["held_out_curve"]],
        )
    t0 = time.time()
    report = held_out_report(
        work / MODEL_DIR,
        work,
        {q: topics[q] for q in plan["held_out"]},
        held,
        args.qrels,
        index,
        settings,
        tuple(args.backends),
        args.agreement_topics,
        stage,
    )
    spent("held_out", t0)
    used = sorted({*miners, *stages})
    history = plan.get("history", {})
    trained_on = plan.get("trained_on", plan["train"])  # a work folder of an older version: every planned topic
    training = {
        "index": str(index.path.resolve()),
        "index_build": index.build_hash(used),  # the build the negatives and held-out hits came from
        "documents": index.manifest.documents,
        "base": str(base),
        "topics": str(args.topics),
        "qrels": str(args.qrels),
        "counts": {
            "training_topics": len(plan["train"]),
            "training_questions": plan.get("rows"),
            "trained_on_topics": len(trained_on),
            "held_out_topics": len(plan["held_out"]),
            "mined_from": list(miners),
            "held_out_from": list(stages),
            "validated_on": stage,
            # the held-out topics (validation, interpolation weights) are ones the validated first stage was not fit on
            "held_out_unseen_by_first_stage": held_out_unseen(stage, unseen, plan["held_out"]),
        },
        "settings": asdict(settings),
        "devices": plan["devices"],  # where it trained (every run of a resumed training)
        # trained (up to the stored checkpoint) or tuned on, the held-out ones last: a ranker over its logits leaves
        # them out
        "topic_ids": trained_on + plan["held_out"],
        "loss": describe_loss(settings.loss, settings.group, min(settings.in_batch, settings.batch - 1)),
        "lr_schedule": "constant after a linear warm-up",
        **history,
        "training_minutes": round(plan["seconds"].get("training", 0.0) / 60, 1),
        "held_out": report,
        "seconds": plan["seconds"],
        "minutes": planned.minutes,
    }
    stored = store_model(index, work, report["chosen"], settings, training)
    shutil.rmtree(work, ignore_errors=True)
    return stored


def remeasure_backends(args: argparse.Namespace) -> Path:
    """`--measure-backends`: the stored model's held-out report (step 5's backends included) measured again with this
    version's ONNX exports on its own held-out topics, and the backend the rule then chooses stored with it, the
    weights tuned again on the probability scale (`interpolate`); no training. The index must be the build its
    negatives were mined from."""
    index = IndexDir(args.index)
    info = CrossEncoderInfo.require(index.path)
    training = info.training
    counts = training.get("counts", {})
    stages = tuple(counts.get("held_out_from") or counts.get("mined_from") or [])  # before issue 43: the miners
    used = sorted({*(counts.get("mined_from") or []), *stages})
    if not used or index.build_hash(used) != training.get("index_build"):
        raise MathScoutError(
            f"the index {index.path} is not the build its cross-encoder was trained on: retrain with "
            + TRAIN_COMMAND.format(index=index.path)
        )
    work = index.path / WORK
    if work.exists():
        raise MathScoutError(
            f"a cross-encoder training is under way in {work}: finish it (rerun it) or remove that folder"
        )
    settings = Settings.recorded(training)
    held = training["topic_ids"][len(training["topic_ids"]) - training["counts"]["held_out_topics"] :]
    topics = {t.id: t for t in load_topics(Path(training["topics"])) if t.id in set(held)}
    started = time.time()
    stored = index.path / FOLDER  # the model is read where it is stored, and copied once into the new folder
    work.mkdir(parents=True)
    try:
        mined = mine(index, [topics[q] for q in held if q in topics], CROSS_DEPTH, work / "held-out.jsonl", stages)
        report = held_out_report(
            stored / MODEL_DIR,
            work,
            topics,
            mined,
            Path(training["qrels"]),
            index,
            settings,
            tuple(args.backends),
            args.agreement_topics,
            counts.get("validated_on"),
        )
        remeasured = {"at": time.strftime("%Y-%m-%d %H:%M:%S"), "seconds": round(time.time() - started, 1)}
        record = {**training, "held_out": report, "remeasured": remeasured}
        return store_model(index, work, report["chosen"], settings, record, trained=stored)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="mathscout train cross-encoder", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--index",
        type=Path,
        required=True,
        help="the index whose candidates give the hard negatives and which stores the model (DIR/cross-encoder/)",
    )
    add_train_topic_arguments(parser)
    parser.add_argument(
        "--train-topics",
        type=_count_or_all,
        default=DEFAULTS.train_topics,
        help="questions trained on: a number or all (default; --topics all says the same)",
    )
    parser.add_argument(
        "--held-out", type=int, default=DEFAULTS.held_out, help="train questions held out for the validation scores"
    )
    parser.add_argument(
        "--topic-order",
        choices=TOPIC_ORDERS,
        default=DEFAULTS.topic_order,
        help="mixed (default): the seeded order with each source of the shared collection in its share of the dev "
        "questions (train is 78%% MATH problems, dev 50%% MSE), for the training and the held-out topics alike; "
        "seeded: the seeded order alone",
    )
    parser.add_argument(
        "--group",
        "--negatives",
        dest="group",
        type=int,
        default=DEFAULTS.group,
        help="hard negatives per question: the listwise softmax is over 1 + N (Zhong 2023 thesis Eq. 5.18)",
    )
    parser.add_argument(
        "--in-batch",
        type=int,
        default=DEFAULTS.in_batch,
        help="other questions' positives added to each question's group as negatives (default none)",
    )
    parser.add_argument("--loss", choices=LOSSES, default=DEFAULTS.loss, help="listwise (softmax) or pointwise (BCE)")
    parser.add_argument(
        "--negatives-from",
        default=None,
        help="first stages mined for negatives, comma-separated (default: dense-ft, else dense, else bm25,structure)",
    )
    parser.add_argument("--depth", type=int, default=DEFAULTS.depth, help="hits per miner the negatives come from")
    parser.add_argument("--max-length", type=int, default=DEFAULTS.max_length, help="word pieces per pair")
    parser.add_argument(
        "--batch", type=int, default=None, help=f"questions per step (default {CPU_BATCH}; {CUDA_BATCH} on CUDA)"
    )
    parser.add_argument("--epochs", type=int, default=DEFAULTS.epochs)
    parser.add_argument("--lr", type=float, default=DEFAULTS.lr)
    parser.add_argument(
        "--freeze-layers",
        type=int,
        default=DEFAULTS.freeze_layers,
        help="freeze the embeddings and the lower K transformer layers (0: train every weight)",
    )
    parser.add_argument(
        "--init",
        default=DEFAULTS.init,
        help=f"the weights to start from: {' or '.join(INITS)} (the index's dense-ft model folder) or a model folder",
    )
    parser.add_argument("--seed", type=int, default=DEFAULTS.seed)
    add_device_argument(parser)
    parser.add_argument(
        "--eval-every",
        type=_steps_or_auto,
        default=None,
        help="steps between held-out validations (each one a checkpoint; the best one is kept); auto (default): "
        + spacing_text(None).replace("%", "%%"),  # argparse formats the help
    )
    parser.add_argument("--save", type=Path, default=None, help="also copy the stored model folder to this folder")
    parser.add_argument("--max-minutes", type=float, default=None, help="stop (resumably) after this long")
    parser.add_argument(
        "--budget-minutes",
        type=float,
        default=BUDGET_MINUTES,
        help="the whole training's time (every run of it): training ends early, keeping its best checkpoint, to fit",
    )
    parser.add_argument(
        "--agreement-topics",
        type=int,
        default=30,
        help="held-out topics each backend is compared on against torch fp32",
    )
    parser.add_argument(
        "--backends",
        default=",".join(BACKENDS),
        help=f"inference backends measured against torch fp32 (of {', '.join(BACKENDS)})",
    )
    parser.add_argument(
        "--measure-backends",
        action="store_true",
        help="no training: measure the stored model's backends again (this version's ONNX exports) on its held-out "
        "topics and store the one the rule chooses, with its interpolation weights tuned again (on this version's "
        "probability scale)",
    )
    args = parser.parse_args(argv)
    if str(args.topics) == "all" and not args.topics.exists():  # `--topics all`: every topic of the default file
        args.topics, args.train_topics = parser.get_default("topics"), "all"
    args.backends = list(dict.fromkeys(["torch", *(b.strip() for b in args.backends.split(",") if b.strip())]))
    unknown = [b for b in args.backends if b not in BACKENDS]
    if unknown:
        raise MathScoutError(f"unknown backend(s) {', '.join(unknown)} (available: {', '.join(BACKENDS)})")
    for name in ("group", "depth", "batch", "epochs"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            raise MathScoutError(f"--{name.replace('_', '-')} must be at least 1")
    for name in ("in_batch", "freeze_layers"):
        if getattr(args, name) < 0:
            raise MathScoutError(f"--{name.replace('_', '-')} must be at least 0")
    if not 16 <= args.max_length <= 512:
        raise MathScoutError("--max-length must be from 16 to 512 word pieces")
    started = time.perf_counter()
    stored = remeasure_backends(args) if args.measure_backends else train(args)
    if stored is not None and args.save is not None:
        shutil.rmtree(args.save, ignore_errors=True)
        shutil.copytree(stored, args.save)
        print(f"a copy of the model: {args.save} (copy it back as {stored} to rerank with it)")
    if stored is not None:
        info = CrossEncoderInfo.require(stored.parent)
        report = info.training["held_out"]
        print(
            f"cross-encoder stored in {stored} ({(time.perf_counter() - started) / 60:.1f} min this run, "
            f"{info.training['minutes']} min in all); backend {info.backend}"
        )
        fused = report["interpolation"]
        for name, score in report["first_stage"].items():
            print(
                f"  held-out {report['measure']} {name}: {score:.4f} -> reranked {report['reranked'][name]:.4f}, "
                f"interpolated {fused['reranked'][name]:.4f} (torch fp32, {report['topics']} topics)"
            )
        weights = ", ".join(f"{n} {w:.2f}" for n, w in fused.get("weights", {}).items())
        print(
            f"  interpolation weight of the cross-encoder (tuned on the held-out topics): {info.weight:.2f}"
            f" ({fused.get('stage') or 'mean of the stages'}){f'; per stage: {weights}' if weights else ''}"
        )
        training = info.training
        if "pairs_seen" in training:
            print(
                f"  training: {training['training_minutes']} min on {', '.join(training.get('devices', []))}, "
                f"{training['steps']:,} steps, {training['pairs_seen']:,} pairs seen, {training['ms_per_pair']} ms a "
                f"pair (steps alone), best step {training['best_step']}"
            )
        for backend, figures in report["backends"].items():
            print(
                f"  {backend}: Kendall tau {figures['kendall_tau']:.3f}, top-10 agreement {figures['top10']:.2f}, "
                f"{figures['ms_per_pair']:.1f} ms/pair ({report['agreement_topics']} topics)"
            )
