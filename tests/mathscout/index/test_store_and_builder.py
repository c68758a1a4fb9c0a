"""Index directories: SQLite store round trip, atomic builds, adding components, clear errors."""

import json
from pathlib import Path

import pytest

from mathscout.errors import IndexMissingError, MathScoutError
from mathscout.index import IndexDir
from mathscout.index.builder import add_components, build_index
from mathscout.index.components import BuildOptions, ComponentSpec, register_component
from mathscout.store import DocumentStore
from mathscout.types import Document, Formula


def _write_jsonl(path: Path, docs: list[dict]) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    return path


DOCS = [
    {"id": "d1", "text": "Pythagoras: $a^2+b^2=c^2$ holds in right triangles."},
    {"id": "d2", "text": "The series $$\\sum_{n=1}^\\infty \\frac{1}{n^2} = \\frac{\\pi^2}{6}$$ converges."},
    {"id": "d3", "text": "No math here, just words about groups."},
]


class _Failing:
    name = "failing"

    def build(self, store, target, options):
        raise RuntimeError("disk on fire")


class _Counting:
    name = "counting"

    def build(self, store, target, options):
        (target / "count.txt").write_text(str(store.count()))
        return {"docs": store.count(), "workers": options.workers}


register_component(ComponentSpec("failing", _Failing, "always fails (tests)", default=False))
register_component(ComponentSpec("counting", _Counting, "counts documents (tests)", default=False))


def test_store_round_trip(tmp_path):
    store = DocumentStore.create(tmp_path / "s.sqlite")
    doc = Document(
        id="x",
        text="see $y=x$",
        title="T",
        metadata={"k": 1},
        formulas=[Formula(id="x#0", doc_id="x", latex="y=x", start=4, end=9)],
    )
    assert store.add([doc, doc]) == (1, 1)  # a repeated id is stored once
    again = DocumentStore.open(tmp_path / "s.sqlite").get("x")
    assert again == doc
    assert store.formula_at(0).latex == "y=x"


def test_build_options_reach_the_component_builds(tmp_path):
    """`mathscout index --workers` is a parameter of the builds (BuildOptions), not an environment variable."""
    corpus = _write_jsonl(tmp_path / "c.jsonl", DOCS)
    manifest = build_index([corpus], tmp_path / "idx", ["counting"], options=BuildOptions(workers=3))
    assert manifest.components["counting"]["workers"] == 3
    assert add_components(tmp_path / "idx", ["counting"]).components["counting"]["workers"] is None


def test_build_counts_documents_and_formulas(tmp_path):
    manifest = build_index([_write_jsonl(tmp_path / "c.jsonl", DOCS)], tmp_path / "idx", ["counting"])
    assert (manifest.documents, manifest.formulas) == (3, 2)
    index = IndexDir(tmp_path / "idx")
    assert index.components == ["store", "counting"]
    assert index.store.get("d2").formulas[0].latex.startswith("\\sum")


def test_a_repeated_id_keeps_its_first_document_and_is_reported(tmp_path):
    from mathscout.notices import collecting

    repeated = {"id": "d1", "text": "A second d1 with $x^3$ and $y^3$: dropped."}
    with collecting() as said:
        manifest = build_index(
            [_write_jsonl(tmp_path / "c.jsonl", DOCS[:2] + [repeated] + DOCS[2:])], tmp_path / "idx", ["counting"]
        )
    assert (manifest.documents, manifest.formulas) == (3, 2)  # the dropped document's formulas are not counted
    assert IndexDir(tmp_path / "idx").store.get("d1").text == DOCS[0]["text"]
    assert any("ignored 1 documents whose id was already seen" in n for n in said)


def test_failed_rebuild_keeps_the_old_index_and_leaves_no_debris(tmp_path):
    corpus = _write_jsonl(tmp_path / "c.jsonl", DOCS)
    build_index([corpus], tmp_path / "idx", ["counting"])
    with pytest.raises(RuntimeError, match="disk on fire"):
        build_index([_write_jsonl(tmp_path / "more.jsonl", DOCS[:1])], tmp_path / "idx", ["failing"])
    assert IndexDir(tmp_path / "idx").store.count() == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.jsonl", "idx", "more.jsonl"]


def test_component_added_to_existing_index(tmp_path):
    build_index([_write_jsonl(tmp_path / "c.jsonl", DOCS)], tmp_path / "idx", ["counting"])
    with pytest.raises(RuntimeError):
        add_components(tmp_path / "idx", ["failing"])
    manifest = add_components(tmp_path / "idx", ["counting"])
    assert manifest.components["counting"]["docs"] == 3
    assert not [p for p in (tmp_path / "idx").iterdir() if p.name.startswith(".")]


def test_missing_index_and_component_errors_name_the_build_command(tmp_path):
    with pytest.raises(IndexMissingError, match="mathscout index --input"):
        IndexDir(tmp_path / "nowhere")
    build_index([_write_jsonl(tmp_path / "c.jsonl", DOCS)], tmp_path / "idx", ["counting"])
    with pytest.raises(IndexMissingError, match="--components bm25"):
        IndexDir(tmp_path / "idx").component_path("bm25")


def test_unknown_component_and_empty_input_are_clear_errors(tmp_path):
    with pytest.raises(MathScoutError, match="unknown index component 'nope'"):
        build_index([_write_jsonl(tmp_path / "c.jsonl", DOCS)], tmp_path / "idx", ["nope"])
    with pytest.raises(MathScoutError, match="no documents found"):
        build_index([_write_jsonl(tmp_path / "empty.jsonl", [])], tmp_path / "idx2", ["counting"])
    assert not (tmp_path / "idx2").exists()


def test_corrupt_store_is_a_clear_error(tmp_path):
    build_index([_write_jsonl(tmp_path / "c.jsonl", DOCS)], tmp_path / "idx", ["counting"])
    (tmp_path / "idx" / "store.sqlite").write_bytes(b"not a database" * 100)
    with pytest.raises(MathScoutError, match=r"damaged|unreadable"):
        IndexDir(tmp_path / "idx").store.count()
