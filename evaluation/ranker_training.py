"""`mathscout train ranker`: LambdaMART (LightGBM lambdarank) over the first-stage candidates, stored with the index.

    mathscout train ranker --index DIR [--topics T --qrels Q]… [--sample 2000] [--folds 5] [--cache FILE]…
                           [--cross-depth N] [--judged-only] [--prime] [--save FOLDER]
    mathscout train ranker runs --index DIR [--ranker FOLDER] --topics T --qrels Q [--cache FILE]
                                --out-dir OUT --set NAME       the ranked run and each retriever's run, scored
                                (what `mathscout run --mode ranked --k 1000` gives, from cached candidates;
                                each retriever to 1,000 hits, structure search to the ranker's depth)

Training reads train topics only (dev is refused): by default a seeded sample of 2,000 of the shared train
topics. `--topics/--qrels` may be repeated (e.g. ARQMath 2020 and the train topics). Each topic's candidates
are the union of the index's retrievers' top 100 (`retrievers/candidates.py`); a candidate's label is its
grade in the qrels (unjudged: 0, or, for ARQMath topic sets with `--judged-only`, left out, as the prime
measures ignore unjudged answers; `--prime` scores those sets' folds with nDCG′). When the index has a trained
cross-encoder, its logits of each topic's top `--cross-depth` (30) candidates are features too (`cross.*`). k-fold cross-validation over topics gives the held-out score of the ranker next to each
retriever alone on the same topics; the stored model is then fitted on all topics. `ranker.json` records the
topics, folds, parameters, scores and feature importances; `ranker-importance.png` plots the importances.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mathscout.config import SHARED_COLLECTION
from mathscout.dense.cross import has_cross_encoder
from mathscout.errors import MathScoutError
from mathscout.evaluation.candidate_cache import cached_candidates, choose_topics
from mathscout.evaluation.measures import compare_runs, evaluate_run
from mathscout.evaluation.topics import require_train_topics
from mathscout.evaluation.tuning import Scorer
from mathscout.index.layout import IndexDir
from mathscout.retrievers.candidates import CROSS_DEPTH, DEPTH, RETRIEVERS, CandidateGenerator, Candidates
from mathscout.retrievers.features import CATEGORICAL, Vocabulary, feature_matrix, feature_names
from mathscout.retrievers.ranked import (
    Ranker,
    RankerConfig,
    lightgbm_module,
    ranked_hits,
    save_model,
    tail_retriever,
    with_tail,
)
from mathscout.retrievers.registry import open_retriever, servable_modes
from mathscout.types import Hit

FOLDS = 5
SEED = 0
SAMPLE = 2000
ROUNDS = 300
PARAMS = {  # LightGBM lambdarank; one thread (the machine is shared), deterministic
    "objective": "lambdarank",
    "metric": "ndcg",
    "eval_at": [10],
    "learning_rate": 0.05,
    "num_leaves": 31,
    "min_data_in_leaf": 50,
    "feature_fraction": 0.8,
    "bagging_fraction": 0.8,
    "bagging_freq": 1,
    "lambdarank_truncation_level": 20,
    "num_threads": 1,
    "verbose": -1,
    "seed": SEED,
    "deterministic": True,
    "force_row_wise": True,
}
IMPORTANCE_PLOT = "ranker-importance.png"
K = 1000  # hits per topic in the written runs


@dataclass
class TopicRows:
    """One training topic: its candidates' feature rows and labels."""

    topic: str
    docs: list[str]
    features: np.ndarray
    labels: np.ndarray
    candidates: Candidates


def topic_rows(
    candidates: list[Candidates],
    qrels: dict[str, dict[str, int]],
    summaries,
    vocabulary: Vocabulary,
    retrievers: list[str],
    judged_only: set[str],
    cross: bool = False,
) -> list[TopicRows]:
    """Feature rows and grade labels per topic (unjudged candidates: label 0, or left out for `judged_only` topics)."""
    rows = []
    for found in candidates:
        docs, matrix = feature_matrix(found, summaries, vocabulary, retrievers, cross)
        judged = qrels.get(found.query.id, {})
        labels = np.array([max(judged.get(d, 0), 0) for d in docs], dtype=np.float64)
        if found.query.id in judged_only:
            keep = np.array([d in judged for d in docs], dtype=bool)
            docs, matrix, labels = [d for d, k in zip(docs, keep) if k], matrix[keep], labels[keep]
        if docs:
            rows.append(TopicRows(found.query.id, docs, matrix, labels, found))
    return rows


def fit(rows: list[TopicRows], names: list[str], rounds: int = ROUNDS):
    """A lambdarank model over these topics."""
    lightgbm = lightgbm_module()
    data = lightgbm.Dataset(
        np.vstack([r.features for r in rows]),
        np.concatenate([r.labels for r in rows]),
        group=[len(r.docs) for r in rows],
        feature_name=[n.replace(".", "__") for n in names],
        categorical_feature=[names.index(c) for c in CATEGORICAL],
        free_raw_data=True,
    )
    return lightgbm.train(PARAMS, data, num_boost_round=rounds)


def _folds(topics: list[str], folds: int, seed: int) -> list[list[str]]:
    order = list(topics)
    random.Random(seed).shuffle(order)
    return [order[n::folds] for n in range(folds)]


def _mean(values) -> float:
    values = list(values)
    return float(np.mean(values)) if values else float("nan")


def importance_plot(names: list[str], gains: np.ndarray, path: Path, title: str) -> Path:
    """Horizontal bars of the features' total split gain, largest on top (the 25 largest)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    order = [i for i in np.argsort(gains)[::-1] if gains[i] > 0][:25][::-1]
    figure, axes = plt.subplots(figsize=(7, 0.28 * len(order) + 1.2))
    axes.barh([names[i] for i in order], gains[order] / gains.sum() * 100, color="#4063a0")
    axes.set_xlabel("share of total split gain (%)")
    axes.set_title(title, fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def fitted_by_models(index: IndexDir, used: list[str], cross_depth: int) -> dict[str, set[str]]:
    """The topics each trained model the ranker reads was trained or tuned on (the cross-encoder when its logits are
    features, colbert's query side when colbert is a retriever): their scores there are fitted, not what a new question
    gets, so the ranker learns from the other topics (dense-ft records none: its held-out questions are its only unseen
    ones)."""
    from mathscout.evaluation.training import colbert, cross_encoder

    fitted = {"cross-encoder": cross_encoder.fitted_topics(index) if cross_depth else set()}
    fitted["colbert"] = colbert.fitted_topics(index) if "colbert" in used else set()
    return fitted


def train(args: argparse.Namespace) -> None:
    if len(args.topics) != len(args.qrels):
        raise MathScoutError("give one --qrels per --topics")
    require_train_topics(*args.topics, *args.qrels, what="training a ranker")
    if args.folds < 2:
        raise MathScoutError("--folds must be at least 2")
    caches = args.cache or []
    if len(caches) not in (0, len(args.topics)):
        raise MathScoutError("give one --cache per --topics (or none)")
    index = IndexDir(args.index)
    started = time.perf_counter()
    retrievers = list(RETRIEVERS)
    used = servable_modes(index, RETRIEVERS)
    if not used:
        raise MathScoutError(
            f"the index {index.path} has none of the retrievers a ranker uses ({', '.join(RETRIEVERS)})"
        )
    cross_depth = (
        (CROSS_DEPTH if has_cross_encoder(index.path) else 0) if args.cross_depth is None else args.cross_depth
    )
    if cross_depth and not has_cross_encoder(index.path):
        raise MathScoutError(
            f"--cross-depth {cross_depth}: the index {index.path} has no cross-encoder: run "
            f"'mathscout train cross-encoder --index {index.path}' first, or give --cross-depth 0"
        )
    candidates: list[Candidates] = []
    qrels: dict[str, dict[str, int]] = {}
    scorers: dict[str, Scorer] = {}
    sets: list[dict[str, Any]] = []
    judged_only: set[str] = set()
    fitted = fitted_by_models(index, used, cross_depth)
    seen = frozenset(set().union(*fitted.values()))
    for n, (topics_path, qrels_path) in enumerate(zip(args.topics, args.qrels)):
        topics = choose_topics(topics_path, qrels_path, args.sample, args.seed, seen)
        if not topics:
            fitters = " and ".join(name for name, ids in fitted.items() if ids)
            why = (
                f"the {fitters} of {index.path} was trained or tuned on every judged one (its scores there are fitted, "
                "not what a new question gets); give other --topics, or --cross-depth 0 to leave the cross-encoder's "
                "features out"
                if fitters
                else f"{qrels_path} judges none of them"
            )
            raise MathScoutError(f"no topic of {topics_path} is left to train the ranker on: {why}")
        found = cached_candidates(index, topics, caches[n] if caches else None, args.depth, cross_depth=cross_depth)
        scorer = Scorer(qrels_path)
        arqmath = scorer.spec.name == "arqmath"  # --prime and --judged-only concern ARQMath judgements only
        if arqmath and args.prime:
            scorer = Scorer(qrels_path, prime=True)
        if arqmath and args.judged_only:
            judged_only.update(t.id for t in topics)
        candidates += found
        qrels.update(scorer.qrels)
        scorers.update({t.id: scorer for t in topics})
        sets.append(
            {
                "topics": str(topics_path),
                "qrels": str(qrels_path),
                "count": len(topics),
                "measure": scorer.measure,
                "ids": [t.id for t in topics],
            }
        )
    print(
        f"candidates of {len(candidates)} topics ({', '.join(used)}; depth {args.depth}"
        + (f"; cross-encoder over the top {cross_depth}" if cross_depth else "")
        + "".join(f"; {len(ids):,} topics {name} was fitted on left out" for name, ids in fitted.items() if ids)
        + "): "
        f"{time.perf_counter() - started:.0f} s",
        flush=True,
    )
    store = index.store
    summaries = store.summaries(d for c in candidates for d in c.docs)
    vocabulary = Vocabulary.learn(summaries.values())
    names = feature_names(retrievers, cross_depth > 0)
    rows = topic_rows(candidates, qrels, summaries, vocabulary, retrievers, judged_only, cross_depth > 0)
    scored = [r for r in rows if r.topic in scorers[r.topic].topics]  # the topics `mathscout eval` averages over
    print(
        f"{sum(len(r.docs) for r in rows):,} candidate rows × {len(names)} features, {len(rows)} topics "
        f"({len(scored)} scored as `mathscout eval` scores them)",
        flush=True,
    )

    def per_topic(results: dict[str, list[tuple[str, float]]]) -> dict[str, float]:
        scores: dict[str, float] = {}
        for scorer in {id(s): s for s in scorers.values()}.values():
            mine = {q: hits for q, hits in results.items() if scorers[q] is scorer}
            scores.update({q: v for q, v in scorer.per_topic(mine).items() if q in mine})
        return scores

    by_topic = {r.topic: r for r in scored}
    folds = _folds(list(by_topic), args.folds, args.seed)
    held_out: dict[str, list[tuple[str, float]]] = {}
    fold_report = []
    for number, test in enumerate(folds, start=1):
        chosen = set(test)
        model = fit([r for r in rows if r.topic not in chosen], names, args.rounds)
        for topic in test:
            r = by_topic[topic]
            hits = ranked_hits(r.candidates, r.docs, model.predict(r.features, num_threads=1), len(r.docs))
            held_out[topic] = [(h.doc_id, h.score) for h in hits]
        score = _mean(per_topic({t: held_out[t] for t in test}).values())
        fold_report.append({"fold": number, "topics": len(test), "test": round(score, 4)})
        print(f"fold {number}: {len(test)} held-out topics, {score:.4f}", flush=True)
    ranker_scores = per_topic(held_out)
    component_scores = {
        name: per_topic({t: [(h.doc_id, h.score) for h in by_topic[t].candidates.runs.get(name, [])] for t in by_topic})
        for name in used
    }
    set_of = {t: n for n, s in enumerate(sets) for t in s.pop("ids")}
    by_set = lambda scores, n: _mean(v for t, v in scores.items() if set_of[t] == n)  # noqa: E731
    print(f"\n{args.folds}-fold CV over {len(by_topic)} topics (held-out mean of each set's first measure):")
    print(f"  {'':<12} " + " ".join(f"{Path(s['topics']).name[:28]:>28}" for s in sets) + f" {'all':>8}")
    for name, scores in {"ranker": ranker_scores, **component_scores}.items():
        print(
            f"  {name:<12} "
            + " ".join(f"{by_set(scores, n):28.4f}" for n in range(len(sets)))
            + f" {_mean(scores.values()):8.4f}"
        )
    for n, s in enumerate(sets):
        s["cv"] = {
            name: round(by_set(scores, n), 4) for name, scores in {"ranker": ranker_scores, **component_scores}.items()
        }

    model = fit(rows, names, args.rounds)
    gains = model.feature_importance("gain")
    importances = {n: round(float(g), 2) for n, g in sorted(zip(names, gains), key=lambda x: -x[1]) if g > 0}
    folder = Path(args.save) if args.save else index.path
    config = RankerConfig(
        retrievers=retrievers,
        used=used,
        depth=args.depth,
        features=names,
        vocabulary={"kinds": vocabulary.kinds, "sources": vocabulary.sources},
        cross_depth=cross_depth,
        training={
            "sets": sets,
            "topics": len(rows),
            "scored_topics": len(by_topic),
            "sample": args.sample,
            "seed": args.seed,
            "judged_only": args.judged_only,
            "left_out": {name: len(ids) for name, ids in fitted.items()},  # the trained models' own topics
            "prime": args.prime,
            "rows": int(sum(len(r.docs) for r in rows)),
            "params": PARAMS,
            "rounds": args.rounds,
            "folds": fold_report,
            "cv": {
                "ranker": round(_mean(ranker_scores.values()), 4),
                **{name: round(_mean(s.values()), 4) for name, s in component_scores.items()},
            },
            "importances_gain": importances,
            "seconds": round(time.perf_counter() - started, 1),
        },
    )
    saved = save_model(model, config, folder)
    plot = importance_plot(
        names, gains, folder / IMPORTANCE_PLOT, f"LambdaMART feature importance ({len(rows)} topics, {', '.join(used)})"
    )
    print(f"stored {saved} and {folder / config.model['file']}; importances plotted in {plot}", file=sys.stderr)


def write_runs(args: argparse.Namespace) -> None:
    """The ranked run and every retriever's run for a topic set (from cached candidates), then their scores."""
    from mathscout.evaluation.families import family_scores, format_families
    from mathscout.evaluation.report import format_comparison
    from mathscout.evaluation.runs import write_run

    index = IndexDir(args.index)
    ranker = Ranker.load(RankerConfig.folder(index, args.ranker))
    topics = choose_topics(args.topics, args.qrels)
    # the retrievers are opened once: the candidate generator's serve the deep runs too
    config = ranker.config
    generator = CandidateGenerator(index, tuple(config.retrievers), config.depth, config.cross_depth)
    found = cached_candidates(
        index,
        topics,
        args.cache,
        config.depth,
        tuple(config.retrievers),
        generator=generator,
        cross_depth=config.cross_depth,
    )
    args.out_dir.mkdir(parents=True, exist_ok=True)
    runs: dict[str, dict[str, list[Hit]]] = {"ranked": {}, **{name: {} for name in ranker.config.used}}
    tail = tail_retriever(ranker.config)
    # each retriever's own top 1,000 (structure search, the slowest, stays at the ranker's depth); the tail's is
    # also the ranked run's tail
    deep = {
        name: (generator.retrievers.get(name) or open_retriever(index, name)).batch_search(topics, K)
        for name in ranker.config.used
        if name != "structure"
    }
    kinds = {}
    for candidates in found:
        qid = candidates.query.id
        kinds[qid] = candidates.stats.kind
        hits = ranker.rank_candidates(candidates, index.store, K)
        full = len(candidates.runs.get(tail, [])) >= ranker.config.depth
        runs["ranked"][qid] = with_tail(hits, deep[tail][qid], K, tail) if tail in deep and full else hits
        for name in ranker.config.used:
            runs[name][qid] = deep[name][qid] if name in deep else candidates.runs.get(name, [])
    paths = []
    for name, run in runs.items():
        path = args.out_dir / f"{args.name}{name}.{args.set}.trec"
        write_run({q: hits for q, hits in run.items() if hits}, path, tag=f"mathscout-{name}")
        paths.append(path)
    print("\n".join(f"wrote {p}" for p in paths))
    first = {p: next(iter(evaluate_run(p, args.qrels, args.prime).summary.values())) for p in paths[1:]}
    order = sorted(paths[1:], key=lambda p: -first[p])  # the best single retriever on these topics first
    comparison = compare_runs([order[0], paths[0], *order[1:]], args.qrels, args.prime)
    print(format_comparison(comparison))
    results = comparison.results[:2]  # the best single retriever and the ranked run, already scored
    print(format_families(results, family_scores(results, lambda t: f"kind: {kinds.get(t, '?')}")))


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "runs":
        parser = argparse.ArgumentParser(prog="mathscout train ranker runs", description=write_runs.__doc__)
        parser.add_argument("--index", type=Path, required=True)
        parser.add_argument("--ranker", type=Path, help="the model folder (default: the index)")
        parser.add_argument("--topics", type=Path, required=True)
        parser.add_argument("--qrels", type=Path, required=True)
        parser.add_argument("--cache", type=Path, help="candidate cache file (created when missing)")
        parser.add_argument("--prime", action="store_true")
        parser.add_argument("--out-dir", type=Path, required=True)
        parser.add_argument("--name", default="", help="file name prefix of the runs")
        parser.add_argument("--set", default="topics", help="topic set name in the file names")
        write_runs(parser.parse_args(argv[1:]))
        return
    parser = argparse.ArgumentParser(prog="mathscout train ranker", description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument(
        "--topics", type=Path, action="append", help="train topics (repeatable; default: the shared train topics)"
    )
    parser.add_argument("--qrels", type=Path, action="append", help="their qrels (one per --topics)")
    parser.add_argument("--cache", type=Path, action="append", help="candidate cache file per --topics (reused)")
    parser.add_argument("--sample", type=int, default=SAMPLE, help="seeded sample of each topic set (0: all)")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--folds", type=int, default=FOLDS)
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="boosting rounds")
    parser.add_argument("--depth", type=int, default=DEPTH, help="hits taken from each retriever")
    parser.add_argument(
        "--cross-depth",
        type=int,
        default=None,
        help=f"top candidates the index's cross-encoder reads for the cross.* features (default {CROSS_DEPTH} when the "
        "index has one, else 0; 0: none)",
    )
    parser.add_argument(
        "--judged-only",
        action="store_true",
        help="ARQMath topic sets: train on judged candidates only (the prime measures ignore the rest)",
    )
    parser.add_argument("--prime", action="store_true", help="score ARQMath topic sets' folds with the prime measures")
    parser.add_argument("--save", type=Path, help="store the model in this folder instead of the index")
    args = parser.parse_args(argv)
    args.topics = args.topics or [SHARED_COLLECTION / "topics.train.jsonl"]
    args.qrels = args.qrels or [SHARED_COLLECTION / "qrels.train.txt"]
    train(args)


if __name__ == "__main__":
    main()
