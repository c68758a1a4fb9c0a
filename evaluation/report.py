"""Readable text for evaluation results: summary, per-topic table, side-by-side comparison."""

from __future__ import annotations

from mathscout.evaluation.measures import SIGNIFICANCE_LEVEL, Comparison, EvalResult, topic_order


def format_evaluation(result: EvalResult, per_topic: bool = False) -> str:
    """The run's mean scores (and optionally one row per topic), with the notes that qualify them."""
    lines = [
        f"run:   {result.run}",
        f"qrels: {result.qrels}",
        f"measures: {result.measure_set}{' (prime)' if result.prime else ''}, mean over {result.topics} topics",
    ]
    lines += [f"note: {note}" for note in result.notes()]
    rows = []
    if per_topic:
        rows = [
            [t] + [f"{result.per_topic[t][m]:.4f}" for m in result.measures]
            for t in sorted(result.per_topic, key=topic_order)
        ]
    rows.append(["mean"] + [f"{result.summary[m]:.4f}" for m in result.measures])
    lines.append("")
    lines += table_lines(["topic"] + result.measures, rows, rule_before_last=per_topic)
    return "\n".join(lines)


def format_comparison(comparison: Comparison) -> str:
    """One row per run; `*` marks a significant difference from the baseline (paired t-test, corrected)."""
    measures = comparison.measures
    first = comparison.results[comparison.baseline]
    rows = []
    for i, result in enumerate(comparison.results):
        cells = []
        for m in measures:
            mark = "*" if comparison.significant(i, m) else ""
            cells.append(f"{result.summary[m]:.4f}{mark}")
        rows.append([f"{'(baseline) ' if i == comparison.baseline else ''}{result.run}"] + cells)
    lines = [
        f"qrels: {first.qrels}",
        f"measures: {first.measure_set}{' (prime)' if first.prime else ''}, mean over {first.topics} topics",
        "",
    ]
    lines += table_lines(["run"] + measures, rows)
    lines.append("")
    tested = len(comparison.results) - 1
    corrected = comparison.correction != "none" and tested > 1  # one test: nothing to correct
    how = f", {comparison.correction}-corrected over the {tested} runs tested" if corrected else ""
    lines.append(f"* p < {SIGNIFICANCE_LEVEL} in a paired t-test over topics against the baseline{how}")
    for i, result in enumerate(comparison.results):
        if i == comparison.baseline:
            continue
        ps = ", ".join(
            f"{m} {format_p(comparison.p_values[i][m])}"
            + (f" ({comparison.correction} {format_p(comparison.corrected[i][m])})" if corrected else "")
            for m in measures
        )
        lines.append(f"p-values {result.run}: {ps}")
    for result in comparison.results:
        lines += [f"note ({result.run}): {note}" for note in result.notes()]
    return "\n".join(lines)


def format_p(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def table_lines(header: list[str], rows: list[list[str]], rule_before_last: bool = False) -> list[str]:
    widths = [max(len(r[c]) for r in [header] + rows) for c in range(len(header))]

    def line(cells: list[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = [cell.rjust(w) for cell, w in zip(cells[1:], widths[1:])]
        return "  ".join([first] + rest)

    rule = "-" * len(line(header))
    out = [line(header), rule]
    for n, row in enumerate(rows):
        if rule_before_last and n == len(rows) - 1:
            out.append(rule)
        out.append(line(row))
    return out
