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
the topics with a relevant document (grade ≥ the set's threshold), the others left out. `topics` (`--topics
qrels|run|FILE`, `evaluation/scope.py`) restricts the judged topics to the run's or a file's.

Runs and qrels are files or in memory: a `Run`, `{topic: [Hit]}` or `{topic: {doc: score}}`, and `{topic: {doc:
grade}}`. Runs compared against a baseline get paired t-tests with a multiple-testing correction
(`evaluation/significance.py`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import ir_measures
from ir_measures import AP, RR, Bpref, P, R, nDCG

from mathscout.errors import MathScoutError
from mathscout.evaluation.runs import Run, RunLike, as_run
from mathscout.evaluation.scope import TopicScope, coverage_warning, topic_scope
from mathscout.evaluation.significance import DEFAULT_CORRECTION, SIGNIFICANCE_LEVEL, correct, paired_p_value

ARQMATH_DEPTH = 1000  # ARQMath runs hold at most 1000 answers per topic
_ARQMATH_TOPIC = re.compile(r"^[AB]\.\d+$")
_DIGITS = re.compile(r"(\d+)")

Qrels = dict[str, dict[str, int]]
QrelsLike = Path | str | Mapping[str, Mapping[str, int]]


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
    topic_scope: str = "qrels"  # what the mean is over (evaluation/scope.py)
    out_of_scope: int = 0  # judged topics outside the scope: not scored
    unjudged_in_scope: int = 0  # topics of the scope without judgments: not scored

    @property
    def topics(self) -> int:
        return len(self.per_topic)

    def notes(self) -> list[str]:
        """What a reader must know to interpret the numbers."""
        notes = []
        if self.out_of_scope:
            notes.append(f"mean over {self.topic_scope}; the other {self.out_of_scope:,} judged topics are not scored")
        if self.unjudged_in_scope:
            notes.append(f"{_topics(self.unjudged_in_scope)} of {self.topic_scope} without judgments: not scored")
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

    def coverage_warning(self, option: str = "--topics run") -> str | None:
        """A loud line when most scored topics are missing from the run, with the mean over the answered ones."""
        line = coverage_warning(self.topics, len(self.missing_topics), f"the run {self.run}", option)
        if line is None:
            return None
        first = self.measures[0]
        missing = set(self.missing_topics)
        answered = [s[first] for q, s in self.per_topic.items() if q not in missing]
        over_answered = f", {sum(answered) / len(answered):.3f} over those" if answered else ""
        return f"{line} ({first} {self.summary[first]:.3f} over all{over_answered})"

    def to_json(self) -> dict:
        warning = self.coverage_warning()
        return {
            "run": self.run,
            "qrels": self.qrels,
            "prime": self.prime,
            "measure_set": self.measure_set,
            "measures": self.measures,
            "topic_scope": self.topic_scope,
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
            "warnings": [warning] if warning else [],
        }


@dataclass
class Comparison:
    """Several runs over the same topics; paired t-tests of each run against the baseline (the first unless
    `baseline` says), and the p-values corrected for testing the runs together (per measure)."""

    results: list[EvalResult]
    p_values: list[dict[str, float | None]]  # per run, per measure; the baseline has none
    corrected: list[dict[str, float | None]] = field(default_factory=list)  # the same, corrected
    baseline: int = 0
    correction: str = "none"

    def __post_init__(self) -> None:
        if not self.corrected:
            self.corrected = self.p_values

    @property
    def measures(self) -> list[str]:
        return self.results[0].measures

    def significant(self, run_index: int, measure: str) -> bool:
        """The corrected p-value is below SIGNIFICANCE_LEVEL."""
        p = self.corrected[run_index].get(measure)
        return p is not None and p < SIGNIFICANCE_LEVEL

    def to_json(self) -> dict:
        return {
            "baseline": self.results[self.baseline].run,
            "significance_level": SIGNIFICANCE_LEVEL,
            "test": "paired t-test over topics vs the baseline",
            "correction": self.correction,
            "measures": self.measures,
            "runs": [
                {
                    "run": r.run,
                    "summary": r.summary,
                    "p_values": self.p_values[i],
                    "p_corrected": self.corrected[i],
                    "significant": {m: self.significant(i, m) for m in self.measures} if i != self.baseline else {},
                    "notes": r.notes(),
                }
                for i, r in enumerate(self.results)
            ],
        }


def topic_order(topic_id: str) -> list:
    """Natural order for topic ids (A.2 before A.10)."""
    return [int(part) if part.isdigit() else part for part in _DIGITS.split(topic_id)]


def load_qrels(qrels: QrelsLike) -> tuple[str, Qrels]:
    """Qrels from a file or in memory (`{topic: {doc: grade}}`), with the name results give them."""
    if isinstance(qrels, (str, Path)):
        return str(qrels), read_qrels(qrels)
    loaded = {str(q): {str(d): int(g) for d, g in docs.items()} for q, docs in qrels.items()}
    if not loaded:
        raise MathScoutError("the qrels are empty")
    return "qrels", loaded


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


def with_measures(spec: MeasureSet, names: Sequence[str] | None, prime: bool = False) -> MeasureSet:
    """`spec` reporting the `names` measures instead: a label `spec` reports means its measure ("MAP", "P@10",
    "nDCG′"), anything else is an ir-measures name ("nDCG@10", "RR@10", "AP(rel=2)", "P(rel=2)@5")."""
    if not names:
        return spec
    if len(set(names)) != len(names):
        raise MathScoutError(f"a measure is named twice: {', '.join(names)}")
    known = {label: m for m in spec.measures for label in (m.name, m.label(prime))}
    chosen = []
    for name in names:
        if name in known:
            chosen.append(known[name])
            continue
        try:
            chosen.append(MeasureSpec(name, ir_measures.parse_measure(name)))
        except (NameError, ValueError, TypeError) as exc:
            raise MathScoutError(
                f"unknown measure '{name}' (ir-measures names, e.g. nDCG@10, RR@10, R@100, AP(rel=2), P(rel=2)@10)"
            ) from exc
    return replace(spec, measures=tuple(chosen))


def evaluate_run(
    run: RunLike,
    qrels: QrelsLike,
    prime: bool = False,
    measure_set: str | None = None,
    topics_with_relevant: bool = False,
    topics: str | Path | Iterable[str] | None = None,
    name: str | None = None,
) -> EvalResult:
    """Score one run against qrels, each a file or in memory (see the module docstring for the conventions);
    `topics` as `mathscout eval --topics` ("qrels", "run", a topic file, or topic ids)."""
    qrels_name, judged = load_qrels(qrels)
    loaded = as_run(run)
    return evaluate_loaded(
        name or _run_name(run),
        loaded,
        judged,
        qrels_name,
        prime,
        choose_measure_set(judged, prime, measure_set),
        topics_with_relevant,
        topic_scope(topics, loaded.topics),
    )


def compare_runs(
    runs: Sequence[RunLike],
    qrels: QrelsLike,
    prime: bool = False,
    measure_set: str | None = None,
    topics_with_relevant: bool = False,
    topics: str | Path | Iterable[str] | None = None,
    correction: str = DEFAULT_CORRECTION,
    names: Sequence[str] | None = None,
) -> Comparison:
    """Score several runs on the same topics; a paired t-test of each against the first, corrected for testing
    them together (`correction`, evaluation/significance.py). `topics` "run": the topics any of the runs answers."""
    if len(runs) < 2:
        raise MathScoutError("compare needs at least two runs (the first is the baseline)")
    qrels_name, judged = load_qrels(qrels)
    spec = choose_measure_set(judged, prime, measure_set)
    loaded = [as_run(r) for r in runs]
    scope = topic_scope(topics, (q for r in loaded for q in r.topics))
    labels = list(names) if names else [_run_name(r) for r in runs]
    results = [
        evaluate_loaded(label, run, judged, qrels_name, prime, spec, topics_with_relevant, scope)
        for label, run in zip(labels, loaded)
    ]
    return compare_results(results, correction=correction)


def compare_results(
    results: Sequence[EvalResult], baseline: int = 0, correction: str = DEFAULT_CORRECTION
) -> Comparison:
    """Paired t-tests of each result against `results[baseline]` over its topics, per measure corrected over the
    runs tested (`correction`)."""
    base = results[baseline]
    topics = sorted(base.per_topic)
    p_values: list[dict[str, float | None]] = [
        {}
        if i == baseline
        else {
            m: paired_p_value([base.per_topic[t][m] for t in topics], [result.per_topic[t][m] for t in topics])
            for m in base.measures
        }
        for i, result in enumerate(results)
    ]
    corrected: list[dict[str, float | None]] = [{} for _ in results]
    tested = [i for i in range(len(results)) if i != baseline]
    for m in base.measures:
        for i, p in zip(tested, correct([p_values[i][m] for i in tested], correction)):
            corrected[i][m] = p
    return Comparison(list(results), p_values, corrected, baseline, correction)


def _run_name(run: RunLike) -> str:
    return str(run) if isinstance(run, (str, Path)) else (run.tag if isinstance(run, Run) and run.tag else "run")


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
    scope: TopicScope | None = None,
) -> EvalResult:
    """Score a run and qrels already read (`evaluate_run` without the files): the measures of `spec` per topic and
    mean, over the judged topics of `scope` (default: every judged topic)."""
    scope = scope or TopicScope()
    in_scope = qrels if scope.ids is None else {q: docs for q, docs in qrels.items() if q in scope.ids}
    if not in_scope:
        raise MathScoutError(f"none of {scope.name} is judged in the qrels {qrels_name}")
    scorable = {q: qrels[q] for q in scored_topics(qrels, spec, topics_with_relevant, qrels_name) if q in in_scope}
    if not scorable:
        raise MathScoutError(f"no topic of {scope.name} has a relevant document in the qrels {qrels_name}")
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
        skipped_topics=sorted((q for q in in_scope if q not in scorable), key=topic_order),
        unanswerable_topics=without_relevant,
        unjudged_topics=len(set(scores) - set(qrels)),
        unjudged_removed=removed,
        duplicates_dropped=run.duplicates_dropped,
        judged_in_run=sum(1 for qid in scorable for d in scores.get(qid, {}) if d in qrels[qid]),
        topic_scope=scope.name,
        out_of_scope=len(qrels) - len(in_scope),
        unjudged_in_scope=0 if scope.ids is None else len(scope.ids - set(qrels)),
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
