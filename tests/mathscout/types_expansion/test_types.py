"""Mathematical types: dictionary, detection, type embeddings, type-aware expansion (TypesExp, Types2X, RM3)."""

from __future__ import annotations

import itertools
import json

import pytest

from mathscout.errors import MathScoutError
from mathscout.types_expansion.detect import TERMS_FILE, TypeDetector, detect_types, read_terms, singular
from mathscout.types_expansion.dictionary import Entry, normalize_entry, normalized_terms
from mathscout.types_expansion.embeddings import train_type_embeddings
from mathscout.types_expansion.expand import expand_query, load_type_model, type_expansion
from tests.support.corpora import TINY_DOCS

# ---- dictionary --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Abelian group", "abelian group"),
        ('k\\"ochel number', "kochel number"),  # LaTeX accents folded
        ("erd\\H{o}s number", "erdos number"),
        ("{\\O}ystein ore", "oystein ore"),
        ("random graph (infinite)", "random graph"),  # parenthetical gloss dropped
        ("Stokes' theorem", "stokes theorem"),
        ("well-defined", "well defined"),  # hyphen → space
        ("$\\kappa$-categorical", None),  # mostly LaTeX
        ("c^\\infty n-plane distribution", None),
        ("of", None),  # a single stopword
        ("lemma", None),  # a discourse word, not a type
        ("every $\\epsilon$-automaton is equivalent to an automaton", None),  # a clause
        ("pythagorean hypotenuses are contraharmonic means", None),
    ],
)
def test_dictionary_entries_are_normalised_or_dropped(raw, expected):
    assert normalize_entry(raw) == expected


def test_plural_spellings_of_one_type_collapse_to_the_title():
    terms, dropped = normalized_terms(
        [
            Entry("abelian group", "title"),
            Entry("abelian groups", "synonym"),
            Entry("Abelian-Group", "defines"),
        ]
    )
    assert terms == ["abelian group"]
    assert dropped["duplicate after normalisation"] == 2


def test_shipped_dictionary_attributes_planetmath_and_holds_types():
    first = TERMS_FILE.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith("#") and "PlanetMath" in first and "CC BY-SA 3.0" in first
    terms = read_terms()
    assert len(terms) > 5000
    assert {"abelian group", "vector space", "cauchy sequence", "group"} <= set(terms)


# ---- detection ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def detector() -> TypeDetector:
    return TypeDetector(
        [
            "group",
            "abelian group",
            "free abelian group",
            "matrix",
            "well defined function",
            "stokes theorem",
            "vector space",
        ]
    )


def test_longest_match_wins(detector):
    text = "Every free abelian group is an abelian group, and a group."
    assert [(m.term, text[m.start : m.end]) for m in detector.detect(text)] == [
        ("free abelian group", "free abelian group"),
        ("abelian group", "abelian group"),
        ("group", "group"),
    ]


def test_plurals_case_hyphens_and_possessives_match(detector):
    text = "Abelian Groups, invertible matrices, a well-defined function and Stokes's theorem"
    found = detector.detect(text)
    assert [m.term for m in found] == ["abelian group", "matrix", "well defined function", "stokes theorem"]
    assert text[found[0].start : found[0].end] == "Abelian Groups"
    assert singular("properties") == "property" and singular("vertices") == "vertex"
    assert singular("series") == "series" and singular("classes") == "class"


def test_formulas_and_punctuation_break_matches(detector):
    assert [m.term for m in detector.detect("an abelian $G$ group")] == ["group"]
    assert [m.term for m in detector.detect("vector. Space")] == []
    assert detector.sentences("Let $V$ be a vector space. Then $\\dim V = 3$.") == [
        ["let", "@@@", "be", "a", "vector_space"],
        ["then", "@@@"],
    ]


def test_shipped_dictionary_detects_types_in_real_text():
    found = [m.term for m in detect_types("Is every finite abelian group a direct product of cyclic groups?")]
    assert "abelian group" in found and "group" not in found


# ---- embeddings and expansion --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shared_texts(shared_data) -> list[str]:
    with open(shared_data / "collection" / "docs.jsonl", encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in itertools.islice(f, 400)]


@pytest.fixture(scope="module")
def tiny_model(shared_texts, tmp_path_factory):
    from mathscout.types_expansion.detect import default_detector

    model, stats, _ = train_type_embeddings(
        shared_texts,
        default_detector(),
        tmp_path_factory.mktemp("w2v"),
        min_count=2,
        vector_size=32,
        epochs=3,
        workers=1,
    )
    assert stats.type_mentions > 1000
    return model


def test_tiny_word2vec_returns_type_neighbours(tiny_model):
    assert "group" in tiny_model
    neighbours = tiny_model.neighbours("group", 5)
    assert len(neighbours) == 5
    assert all(n in tiny_model.types and n != "group" and -1 <= s <= 1 for n, s in neighbours)
    assert [s for _, s in neighbours] == sorted((s for _, s in neighbours), reverse=True)


def test_expansion_adds_fresh_neighbours_of_query_types(tiny_model):
    expansion = expand_query("Is a subgroup of an abelian group normal?", tiny_model)
    assert not expansion.is_noop and "abelian group" in expansion.types
    assert expansion.expansions and all(new not in expansion.types for _, new, _ in expansion.expansions)
    weights = expansion.type_weights()
    assert weights["abelian_group"] == 2.0 and all(w == 2.0 for w in weights.values())


def test_type_free_query_is_not_expanded(tiny_model):
    expansion = expand_query("what is $1+1$?", tiny_model)
    assert expansion.is_noop and expansion.expansions == [] and expansion.type_weights() == {}
    assert "no mathematical types" in expansion.summary()


# ---- the `types` component and the types / types2x / rm3 modes ----------------------------------------


def test_missing_type_model_names_the_build_command(tiny_index):
    from mathscout.retrievers import open_retriever

    command = f"mathscout index --index {tiny_index} --components types"
    with pytest.raises(MathScoutError, match="--components types") as error:
        open_retriever(tiny_index, "types")
    assert command in str(error.value)
    with pytest.raises(MathScoutError) as error:
        load_type_model(tiny_index)
    assert command in str(error.value)


@pytest.fixture(scope="module")
def typed_index(tiny_index, tmp_path_factory):
    """`mathscout train types` over a copy of the tiny index the tests share (without PlanetMath bodies, to keep it
    small)."""
    import contextlib
    import io
    import shutil

    from mathscout.cli import main
    from mathscout.index.layout import IndexDir

    typed = shutil.copytree(tiny_index, tmp_path_factory.mktemp("types-index") / "tiny")
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(out):
        patch.delenv("MATHSCOUT_PLANETMATH", raising=False)
        assert main(["train", "types", "--index", str(typed), "--planetmath", "none"]) == 0
    assert "tokens/s" in out.getvalue() and "word2vec" in out.getvalue()
    stats = IndexDir(typed).manifest.components["types"]
    assert stats["documents"] == TINY_DOCS and stats["planetmath_extra_texts"] == 0
    assert stats["type_mentions"] > 0 and stats["types_with_vectors"] > 0
    assert stats["word2vec"]["sg"] == 1 and stats["word2vec"]["window"] == 10 and stats["train_seconds"] > 0
    return typed


def test_type_modes_add_type_scores_to_bm25(typed_index):
    from mathscout.retrievers import open_retriever

    query = "Is every finite abelian group a direct product of cyclic groups?"
    bm25 = open_retriever(typed_index, "bm25").search(query, k=10)
    types2x = open_retriever(typed_index, "types2x")
    hits = types2x.search(query, k=10)
    assert hits and [h.rank for h in hits] == list(range(1, len(hits) + 1))
    assert any(h.components["types"] > 0 for h in hits)
    assert all(h.score == pytest.approx(h.components["bm25"] + h.components["types"]) for h in hits)
    assert [h.doc_id for h in hits] != [h.doc_id for h in bm25]
    types = open_retriever(typed_index, "types")
    assert types.expansion(query).expansions and not types2x.expansion(query).expansions


def test_type_free_query_ranks_like_bm25(typed_index):
    from mathscout.retrievers import open_retriever

    query = "$x^2+1$"
    types = open_retriever(typed_index, "types")
    assert types.expansion(query).is_noop
    assert [h.doc_id for h in types.search(query, k=5)] == [
        h.doc_id for h in open_retriever(typed_index, "bm25").search(query, k=5)
    ]


def test_rm3_mode_reranks_with_feedback(typed_index):
    from mathscout.retrievers import open_retriever

    query = "convergence of the harmonic series"
    rm3 = open_retriever(typed_index, "rm3").search(query, k=10)
    bm25 = open_retriever(typed_index, "bm25").search(query, k=10)
    assert rm3 and set(rm3[0].components) == {"rm3"}
    assert [h.doc_id for h in rm3] != [h.doc_id for h in bm25]


# ---- the `type_expansion` tool and bad input ---------------------------------------------------------------


def test_type_expansion_tool_reports_types_and_related_types_with_cosines(typed_index):
    from mathscout.events import Expansion

    result = type_expansion("Is every finite abelian group a direct product of cyclic groups?", typed_index)
    assert not result.is_noop and all(isinstance(e, Expansion) for e in result)
    assert [e.type for e in result] == ["abelian group", "direct product", "cyclic group"]
    first = result[0]
    assert len(first.related) == 5 and all(-1 <= cosine <= 1 for _, cosine in first.related)
    assert [c for _, c in first.related] == sorted((c for _, c in first.related), reverse=True)
    assert not {t for e in result for t, _ in e.related} & {e.type for e in result}  # fresh types only
    assert result.summary.startswith("query types: abelian group")


@pytest.mark.parametrize(
    "text",
    [
        "what is $\\int_0^1 x^2\\,dx$?",  # formulas only
        "zxqv flumbert grobnitz",  # unknown tokens
        "∀ε>0 ∃δ>0: |x−a|<δ ⇒ |f(x)−f(a)|<ε",  # Unicode math, no words that name types
        "Wie zeigt man, dass diese Folge beschränkt ist?",  # German
        "如何证明这个不等式？",  # Chinese
    ],
)
def test_texts_without_types_are_a_reported_noop(typed_index, text):
    result = type_expansion(text, typed_index)
    assert result.is_noop and list(result) == [] and len(result) == 0
    assert result.summary == "no mathematical types detected: type expansion is a no-op"


def test_types_are_found_around_unicode_math_and_in_accented_text(typed_index):
    result = type_expansion(
        "Soit G un abelian group d’ordre n², et ∀g∈G: g·g = e; is G a vector space over 𝔽₂?", typed_index
    )
    assert {"abelian group", "vector space"} <= {e.type for e in result}


def test_empty_text_and_missing_model_are_one_line_errors(tiny_index, typed_index, tmp_path):
    from mathscout.errors import QueryError

    with pytest.raises(QueryError, match="empty"):
        type_expansion("   ", typed_index)
    with pytest.raises(MathScoutError, match="no index at"):
        type_expansion("abelian group", tmp_path / "nowhere")


def test_huge_query_is_expanded_like_its_types(typed_index):
    text = "Let G be a finite abelian group. " * 2000
    result = type_expansion(text, typed_index)
    assert [e.type for e in result] == ["abelian group"]


def test_types_mode_retriever_reports_what_expansion_added(typed_index):
    from mathscout.retrievers import open_retriever

    types = open_retriever(typed_index, "types")
    expansion = types.expansion("Is every finite abelian group a direct product of cyclic groups?")
    assert expansion.summary().startswith("query types: abelian group") and "added:" in expansion.summary()
    weights = expansion.type_weights()
    assert weights["abelian_group"] == 2.0 and len(weights) == len(expansion.types) + len(expansion.added)


def test_broken_type_model_is_a_clear_error(tmp_path):
    from mathscout.types_expansion.embeddings import TypeEmbeddings

    (tmp_path / "vocabulary.json").write_text('{"types": ["abelian group"]}', encoding="utf-8")
    (tmp_path / "vectors.npy").write_bytes(b"not an array")
    (tmp_path / "terms.tsv").write_text("abelian group\n", encoding="utf-8")
    with pytest.raises(MathScoutError, match=r"type vectors .* unreadable .* --components types"):
        TypeEmbeddings.load(tmp_path)


def test_type_embeddings_round_trip_without_pickles(tiny_model, tmp_path):
    """Saved as a plain float32 array and a JSON list of types (issue 42): read back, the same neighbours."""
    from mathscout.types_expansion.embeddings import TypeEmbeddings

    tiny_model.save(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["terms.tsv", "vectors.npy", "vocabulary.json"]
    loaded = TypeEmbeddings.load(tmp_path)
    assert loaded.types == tiny_model.types
    assert loaded.neighbours("group", 5) == tiny_model.neighbours("group", 5)


def test_an_old_pickled_type_model_is_never_unpickled(tmp_path):
    """An index built before issue 42 keeps gensim's pickle (vectors.kv): one line naming the rebuild, and a payload
    in it never runs."""
    from mathscout.types_expansion.embeddings import TypeEmbeddings
    from tests.support.crafted import pickled

    folder = tmp_path / "idx" / "types"
    folder.mkdir(parents=True)
    (folder / "vectors.kv").write_bytes(pickled(tmp_path / "ran"))
    (folder / "terms.tsv").write_text("abelian group\n", encoding="utf-8")
    with pytest.raises(MathScoutError, match="old format") as error:
        TypeEmbeddings.load(folder)
    assert f"mathscout index --index {tmp_path / 'idx'} --components types" in str(error.value)
    assert not (tmp_path / "ran").exists()


def test_corpus_filter_drops_rare_terms_and_adjectives(shared_texts):
    from mathscout.types_expansion.dictionary import modifier_rates

    rates = modifier_rates(["finite", "group", "matrix", "abelian"], shared_texts)
    assert rates["finite"][1] > 0.7 and rates["group"][1] < 0.4 and rates["matrix"][1] < 0.5
    terms = set(read_terms())
    assert not {"finite", "abelian", "real"} & terms  # properties, not types (§3.2)
    assert {"group", "matrix", "finite group", "abelian group"} <= terms
