"""Scoring runs against qrels with ir-measures (pytrec_eval; msmarco for RR@10), and comparing runs.

Two measure sets:
- `arqmath` (Zhong 2023 thesis §2.5; the ARQMath Task 1 official measures): nDCG (all grades), MAP and P@10 with
  High+Medium (grade ≥ 2) as relevant, and bpref (grade ≥ 2); runs are cut at 1000 hits. With `prime`
  unjudged documents are removed from the run first, which gives nDCG′, MAP′ and P′@10.
- `collection` (the shipped collection qrels, every grade ≥ 1 relevant): nDCG@10, RR@10, R@100, MAP.

As in ARQMath, a judged topic the run does not answer counts as zero, and means are over every assessed
topic of the qrels (the official ARQMath evaluation's topic set): a topic whose judgments hold nothing
relevant for a measure (possible in the `-available` subsets, e.g. only grade 0–1 answers for MAP′) scores
0 on it. `topics_with_relevant=True` (`mathscout eval --topics-with-relevant`) keeps the older view: only
the topics with a relevant document (grade ≥ the set's threshold), the others left out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import ir_measures
from ir_measures import AP, RR, Bpref, P, R, nDCG
from scipy.stats import ttest_rel

from mathscout.errors import MathScoutError
from mathscout.evaluation.runs import Run, read_run

SIGNIFICANCE_LEVEL = 0.05
ARQMATH_DEPTH = 1000  # ARQMath runs hold at most 1000 answers per topic
_ARQMATH_TOPIC = re.compile(r"^[AB]\.\d+$")
_DIGITS = re.compile(r"(\d+)")

Qrels = dict[str, dict[str, int]]


@dataclass(frozen=True)
class MeasureSpec:
    """One reported measure: its ir-measures definition and its column label."""

    name: str  # label without the prime mark, e.g. "nDCG", "P@10"
    measure: ir_measures.Measure
    primed: bool = True  # gets the ′ mark under --prime (bpref ignores unjudged documents by itself)

    def label(self, prime: bool) -> str:
        if not (prime and self.primed):
            return self.name
        head, at, tail = self.name.partition("@")
        return f"{head}'{at}{tail}"


@dataclass(frozen=True)
class MeasureSet:
    name: str
    measures: tuple[MeasureSpec, ...]
    relevant_grade: int  # the binarisation threshold of the binary measures
    depth: int | None  # the run is cut to this many hits per topic before scoring


MEASURE_SETS = {
    # Zhong 2023 thesis §2.5: nDCG (eq. 2.8) over all grades — computed by trec_eval as ARQMath does, i.e. with
    # gain = grade rather than 2^grade − 1; MAP (Zhong 2023 thesis, eq. 2.9), P@10 and bpref (eq. 2.10) with H+M binarisation.
    "arqmath": MeasureSet(
        name="arqmath",
        measures=(
            MeasureSpec("nDCG", nDCG),
            MeasureSpec("MAP", AP(rel=2)),
            MeasureSpec("P@10", P(rel=2) @ 10),
            MeasureSpec("bpref", Bpref(rel=2), primed=False),
        ),
        relevant_grade=2,
        depth=ARQMATH_DEPTH,
    ),
    "collection": MeasureSet(
        name="collection",
        measures=(
            MeasureSpec("nDCG@10", nDCG @ 10),
            MeasureSpec("RR@10", RR @ 10),
            MeasureSpec("R@100", R @ 100),
            MeasureSpec("MAP", AP),
        ),
        relevant_grade=1,
        depth=None,
    ),
}


@dataclass
class EvalResult:
    """The scores of one run: per topic and their mean, with what was left out and why."""

    run: str
    qrels: str
    prime: bool
    measure_set: str
    measures: list[str]
    per_topic: dict[str, dict[str, float]]
    summary: dict[str, float]
    relevant_grade: int
    missing_topics: list[str] = field(default_factory=list)  # judged, not in the run: scored 0
    skipped_topics: list[str] = field(
        default_factory=list
    )  # judged, nothing relevant, --topics-with-relevant: not scored
    unanswerable_topics: list[str] = field(
        default_factory=list
    )  # judged, nothing relevant, scored (0 on binary measures)
    unjudged_topics: int = 0  # run topics absent from the qrels: ignored
    unjudged_removed: int = 0  # documents removed under --prime
    duplicates_dropped: int = 0
    judged_in_run: int | None = None  # run entries of scored topics that the qrels judge (0: the ids differ)

    @property
    def topics(self) -> int:
        return len(self.per_topic)

    def notes(self) -> list[str]:
        """What a reader must know to interpret the numbers."""
        notes = []
        if self.prime:
            notes.append(f"prime measures: {self.unjudged_removed:,} unjudged documents removed from the run")
        if self.missing_topics:
            notes.append(
                f"{_topics(len(self.missing_topics))} judged but missing from the run: "
                f"count as 0 (ARQMath convention): {_preview(self.missing_topics)}"
            )
        if self.skipped_topics:
            notes.append(
                f"{_topics(len(self.skipped_topics))} judged without any relevant document "
                f"(grade >= {self.relevant_grade}): not scored (--topics-with-relevant)"
            )
        if self.unanswerable_topics:
            notes.append(
                f"{_topics(len(self.unanswerable_topics))} judged without any relevant document "
                f"(grade >= {self.relevant_grade}): scored over every assessed topic as ARQMath does "
                f"(0 on each measure they hold nothing relevant for; --topics-with-relevant leaves them out)"
            )
        if self.unjudged_topics:
            notes.append(f"{_topics(self.unjudged_topics)} of the run without judgments: ignored")
        if self.duplicates_dropped:
            notes.append(f"{self.duplicates_dropped} duplicate run lines ignored (first occurrence kept)")
        if self.judged_in_run == 0:
            notes.append(
                "no id of the run is judged in the qrels: they name different things (e.g. a Task 2 run over "
                "an index without the official ARQMath formula ids); these scores say nothing"
            )
        return notes

    def to_json(self) -> dict:
        return {
            "run": self.run,
            "qrels": self.qrels,
            "prime": self.prime,
            "measure_set": self.measure_set,
            "measures": self.measures,
            "topics": self.topics,
            "summary": self.summary,
            "per_topic": self.per_topic,
            "missing_topics": self.missing_topics,
            "skipped_topics": self.skipped_topics,
            "unanswerable_topics": self.unanswerable_topics,
            "unjudged_topics": self.unjudged_topics,
            "unjudged_removed": self.unjudged_removed,
            "duplicates_dropped": self.duplicates_dropped,
            "notes": self.notes(),
        }


@dataclass
class Comparison:
    """Several runs over the same topics; paired t-tests of each run against the first (the baseline)."""

    results: list[EvalResult]
    p_values: list[dict[str, float | None]]  # per run, per measure; the baseline has none

    @property
    def measures(self) -> list[str]:
        return self.results[0].measures

    def significant(self, run_index: int, measure: str) -> bool:
        p = self.p_values[run_index].get(measure)
        return p is not None and p < SIGNIFICANCE_LEVEL

    def to_json(self) -> dict:
        return {
            "baseline": self.results[0].run,
            "significance_level": SIGNIFICANCE_LEVEL,
            "test": "paired t-test over topics vs the baseline (first run)",
            "measures": self.measures,
            "runs": [
                {
                    "run": r.run,
                    "summary": r.summary,
                    "p_values": self.p_values[i],
                    "significant": {m: self.significant(i, m) for m in self.measures} if i else {},
                    "notes": r.notes(),
                }
                for i, r in enumerate(self.results)
            ],
        }


def topic_order(topic_id: str) -> list:
    """Natural order for topic ids (A.2 before A.10)."""
    return [int(part) if part.isdigit() else part for part in _DIGITS.split(topic_id)]


def read_qrels(path: Path | str) -> Qrels:
    """TREC qrels `topic iteration doc grade` (grades may be written as floats, e.g. NTCIR's `2.0`)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MathScoutError(f"cannot read the qrels file {path}: {exc}") from exc
    qrels: Qrels = {}
    first_line: dict[tuple[str, str], int] = {}
    conflicts: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        cols = line.split()
        if not cols:
            continue
        if len(cols) != 4:
            raise MathScoutError(f"{path}:{number}: expected a qrels line 'topic 0 doc grade', got {len(cols)} columns")
        try:
            value = float(cols[3])
        except ValueError as exc:
            raise MathScoutError(f"{path}:{number}: the grade {cols[3]!r} is not a number") from exc
        if not math.isfinite(value):
            raise MathScoutError(f"{path}:{number}: the grade {cols[3]!r} is not a finite number")
        grade = round(value)
        judged = qrels.setdefault(cols[0], {})
        if (
            cols[2] in judged and judged[cols[2]] != grade
        ):  # the same judgement repeated is fine; a different one is not
            conflicts.append(
                f"topic {cols[0]} document {cols[2]}: grade {judged[cols[2]]} (line "
                f"{first_line[cols[0], cols[2]]}) and {grade} (line {number})"
            )
            continue
        first_line.setdefault((cols[0], cols[2]), number)
        judged[cols[2]] = grade
    if conflicts:
        more = f" and {len(conflicts) - 3} more" if len(conflicts) > 3 else ""
        raise MathScoutError(
            f"{path} judges {len(conflicts)} document(s) twice with different grades — "
            f"{'; '.join(conflicts[:3])}{more}: keep one grade for each"
        )
    if not qrels:
        raise MathScoutError(f"the qrels file {path} is empty")
    return qrels


def choose_measure_set(qrels: Qrels, prime: bool, name: str | None = None) -> MeasureSet:
    """The named set, else `arqmath` for --prime or ARQMath topic ids (A.1, B.301…), else `collection`."""
    if name is None:
        name = "arqmath" if prime or all(_ARQMATH_TOPIC.match(qid) for qid in qrels) else "collection"
    if name not in MEASURE_SETS:
        raise MathScoutError(f"unknown measure set '{name}' (use one of: {', '.join(MEASURE_SETS)})")
    return MEASURE_SETS[name]


def evaluate_run(
    run_path: Path | str,
    qrels_path: Path | str,
    prime: bool = False,
    measure_set: str | None = None,
    topics_with_relevant: bool = False,
) -> EvalResult:
    """Score one run file against a qrels file (see the module docstring for the conventions)."""
    qrels = read_qrels(qrels_path)
    return evaluate_loaded(
        str(run_path),
        read_run(run_path),
        qrels,
        str(qrels_path),
        prime,
        choose_measure_set(qrels, prime, measure_set),
        topics_with_relevant,
    )


def compare_runs(
    run_paths: Sequence[Path | str],
    qrels_path: Path | str,
    prime: bool = False,
    measure_set: str | None = None,
    topics_with_relevant: bool = False,
) -> Comparison:
    """Score several runs on the same topics; paired t-test (p < 0.05) of each against the first."""
    if len(run_paths) < 2:
        raise MathScoutError("compare needs at least two runs (the first is the baseline)")
    qrels = read_qrels(qrels_path)
    spec = choose_measure_set(qrels, prime, measure_set)
    results = [
        evaluate_loaded(str(p), read_run(p), qrels, str(qrels_path), prime, spec, topics_with_relevant)
        for p in run_paths
    ]
    baseline = results[0]
    topics = sorted(baseline.per_topic)
    p_values: list[dict[str, float | None]] = [{}]
    for result in results[1:]:
        p_values.append(
            {
                m: _paired_p_value([baseline.per_topic[t][m] for t in topics], [result.per_topic[t][m] for t in topics])
                for m in baseline.measures
            }
        )
    return Comparison(results=results, p_values=p_values)


def scored_topics(
    qrels: Qrels, spec: MeasureSet, topics_with_relevant: bool = False, qrels_name: str = "the qrels"
) -> list[str]:
    """The topics a mean is over: every assessed topic, or (the older view) those with a relevant document."""
    relevant = [q for q, docs in qrels.items() if any(g >= spec.relevant_grade for g in docs.values())]
    if not relevant:
        raise MathScoutError(f"no topic of {qrels_name} has a relevant document (grade >= {spec.relevant_grade})")
    return relevant if topics_with_relevant else list(qrels)


def evaluate_loaded(
    run_name: str,
    run: Run,
    qrels: Qrels,
    qrels_name: str,
    prime: bool,
    spec: MeasureSet,
    topics_with_relevant: bool = False,
) -> EvalResult:
    """Score a run and qrels already read (`evaluate_run` without the files): the measures of `spec` per topic and mean."""
    scorable = {q: qrels[q] for q in scored_topics(qrels, spec, topics_with_relevant, qrels_name)}
    without_relevant = sorted(
        (q for q in scorable if not any(g >= spec.relevant_grade for g in scorable[q].values())), key=topic_order
    )
    scores = run.scores()
    if not set(scores) & set(qrels):
        raise MathScoutError(
            f"the run {run_name} and the qrels {qrels_name} share no topic "
            f"(run topics look like '{next(iter(scores))}', qrels topics like '{next(iter(qrels))}')"
        )
    labels = [m.label(prime) for m in spec.measures]
    by_measure = {m.measure: label for m, label in zip(spec.measures, labels)}
    removed = 0
    evaluated: dict[str, dict[str, float]] = {}
    for qid in scorable:
        docs = _trec_eval_ranking(scores.get(qid, {}), spec.depth)
        if prime:
            judged = {d: s for d, s in docs.items() if d in qrels[qid]}
            removed += len(docs) - len(judged)
            docs = judged
        if docs:
            evaluated[qid] = docs
    per_topic = {qid: dict.fromkeys(labels, 0.0) for qid in scorable}
    if evaluated:
        evaluator = ir_measures.evaluator([m.measure for m in spec.measures], scorable)
        for metric in evaluator.iter_calc(evaluated):
            if metric.query_id in evaluated:
                per_topic[metric.query_id][by_measure[metric.measure]] = float(metric.value)
    summary = {label: sum(t[label] for t in per_topic.values()) / len(per_topic) for label in labels}
    return EvalResult(
        run=run_name,
        qrels=qrels_name,
        prime=prime,
        measure_set=spec.name,
        measures=labels,
        per_topic=per_topic,
        summary=summary,
        relevant_grade=spec.relevant_grade,
        missing_topics=sorted((q for q in scorable if q not in evaluated), key=topic_order),
        skipped_topics=sorted((q for q in qrels if q not in scorable), key=topic_order),
        unanswerable_topics=without_relevant,
        unjudged_topics=len(set(scores) - set(qrels)),
        unjudged_removed=removed,
        duplicates_dropped=run.duplicates_dropped,
        judged_in_run=sum(1 for qid in scorable for d in scores.get(qid, {}) if d in qrels[qid]),
    )


def _topics(n: int) -> str:
    return f"{n} topic" if n == 1 else f"{n} topics"


def _preview(ids: list[str], shown: int = 10) -> str:
    more = f", … ({len(ids) - shown} more)" if len(ids) > shown else ""
    return ", ".join(ids[:shown]) + more


def _trec_eval_ranking(docs: dict[str, float], depth: int | None) -> dict[str, float]:
    """The documents in trec_eval's order (score, then document id, both descending), cut at `depth`
    and rescored by rank, so that every ir-measures provider sees the same ranking even on ties."""
    ordered = sorted(docs.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)[:depth]
    return {doc: float(len(ordered) - i) for i, (doc, _) in enumerate(ordered)}


def _paired_p_value(baseline: list[float], other: list[float]) -> float | None:
    """Two-sided paired t-test p-value; 1.0 when the runs agree on every topic, None below 2 topics."""
    if len(baseline) < 2:
        return None
    if all(a == b for a, b in zip(baseline, other)):
        return 1.0
    p = float(ttest_rel(other, baseline).pvalue)
    return None if math.isnan(p) else p
