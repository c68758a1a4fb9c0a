"""Approach Zero's paths and similarity formulas, pinned to the worked examples of the thesis (Zhong 2023)."""

from __future__ import annotations

import numpy as np
import pytest

from mathscout.structure import scoring
from mathscout.structure.parser import parse_latex
from mathscout.structure.paths import PathPrefix, leaf_count, path_prefixes
from mathscout.structure.postings import decode_varbyte, encode_varbyte


def prefixes(latex: str) -> list[PathPrefix]:
    result = parse_latex(latex)
    assert result.tree is not None, latex
    return path_prefixes(result.tree)


def by_token_path(paths: list[tuple[str, str, int]]) -> dict[str, list[PathPrefix]]:
    """Hand-built paths (token path, leaf symbol, fingerprint) all ending at one root, grouped by token path."""
    grouped: dict[str, list[PathPrefix]] = {}
    for leaf, (token_path, symbol, fingerprint) in enumerate(paths):
        grouped.setdefault(token_path, []).append(PathPrefix(token_path, 0, leaf, symbol, fingerprint))
    return grouped


def test_figure_3_1_leaf_root_paths_and_prefixes():
    token_paths = {p.token_path for p in prefixes(r"ab+\frac{c}{d}+e_1^2")}
    assert {
        "VAR/MUL/ADD",
        "VAR/rank1/FRAC/ADD",
        "VAR/rank2/FRAC/ADD",
        "VAR/BASE/SUBSUP/ADD",
        "NUM/SUB/SUBSUP/ADD",
        "NUM/SUP/SUBSUP/ADD",
        "VAR/MUL",
        "VAR/rank1/FRAC",
        "VAR/rank2/FRAC",
    } <= token_paths
    # rank nodes and script slots are never root ends (no `VAR/rank1`, `VAR/BASE` prefixes)
    assert not {"VAR/rank1", "VAR/rank2", "VAR/BASE", "NUM/SUB", "NUM/SUP"} & token_paths


def test_paths_ignore_operand_order_under_commutative_operators():
    def signature(latex):
        return sorted((p.token_path, p.symbol, p.fingerprint) for p in prefixes(latex))

    assert signature("a+bc") == signature("cb+a")
    assert signature(r"\frac{a}{b}") != signature(r"\frac{b}{a}")


def test_table_3_1_mark_and_cross_is_3_4():
    # x + y + y^2 against -y + x + x^2 with the caption's path sets; -y differs from y only by its fingerprint
    query = by_token_path(
        [("VAR/ADD", "x", 1), ("VAR/ADD", "y", 1), ("VAR/BASE/SUBSUP/ADD", "y", 2), ("NUM/SUP/SUBSUP/ADD", "2", 3)]
    )
    doc = by_token_path(
        [("VAR/ADD", "y", 9), ("VAR/ADD", "x", 1), ("VAR/BASE/SUBSUP/ADD", "x", 2), ("NUM/SUP/SUBSUP/ADD", "2", 3)]
    )
    marks = scoring.mark(((query[t], doc[t]) for t in query), b1=0.9, b2=0.8)
    assert marks["y"]["x"] == pytest.approx(0.8 + 0.8)  # y and y^2 against x and x^2: symbols differ (b2)
    assert marks["y"]["y"] == pytest.approx(0.9)  # y against -y: operand matches, fingerprint does not (b1)
    assert marks["x"]["x"] == pytest.approx(1.0)  # complete match
    assert scoring.mark_and_cross(query, doc, b1=0.9, b2=0.8) == pytest.approx((0.8 + 0.8) + 0.8 + 1.0)


def test_mark_and_cross_rewards_consistent_renaming():
    # rule 3 (bound variable greediness): x + x vs y + y beats x + x vs x + z
    same_pattern = scoring.mark_and_cross(
        by_token_path([("VAR/ADD", "x", 1)] * 2), by_token_path([("VAR/ADD", "y", 1)] * 2)
    )
    one_exact = scoring.mark_and_cross(
        by_token_path([("VAR/ADD", "x", 1)] * 2), by_token_path([("VAR/ADD", "x", 1), ("VAR/ADD", "z", 1)])
    )
    assert same_pattern > one_exact
    identical = prefixes("x+y+y^2")
    q = scoring.group_by_root(identical)[0]
    assert scoring.mark_and_cross(q, q) == pytest.approx(leaf_count(parse_latex("x+y+y^2").tree))


def test_equation_4_14_widest_node_match_is_3():
    query_node = {"VAR/MUL/ADD": 5, "VAR/ADD": 1}
    d4 = {"VAR/MUL/ADD": 2, "VAR/ADD": 2}
    d1 = {"VAR/MUL/ADD": 3}
    assert scoring.node_pair_width(query_node, d4) == 3  # min(5, 2) + min(1, 2)
    assert scoring.node_pair_width(query_node, d1) == 3  # min(5, 3)
    assert max(scoring.node_pair_width(query_node, d) for d in (d4, d1)) == 3


def test_figure_3_2_widest_common_subtree_is_a_plus_bc():
    query, doc = prefixes("a+bc+xy+z"), prefixes("(a+bc)+xy")
    best = scoring.widest_match(scoring.group_by_root(query), scoring.group_by_root(doc))
    assert best.width == 3 and best.query_node == 0 and best.doc_node == 1  # (a+bc) is the document's first child
    weighted = scoring.widest_match(scoring.group_by_root(query), scoring.group_by_root(doc), idf=lambda t: 2.0)
    assert weighted.width == 6  # Eq. 3.5: each matched leaf counts its path's idf


def test_figure_3_5_multi_tree_matching_and_equation_3_3():
    trees = scoring.multi_tree_match(prefixes("a+bc+xy+z"), prefixes("(a+bc)+xy"))
    assert [(t.leaves, t.operators) for t in trees] == [(3, 2), (2, 1)]  # a+bc (ADD, MUL) then xy (MUL)
    gamma = scoring.multi_tree_similarity(trees, alpha=0.4, betas=(0.9, 0.06, 0.04))
    assert gamma == pytest.approx(0.9 * (0.4 * 2 + 0.6 * 3) + 0.06 * (0.4 * 1 + 0.6 * 2))
    assert scoring.multi_tree_similarity(trees, alpha=0.0, betas=(1.0,)) == 3  # = w* of Eq. 3.4


def test_overall_score_formulas():
    assert scoring.symbol_factor(1.0) == 1.0 and scoring.symbol_factor(0.0) == 0.5  # Eq. 3.14
    assert scoring.length_penalty(3, 0.3) == pytest.approx(0.7 + 0.3 / np.log(4))  # Eq. 3.15
    assert scoring.length_penalty(3, 0.05) > scoring.length_penalty(30, 0.05)  # longer formulas are penalised
    assert scoring.overall_score(4.0, 0.5, 0.9) == pytest.approx(1.8)  # Eq. 3.16
    assert scoring.math_text_score(2.0, 3.0) == pytest.approx(2.5 * 2.0 + 3.0)  # Eq. 3.18, λ_m = 2.5
    assert scoring.score_upper_bound(5.0, 0.3, 5) == pytest.approx(5 * (0.7 + 0.3 / np.log(6)))  # Eq. 4.15
    assert scoring.initial_threshold(0.0, 10.0, 0.3) == 0.0
    assert 0 < scoring.initial_threshold(0.2, 10.0, 0.3) < scoring.score_upper_bound(2.0, 0.3, 1)  # Eq. 4.17


def test_formula_similarity_prefers_the_same_formula_and_stays_under_its_bound():
    query = prefixes("x^2+y^2=z^2")
    scores = {}
    for latex in ("x^2+y^2=z^2", "a^2+b^2=c^2", "x^2+y^2", "E=mc^2"):
        tree = parse_latex(latex).tree
        match = scoring.formula_similarity(query, path_prefixes(tree), leaf_count(tree))
        scores[latex] = match.score
        assert match.score <= scoring.score_upper_bound(match.width, scoring.ETA_ARQMATH, leaf_count(tree)) + 1e-12
    assert scores["x^2+y^2=z^2"] > scores["a^2+b^2=c^2"] > scores["x^2+y^2"] > scores["E=mc^2"]


def test_varbyte_round_trip():
    values = np.array([0, 1, 127, 128, 300, 2**31 - 1, 2**40], dtype=np.int64)
    encoded = encode_varbyte(values)
    assert len(encoded) < values.nbytes
    assert decode_varbyte(encoded, len(values)).tolist() == values.tolist()


def test_multi_tree_option_scores_eq_3_16_with_eq_3_3():
    """Fig. 3.5: γ(π) = 0.9·(0.4·2 + 0.6·3) + 0.06·(0.4·1 + 0.6·2), times the widest match's S_sym and P (η = 0.05)."""
    q, d = prefixes("a+bc+xy+z"), prefixes("(a+bc)+xy")
    single = scoring.formula_similarity(q, d, 5, eta=0.05)
    score = scoring.multi_tree_formula_similarity(q, d, 5, eta=0.05)
    gamma = 0.9 * (0.4 * 2 + 0.6 * 3) + 0.06 * (0.4 * 1 + 0.6 * 2)
    assert score == pytest.approx(gamma * single.symbol * single.penalty)
    assert scoring.multi_tree_formula_similarity(q, prefixes(r"\sqrt{w}"), 1) == 0.0
