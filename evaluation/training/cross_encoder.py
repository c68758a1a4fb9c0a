"""`mathscout train cross-encoder`: a cross-encoder (question, answer passage → relevance) trained on the train topics
with hard negatives from the index's own first stages, stored with the index (mathscout.dense.cross).

    mathscout train cross-encoder --index DIR [--topics T --qrels Q] [--budget-minutes B] [--max-minutes M]
                                  [--epochs E] [--train-topics N] [--held-out H] [--negatives n] [--depth D] [--max-length L]
    mathscout train cross-encoder --index DIR --measure-backends    # step 5 again for the stored model (no training)

1. Topics: a seeded sample of N train topics whose best-graded relevant answer (grade ≥ 2) is in the index, and H
   others held out for validation (`--topics/--qrels`: train files only, dev is refused).
2. Hard negatives: each topic's top D hits of the index's bm25, structure and (when the index has it) dense-ft
   search (the candidates `--rerank cross` reorders), its judged answers and the answers of its own thread removed;
   n of them drawn at random (seeded) for each training topic.
3. Training: sentence-transformers' CrossEncoder from the offline all-MiniLM-L6-v2 weights with a one-logit head,
   CrossEncoderTrainer with MultipleNegativesRankingLoss over (question, positive, n hard negatives) plus one in-batch
   negative: Zhong 2023 thesis §5.2.2 Eq. 5.18's softmax of the positive against hard and in-batch negatives, with
   the cross-encoder's score in place of the bi-encoder's S(q, p). Both texts pass through `model_input_text`
   (formulas stay LaTeX); a pair is cut to L word pieces. Every `--eval-every` steps (and before the first) the
   library's CrossEncoderRerankingEvaluator gives the held-out nDCG@10 of the first miner's reranked top D; the best
   checkpoint is the model kept.
4. Held-out: nDCG@10 of each first stage's top D on the held-out topics, before and after reranking.
5. Backends: the held-out pairs scored by torch fp32, ONNX fp32 and ONNX int8: Kendall τ and top-10 agreement against
   fp32 per topic, ms per pair. The fastest backend that keeps the order (mean τ ≥ MIN_TAU and top-10 agreement ≥
   MIN_TOP10) is chosen and recorded; torch always qualifies.
6. Stored: DIR/cross-encoder/ (model/, the chosen ONNX graph, loss.png, cross-encoder.json with the index build's
   hash, the topics and qrels files, counts, epochs, held-out scores, backend measurements and times).

Every step is resumable: the work lives in DIR/cross-encoder.work/ (the plan, the mined candidates, the trainer's
checkpoints at each validation); after a kill or `--max-minutes`, rerun the same command.

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
    MODEL_DIR,
    ONNX_FILES,
    TRAIN_COMMAND,
    CrossEncoderInfo,
    CrossScorer,
    interpolate,
    load_cross_model,
    onnx_graph,
)
from mathscout.dense.encoder import export_onnx
from mathscout.dense.model import default_model_path, model_input_text
from mathscout.errors import MathScoutError
from mathscout.evaluation.measures import read_qrels
from mathscout.evaluation.topics import add_train_topic_arguments, load_topics
from mathscout.evaluation.training.contrastive import SEED, plot_losses
from mathscout.evaluation.training.plan import TrainingPlan, require_train_files
from mathscout.evaluation.tuning import Scorer
from mathscout.index.integrity import record_folder
from mathscout.index.layout import IndexDir
from mathscout.retrievers.registry import open_retriever, servable_modes
from mathscout.retrievers.rerank import passage_text
from mathscout.types import Query

MINERS = (
    "bm25",
    "structure",
    "dense-ft",
)  # first stages whose candidates give the hard negatives (those the index has)
WORK = "cross-encoder.work"
WEIGHTS = tuple(round(0.05 * n, 2) for n in range(21))  # the cross-encoder's share in `interpolate`, tuned held out
MIN_TAU = 0.9  # a backend keeps the scores' order when its mean Kendall τ against torch fp32 is at least this …
MIN_TOP10 = 0.9  # … and its top 10 shares at least this share of fp32's, over the held-out topics
RELEVANT = 2  # the lowest grade taken as a positive
BUDGET_MINUTES = 60.0  # the bound issue 34 sets on the whole training
SAFETY = 1.5  # the time left must cover this many times the estimated validation and report


@dataclass(frozen=True)
class Settings:
    """What the training data and schedule depend on (a rerun must give the same, or start afresh)."""

    train_topics: int = 1500
    held_out: int = 60
    negatives: int = 3  # hard negatives per question (+ the positive and 1 in-batch): 5 pairs through the model
    depth: int = CROSS_DEPTH  # hits per first stage mined (and reranked on the held-out topics)
    max_length: int = 128  # word pieces of a (question, passage) pair: what reranking 100 in 1 s allows (see below)
    batch: int = 16  # questions per step
    epochs: int = 1
    lr: float = 1e-4  # Zhong 2023 thesis §5.3.1 fine-tunes at 2·10⁻⁵ over 594,000 triplets; here ~100 steps
    warmup: float = 0.1
    seed: int = SEED

    @classmethod
    def recorded(cls, training: dict[str, Any]) -> Settings:
        """The settings a stored model's training record holds (fields it does not know are left out)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in training.get("settings", {}).items() if k in known})


DEFAULTS = Settings()


@dataclass
class Mined:
    """One topic's first-stage hits: retriever → [(doc, score)], best first."""

    topic: str
    runs: dict[str, list[tuple[str, float]]]

    @property
    def docs(self) -> list[str]:
        return list(dict.fromkeys(doc for hits in self.runs.values() for doc, _ in hits))


# ---- 1. topics ------------------------------------------------------------------------------------------------------


def choose(topics_path: Path, qrels_path: Path, index: IndexDir, settings: Settings) -> tuple[list[str], list[str]]:
    """(training topic ids, held-out topic ids): a seeded sample of the topics whose positive is in the index."""
    qrels = read_qrels(qrels_path)
    topics = [t for t in load_topics(topics_path) if any(g >= RELEVANT for g in qrels.get(t.id, {}).values())]
    rng = random.Random(settings.seed)
    rng.shuffle(topics)
    wanted = settings.train_topics + settings.held_out
    stored = index.store.summaries(d for t in topics[: wanted * 2] for d in qrels[t.id])
    usable = [t.id for t in topics[: wanted * 2] if any(d in stored for d, g in qrels[t.id].items() if g >= RELEVANT)]
    if len(usable) < 2:
        raise MathScoutError(f"only {len(usable)} topic(s) of {topics_path} have a relevant answer in {index.path}")
    held = min(settings.held_out, max(1, len(usable) // 5))
    return usable[held : held + settings.train_topics], usable[:held]


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


def mine(index: IndexDir, topics: list[Query], depth: int, path: Path) -> dict[str, Mined]:
    """Each topic's first-stage hits, appended to `path` topic by topic (a rerun reads them back)."""
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
    miners = servable_modes(index, MINERS)
    retrievers = {name: open_retriever(index, name) for name in miners}
    with open(path, "a", encoding="utf-8") as out:
        for topic in tqdm(
            todo,
            desc=f"hard negatives ({', '.join(miners)}, top {depth})",
            unit="topic",
            file=sys.stderr,
            initial=len(done),
            total=len(topics),
        ):
            runs = {}
            for name, retriever in retrievers.items():
                try:
                    runs[name] = [
                        (h.doc_id, float(h.score)) for h in retriever.batch_search([topic], k=depth)[topic.id]
                    ]
                except MathScoutError:  # a question this retriever cannot search (no words, no formula)
                    runs[name] = []
            done[topic.id] = Mined(topic.id, runs)
            out.write(json.dumps({"topic": topic.id, "runs": runs}) + "\n")
            out.flush()
    return done


def training_rows(
    topics: dict[str, Query],
    mined: dict[str, Mined],
    qrels: dict[str, dict[str, int]],
    index: IndexDir,
    settings: Settings,
) -> list[list[str]]:
    """(question, positive, negative × n) texts per training topic: its best-graded stored answer and n candidates
    that are neither judged for it nor from its own thread."""
    rng = random.Random(settings.seed)
    store = index.store
    threads = {
        doc: s.metadata.get("thread_id")
        for doc, s in store.summaries(
            {d for m in mined.values() for d in m.docs} | {d for t in topics for d in qrels[t]}
        ).items()
    }
    rows = []
    for qid in sorted(topics):
        judged = qrels[qid]
        best = max((g for d, g in judged.items() if d in threads), default=0)
        if best < RELEVANT:
            continue
        positive = rng.choice(sorted(d for d, g in judged.items() if g == best and d in threads))
        pool = [d for d in mined[qid].docs if d not in judged and threads.get(d) != qid]
        if len(pool) < settings.negatives:
            continue
        negatives = rng.sample(pool, settings.negatives)
        texts = {
            d.id: model_input_text(passage_text(d.title, d.text))
            for d in store.get_many([positive, *negatives]).values()
        }
        rows.append([model_input_text(topics[qid].text), texts[positive], *(texts[d] for d in negatives)])
    return rows


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

    def spent(self) -> bool:
        """True when the time left no longer covers (with SAFETY) a validation the schedule may run now, the last one
        and the report (the training validates at its start, so the seconds per pair are measured before any step)."""
        if self.pair_seconds is None:
            return False
        needed = SAFETY * (self.pair_seconds * (2 * self.validation_pairs + self.report_pairs) + self.export_seconds)
        return time.time() + needed > self.ends


EVALUATOR = "held-out"
METRIC = f"eval_{EVALUATOR}_ndcg@10"  # the trainer's name of the evaluator's nDCG@10


def validation_samples(
    topics: dict[str, Query], mined: dict[str, Mined], qrels: dict[str, dict[str, int]], index: IndexDir, depth: int
) -> list[dict]:
    """The held-out topics as the library's reranking evaluator reads them: the first miner's top `depth` passages in
    its order (only the relevant ones it found count: `always_rerank_positives=False`)."""
    samples = []
    for qid in sorted(topics):
        runs = mined[qid].runs
        hits = next((runs[name] for name in MINERS if runs.get(name)), [])[:depth]
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


def train_model(
    rows: list[list[str]],
    samples: list[dict],
    base: Path,
    work: Path,
    settings: Settings,
    deadline: float | None,
    every: int,
    budget: Budget | None = None,
) -> tuple[bool, dict]:
    """Fine-tune from `base` with the library's trainer, validated on `samples` (held-out nDCG@10 of the first stage's
    reranked top hits) every `every` steps and at the start, the best checkpoint kept; (finished, its history: batch
    losses, held-out curve, best step, and `stopped_early` when the budget ended it). Checkpoints go to work/trainer
    and a rerun resumes from the newest; at `deadline` (time.time()) it checkpoints and stops, unfinished."""
    from datasets import Dataset
    from sentence_transformers.cross_encoder import CrossEncoderTrainer, CrossEncoderTrainingArguments, losses
    from sentence_transformers.cross_encoder.evaluation import CrossEncoderRerankingEvaluator
    from transformers import TrainerCallback
    from transformers.trainer_utils import get_last_checkpoint

    columns = ["query", "positive", *(f"negative_{n}" for n in range(1, settings.negatives + 1))]
    dataset = Dataset.from_dict({name: [row[i] for row in rows] for i, name in enumerate(columns)})
    model = load_cross_model(base, settings.max_length, cached=False)  # the trainer changes it in place
    model.train()
    output = work / "trainer"
    last = get_last_checkpoint(str(output)) if output.is_dir() else None
    arguments = CrossEncoderTrainingArguments(
        output_dir=str(output),
        num_train_epochs=settings.epochs,
        per_device_train_batch_size=settings.batch,
        learning_rate=settings.lr,
        warmup_steps=settings.warmup,
        save_strategy="steps",
        save_steps=every,
        eval_strategy="steps",
        eval_steps=every,
        eval_on_start=True,  # the curve's first point, and on a resumed run the budget's seconds per pair
        load_best_model_at_end=True,
        metric_for_best_model=METRIC,
        greater_is_better=True,
        save_total_limit=1,
        logging_steps=max(1, min(10, every)),
        report_to="none",
        seed=settings.seed,
        data_seed=settings.seed,
        dataloader_pin_memory=False,
        use_cpu=True,
        disable_tqdm=False,
    )

    class TimedEvaluator(CrossEncoderRerankingEvaluator):
        def __call__(self, *args, **kwargs):
            started = time.perf_counter()
            metrics = super().__call__(*args, **kwargs)
            if budget is not None:
                budget.validated(time.perf_counter() - started)
            return metrics

    evaluator = TimedEvaluator(samples, always_rerank_positives=False, name=EVALUATOR, batch_size=32, write_csv=False)
    stopped: list[int] = []

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

    loss = losses.MultipleNegativesRankingLoss(model, num_negatives=1)  # Zhong 2023 thesis §5.2.2, Eq. 5.18
    trainer = CrossEncoderTrainer(
        model=model, args=arguments, train_dataset=dataset, loss=loss, evaluator=evaluator, callbacks=[Deadline()]
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
    }
    if state.best_model_checkpoint:
        history["best_step"] = int(Path(state.best_model_checkpoint).name.rpartition("-")[2])
    if stopped and budget is not None:
        history["stopped_early"] = {"step": stopped[0], "of": state.max_steps, "budget_minutes": budget.minutes}
    finished = state.global_step >= state.max_steps or bool(stopped)
    if finished:  # the best checkpoint's weights (load_best_model_at_end)
        model.eval()
        model.save(str(work / MODEL_DIR))
    return finished, history


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
) -> dict:
    """nDCG@10 of each first stage's top `depth` and of it reranked by torch fp32 on every held-out topic; each backend's
    Kendall τ, top-10 agreement with fp32, reranked nDCG@10 and ms per pair on the first `agreement_topics` of them."""
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
            fused = interpolate([scores["torch"][q][d] for d, _ in hits], [s for _, s in hits], weight)
            out[q] = sorted(((d, float(f)) for (d, _), f in zip(hits, fused)), key=lambda x: -x[1])
        return out

    everyone = set(topics)
    grid = {w: {n: mean(interpolated(n, w), everyone) for n in runs} for w in WEIGHTS}
    weight = max(WEIGHTS, key=lambda w: (round(float(np.mean(list(grid[w].values()))), 4), w))
    report: dict = {
        "topics": len(topics),
        "pairs": pairs["torch"],
        "measure": scorer.measure,
        "first_stage": {n: mean({q: mined[q].runs.get(n, []) for q in topics}, everyone) for n in runs},
        "reranked": {n: mean(reranked(n, "torch"), everyone) for n in runs},
        "interpolation": {"weight": weight, "reranked": grid[weight], "grid": {f"{w:.2f}": grid[w] for w in WEIGHTS}},
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
    info = CrossEncoderInfo(
        backend=backend,
        max_length=settings.max_length,
        weight=training["held_out"]["interpolation"]["weight"],
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


def train(args: argparse.Namespace) -> Path | None:
    started = time.time()
    deadline = started + args.max_minutes * 60 if args.max_minutes is not None else None
    require_train_files(args.topics, args.qrels, "training a cross-encoder")
    index = IndexDir(args.index)
    settings = Settings(**{f.name: getattr(args, f.name) for f in fields(Settings) if hasattr(args, f.name)})
    work = index.path / WORK
    source = {"topics": str(args.topics.resolve()), "qrels": str(args.qrels.resolve()), "base": str(args.base)}
    planned = TrainingPlan(work, asdict(settings), source, lambda: choose(args.topics, args.qrels, index, settings))
    plan, spent = planned.data, planned.spent
    spent_before = sum(plan["seconds"].values())  # by earlier runs of a resumed training: the budget covers them
    print(
        f"cross-encoder: {len(plan['train'])} training and {len(plan['held_out'])} held-out topics, "
        f"{settings.negatives} hard negatives each from the top {settings.depth}, pairs cut to {settings.max_length} "
        f"word pieces, batch {settings.batch}, {settings.epochs} epoch(s)",
        file=sys.stderr,
    )
    topics = {t.id: t for t in load_topics(args.topics) if t.id in set(plan["train"]) | set(plan["held_out"])}
    qrels = read_qrels(args.qrels)
    t0 = time.time()
    mined = mine(index, [topics[q] for q in plan["train"] + plan["held_out"]], settings.depth, work / "mined.jsonl")
    spent("mining", t0)
    t0 = time.time()
    finished = (work / MODEL_DIR / "config.json").is_file()
    if not finished:
        rows = training_rows({q: topics[q] for q in plan["train"]}, mined, qrels, index, settings)
        samples = validation_samples({q: topics[q] for q in plan["held_out"]}, mined, qrels, index, settings.depth)
        held_pairs = [len(mined[q].docs) for q in sorted(plan["held_out"])]  # torch scores them all, ONNX a share
        budget = Budget(
            args.budget_minutes,
            ends=started + args.budget_minutes * 60 - spent_before,
            validation_pairs=sum(len(sample["documents"]) for sample in samples),
            report_pairs=sum(held_pairs) + sum(held_pairs[: args.agreement_topics]) * (len(args.backends) - 1),
        )
        plan["rows"] = len(rows)
        print(
            f"{len(rows):,} training questions × (1 positive + {settings.negatives} hard negatives + 1 in-batch); "
            f"{-(-len(rows) // settings.batch) * settings.epochs} steps; held-out nDCG@10 every {args.eval_every} "
            f"steps",
            file=sys.stderr,
        )
        finished, history = train_model(rows, samples, args.base, work, settings, deadline, args.eval_every, budget)
        plan["history"] = history
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
        curve = [score for _, score in history["held_out_curve"]]
        plot_losses(
            history["losses"],
            work / "loss.png",
            f"cross-encoder: {plan['rows']} questions, {settings.epochs} epoch(s), best step {history['best_step']}",
            held_out=curve,
            steps_per_epoch=args.eval_every,
        )
    t0 = time.time()
    report = held_out_report(
        work / MODEL_DIR,
        work,
        {q: topics[q] for q in plan["held_out"]},
        mined,
        args.qrels,
        index,
        settings,
        tuple(args.backends),
        args.agreement_topics,
    )
    spent("held_out", t0)
    used = sorted({n for m in mined.values() for n in m.runs})
    training = {
        "index": str(index.path.resolve()),
        "index_build": index.build_hash(used),  # the build the negatives came from
        "documents": index.manifest.documents,
        "base": str(args.base),
        "topics": str(args.topics),
        "qrels": str(args.qrels),
        "counts": {
            "training_topics": len(plan["train"]),
            "training_questions": plan.get("rows"),
            "held_out_topics": len(plan["held_out"]),
            "mined_from": used,
        },
        "settings": asdict(settings),
        # trained or tuned on: a ranker over its logits leaves them out
        "topic_ids": plan["train"] + plan["held_out"],
        "loss": "MultipleNegativesRankingLoss (Zhong 2023 thesis §5.2.2, Eq. 5.18), 1 in-batch negative",
        **plan.get("history", {}),
        "held_out": report,
        "seconds": plan["seconds"],
        "minutes": planned.minutes,
    }
    stored = store_model(index, work, report["chosen"], settings, training)
    shutil.rmtree(work, ignore_errors=True)
    return stored


def remeasure_backends(args: argparse.Namespace) -> Path:
    """`--measure-backends`: the stored model's held-out report (step 5's backends included) measured again with this
    version's ONNX exports on its own held-out topics, and the backend the rule then chooses stored with it; no
    training. The index must be the build its negatives were mined from."""
    index = IndexDir(args.index)
    info = CrossEncoderInfo.require(index.path)
    training = info.training
    used = training.get("counts", {}).get("mined_from") or []
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
        mined = mine(index, [topics[q] for q in held if q in topics], settings.depth, work / "mined.jsonl")
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
    parser.add_argument("--base", type=Path, default=None, help="the weights to start from (default all-MiniLM-L6-v2)")
    parser.add_argument("--train-topics", type=int, default=DEFAULTS.train_topics, help="questions trained on")
    parser.add_argument(
        "--held-out", type=int, default=DEFAULTS.held_out, help="train questions held out for the validation scores"
    )
    parser.add_argument("--negatives", type=int, default=DEFAULTS.negatives, help="hard negatives per question")
    parser.add_argument("--depth", type=int, default=DEFAULTS.depth, help="hits per first stage mined")
    parser.add_argument("--max-length", type=int, default=DEFAULTS.max_length, help="word pieces per pair")
    parser.add_argument("--batch", type=int, default=DEFAULTS.batch, help="questions per step")
    parser.add_argument("--epochs", type=int, default=DEFAULTS.epochs)
    parser.add_argument("--lr", type=float, default=DEFAULTS.lr)
    parser.add_argument("--seed", type=int, default=DEFAULTS.seed)
    parser.add_argument(
        "--eval-every",
        type=int,
        default=25,
        help="steps between held-out validations (each one a checkpoint; the best one is kept)",
    )
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
        "topics and store the one the rule chooses",
    )
    args = parser.parse_args(argv)
    args.backends = list(dict.fromkeys(["torch", *(b.strip() for b in args.backends.split(",") if b.strip())]))
    unknown = [b for b in args.backends if b not in BACKENDS]
    if unknown:
        raise MathScoutError(f"unknown backend(s) {', '.join(unknown)} (available: {', '.join(BACKENDS)})")
    for name in ("train_topics", "negatives", "depth", "batch", "epochs", "eval_every"):
        if getattr(args, name) < 1:
            raise MathScoutError(f"--{name.replace('_', '-')} must be at least 1")
    if not 16 <= args.max_length <= 512:
        raise MathScoutError("--max-length must be from 16 to 512 word pieces")
    args.base = args.base or default_model_path()
    started = time.perf_counter()
    stored = remeasure_backends(args) if args.measure_backends else train(args)
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
        print(f"  interpolation weight of the cross-encoder (tuned on the held-out topics): {info.weight:.2f}")
        for backend, figures in report["backends"].items():
            print(
                f"  {backend}: Kendall tau {figures['kendall_tau']:.3f}, top-10 agreement {figures['top10']:.2f}, "
                f"{figures['ms_per_pair']:.1f} ms/pair ({report['agreement_topics']} topics)"
            )
