"""Fusion weights by k-fold cross-validation over topics, and `mathscout train fusion`.

Zhong 2023 thesis §5.3: hybrid scores use "linear interpolation parameters tuned on 5-fold cross validations"; the
weights form a grid on the simplex, step 0.05 for two runs and 0.25 for three (Zhong 2023 thesis, Table 5.6). Each fold's
weights are chosen on the other folds and scored on it; the CV score is the mean over the held-out
topics. The weights stored with an index are tuned on all topics of the tuning set.

    mathscout train fusion --runs structure=S.trec dense=D.trec [bm25=B.trec] --qrels Q [--prime] [--topics run]
                           [--index DIR | --save FILE]  store the final weights in DIR/fusion.json or FILE
                           [--apply DIR/fusion.json] also score fixed, already tuned weights on these topics
                           [--write-runs OUT --name N --set S]  the fused runs as files
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.stats import ttest_rel

from mathscout.errors import MathScoutError
from mathscout.evaluation.measures import (
    MeasureSet,
    choose_measure_set,
    evaluate_loaded,
    read_qrels,
    scored_topics,
    topic_order,
)
from mathscout.evaluation.runs import Run, RunEntry, read_run, write_run
from mathscout.evaluation.scope import TopicScope, add_topics_argument, coverage_warning, topic_scope
from mathscout.index.layout import IndexDir
from mathscout.notices import warning as warn
from mathscout.retrievers.fusion import DEPTH, METHODS, FusionConfig, Ranking, TopicMatrix, describe_weights, method
from mathscout.types import Hit

FOLDS = 5
SEED = 0
Runs = dict[str, dict[str, Ranking]]  # run name → topic → ranking


def default_step(runs: int) -> float:
    """Zhong 2023 thesis, Table 5.6's grids: 0.05 for two runs, 0.25 for three or more."""
    return 0.05 if runs <= 2 else 0.25


def weight_grid(runs: int, step: float) -> np.ndarray:
    """Every weight vector on the simplex with the given step: (points, runs), rows sum to 1."""
    if runs < 1:
        raise MathScoutError("fusion needs at least one run")
    units = round(1 / step)
    if units < 1 or abs(units * step - 1) > 1e-9:
        raise MathScoutError(f"the grid step {step} must divide 1 (e.g. 0.05, 0.1, 0.25)")

    def compositions(total: int, parts: int):
        if parts == 1:
            yield (total,)
            return
        for first in range(total, -1, -1):
            for rest in compositions(total - first, parts - 1):
                yield (first, *rest)

    return np.array(list(compositions(units, runs)), dtype=np.float64) / units


class Scorer:
    """Per-topic scores with the first measure `mathscout eval` reports for these qrels (nDCG@10 on the
    collection's qrels, nDCG′ on ARQMath with --prime), computed by the same code, over the judged topics of
    `scope` (`--topics`; default every judged topic)."""

    def __init__(
        self,
        qrels_path: Path | str,
        prime: bool = False,
        measure_set: str | None = None,
        scope: TopicScope | None = None,
    ):
        self.qrels_path = str(qrels_path)
        self.qrels = read_qrels(qrels_path)
        self.prime = prime
        self.spec: MeasureSet = choose_measure_set(self.qrels, prime, measure_set)
        self.measure = self.spec.measures[0].label(prime)
        self.scope = scope or TopicScope()
        self.topics = sorted(  # the topics `mathscout eval --topics` averages
            (q for q in scored_topics(self.qrels, self.spec) if self.scope.ids is None or q in self.scope.ids),
            key=topic_order,
        )
        if not self.topics:
            raise MathScoutError(f"none of {self.scope.name} is judged in the qrels {self.qrels_path}")

    def per_topic(self, results: Mapping[str, Sequence[tuple[str, float]]]) -> dict[str, float]:
        """Score ranked (doc, score) lists per topic; judged topics without results count 0."""
        run = Run(
            topics={
                qid: [RunEntry(doc, rank, score) for rank, (doc, score) in enumerate(hits, start=1)]
                for qid, hits in results.items()
                if hits
            }
        )
        if not run.topics:
            return dict.fromkeys(self.topics, 0.0)
        result = evaluate_loaded("fusion", run, self.qrels, self.qrels_path, self.prime, self.spec, scope=self.scope)
        return {qid: result.per_topic[qid][self.measure] for qid in self.topics}

    def run_scores(self, run: Mapping[str, Ranking]) -> dict[str, float]:
        return self.per_topic({qid: sorted(r.items(), key=lambda kv: -kv[1]) for qid, r in run.items()})


@dataclass
class Fold:
    number: int
    topics: list[str]
    weights: dict[str, float]
    train_score: float
    test_score: float


@dataclass
class CrossValidation:
    """What tuning found: per-fold weights and scores, held-out per-topic scores, and the final weights."""

    names: list[str]
    method: str
    measure: str
    step: float
    grid_points: int
    folds: list[Fold]
    per_topic: dict[str, float]  # held-out score of every topic
    fused: dict[str, list[tuple[str, float]]]  # held-out fused ranking of every topic
    final_weights: dict[str, float]  # tuned on all topics
    final_score: float  # their (optimistic, in-sample) score
    ceiling_score: float  # each topic at its own best grid point: no grid weights, even per query, do better

    @property
    def score(self) -> float:
        return float(np.mean(list(self.per_topic.values())))


class GridSearch:
    """Scores of every grid point on every topic, computed once (rankings fused for the whole grid at once)."""

    def __init__(
        self, runs: Runs, scorer: Scorer, fusion: str = "linear", grid: np.ndarray | None = None, depth: int = DEPTH
    ):
        self.names = list(runs)
        self.fusion = method(fusion)
        self.grid = grid if grid is not None else weight_grid(len(self.names), default_step(len(self.names)))
        self.scorer = scorer
        topics = list(dict.fromkeys([*scorer.topics, *(q for run in runs.values() for q in run)]))
        self.matrices = {
            qid: TopicMatrix.build([runs[n].get(qid, {}) for n in self.names], self.fusion, depth) for qid in topics
        }
        self.scores = np.zeros((len(self.grid), len(scorer.topics)))  # (points, judged topics)
        for point in range(len(self.grid)):
            per_topic = scorer.per_topic({qid: self.ranking(qid, point) for qid in self.matrices})
            self.scores[point] = [per_topic[qid] for qid in scorer.topics]

    def ranking(self, qid: str, point: int, k: int = DEPTH) -> list[tuple[str, float]]:
        return self.matrices[qid].ranking(self.grid[point], self.fusion, k)

    def weights(self, point: int) -> dict[str, float]:
        return {name: float(w) for name, w in zip(self.names, self.grid[point])}

    def ceiling(self) -> float:
        """The mean over topics of each topic's best grid point: what weights chosen per query could reach."""
        return float(self.scores.max(axis=0).mean())

    def best(self, topic_positions: np.ndarray) -> int:
        """The grid point with the highest mean over these topics (the first one on ties)."""
        return int(np.argmax(self.scores[:, topic_positions].mean(axis=1)))


def cross_validate(grid: GridSearch, folds: int = FOLDS, seed: int = SEED) -> CrossValidation:
    """k-fold CV over the judged topics: each fold's weights are tuned on the other folds."""
    topics = grid.scorer.topics
    if len(topics) < folds:
        raise MathScoutError(f"{len(topics)} judged topics cannot be split into {folds} folds")
    order = list(range(len(topics)))
    random.Random(seed).shuffle(order)
    assignment = np.zeros(len(topics), dtype=np.int64)
    for n, shuffled in enumerate(order):
        assignment[shuffled] = n % folds
    per_topic: dict[str, float] = {}
    fused: dict[str, list[tuple[str, float]]] = {}
    report: list[Fold] = []
    for number in range(folds):
        test = np.flatnonzero(assignment == number)
        train = np.flatnonzero(assignment != number)
        point = grid.best(train)
        for position in test:
            qid = topics[position]
            per_topic[qid] = float(grid.scores[point, position])
            fused[qid] = grid.ranking(qid, point)
        report.append(
            Fold(
                number + 1,
                [topics[p] for p in test],
                grid.weights(point),
                float(grid.scores[point, train].mean()),
                float(grid.scores[point, test].mean()),
            )
        )
    final = grid.best(np.arange(len(topics)))
    step = float(grid.grid[grid.grid > 0].min()) if len(grid.grid) > 1 else 1.0
    return CrossValidation(
        grid.names,
        grid.fusion.name,
        grid.scorer.measure,
        step,
        len(grid.grid),
        report,
        per_topic,
        fused,
        grid.weights(final),
        float(grid.scores[final].mean()),
        grid.ceiling(),
    )


def load_runs(specs: Sequence[str]) -> Runs:
    """`name=path` pairs → runs; the name is the retriever (search mode) the run comes from."""
    runs: Runs = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise MathScoutError(f"--runs takes NAME=PATH pairs (e.g. dense=runs/dense.dev.trec), got {spec!r}")
        if name in runs:
            raise MathScoutError(f"the run name '{name}' is given twice")
        runs[name] = read_run(path).scores()
    return runs


def topic_type(topic_id: str) -> str:
    """A topic's type as its id gives it: the source prefix (`mse`, `mo`, `math`, …), or `all` for ARQMath ids."""
    head, sep, _ = topic_id.partition(":")
    return head if sep else "all"


@dataclass
class Row:
    system: str
    per_topic: dict[str, float]


def _table(rows: list[Row], topics: list[str], measure: str, baseline: Row | None) -> list[str]:
    types = sorted({topic_type(q) for q in topics})
    by_type = {t: [q for q in topics if topic_type(q) == t] for t in types}
    header = f"{'system':<34} {measure:>8}" + "".join(
        f" {f'{t} ({len(by_type[t])})':>12}" for t in types if len(types) > 1
    )
    lines = [header + ("   p vs " + baseline.system if baseline else "")]
    for row in rows:
        line = f"{row.system:<34} {np.mean([row.per_topic[q] for q in topics]):8.3f}"
        if len(types) > 1:
            line += "".join(f" {np.mean([row.per_topic[q] for q in by_type[t]]):12.3f}" for t in types)
        if baseline is not None and row is not baseline:
            diff = [row.per_topic[q] - baseline.per_topic[q] for q in topics]
            p = (
                1.0
                if not any(diff)
                else float(
                    ttest_rel([row.per_topic[q] for q in topics], [baseline.per_topic[q] for q in topics]).pvalue
                )
            )
            line += f"   p = {p:.3g}"
        lines.append(line)
    return lines


def _headroom(best_run: str, best_score: float, cv: CrossValidation) -> str:
    """The fusion's gain over its best run: held out, fitted on these topics, and with weights chosen per topic."""

    def gain(score: float) -> str:
        return f"{100 * (score / best_score - 1):+.1f} %" if best_score > 0 else "n/a"

    return (
        f"gain over the best run ({best_run}, {best_score:.3f}): CV {gain(cv.score)}; weights fitted on these "
        f"topics {gain(cv.final_score)}; each topic at its own best weights {gain(cv.ceiling_score)} "
        f"({cv.ceiling_score:.3f}, the ceiling of this grid)"
    )


def _check_servable(index: IndexDir, names: list[str], components: bool = True) -> None:
    """The hybrid mode of `index` must be able to open every weighted run's retriever (runs are named by mode): each
    name a search mode other than the fusion itself, and (with `components`) its components in the index."""
    from mathscout.retrievers.registry import available_modes

    modes = available_modes()
    for name in names:
        if name in ("hybrid", "auto"):  # the fused mode itself (and the planner above it) cannot be a part of it
            raise MathScoutError(
                f"the run name '{name}' names the fusion itself: weight the runs of the modes it fuses "
                "(structure=…, dense=…, bm25=…)"
            )
        if name not in modes:
            raise MathScoutError(
                f"the run name '{name}' is not a search mode ({', '.join(sorted(modes))}): name each "
                f"run after the mode that produced it, so that --mode hybrid can run it"
            )
        for component in modes[name].requires if components else ():
            index.component_path(component)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="mathscout train fusion", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runs",
        nargs="+",
        required=True,
        metavar="NAME=PATH",
        help="one run file per retriever, named by its search mode (e.g. structure=… dense=…)",
    )
    parser.add_argument("--qrels", required=True, type=Path)
    add_topics_argument(parser)
    parser.add_argument("--prime", action="store_true", help="ARQMath prime measures (tune on nDCG′)")
    parser.add_argument("--measures", choices=["arqmath", "collection"], default=None)
    parser.add_argument("--method", default="linear", choices=list(METHODS), help="the tuned fusion (default linear)")
    parser.add_argument("--folds", type=int, default=FOLDS)
    parser.add_argument("--step", type=float, help="grid step (default 0.05 for two runs, 0.25 for three or more)")
    parser.add_argument("--depth", type=int, default=DEPTH, help="hits taken from each run")
    parser.add_argument("--seed", type=int, default=SEED, help="shuffles topics into folds")
    parser.add_argument("--index", type=Path, help="store the final weights in this index (fusion.json)")
    parser.add_argument("--save", type=Path, metavar="FUSION_JSON", help="store the final weights in this file")
    parser.add_argument(
        "--apply",
        type=Path,
        nargs="*",
        default=[],
        metavar="FUSION_JSON",
        help="also score these already tuned weights (no tuning on these topics)",
    )
    parser.add_argument("--write-runs", type=Path, metavar="DIR", help="write the fused runs here")
    parser.add_argument("--name", default="fusion", help="file name prefix of the written runs")
    parser.add_argument("--set", default="topics", help="topic set name in the written runs' file names")
    args = parser.parse_args(argv)
    if args.folds < 2:
        raise MathScoutError("--folds must be at least 2")
    index = IndexDir(args.index) if args.index else None  # a missing or damaged index is said before any tuning

    started = time.perf_counter()
    runs = load_runs(args.runs)
    if index is not None:
        _check_servable(index, list(runs), components=False)  # the names now; the weighted runs' components below
    scorer = Scorer(
        args.qrels, args.prime, args.measures, topic_scope(args.topics, (q for r in runs.values() for q in r))
    )
    answered = {q for run in runs.values() for q in run}
    unanswered = sum(1 for q in scorer.topics if q not in answered)
    if warning := coverage_warning(len(scorer.topics), unanswered, "every run", "--topics run"):
        warn(f"{warning}; the folds hold mostly such topics")
    step = args.step or default_step(len(runs))
    grid = GridSearch(runs, scorer, args.method, weight_grid(len(runs), step), args.depth)
    cv = cross_validate(grid, args.folds, args.seed)
    print(
        f"{args.method} fusion of {', '.join(runs)} on {len(scorer.topics)} judged topics of {args.qrels}: "
        f"{cv.measure}, {args.folds}-fold CV over topics, grid step {step:g} ({cv.grid_points} points), "
        f"{time.perf_counter() - started:.1f} s"
    )
    print(f"{'fold':<5} {'topics':>6}  {'weights':<52} {'train':>7} {'test':>7}")
    for fold in cv.folds:
        print(
            f"{fold.number:<5} {len(fold.topics):>6}  {describe_weights(fold.weights):<52} "
            f"{fold.train_score:7.3f} {fold.test_score:7.3f}"
        )
    print(
        f"CV {cv.measure} {cv.score:.3f}; weights tuned on all topics: {describe_weights(cv.final_weights)} "
        f"({cv.final_score:.3f} in-sample)"
    )

    rows = [Row(name, scorer.run_scores(run)) for name, run in runs.items()]
    best_single = max(rows, key=lambda r: np.mean(list(r.per_topic.values())))
    best_score = float(np.mean(list(best_single.per_topic.values())))
    print(_headroom(best_single.system, best_score, cv))
    fused_runs: list[tuple[str, str, dict[str, list[tuple[str, float]]]]] = [  # (label, file slug, rankings)
        (f"{args.method} (CV)", f"{args.method}-cv", cv.fused)
    ]
    for fixed in args.apply:
        config = FusionConfig.read_file(fixed)
        missing = [n for n in config.weights if config.weights[n] > 0 and n not in runs]
        if missing:
            raise MathScoutError(f"{fixed} weighs runs not given here: {', '.join(missing)}")
        applied = GridSearch(
            runs, scorer, config.method, np.array([[config.weights.get(n, 0.0) for n in runs]]), args.depth
        )
        fused_runs.append(
            (
                f"{config.method} ({describe_weights(config.weights)})",
                f"{config.method}-applied",
                {q: applied.ranking(q, 0) for q in applied.matrices},
            )
        )
    for name in METHODS:
        equal = GridSearch(runs, scorer, name, np.ones((1, len(runs))) / len(runs), args.depth)
        fused_runs.append((f"{name} (equal weights)", name, {q: equal.ranking(q, 0) for q in equal.matrices}))
    rows += [Row(label, scorer.per_topic(fused)) for label, _, fused in fused_runs]
    print()
    print("\n".join(_table(rows, scorer.topics, cv.measure, best_single)))

    if args.write_runs:
        for _, slug, fused in fused_runs:
            path = args.write_runs / f"{args.name}-{slug}.{args.set}.trec"
            write_run(
                {q: [Hit(doc_id=d, score=s) for d, s in hits] for q, hits in fused.items() if hits},
                path,
                tag=f"{args.name}-{slug}",
            )
            print(f"wrote {path}")
    if index is not None:
        _check_servable(index, [n for n, w in cv.final_weights.items() if w > 0])
    if args.index or args.save:
        config = FusionConfig(
            weights=cv.final_weights,
            method=args.method,
            depth=args.depth,
            tuning={
                "qrels": str(args.qrels),
                "runs": dict(arg.split("=", 1) for arg in args.runs),
                "topics": len(scorer.topics),
                "measure": cv.measure,
                "folds": [
                    {
                        "fold": f.number,
                        "topics": len(f.topics),
                        "weights": f.weights,
                        "train": round(f.train_score, 4),
                        "test": round(f.test_score, 4),
                    }
                    for f in cv.folds
                ],
                "cv_score": round(cv.score, 4),
                "in_sample_score": round(cv.final_score, 4),
                "per_topic_ceiling": round(cv.ceiling_score, 4),
                "grid_step": step,
                "seed": args.seed,
            },
        )
        for path in ([FusionConfig.path(IndexDir(args.index))] if args.index else []) + (
            [args.save] if args.save else []
        ):
            print(f"stored {describe_weights(cv.final_weights)} in {config.write_file(path)}", file=sys.stderr)
