"""An order-free key of an operator tree: two formulas structure search sees as the same get one key."""

from __future__ import annotations

from mathscout.structure.opt import Node


def tree_key(node: Node) -> str:
    """Token, leaf symbol and children; children of commutative operators sorted (`a+b` = `b+a`)."""
    children = [tree_key(c) for c in node.children]
    if node.commutative:
        children.sort()
    label = node.token + (f":{node.symbol}" if node.is_leaf else "")
    return label + ("(" + ",".join(children) + ")" if children else "")
