"""Index files as a hostile author makes them (issue 42): payloads that would run code if a loader executed them, files
of the right name holding something else, and the manifest's checksums fixed to match (they sit beside the files they
check, so whoever crafts the folder crafts them too).

A payload proves nothing ran by the absence of its marker file: unpickling it calls `open(marker, "w")`.
"""

from __future__ import annotations

import builtins
import json
import pickle
from pathlib import Path

import numpy as np

from mathscout.index.integrity import record_file, record_folder

MARKER = "payload-ran"  # created beside the index folder by any payload that runs


def marker(index: Path) -> Path:
    return index.parent / MARKER


class _Payload:
    """Unpickled, it creates its marker file (no shell, nothing else)."""

    def __init__(self, target: Path):
        self.target = str(target)

    def __reduce__(self):
        return (builtins.open, (self.target, "w"))


def pickled(target: Path) -> bytes:
    """A pickle whose loading creates `target`."""
    return pickle.dumps(_Payload(target), protocol=2)


def object_array(path: Path, target: Path) -> None:
    """An .npy of dtype object whose element is the payload: numpy unpickles it when allow_pickle is on."""
    with open(path, "wb") as f:
        np.save(f, np.array([_Payload(target), 1.0], dtype=object), allow_pickle=True)


def huge_header(path: Path) -> None:
    """An .npy whose header claims a terabyte of float32 while the file holds a few bytes."""
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": (2**38, 4)})
        f.write(b"\0" * 64)


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def onnx_with_external_data(path: Path, location: str) -> None:
    """A valid one-node ONNX graph (y = x + w) whose initializer w keeps its data in the file `location`."""
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.ones(4, np.float32), "w")
    weight.ClearField("raw_data")
    weight.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", "16")):
        entry = weight.external_data.add()
        entry.key, entry.value = key, value
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])],
        "crafted",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        [weight],
    )
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())


def reseal(index: Path) -> None:
    """Record the present size and CRC-32 of the files, as the author of a crafted index would: in the manifest (every
    file of each component's folder; the store's listed files) and in a trained model's own description
    (cross-encoder/cross-encoder.json: every file of its folder but itself)."""
    manifest_path = index / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    for name, entry in manifest["components"].items():
        if name == "store":
            entry["files"] = {f: record_file(index / f).to_json() for f in entry.get("files", {})}
        else:
            entry["files"] = record_folder(index / name)
    manifest_path.write_text(json.dumps(manifest), encoding="utf-8")
    description = index / "cross-encoder" / "cross-encoder.json"
    if description.is_file():
        info = json.loads(description.read_text(encoding="utf-8"))
        info["files"] = {k: v for k, v in record_folder(description.parent).items() if k != description.name}
        description.write_text(json.dumps(info), encoding="utf-8")
