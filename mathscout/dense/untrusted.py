"""Model files from a folder MathScout did not write (an index's model folder, a stored ONNX graph, a configured model),
checked before a library opens them: whoever made the folder chose every byte, and the checksums beside it too.

- A model folder's weights are read from safetensors only: a pickled checkpoint (`pytorch_model.bin`, `*.pt`, …) is
  never opened (unpickling runs code; torch's weights-only reader is a second line, not the first). Its `config.json`
  and `tokenizer_config.json` may not ask for code of their own (`auto_map`), and `modules.json` may name
  sentence-transformers' own modules only, in folders inside the model's; no library is ever asked to trust such code.
- A stored ONNX graph holds its tensors inline: one naming a file for its data (`external_data`, which onnxruntime
  would open relative to the graph, or anywhere with `..` or an absolute path) is refused; so is one that does not
  parse.
"""

from __future__ import annotations

from pathlib import Path

from mathscout.errors import MathScoutError
from mathscout.index.stored import StoredFile

PICKLED_WEIGHTS = ("*.bin", "*.pt", "*.pth", "*.ckpt", "*.pkl", "*.pickle")  # torch.save / pickle checkpoints
OWN_MODULES = "sentence_transformers."  # the only module classes a modules.json may name


def check_model_folder(folder: Path, remedy: str) -> None:
    """A MathScoutError (one line ending in `remedy`) unless `folder`'s weights are safetensors and no file of it asks
    for code of its own."""
    for place in [folder, *sorted(p for p in folder.rglob("*") if p.is_dir())]:
        pickled = sorted(p.name for pattern in PICKLED_WEIGHTS for p in place.glob(pattern))
        if (pickled or place == folder) and not any(place.glob("*.safetensors")):
            held = f"only as a pickle ({', '.join(pickled)})" if pickled else "in no file MathScout reads"
            raise MathScoutError(
                f"the model in {place} keeps its weights {held}; MathScout reads weights from safetensors only "
                f"(a pickle can run code): {remedy}"
            )
    for name in ("config.json", "tokenizer_config.json"):
        if (folder / name).is_file():
            data = StoredFile(folder / name, "the model file", remedy).load()
            if "auto_map" in data:
                raise MathScoutError(
                    f"{folder / name} asks for code of its own (auto_map), which MathScout never runs: {remedy}"
                )
    if (folder / "modules.json").is_file():
        file = StoredFile(folder / "modules.json", "the model file", remedy)
        for module in file.items(file.value(), "its content"):
            module = file.mapping(module, "a module")
            kind, where = module.get("type"), module.get("path", "")
            file.require(
                isinstance(kind, str) and kind.startswith(OWN_MODULES),
                f"a module's type is {str(kind)[:80]!r}, not one of sentence-transformers' own",
            )
            file.require(
                isinstance(where, str) and not Path(where).is_absolute() and ".." not in Path(where).parts,
                f"a module's path is {str(where)[:80]!r}, not a folder inside the model's",
            )


def check_graph(path: Path, remedy: str) -> None:
    """A MathScoutError (one line ending in `remedy`) unless the ONNX graph in `path` parses and keeps every tensor's
    data inline."""
    import onnx
    from onnx.external_data_helper import uses_external_data

    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # noqa: BLE001 — protobuf's DecodeError and onnx's own: not a graph, said in one line
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise MathScoutError(f"the ONNX graph {path} is unreadable ({first[:200]}): {remedy}") from None
    for tensor in _tensors(model.graph):
        if uses_external_data(tensor):
            location = next((e.value for e in tensor.external_data if e.key == "location"), "")
            raise MathScoutError(
                f"the ONNX graph {path} keeps the data of {tensor.name or 'a tensor'} in another file "
                f"({location[:100]!r}); MathScout reads graphs that hold their data inline: {remedy}"
            )


def _tensors(graph) -> list:
    """Every tensor of a graph and of the graphs inside its nodes (If, Loop, Scan bodies)."""
    found = list(graph.initializer)
    found += [t for sparse in graph.sparse_initializer for t in (sparse.values, sparse.indices)]
    for node in graph.node:
        for attribute in node.attribute:
            found += [attribute.t, *attribute.tensors] if attribute.HasField("t") else list(attribute.tensors)
            for inner in [attribute.g, *attribute.graphs] if attribute.HasField("g") else attribute.graphs:
                found += _tensors(inner)
    return found
