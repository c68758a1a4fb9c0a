"""The offline answer's opening summary against its own top hit: how often the document the summary's first sentence
cites is judged relevant, and how often the answer's top hit is (issue 35).

    mathscout bench answers --index DIR [--topics FILE --qrels FILE] [--limit N | --sample N --seed S] [--k 10]
                            [--summary-model auto|dense|lexical|none] [--grid]

Each topic (title + body, as `mathscout run` sends it) is asked of the offline assistant (no LLM, mode auto). A document
is relevant when the qrels give it a grade > 0. Printed: both rates with counts, the paired difference, an exact McNemar
(sign) test over the topics where the two differ, the p50/p95 answer time, and the time the summary's sentence scoring
adds to an answer (the summary composed with the scorer minus without it, over the same hits). Default topics: the
shared dev topics and qrels; `--topics`/`--qrels` take others (the train ones, say).

`--grid` tunes the summary on train topics (dev files are refused): each topic's candidates are scored once at the
widest depth, then every setting of (hits N, rank prior weight, sentence similarity weight) chooses its first sentence,
and the best settings are printed with their rates. One warm-up question is not counted.
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import time
from pathlib import Path

from mathscout.agent.assistant import Assistant
from mathscout.agent.compose import (
    PRIOR_WEIGHT,
    SENTENCE_WEIGHTS,
    SUMMARY_HITS,
    Candidate,
    _cite,
    choose_summary,
    score_candidates,
    summary_candidates,
    summary_line,
)
from mathscout.agent.offline import SUMMARY_MODELS, sentence_scorer
from mathscout.config import SHARED_DATA
from mathscout.errors import MathScoutError
from mathscout.evaluation.measures import read_qrels
from mathscout.evaluation.topics import load_topics, require_train_topics
from mathscout.question import read_question

COLLECTION = SHARED_DATA / "collection"
GRID_HITS = (1, 2, 3, 5, 7, 10)
GRID_PRIOR = (0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.7, 1.0, 2.0)
GRID_SENTENCE = (0.0, 1.0)  # the sentence similarity's weight (against the prior's, only their ratio counts)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _first_cited(text: str, hits) -> str | None:
    """The first hit the answer's "In short" paragraph cites, or None when it has none (a citation as the answer
    writes it: `[id]`, or escaped text for an id with spaces or brackets, as ProofWiki's `pw:Euclid's Lemma`)."""
    summary = next((part for part in text.split("\n\n") if part.startswith("**In short:**")), "")
    places = [(summary.find(_cite(h.doc_id)), h.doc_id) for h in hits if _cite(h.doc_id) in summary]
    return min(places)[1] if places else None


def mcnemar(better: int, worse: int) -> float:
    """Exact two-sided McNemar (sign) test: the p-value of `better` against `worse` discordant topics."""
    from scipy.stats import binomtest

    return float(binomtest(better, better + worse, 0.5).pvalue) if better + worse else 1.0


def _topics(args) -> list:
    topics = load_topics(args.topics)
    if args.sample:
        topics = random.Random(args.seed).sample(topics, min(args.sample, len(topics)))
    return topics[: args.limit] if args.limit else topics


def _relevant(qrels, topic_id: str, doc_id: str | None) -> bool:
    return doc_id is not None and qrels.get(topic_id, {}).get(doc_id, 0) > 0


def measure(assistant: Assistant, topics, qrels, k: int, model: str) -> dict:
    """Per topic: is the summary's first cited document relevant, is the top hit; answer and scoring times."""
    assistant.planner.summary_model = model
    store = assistant.toolbox.index.store
    summary_rel, top_rel, seconds, added = [], [], [], []
    for topic in topics:
        started = time.perf_counter()
        answer = assistant.ask(topic.text, k=k, use_llm=False)
        seconds.append(time.perf_counter() - started)
        summary_rel.append(_relevant(qrels, topic.id, _first_cited(answer.text, answer.hits)))
        top_rel.append(_relevant(qrels, topic.id, answer.hits[0].doc_id if answer.hits else None))
        if answer.hits:  # the scorer's cost: the same summary with and without it
            question, documents = read_question(topic.text), store.get_many(h.doc_id for h in answer.hits)
            scorer = sentence_scorer(assistant.toolbox, model)
            started = time.perf_counter()
            summary_line(answer.hits, documents, question, scorer)
            scored = time.perf_counter() - started
            started = time.perf_counter()
            summary_line(answer.hits, documents)
            added.append(scored - (time.perf_counter() - started))
    return {"summary": summary_rel, "top": top_rel, "seconds": seconds, "added": added}


def report(label: str, result: dict) -> None:
    summary, top = result["summary"], result["top"]
    n = len(summary)
    better = sum(s and not t for s, t in zip(summary, top))
    worse = sum(t and not s for s, t in zip(summary, top))
    print(label)
    print(f"  summary's first cited document relevant: {sum(summary):>4} / {n} = {100 * sum(summary) / n:5.1f} %")
    print(f"  answer's top hit relevant:               {sum(top):>4} / {n} = {100 * sum(top) / n:5.1f} %")
    print(
        f"  paired difference {100 * (sum(summary) - sum(top)) / n:+.1f} points: the summary's document relevant and the "
        f"top hit not on {better} topics, the reverse on {worse}; exact McNemar p = {mcnemar(better, worse):.3g}"
    )
    seconds, added = result["seconds"], result["added"]
    print(
        f"  answer time p50 {1000 * _percentile(seconds, 0.5):.0f} ms, p95 {1000 * _percentile(seconds, 0.95):.0f} ms; "
        f"sentence scoring adds p50 {1000 * _percentile(added, 0.5):.1f} ms, p95 {1000 * _percentile(added, 0.95):.1f} ms"
        if added
        else "  (no answer had hits)"
    )


def grid(assistant: Assistant, topics, qrels, k: int, model: str) -> None:
    """Every (hits, prior weight, sentence weight) over candidates scored once per topic; best settings first."""
    scorer = sentence_scorer(assistant.toolbox, model)
    store = assistant.toolbox.index.store
    rows: list[tuple[str, list[Candidate], str | None]] = []  # (topic id, candidates, top hit)
    for topic in topics:
        answer = assistant.ask(topic.text, k=k, use_llm=False)
        if not answer.hits:
            rows.append((topic.id, [], None))
            continue
        documents = store.get_many(h.doc_id for h in answer.hits)
        candidates = summary_candidates(answer.hits, documents, max(GRID_HITS))
        if scorer is not None and candidates:
            score_candidates(read_question(topic.text), candidates, scorer)
        rows.append((topic.id, candidates, answer.hits[0].doc_id))
    n = len(rows)
    top = sum(_relevant(qrels, qid, first) for qid, _, first in rows)
    print(
        f"grid over {n} topics, summary model {scorer.name if scorer else 'none'}; top hit relevant {top} / {n} = "
        f"{100 * top / n:.1f} %"
    )
    results = []
    for hits, prior, sentence in itertools.product(GRID_HITS, GRID_PRIOR, GRID_SENTENCE):
        relevant = better = worse = 0
        for qid, candidates, first in rows:
            chosen = choose_summary([c for c in candidates if c.rank <= hits], sentence, prior, sources=1)
            ok, top_ok = _relevant(qrels, qid, chosen[0].doc_id if chosen else None), _relevant(qrels, qid, first)
            relevant += ok
            better += ok and not top_ok
            worse += top_ok and not ok
        results.append((relevant, -hits, prior, sentence, better, worse))
    print(
        f"  {'hits':>4} {'prior':>5} {'sentence':>8}  summary relevant   better/worse  McNemar p   (the best 3 per hits)"
    )
    best = [r for hits in GRID_HITS for r in sorted((r for r in results if -r[1] == hits), reverse=True)[:3]]
    for relevant, hits, prior, sentence, better, worse in sorted(best, reverse=True):
        print(
            f"  {-hits:>4} {prior:>5} {sentence:>8}  {relevant:>4} = {100 * relevant / n:5.1f} %   {better:>4}/{worse:<4}  "
            f"{mcnemar(better, worse):.3g}"
        )
    weight = SENTENCE_WEIGHTS.get(scorer.name, 1.0) if scorer else 1.0
    current = next(r for r in results if -r[1] == SUMMARY_HITS and r[2] == PRIOR_WEIGHT and r[3] == weight)
    print(
        f"  the settings in agent/compose.py (hits {SUMMARY_HITS}, prior {PRIOR_WEIGHT}, sentence {weight}): "
        f"{current[0]} = {100 * current[0] / n:.1f} %"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="mathscout bench answers", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--index", type=Path, required=True, help="index directory (e.g. one over the shared collection)"
    )
    parser.add_argument("--topics", type=Path, default=COLLECTION / "topics.dev.jsonl")
    parser.add_argument("--qrels", type=Path, default=COLLECTION / "qrels.dev.txt")
    parser.add_argument("--limit", type=int, default=0, help="only the first N topics (after --sample)")
    parser.add_argument("--sample", type=int, default=0, help="a seeded random sample of N topics")
    parser.add_argument("--seed", type=int, default=35)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument(
        "--summary-model",
        default="auto",
        choices=SUMMARY_MODELS,
        help="what scores the summary's sentences (auto: the strongest model the index has)",
    )
    parser.add_argument("--grid", action="store_true", help="tune hits, prior and sentence weights (train topics only)")
    args = parser.parse_args(argv)
    if args.grid:
        require_train_topics(args.topics, args.qrels, what="bench answers --grid")
    qrels = read_qrels(args.qrels)
    topics = [t for t in _topics(args) if t.id in qrels]
    if not topics:
        raise MathScoutError(f"no topic of {args.topics} has judgements in {args.qrels}")
    assistant = Assistant(args.index, use_llm=False)
    assistant.planner.summary_model = args.summary_model
    started = time.perf_counter()
    assistant.ask(topics[0].text, k=args.k, use_llm=False)  # warm-up: the JVM, kernels, the model
    print(f"warm-up (opening the index, first answer): {time.perf_counter() - started:.1f} s", flush=True)
    if args.grid:
        grid(assistant, topics, qrels, args.k, args.summary_model)
        return
    result = measure(assistant, topics, qrels, args.k, args.summary_model)
    scorer = sentence_scorer(assistant.toolbox, args.summary_model)
    report(
        f"offline answers over {len(topics)} topics of {args.topics.name} ({args.qrels.name}), index {args.index} "
        f"({', '.join(assistant.toolbox.index.components)}), summary model {scorer.name if scorer else 'none'}, "
        f"k = {args.k}, mean answer {statistics.mean(result['seconds']):.2f} s",
        result,
    )
