"""Per-family means of evaluated runs: topics grouped by a function of their id, by default its source
prefix (`mo:…` MathOverflow, `mse:…` Math StackExchange, `math:…` competition problems, …).

    mathscout eval --run A.trec B.trec --qrels Q --by-family [--prime] [--json]

prints, for each family and measure, every run's mean over the family's scored topics and a paired
t-test of each run against the first (the baseline) within the family.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from scipy.stats import ttest_rel

from mathscout.evaluation.measures import SIGNIFICANCE_LEVEL, EvalResult, topic_order
from mathscout.evaluation.tuning import topic_type

ALL = "all topics"


@dataclass
class FamilyScores:
    """One family's topics and, per run (in the order given), the mean of each measure and its p-value
    against the first run (None for the first run and for identical scores)."""

    family: str
    topics: list[str]
    means: list[dict[str, float]]
    p_values: list[dict[str, float | None]]


def _p_value(run: list[float], baseline: list[float]) -> float | None:
    differences = {round(a - b, 12) for a, b in zip(run, baseline)}
    if len(run) < 2 or differences == {0.0}:
        return None
    if len(differences) == 1:  # the same non-zero difference on every topic: no variance to test against
        return 0.0
    return float(ttest_rel(run, baseline).pvalue)


def family_scores(results: Sequence[EvalResult], family: Callable[[str], str] = topic_type) -> list[FamilyScores]:
    """Every family of the first run's scored topics (sorted by name), then all topics together."""
    if not results:
        return []
    topics = sorted(results[0].per_topic, key=topic_order)
    groups: dict[str, list[str]] = {}
    for topic in topics:
        groups.setdefault(family(topic), []).append(topic)
    named = sorted(groups.items()) + ([(ALL, topics)] if len(groups) > 1 else [])
    found = []
    for name, members in named:
        means, p_values = [], []
        for result in results:
            means.append(
                {
                    m: sum(result.per_topic.get(t, {}).get(m, 0.0) for t in members) / len(members)
                    for m in result.measures
                }
            )
            p_values.append(
                {
                    m: None
                    if result is results[0]
                    else _p_value(
                        [result.per_topic.get(t, {}).get(m, 0.0) for t in members],
                        [results[0].per_topic[t][m] for t in members],
                    )
                    for m in result.measures
                }
            )
        found.append(FamilyScores(name, members, means, p_values))
    return found


def _star(p_value: float | None) -> str:
    """'*' after a mean significantly different from the baseline's."""
    return "*" if p_value is not None and p_value < SIGNIFICANCE_LEVEL else " "


def format_families(results: Sequence[EvalResult], families: list[FamilyScores]) -> str:
    """One block per family: a row per run, a column per measure; `*` marks p < 0.05 against the first run."""
    measures = results[0].measures
    names = [Path(r.run).name for r in results]
    width = max(len(n) for n in names)
    lines = [
        f"qrels: {results[0].qrels}",
        f"measures: {results[0].measure_set}{' (prime)' if results[0].prime else ''}; "
        f"families by topic id prefix; baseline = first run",
        "",
    ]
    for group in families:
        lines.append(f"{group.family} ({len(group.topics)} topics)")
        lines.append("  " + "run".ljust(width) + "".join(f"{m:>11}" for m in measures))
        for name, means, ps in zip(names, group.means, group.p_values):
            cells = [f"{means[m]:.4f}{_star(ps[m])}" for m in measures]
            lines.append("  " + name.ljust(width) + "".join(f"{c:>11}" for c in cells))
        lines.append("")
    lines.append(f"* p < {SIGNIFICANCE_LEVEL} in a paired t-test over the family's topics against the first run")
    return "\n".join(lines)


def families_json(results: Sequence[EvalResult], families: list[FamilyScores]) -> dict:
    return {
        "qrels": results[0].qrels,
        "prime": results[0].prime,
        "measures": results[0].measures,
        "runs": [r.run for r in results],
        "families": [
            {
                "family": g.family,
                "topics": len(g.topics),
                "runs": [{"run": r.run, "means": m, "p_values": p} for r, m, p in zip(results, g.means, g.p_values)],
            }
            for g in families
        ],
    }
