"""Character spans to highlight in a formula's LaTeX, given which of its OPT leaves matched.

Leaves are identified by their position in left-to-right order (`Node.leaves()`), the order in which a
path index enumerates a formula's leaf-root paths (Zhong 2023 thesis §3.1.3). The parser records each leaf's
character span, so a match maps back onto the source text.
"""

from __future__ import annotations

from collections.abc import Iterable

from mathscout.structure.opt import Node
from mathscout.structure.parser import parse_latex


def leaf_spans(tree: Node, leaf_positions: Iterable[int]) -> list[tuple[int, int]]:
    """(start, end) of the given leaves of `tree` (unknown positions and spanless leaves are skipped)."""
    wanted = set(leaf_positions)
    spans = []
    for i, leaf in enumerate(tree.leaves()):
        if i in wanted and leaf.start is not None and leaf.end is not None:
            spans.append((leaf.start, leaf.end))
    return spans


def merge_spans(spans: Iterable[tuple[int, int]], latex: str) -> list[tuple[int, int]]:
    """Sorted spans, with overlapping ones and ones separated only by spaces/braces merged."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and latex[merged[-1][1] : start].strip(" {}") == "":
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def highlight_spans(latex: str, leaf_positions: Iterable[int]) -> list[tuple[int, int]]:
    """Character spans of `latex` covering the matched leaves (empty when the formula does not parse)."""
    tree = parse_latex(latex).tree
    if tree is None:
        return []
    return merge_spans(leaf_spans(tree, leaf_positions), latex)
