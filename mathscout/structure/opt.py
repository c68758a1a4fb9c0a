"""Operator trees (OPT), Zhong 2023 thesis §3.1: internal nodes are operators, leaves are operands.

Shared contract between the LaTeX parser (which builds trees) and the path index / scorer (which
reads them). Labels follow Zhong 2023 thesis Figure 3.1: operators like ADD, MUL, FRAC, SUBSUP (with BASE/SUB/SUP
children), EQ; rank nodes `rank1`, `rank2`, … under non-commutative operators; leaves tokenized to
their type (VAR, NUM, …) while `symbol` keeps the original symbol for symbol similarity (Zhong 2023 thesis §3.2.1).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass
class Node:
    """One OPT node.

    token: tokenized label used in paths (operator name, rank node, or leaf type such as VAR/NUM).
    symbol: leaves: the unified original symbol (`x`, `2`, `\\alpha`); operators: their source text.
    commutative: operand order is irrelevant (ADD, MUL, EQ, …); otherwise children are rank nodes.
    wildcard: a `\\qvar{…}` query wildcard (NTCIR-12) that may match any subtree.
    start, end: leaves: the character span of the leaf in the parsed LaTeX (None when unknown);
        not part of node equality.
    """

    token: str
    symbol: str = ""
    children: list[Node] = field(default_factory=list)
    commutative: bool = False
    wildcard: bool = False
    start: int | None = field(default=None, compare=False)
    end: int | None = field(default=None, compare=False)

    @property
    def is_leaf(self) -> bool:
        return not self.children

    def leaves(self) -> Iterator[Node]:
        """Leaves in left-to-right order."""
        return (node for node in self.walk() if not node.children)

    def walk(self) -> Iterator[Node]:
        """Every node, pre-order (without recursion, however deep the tree)."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))

    def pretty(self, indent: int = 0) -> str:
        """A readable multi-line rendering (for tests and debugging)."""
        label = self.token + (f" {self.symbol}" if self.is_leaf and self.symbol else "")
        lines = ["  " * indent + label]
        lines += [child.pretty(indent + 1) for child in self.children]
        return "\n".join(lines)


@dataclass
class ParseResult:
    """A parsed formula: the tree (None when nothing could be parsed), and whether the parse was partial."""

    tree: Node | None
    complete: bool
    error: str = ""
