"""Leaf-root paths of an operator tree and their prefixes: the search unit of structure search (Zhong 2023 thesis §3.1.3).

Every leaf (operand) has one leaf-root path. Each *prefix* of it — from the leaf up to one of its
ancestors, the prefix's *root end* — represents the subexpression rooted at that ancestor (Zhong 2023 thesis, Figure 3.1):
two subtrees are taken as structurally equal when their prefixes pair up (Assumption 2). Paths match
by their *token path* (node tokens from the leaf upwards, `VAR/MUL/ADD`), so symbols may be
substituted; the leaf symbol and a *fingerprint* of the operator symbols above the leaf are kept for
symbol similarity (Zhong 2023 thesis §3.2.1).

Abstract nodes — rank nodes and the BASE/SUB/SUP slots of scripts — are never root ends: they are not
operators (Zhong 2023 thesis, Alg. 1 counts only visible operators) and the subtree under one equals its child's.

Wildcards (Zhong 2023 thesis §4.4.1, NTCIR-12 `\\qvar{…}`): a document's every non-root, non-abstract node — operator
or operand — is also indexed as an extra "leaf" `*` with its descendants ignored (*wildcard paths*,
`*/BASE/SUBSUP/ADD`), and a query's wildcard leaf is a normal leaf `*`, so `\\qvar{a}^2` matches the
`(y+1)^2` of a document through the path `*/BASE/SUBSUP`. Every wildcard path carries the symbol `*`
(a wildcard binds any symbol) and covers the `leaves` operands under its node.
"""

from __future__ import annotations

from dataclasses import dataclass

from mathscout.structure.opt import Node

WILDCARD = "*"  # token and symbol of wildcard paths
MAX_PATH_OPERATORS = 32  # a prefix spans at most this many operators above its leaf (deeper root ends are not indexed)
FINGERPRINT_OPERATORS = 4  # the fingerprint hashes the symbols of this many operators above the leaf
_SCRIPT_SLOTS = frozenset({"BASE", "SUB", "SUP"})
_FNV_OFFSET = 0x811C9DC5
_FNV_PRIME = 0x01000193


def is_abstract(token: str) -> bool:
    """Rank nodes and script slots: structural markers, not operators a reader sees (Zhong 2023 thesis, Alg. 1's VISIBLE)."""
    return token in _SCRIPT_SLOTS or (token.startswith("rank") and token[4:].isdigit())


@dataclass(frozen=True)
class PathPrefix:
    """One prefix of a leaf-root path.

    token_path: tokens from the leaf up to the root end, joined by `/` (e.g. `VAR/MUL/ADD`).
    root_end: pre-order id of the ancestor where the prefix ends (0 = the tree's root).
    leaf: left-to-right position of the leaf (as in `Node.leaves()` and `highlight.leaf_spans`).
    symbol: the leaf's original symbol (`x`, `2`, `\\alpha`); `*` on wildcard paths.
    fingerprint: 16-bit FNV-1a hash of the operator symbols just above the leaf (Zhong 2023 thesis §3.2.1).
    leaves: operands covered, positions `leaf … leaf + leaves − 1` (more than one only on a wildcard path).
    """

    token_path: str
    root_end: int
    leaf: int
    symbol: str
    fingerprint: int
    leaves: int = 1

    @property
    def covered(self) -> range:
        """Positions of the operands this path stands for."""
        return range(self.leaf, self.leaf + self.leaves)


def fnv1a16(parts: list[str]) -> int:
    """FNV-1a (32-bit) of the parts, each followed by a separator byte, folded to 16 bits (Zhong 2023 thesis §3.2.1)."""
    h = _FNV_OFFSET
    for part in parts:
        for byte in part.encode("utf-8") + b"\x00":
            h = ((h ^ byte) * _FNV_PRIME) & 0xFFFFFFFF
    return (h >> 16) ^ (h & 0xFFFF)


def path_prefixes(
    tree: Node, max_operators: int = MAX_PATH_OPERATORS, wildcard_paths: bool = False
) -> list[PathPrefix]:
    """All prefixes of all leaf-root paths of `tree`; a query's wildcard leaves give `*` paths.

    `wildcard_paths` (documents): also the `*` paths of every non-root, non-abstract node (Zhong 2023 thesis §4.4.1).
    A tree that is a single leaf has no operator and so no prefix.
    """
    prefixes: list[PathPrefix] = []
    below = _leaves_below(tree) if wildcard_paths else {}
    # iterative pre-order walk keeping the ancestor chain: (node, pre-order id)
    chain: list[tuple[Node, int]] = []
    stack: list[tuple[Node, int]] = [(tree, 0)]  # (node, depth)
    next_id = 0
    leaf_position = 0
    while stack:
        node, depth = stack.pop()
        del chain[depth:]
        node_id = next_id
        next_id += 1
        if wildcard_paths and chain and not is_abstract(node.token):
            _leaf_prefixes(WILDCARD, WILDCARD, leaf_position, below[id(node)], chain, max_operators, prefixes)
        if node.children:
            chain.append((node, node_id))
            stack.extend((child, depth + 1) for child in reversed(node.children))
            continue
        if node.wildcard:
            if not wildcard_paths:  # a query's wildcard; a document never has one
                _leaf_prefixes(WILDCARD, WILDCARD, leaf_position, 1, chain, max_operators, prefixes)
        else:
            _leaf_prefixes(node.token, node.symbol, leaf_position, 1, chain, max_operators, prefixes)
        leaf_position += 1
    return prefixes


def _leaves_below(tree: Node) -> dict[int, int]:
    """Operands under each node (keyed by `id(node)`), without recursion."""
    order: list[Node] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(node.children)
    below: dict[int, int] = {}
    for node in reversed(order):  # children before parents
        below[id(node)] = sum(below[id(c)] for c in node.children) if node.children else 1
    return below


def _leaf_prefixes(
    token: str,
    symbol: str,
    position: int,
    leaves: int,
    chain: list[tuple[Node, int]],
    max_operators: int,
    out: list[PathPrefix],
) -> None:
    tokens = [token]
    fingerprint_symbols: list[str] = []
    operators = 0
    for ancestor, ancestor_id in reversed(chain):
        tokens.append(ancestor.token)
        if is_abstract(ancestor.token):
            continue
        operators += 1
        if operators > max_operators:
            break
        if len(fingerprint_symbols) < FINGERPRINT_OPERATORS:
            fingerprint_symbols.append(ancestor.symbol or ancestor.token)
        out.append(PathPrefix("/".join(tokens), ancestor_id, position, symbol, fnv1a16(fingerprint_symbols), leaves))


def is_wildcard_path(token_path: str) -> bool:
    """Whether a token path is a wildcard path (`*/…`)."""
    return token_path.startswith(WILDCARD + "/")


def has_wildcard(prefixes: list[PathPrefix]) -> bool:
    """Whether any path is a wildcard path."""
    return any(is_wildcard_path(p.token_path) for p in prefixes)


def leaf_count(tree: Node) -> int:
    """Number of leaves (the formula length L_D of Zhong 2023 thesis Eq. 3.15)."""
    return sum(1 for _ in tree.leaves())
