"""Crafted index files (issue 42, item 1: an index folder is untrusted input). Users share and download prebuilt
indexes, so every file of one is written by a possibly hostile author, who also writes the manifest's checksums beside
them: each case crafts one file of a copied index, records its checksum again (`reseal`), runs the real command and
checks one clean error line holding the phrase, that no payload ran (a pickle payload creates a marker file when
anything unpickles it), nothing changed on disk and memory stayed under the bound.

Add a crafted file with one `Crafted` in the list of the index it needs: TYPED (the tiny index with the types
component; a learned ranker's files too), STORED (the tiny index with a cross-encoder folder; `model`), DENSE (the dense
index; `model`).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.crafted import (
    huge_header,
    marker,
    object_array,
    onnx_with_external_data,
    pickled,
    reseal,
    truncate,
)
from tests.support.harness import refused_unchanged, run_measured


@dataclass(frozen=True)
class Crafted:
    """`craft(path, marker)` writes the file `file` of the index (a payload in it would create `marker`); `command`
    runs with {index} replaced; the error line holds `phrase`."""

    file: str
    craft: Callable[[Path, Path], None]
    command: tuple[str, ...]
    phrase: str


def search(mode: str, *extra: str) -> tuple[str, ...]:
    return ("search", "--index", "{index}", "--mode", mode, *extra, "abelian group")


def garbage(path: Path, _marker: Path) -> None:
    path.write_bytes(b"\x00not what it should be\xff" * 40)


def text(content: str) -> Callable[[Path, Path], None]:
    return lambda path, _marker: path.write_text(content, encoding="utf-8")


def payload(path: Path, target: Path) -> None:
    path.write_bytes(pickled(target))


def cut(path: Path, _marker: Path) -> None:
    truncate(path)


def claims_a_terabyte(path: Path, _marker: Path) -> None:
    huge_header(path)


def old_type_vectors(path: Path, target: Path) -> None:
    """The types component as MathScout stored it before: gensim's pickle (vectors.kv) in place of the arrays."""
    for name in ("vectors.npy", "vocabulary.json"):
        (path.parent / name).unlink(missing_ok=True)
    path.write_bytes(pickled(target))


def view_store(path: Path, _marker: Path) -> None:
    """A store whose `documents` is a view that never ends (a recursive query): not a table MathScout wrote."""
    db = sqlite3.connect(path)
    db.executescript(
        "ALTER TABLE documents RENAME TO kept;"
        "CREATE VIEW documents AS WITH RECURSIVE n(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM n) "
        "SELECT x AS ordinal, '' AS id, '' AS title, '' AS text, '{}' AS metadata FROM n;"
    )
    db.close()


def graph(write: Callable[[Path], None]) -> Callable[[Path, Path], None]:
    """A stored ONNX graph (`write` makes it) that the cross-encoder's description names as its backend."""

    def craft(path: Path, _marker: Path) -> None:
        write(path)
        info = path.parent / "cross-encoder.json"
        info.write_text(json.dumps({**json.loads(info.read_text()), "backend": "onnx-int8"}), encoding="utf-8")

    return craft


def pickled_weights(path: Path, target: Path) -> None:
    """The model's weights as a torch pickle (pytorch_model.bin) instead of safetensors."""
    (path.parent / "model.safetensors").unlink()
    path.write_bytes(pickled(target))


def ranker_model(path: Path, _marker: Path) -> None:
    """A learned ranker whose model file is not LightGBM's text: ranker.json lists it with its checksum."""
    from mathscout.index.integrity import record_file
    from mathscout.retrievers.features import feature_names

    path.write_text("tree\nnum_leaves=not a number\n" + "\x00" * 64, encoding="utf-8")
    used = ["bm25", "structure"]
    config = {"retrievers": used, "used": used, "depth": 100, "features": feature_names(used)}
    config |= {"vocabulary": {"kinds": [], "sources": []}, "model": {"file": path.name, **record_file(path).to_json()}}
    (path.parent / "ranker.json").write_text(json.dumps(config), encoding="utf-8")


REBUILD_TYPES = "--components types"
TYPED = [
    pytest.param(Crafted("types/vectors.kv", old_type_vectors, search("types"), "old format"), id="types-old-pickle"),
    pytest.param(
        Crafted("types/vectors.npy", lambda p, m: object_array(p, m), search("types"), "Python objects"),
        id="types-object-array",
    ),
    pytest.param(Crafted("types/vectors.npy", cut, search("types"), REBUILD_TYPES), id="types-vectors-truncated"),
    pytest.param(
        Crafted("types/vectors.npy", claims_a_terabyte, search("types"), "mmap length"), id="types-vectors-header"
    ),
    pytest.param(
        Crafted("types/vocabulary.json", text("[" * 100_000), search("types"), "nested"), id="types-vocab-deep"
    ),
    pytest.param(
        Crafted("types/vocabulary.json", text('{"types": ["group"]}'), search("types"), "not one float32 row"),
        id="types-vocab-count",
    ),
    pytest.param(Crafted("store.sqlite", garbage, search("bm25"), "the document store"), id="store-garbage"),
    pytest.param(Crafted("store.sqlite", view_store, search("bm25"), "documents is a view"), id="store-view"),
    pytest.param(Crafted("ranker.lgb.txt", ranker_model, search("ranked"), "the ranker model"), id="ranker-garbage"),
]


@pytest.fixture(scope="module")
def typed_index(tiny_index, tmp_path_factory) -> Path:
    """A copy of the tiny index with the types component (without PlanetMath bodies, to keep it small)."""
    from mathscout.index.components import BuildOptions
    from mathscout.retrievers.indexing import add_components

    index = shutil.copytree(tiny_index, tmp_path_factory.mktemp("typed") / "idx")
    add_components(index, ["types"], BuildOptions(planetmath="none"))
    return index


def check_refusal(index: Path, case: Crafted, home: Path) -> str:
    """Craft `case.file` of `index` and reseal it, run the command: one clean error line holding the phrase, no
    payload ran, nothing changed on disk, memory under the bound. The error line."""
    case.craft(index / case.file, marker(index))
    reseal(index)
    line = refused_unchanged(index, case.command, home, ran=marker(index).exists)
    assert case.phrase in line, line
    return line


@pytest.mark.parametrize("case", TYPED)
def test_a_crafted_file_is_one_clear_line_and_runs_nothing(typed_index, tmp_path, case):
    check_refusal(shutil.copytree(typed_index, tmp_path / "idx"), case, tmp_path)


def test_an_old_pickled_types_component_never_runs_and_names_its_rebuild(typed_index, tmp_path):
    """The issue's reproduction: `vectors.kv` replaced by a pickle payload, its CRC fixed in the manifest, searched in
    the default mode: the payload does not run, the hits come, and one line says what is wrong and how to rebuild."""
    index = shutil.copytree(typed_index, tmp_path / "idx")
    old_type_vectors(index / "types" / "vectors.kv", marker(index))
    reseal(index)
    outcome = run_measured(["search", "--index", str(index), "abelian group"], tmp_path)
    assert not marker(index).exists(), "the pickle in vectors.kv ran"
    assert outcome.returncode == 0 and "Traceback" not in outcome.stderr, outcome.stderr[-2000:]
    assert "abelian" in outcome.stdout
    # a note of the result (stdout), said once
    said = [line for line in (outcome.stdout + outcome.stderr).splitlines() if "vectors.kv" in line]
    assert len(said) == 1, outcome.stdout[-2000:] + outcome.stderr[-2000:]
    assert "old format" in said[0] and f"mathscout index --index {index} --components types" in said[0], said


# --- a stored model: the cross-encoder's folder -------------------------------------------------------

CROSS = ("search", "--index", "{index}", "--mode", "bm25", "--rerank", "cross", "abelian group")
STORED = [
    pytest.param(
        Crafted("cross-encoder/model.int8.onnx", graph(lambda p: garbage(p, p)), CROSS, "the ONNX graph"),
        id="onnx-garbage",
    ),
    pytest.param(
        Crafted(
            "cross-encoder/model.int8.onnx",
            graph(lambda p: onnx_with_external_data(p, "../../../../../../etc/passwd")),
            CROSS,
            "in another file ('../../../../../../etc/passwd')",
        ),
        id="onnx-external-data-outside",
    ),
    pytest.param(
        Crafted(
            "cross-encoder/model/pytorch_model.bin", pickled_weights, CROSS, "only as a pickle (pytorch_model.bin)"
        ),
        id="model-pickled-weights",
    ),
    pytest.param(
        Crafted(
            "cross-encoder/model/config.json", text('{"auto_map": {"AutoModel": "evil.Model"}}'), CROSS, "auto_map"
        ),
        id="model-remote-code",
    ),
    pytest.param(Crafted("cross-encoder/model/tokenizer.json", garbage, CROSS, "cross-encoder"), id="model-tokenizer"),
]


@pytest.fixture(scope="module")
def stored_index(tiny_index, tmp_path_factory) -> Path:
    """A copy of the tiny index with a cross-encoder folder as `mathscout train cross-encoder` lays it out: the base
    model's files (all-MiniLM-L6-v2: safetensors, tokenizer) as its model, run on torch."""
    pytest.importorskip("sentence_transformers", reason="the optional 'dense' part is not installed")
    from mathscout.dense.model import default_model_path

    index = shutil.copytree(tiny_index, tmp_path_factory.mktemp("stored") / "idx")
    folder = index / "cross-encoder"
    shutil.copytree(default_model_path(), folder / "model")
    (folder / "cross-encoder.json").write_text(
        json.dumps({"version": 1, "backend": "torch", "max_length": 128, "files": {}}), encoding="utf-8"
    )
    reseal(index)
    return index


@pytest.mark.model
@pytest.mark.parametrize("case", STORED)
def test_a_crafted_model_file_is_one_clear_line_and_runs_nothing(stored_index, tmp_path, case):
    check_refusal(shutil.copytree(stored_index, tmp_path / "idx"), case, tmp_path)


# --- the dense index's vectors and faiss files --------------------------------------------------------------------------

DENSE = [
    pytest.param(Crafted("dense/flat.faiss", cut, search("dense"), "faiss index"), id="faiss-truncated"),
    pytest.param(
        Crafted("dense/passage_doc.npy", lambda p, m: object_array(p, m), search("dense"), "Object arrays"),
        id="dense-object-array",
    ),
    pytest.param(Crafted("dense/tokens/offsets.npy", cut, search("colbert"), "token vectors"), id="colbert-truncated"),
    pytest.param(Crafted("dense/meta.json", text("[" * 100_000), search("dense"), "nested"), id="dense-meta-deep"),
]


@pytest.mark.model
@pytest.mark.parametrize("case", DENSE)
def test_a_crafted_vector_file_is_one_clear_line_and_runs_nothing(dense_index, tmp_path, case):
    check_refusal(shutil.copytree(dense_index, tmp_path / "idx"), case, tmp_path)
