"""Math tokenization for BM25: unified commands, dropped layout, surviving variables, query detection."""

import json
import time

import pytest

from mathscout.corpus import make_document
from mathscout.latex.tokens import analyze, formula_terms, lex, math_tokens, query_terms


@pytest.mark.parametrize(
    "a, b",
    [
        (r"\dfrac{1}{2}", r"\frac12"),
        (r"\tfrac{a}{b}", r"\frac{a}{b}"),
        (r"x \le y", r"x \leq y"),
        (r"x \leqslant y", r"x\le y"),
        (r"x \geq y", r"x \ge y"),
        (r"x \ne y", r"x \neq y"),
        (r"x \not= y", r"x \neq y"),
        (r"f: A \rightarrow B", r"f: A \to B"),
        (r"\varnothing", r"\emptyset"),
        (r"\left( x + 1 \right)", r"(x+1)"),
        (r"\int f(x) \, \mathrm{d}x", r"\int f(x) dx"),
        (r"\displaystyle \sum_{n} a_n \quad \! \;", r"\sum_n a_n"),
        (r"\mathbf{v} \cdot \mathit{w}", r"v \cdot w"),
        (r"\mathbb{R}^n", r"\R^n"),
        (r"\dbinom{n}{k}", r"\binom{n}{k}"),
    ],
)
def test_equivalent_latex_gives_the_same_tokens(a, b):
    assert math_tokens(a) == math_tokens(b)


def test_tokens_are_meaningful_symbols():
    assert math_tokens(r"\dfrac{1}{2}") == ["frac", "1", "2"]
    assert math_tokens(r"\sin^2 x + \cos^2 x = 1") == [
        "sin",
        "sup",
        "2",
        "x",
        "plus",
        "cos",
        "sup",
        "2",
        "x",
        "eq",
        "1",
    ]
    assert math_tokens(r"\text{for all } x \label{eq:1}") == ["x"]
    assert math_tokens(r"\operatorname{rank}(A)") == ["rank", "A"]
    assert math_tokens(r"\begin{pmatrix} a & b \\ c & d \end{pmatrix}") == ["matrix", "a", "b", "c", "d"]


def test_math_variables_and_commands_survive_analysis():
    doc = make_document("d", "Let $a$ be the integrals of $\\sin x$ and $A$.")
    terms = analyze(doc.text, doc.formulas)
    assert "m_a" in terms and "m_A" in terms  # case kept; `a` is not dropped as a stopword
    assert "m_sin" in terms  # `\sin` is not stemmed
    assert "integr" in terms and "let" in terms  # prose is Porter-stemmed
    assert "a" not in terms and "the" not in terms  # prose stopwords are dropped


def test_numbers_match_across_prose_and_math_and_pairs_are_terms():
    assert "101" in query_terms("the squares of 101 and 99")
    assert "101" in formula_terms("101^2")
    assert {"m2_x_sup", "m2_sup_2"} <= set(formula_terms("x^2"))


def test_words_inside_text_commands_are_prose():
    assert formula_terms(r"x \text{ for running }") == ("m_x", "run")


@pytest.mark.parametrize(
    "query, expected",
    [
        (r"\frac{1}{x}+1", {"m_frac", "m_x", "m_plus", "1"}),
        (r"prove x^2+1 > 0", {"prove", "m_x", "m_sup", "m_gt"}),
        (r"why is $a^2+b^2=c^2$ true", {"m_a", "m_b", "m_c", "true"}),
        (r"integral of \(\sqrt{x}\)", {"integr", "m_sqrt", "m_x"}),
    ],
)
def test_query_math_is_found_delimited_or_bare(query, expected):
    assert expected <= set(query_terms(query))


def test_plain_word_queries_stay_words():
    assert query_terms("a group of prime order is cyclic") == ["group", "prime", "order", "cyclic"]


@pytest.mark.parametrize(
    "junk", ["{", "}", r"\frac{", r"\text{unclosed", r"\begin{", "\\", "^_^", r"\left(", "", "$$", "\x00"]
)
def test_malformed_latex_never_raises(junk):
    assert isinstance(lex(junk), list)
    assert isinstance(query_terms(junk), list)


def test_tokenizing_real_documents_is_fast(shared_data):
    docs = []
    with open(shared_data / "collection" / "docs.jsonl", encoding="utf-8") as f:
        for line, _ in zip(f, range(2000)):
            record = json.loads(line)
            docs.append(make_document(record["id"], record["text"]))
    started = time.perf_counter()
    terms = sum(len(analyze(d.text, d.formulas)) for d in docs)
    seconds = time.perf_counter() - started
    assert terms > 100_000
    assert seconds < 10, f"{len(docs)} documents took {seconds:.1f} s"


def test_wildcards_give_no_terms_and_break_pairs():
    terms = formula_terms(r"\qvar{a}^2+\qvar{b}^2")
    assert not any("qvar" in t or t in ("m_a", "m_b") for t in terms)
    assert terms == ("m_sup", "2", "m2_sup_2", "m_plus", "m2_2_plus", "m_sup", "2", "m2_sup_2")
    assert formula_terms(r"u=\qvar@construct{?}") == ("m_u", "m_eq", "m2_u_eq")  # MSE's placeholder macro too


def test_both_math_readers_unify_the_spellings_of_the_one_alias_table():
    """A spelling the table gives both readers means the same to BM25 (one token) and to structure search
    (one tree) as its canonical form: `x \\le y` is `x \\leq y` for both."""
    from mathscout.latex.aliases import TABLE
    from mathscout.structure.parser import parse_latex

    checked = 0
    for row in TABLE:
        if not row.canonical.startswith("\\") or not row.canonical[1:].isalpha():
            continue
        written = rf"x {row.canonical} y"
        for spelling in row.spellings:
            other = rf"x \{spelling} y"
            assert math_tokens(other) == math_tokens(written), spelling
            assert _shape(parse_latex(other).tree) == _shape(parse_latex(written).tree), spelling
            checked += 1
    assert checked > 30


def _shape(node):
    """A tree without source positions."""
    return None if node is None else (node.token, node.symbol, tuple(_shape(c) for c in node.children))


def test_the_supremum_and_the_superscript_are_different_tokens_in_new_indexes():
    """Vocabulary 2 (new builds) fixes a collision: `\\sup` and `^` were both `sup`; vocabulary 1 (indexes whose
    manifest records none) keeps it, so they answer as they were built."""
    from mathscout.latex.aliases import LEGACY_VOCABULARY, VOCABULARY

    assert math_tokens(r"\sup_x f", VOCABULARY)[:2] == ["supremum", "sub"]
    assert math_tokens(r"\operatorname{sup} A", VOCABULARY)[0] == math_tokens("sup A", VOCABULARY)[0] == "supremum"
    assert math_tokens("x^2", VOCABULARY) == ["x", "sup", "2"]
    assert math_tokens(r"\sup_x f", LEGACY_VOCABULARY)[:2] == math_tokens("sup_x f")[:2] == ["sup", "sub"]
    assert math_tokens(r"\frac{a}{b} \le c", VOCABULARY) == math_tokens(r"\frac{a}{b} \le c", LEGACY_VOCABULARY)


def test_a_new_index_records_its_token_vocabulary_and_searches_with_it(tiny_index):
    from mathscout.index.layout import IndexDir
    from mathscout.latex.aliases import VOCABULARY
    from mathscout.retrievers.bm25 import BM25Retriever
    from mathscout.types import Query

    index = IndexDir(tiny_index)
    assert index.manifest.components["bm25"]["vocabulary"] == VOCABULARY
    assert index.manifest.components["structure"]["vocabulary"] == VOCABULARY
    assert "m_supremum" in BM25Retriever(index).query_weights(Query(id="q", text=r"the least upper bound $\sup A$"))


def test_a_new_structure_index_records_its_lexer_and_an_old_one_parses_queries_as_it_was_built(tiny_index, tmp_path):
    """New structure builds parse with lexer 2 (whitespace is never a leaf) and record it; an index whose manifest
    records no lexer was built with lexer 1, so its queries keep lexer 1's trees (a trailing space is a leaf `' '`)."""
    import json
    import shutil

    from mathscout.index.layout import IndexDir
    from mathscout.retrievers import open_retriever
    from mathscout.structure.lexer import LEGACY_LEXER, LEXER

    def whitespace_leaves(prepared) -> list[str]:
        return [leaf.symbol for leaf in prepared.tree.leaves() if leaf.symbol and not leaf.symbol.strip()]

    formula = "x^2 + 1 "  # a topic formula as a file may hold it (the query splitter strips those it finds in text)
    assert IndexDir(tiny_index).manifest.components["structure"]["lexer"] == LEXER
    new = open_retriever(tiny_index, "structure")
    assert new.searcher.lexer == LEXER and whitespace_leaves(new.searcher.prepare(formula)) == []

    old = shutil.copytree(tiny_index, tmp_path / "old")
    manifest = json.loads((old / "manifest.json").read_text(encoding="utf-8"))
    del manifest["components"]["structure"]["lexer"]
    (old / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    legacy = open_retriever(old, "structure")
    assert legacy.searcher.lexer == LEGACY_LEXER and whitespace_leaves(legacy.searcher.prepare(formula)) == [" "]
    assert legacy.searcher.prepare("x^2 + 1").tree == new.searcher.prepare("x^2 + 1").tree  # no space: the same tree
