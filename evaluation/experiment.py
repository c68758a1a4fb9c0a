"""`Experiment`: pipelines run over topics, scored against qrels and compared with significance tests in one call
(PyTerrier's `pt.Experiment`; ../shared/STYLE.md).

    from mathscout import Experiment
    from mathscout.retrievers import open_retriever

    bm25, structure = open_retriever(INDEX, "bm25"), open_retriever(INDEX, "structure")
    result = Experiment({"bm25": bm25, "hybrid": 0.5 * bm25 + 0.5 * structure}, "topics.jsonl", "qrels.txt",
                        measures=["nDCG@10", "RR@10", "R@100"])
    print(result)                 # one row per pipeline: means, Δ and corrected p against the baseline
    result.table, result.per_topic, result.to_markdown(), result.to_dict(), result.write_runs("runs/")

A pipeline is a retriever (anything with `batch_search`: a search mode, a composition `0.3 * a + 0.7 * b`,
`a >> reranker`, `a % 100`), a run file, or a run in memory (`{topic: [Hit]}`, `{topic: {doc: score}}`, a `Run`).
The scoring is `mathscout eval`'s own (`evaluation/measures.py`): the same runs give the same figures there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mathscout.errors import MathScoutError
from mathscout.evaluation.measures import (
    Comparison,
    EvalResult,
    QrelsLike,
    choose_measure_set,
    compare_results,
    evaluate_loaded,
    load_qrels,
    with_measures,
)
from mathscout.evaluation.report import format_p, table_lines
from mathscout.evaluation.runs import Run, as_run, write_run
from mathscout.evaluation.scope import TopicScope, topic_scope
from mathscout.evaluation.significance import DEFAULT_CORRECTION, SIGNIFICANCE_LEVEL, check_correction
from mathscout.evaluation.topics import load_topics
from mathscout.limits import K
from mathscout.types import Query

Pipeline = Any  # a retriever (has batch_search) or a RunLike


@dataclass(frozen=True)
class Row:
    """One pipeline's line of the table: per measure its mean, the difference from the baseline's mean, the paired
    t-test's p-value against the baseline, raw and corrected, and whether the corrected one is significant (the
    baseline's row has no difference, p-value or mark)."""

    name: str
    baseline: bool
    means: dict[str, float]
    deltas: dict[str, float] = field(default_factory=dict)
    p_values: dict[str, float | None] = field(default_factory=dict)
    corrected: dict[str, float | None] = field(default_factory=dict)
    significant: dict[str, bool] = field(default_factory=dict)

    def mark(self, measure: str) -> str:
        return "*" if self.significant.get(measure) else ""


@dataclass
class ExperimentResult:
    """What `Experiment` found: `table` (a `Row` per pipeline), `per_topic` (pipeline → topic → measure → score),
    the evaluated runs, and the warnings and notes that qualify the figures."""

    measures: list[str]
    table: list[Row]
    per_topic: dict[str, dict[str, dict[str, float]]]
    runs: dict[str, Run]
    baseline: str | None
    correction: str
    topics: int  # how many topics each mean is over
    topic_scope: str
    warnings: list[str]
    notes: dict[str, list[str]]  # per pipeline
    comparison: Comparison | None = None  # the tests as `mathscout eval` reports them (None without a baseline)

    def row(self, name: str) -> Row:
        for row in self.table:
            if row.name == name:
                return row
        raise MathScoutError(f"no pipeline named '{name}' (pipelines: {', '.join(r.name for r in self.table)})")

    def to_dict(self) -> dict:
        """Plain data (JSON-ready)."""
        return {
            "measures": self.measures,
            "baseline": self.baseline,
            "correction": self.correction,
            "significance_level": SIGNIFICANCE_LEVEL,
            "topics": self.topics,
            "topic_scope": self.topic_scope,
            "table": [asdict(row) for row in self.table],
            "per_topic": self.per_topic,
            "warnings": self.warnings,
            "notes": self.notes,
        }

    def to_dataframe(self):
        """The table as a pandas DataFrame (pandas is not a dependency of MathScout: install it to use this)."""
        try:
            import pandas as pd  # type: ignore[import-untyped]  # no stubs installed: pandas is not a dependency
        except ImportError as exc:
            raise MathScoutError("to_dataframe needs pandas ('pip install pandas'); to_dict() needs nothing") from exc
        return pd.DataFrame([_flat(row, self.measures) for row in self.table])

    def to_markdown(self) -> str:
        header, rows = self._cells()
        lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines + ["", self._legend()])

    def __str__(self) -> str:
        header, rows = self._cells()
        lines = [line.rstrip() for line in table_lines(header, rows)] + ["", self._legend()]
        lines += self.warnings
        lines += [f"note ({name}): {note}" for name, notes in self.notes.items() for note in notes]
        return "\n".join(lines)

    def _cells(self) -> tuple[list[str], list[list[str]]]:
        tested = self.baseline is not None
        header = ["pipeline"]
        for m in self.measures:
            header += [m, "Δ", f"p ({self.correction})"] if tested else [m]
        rows = []
        for row in self.table:
            cells = [f"{row.name} (baseline)" if row.baseline else row.name]
            for m in self.measures:
                cells.append(f"{row.means[m]:.4f}{row.mark(m)}")
                if tested:
                    cells += ["", ""] if row.baseline else [f"{row.deltas[m]:+.4f}", format_p(row.corrected[m])]
            rows.append(cells)
        return header, rows

    def _legend(self) -> str:
        over = f"means over {self.topics} topics" + ("" if self.topic_scope == "qrels" else f" ({self.topic_scope})")
        if self.baseline is None:
            return over
        return (
            f"{over}; * p < {SIGNIFICANCE_LEVEL}, paired t-test against {self.baseline}, p-values corrected per "
            f"measure over the {len(self.table) - 1} pipelines tested ({self.correction})"
        )

    def write_runs(self, folder: Path | str, fmt: str = "trec") -> dict[str, Path]:
        """Each pipeline's run as `folder/NAME.trec` (`mathscout eval --run …` scores them the same)."""
        written = {}
        for name, run in self.runs.items():
            slug = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
            path = Path(folder) / f"{slug}.{fmt}"
            write_run(run.hits(), path, tag=slug, fmt=fmt)
            written[name] = path
        return written


def Experiment(  # named as PyTerrier's: a call that reads like a value
    pipelines: Mapping[str, Pipeline] | Sequence[Pipeline],
    topics: Path | str | Sequence[Query] | None,
    qrels: QrelsLike,
    measures: Sequence[str] | None = None,
    *,
    names: Sequence[str] | None = None,
    baseline: int | str | None = 0,
    correction: str = DEFAULT_CORRECTION,
    over: str | Path | Iterable[str] | None = None,
    prime: bool = False,
    measure_set: str | None = None,
    topics_with_relevant: bool = False,
    k: int = 1000,
) -> ExperimentResult:
    """Run every retriever among `pipelines` over `topics` (a topic file or queries; the top `k`), score each run
    against `qrels` with `measures` (ir-measures names, e.g. "nDCG@10", "RR@10", "R@100", "AP(rel=2)"; default
    the set `mathscout eval` chooses) and test each against `baseline` (an index or a name; None: no tests) with
    paired t-tests, corrected per measure over the pipelines tested (`correction`: holm, bonferroni or none).

    `over` is what each mean is over, as `mathscout eval --topics`: "qrels" (every judged topic), "run" (the topics
    any run answers), a topic file or topic ids; default the topics given, else the qrels'. A judged topic a run
    does not answer counts 0; more than half of them missing is said in `warnings`."""
    check_correction(correction)
    named = _named(pipelines, names)
    queries = _queries(topics)
    if queries is None and any(_is_retriever(p) for p in named.values()):
        raise MathScoutError("retrievers need topics to search: give a topic file or a list of queries")
    qrels_name, judged = load_qrels(qrels)
    runs = {name: _run(p, queries, k, name) for name, p in named.items()}
    given = TopicScope(f"the {len(queries)} topics given", frozenset(q.id for q in queries)) if queries else None
    scope = topic_scope(given if over is None else over, (q for run in runs.values() for q in run.topics))
    spec = with_measures(choose_measure_set(judged, prime, measure_set), measures, prime)
    results = [
        evaluate_loaded(name, run, judged, qrels_name, prime, spec, topics_with_relevant, scope)
        for name, run in runs.items()
    ]
    base = _baseline_index(baseline, list(named))
    comparison = compare_results(results, base, correction) if base is not None and len(results) > 1 else None
    return ExperimentResult(
        measures=results[0].measures,
        table=[_row(i, results, comparison) for i in range(len(results))],
        per_topic={r.run: r.per_topic for r in results},
        runs=runs,
        baseline=results[comparison.baseline].run if comparison else None,
        correction=correction if comparison else "none",
        topics=results[0].topics,
        topic_scope=results[0].topic_scope,
        warnings=[w for r in results if (w := r.coverage_warning("over='run'"))],
        notes={r.run: r.notes() for r in results if r.notes()},
        comparison=comparison,
    )


def _named(pipelines: Mapping[str, Pipeline] | Sequence[Pipeline], names: Sequence[str] | None) -> dict[str, Any]:
    if isinstance(pipelines, Mapping):
        named = {str(n): p for n, p in pipelines.items()}
    else:
        given = list(pipelines)
        labels = list(names) if names else [_default_name(p, i) for i, p in enumerate(given)]
        if len(labels) != len(given):
            raise MathScoutError(f"{len(labels)} names for {len(given)} pipelines")
        labels = [n if labels.count(n) == 1 else f"{n}#{i + 1}" for i, n in enumerate(labels)]
        named = dict(zip(labels, given))
        if len(named) != len(given):
            raise MathScoutError(f"pipeline names must differ: {', '.join(labels)}")
    if not named:
        raise MathScoutError("an experiment needs at least one pipeline")
    return named


def _default_name(pipeline: Pipeline, i: int) -> str:
    if isinstance(pipeline, (str, Path)):
        return str(pipeline)
    if _is_retriever(pipeline):
        return str(getattr(pipeline, "name", "") or type(pipeline).__name__)
    if isinstance(pipeline, Run) and pipeline.tag:
        return pipeline.tag
    return f"run{i + 1}"


def _is_retriever(pipeline: Pipeline) -> bool:
    return callable(getattr(pipeline, "batch_search", None))


def _queries(topics: Path | str | Sequence[Query] | None) -> list[Query] | None:
    if topics is None:
        return None
    queries = load_topics(topics) if isinstance(topics, (str, Path)) else list(topics)
    if not queries:
        raise MathScoutError("the topics are an empty list")
    return queries


def _run(pipeline: Pipeline, queries: list[Query] | None, k: int, name: str) -> Run:
    if _is_retriever(pipeline):
        assert queries is not None
        return as_run(pipeline.batch_search(queries, k=K.check(k)), tag=name)
    if isinstance(pipeline, (str, Path, Run, Mapping)):
        return as_run(pipeline, tag=name)
    raise MathScoutError(
        f"the pipeline '{name}' is a {type(pipeline).__name__}: give a retriever, a run file or a run in memory "
        "({topic: [Hit]} or {topic: {doc: score}})"
    )


def _baseline_index(baseline: int | str | None, names: list[str]) -> int | None:
    if baseline is None:
        return None
    if isinstance(baseline, str):
        if baseline not in names:
            raise MathScoutError(f"the baseline '{baseline}' is not a pipeline (pipelines: {', '.join(names)})")
        return names.index(baseline)
    if not -len(names) <= baseline < len(names):
        raise MathScoutError(f"baseline {baseline} is out of range for {len(names)} pipelines")
    return baseline % len(names)


def _row(i: int, results: list[EvalResult], comparison: Comparison | None) -> Row:
    result = results[i]
    if comparison is None or i == comparison.baseline:
        return Row(result.run, comparison is not None, dict(result.summary))
    base = results[comparison.baseline].summary
    return Row(
        result.run,
        False,
        dict(result.summary),
        {m: result.summary[m] - base[m] for m in result.measures},
        dict(comparison.p_values[i]),
        dict(comparison.corrected[i]),
        {m: comparison.significant(i, m) for m in result.measures},
    )


def _flat(row: Row, measures: list[str]) -> dict:
    flat: dict[str, Any] = {"name": row.name, "baseline": row.baseline}
    for m in measures:
        flat[m] = row.means[m]
        if not row.baseline and row.p_values:
            flat |= {f"{m} Δ": row.deltas[m], f"{m} p": row.p_values[m], f"{m} p corrected": row.corrected[m]}
    return flat
