"""Why a learned ranker scores what it scores (issue 34): learning curves over the number of train topics, with and
without the cross-encoder's features, beside re-orderings of the same candidates by their judgements (oracles).

    python -m mathscout.evaluation.ranker_curve --index DIR --train-cache C-train.jsonl --train-qrels Q
                                                --eval-cache C-dev.jsonl --eval-qrels Q [--sizes 250,500,1000,2000]

The caches are `mathscout train ranker --cache` files (made with the cross-encoder's logits, `--cross-depth 30`). For
each size, a seeded sample of the cached train topics gives one LambdaMART fit with the stored parameters
(`evaluation/ranker_training.py`), scored on the eval topics with their first measure. The rows printed beside it:

- `rrf`: the candidates in the order the cross-encoder's depth is chosen by (reciprocal rank fusion of the runs);
- `cross@30`: those top 30 ordered by the cross-encoder's logit alone, the rest after;
- `oracle@30`: those top 30 ordered by their judged grade (what a perfect reranker of the top 30 reaches);
- `oracle`: every candidate ordered by grade (what any ranker of these candidates reaches).

Every row is split by question kind (the planner's classifier), as `mathscout eval --by-family` does for runs.
"""

from __future__ import annotations

import argparse
import random
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np

from mathscout.evaluation.candidate_cache import read_cache
from mathscout.evaluation.ranker_training import fit, topic_rows
from mathscout.evaluation.tuning import Scorer
from mathscout.index.layout import IndexDir
from mathscout.retrievers.candidates import Candidates, cross_order
from mathscout.retrievers.features import Vocabulary, feature_names
from mathscout.retrievers.ranked import ranked_hits

Ordering = Callable[[Candidates], list[tuple[str, float]]]


def _ranked(docs: list[str]) -> list[tuple[str, float]]:
    return [(doc, float(len(docs) - n)) for n, doc in enumerate(docs)]


def by_grade(qrels: dict[str, int], docs: list[str]) -> list[str]:
    """`docs` by judged grade, best first (unjudged as 0), ties kept in their order."""
    return sorted(docs, key=lambda d: -max(qrels.get(d, 0), 0))


def orderings(qrels: dict[str, dict[str, int]], depth: int) -> dict[str, Ordering]:
    """The candidate re-orderings that need no model: fused, the cross-encoder alone, and the two oracles."""

    def fused(c: Candidates) -> list[str]:
        return cross_order(c, len(c.docs))

    def cross(c: Candidates) -> list[tuple[str, float]]:
        order = fused(c)
        logits = {h.doc_id: h.score for h in c.cross or []}
        head = sorted(order[:depth], key=lambda d: -logits.get(d, -np.inf))
        return _ranked(head + order[depth:])

    def oracle_top(c: Candidates) -> list[tuple[str, float]]:
        order = fused(c)
        return _ranked(by_grade(qrels.get(c.query.id, {}), order[:depth]) + order[depth:])

    return {
        "rrf": lambda c: _ranked(fused(c)),
        f"cross@{depth}": cross,
        f"oracle@{depth}": oracle_top,
        "oracle": lambda c: _ranked(by_grade(qrels.get(c.query.id, {}), fused(c))),
    }


def _by_kind(scores: dict[str, float], kinds: dict[str, str]) -> dict[str, float]:
    groups: dict[str, list[float]] = defaultdict(list)
    for topic, value in scores.items():
        groups[kinds.get(topic, "?")].append(value)
    return {kind: float(np.mean(values)) for kind, values in sorted(groups.items())}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m mathscout.evaluation.ranker_curve", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--train-cache", type=Path, required=True)
    parser.add_argument("--train-qrels", type=Path, required=True)
    parser.add_argument("--eval-cache", type=Path, required=True)
    parser.add_argument("--eval-qrels", type=Path, required=True)
    parser.add_argument("--sizes", default="250,500,1000,2000", help="train topics per fit, comma-separated")
    parser.add_argument("--depth", type=int, default=30, help="the cross-encoder's depth in the caches")
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    index = IndexDir(args.index)
    train: list[Candidates] = list(read_cache(args.train_cache)["topics"].values())
    evaluate = read_cache(args.eval_cache)
    scorer = Scorer(args.eval_qrels)
    tests = [evaluate["topics"][t] for t in scorer.topics if t in evaluate["topics"]]
    retrievers = list(evaluate["meta"]["retrievers"])
    kinds = {c.query.id: c.stats.kind for c in tests}
    train_qrels = Scorer(args.train_qrels).qrels
    summaries = index.store.summaries({d for c in [*train, *tests] for d in c.docs})
    vocabulary = Vocabulary.learn(summaries.values())

    table: dict[str, dict[str, float]] = {}
    for name, order in orderings(scorer.qrels, args.depth).items():
        table[name] = scorer.per_topic({c.query.id: order(c) for c in tests})

    sizes = sorted(int(s) for s in args.sizes.split(",") if s.strip())
    shuffled = sorted(train, key=lambda c: c.query.id)
    random.Random(args.seed).shuffle(shuffled)
    for cross in (False, True):
        names = feature_names(retrievers, cross)
        test_rows = topic_rows(tests, scorer.qrels, summaries, vocabulary, retrievers, set(), cross)
        for size in sizes:
            chosen = topic_rows(shuffled[:size], train_qrels, summaries, vocabulary, retrievers, set(), cross)
            model = fit(chosen, names, args.rounds)
            results = {
                r.topic: [
                    (h.doc_id, h.score)
                    for h in ranked_hits(r.candidates, r.docs, model.predict(r.features, num_threads=1), len(r.docs))
                ]
                for r in test_rows
            }
            table[f"ranker{'+cross' if cross else ''} {len(chosen)}"] = scorer.per_topic(results)
            print(f"fitted {'with' if cross else 'without'} the cross features on {len(chosen)} topics", flush=True)

    kinds_seen = sorted(set(kinds.values()))
    counts = {k: sum(1 for v in kinds.values() if v == k) for k in kinds_seen}
    print(f"\n{scorer.measure} over {len(tests)} topics of {args.eval_qrels.name}")
    print(f"{'ordering':<22} {'all':>7} " + " ".join(f"{k + ' (' + str(counts[k]) + ')':>14}" for k in kinds_seen))
    for name, scores in table.items():
        split = _by_kind(scores, kinds)
        print(
            f"{name:<22} {np.mean(list(scores.values())):7.4f} "
            + " ".join(f"{split.get(k, 0):14.4f}" for k in kinds_seen)
        )


if __name__ == "__main__":
    main()
