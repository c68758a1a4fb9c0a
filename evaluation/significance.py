"""Paired significance tests over topics and the multiple-testing corrections applied to them.

Several runs tested against one baseline are several tests at once: with five runs and a 5 % level, one false
"significant" is likely by chance. The corrections adjust each measure's p-values over the runs tested against
the baseline (the family is one measure's comparisons, as PyTerrier's `Experiment` does):

- `holm` (the default): Holm-Bonferroni step-down; never less powerful than Bonferroni, same guarantee;
- `bonferroni`: each p-value times the number of tests;
- `none`: the raw p-values.

Corrected p-values are capped at 1; a missing p-value (fewer than two topics) stays missing and is not counted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from mathscout.errors import MathScoutError

SIGNIFICANCE_LEVEL = 0.05
CORRECTIONS = ("holm", "bonferroni", "none")
DEFAULT_CORRECTION = "holm"


def paired_p_value(baseline: Sequence[float], other: Sequence[float]) -> float | None:
    """Two-sided paired t-test p-value; 1.0 when the runs agree on every topic, None below 2 topics."""
    if len(baseline) < 2:
        return None
    if all(a == b for a, b in zip(baseline, other)):
        return 1.0
    from scipy.stats import ttest_rel  # imported here: the command line's parser reads CORRECTIONS

    p = float(ttest_rel(other, baseline).pvalue)
    return None if math.isnan(p) else p


def check_correction(name: str) -> str:
    if name not in CORRECTIONS:
        raise MathScoutError(f"unknown correction '{name}' (use one of: {', '.join(CORRECTIONS)})")
    return name


def correct(p_values: Sequence[float | None], correction: str = DEFAULT_CORRECTION) -> list[float | None]:
    """`p_values` adjusted for testing them together (same order; None stays None)."""
    check_correction(correction)
    present = [(i, p) for i, p in enumerate(p_values) if p is not None]
    out: list[float | None] = list(p_values)
    m = len(present)
    if correction == "none" or m == 0:
        return out
    if correction == "bonferroni":
        for i, p in present:
            out[i] = min(1.0, p * m)
        return out
    running = 0.0  # Holm: the j-th smallest times (m - j), made monotone by a running maximum
    for j, (i, p) in enumerate(sorted(present, key=lambda ip: ip[1])):
        running = max(running, min(1.0, (m - j) * p))
        out[i] = running
    return out
