"""The on-disk layout of an index directory and its manifest.

<index>/
  manifest.json   what was built: components, counts, sources, timings
  store.sqlite    documents and formulas (mathscout.store.DocumentStore)
  <component>/    one sub-folder per retrieval component (bm25/, structure/, dense/, …)
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mathscout.errors import IndexMissingError
from mathscout.index.integrity import verify_folder
from mathscout.index.stored import StoredFile
from mathscout.store import DocumentStore

MANIFEST = "manifest.json"
STORE = "store.sqlite"
FORMAT_VERSION = 1
COMPONENT_NAME = re.compile(
    r"[a-z][a-z0-9-]{0,39}"
)  # a component is a folder of the index: no path may hide in its name


def _finite_or_null(value: Any) -> Any:
    """`value` with every NaN or infinity as None: JSON has no such numbers, and readers refuse them."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite_or_null(v) for k, v in value.items()}
    return [_finite_or_null(v) for v in value] if isinstance(value, (list, tuple)) else value


def write_json_atomic(path: Path | str, data: Any) -> Path:
    """Write strict JSON next to `path` and rename it into place, so readers never see half a file."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-")
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(_finite_or_null(data), out, indent=2, ensure_ascii=False, allow_nan=False)
    os.replace(tmp, path)
    return path


@dataclass
class Manifest:
    """What an index directory holds."""

    documents: int = 0
    formulas: int = 0
    sources: list[str] = field(default_factory=list)
    components: dict[str, dict[str, Any]] = field(default_factory=dict)
    version: int = FORMAT_VERSION
    generation: str = ""  # a new random id at every write: a running server notices a rebuilt or extended index

    @classmethod
    def read(cls, path: Path) -> Manifest:
        """The manifest at `path`, every field checked (a damaged one is one line naming the rebuild command)."""
        file = StoredFile(
            path,
            "the index manifest",
            f"rebuild the index with 'mathscout index --input PATH --index {Path(path).parent}'",
        )
        data = file.load()
        components = file.mapping(data.get("components", {}), "components")
        for name, entry in components.items():
            file.expect(COMPONENT_NAME.fullmatch(name), name, "a component's name", "a folder name like 'bm25'")
            files = file.mapping(file.mapping(entry, f"component '{name}'").get("files", {}), f"the files of '{name}'")
            for relative, record in files.items():
                file.record(record, relative)
        return cls(
            documents=file.whole(data.get("documents", 0), "documents"),
            formulas=file.whole(data.get("formulas", 0), "formulas"),
            sources=[file.text(s, "a source") for s in file.items(data.get("sources", []), "sources")],
            components=components,
            version=file.whole(data.get("version", FORMAT_VERSION), "version"),
            generation=file.text(data.get("generation", ""), "generation"),
        )

    def write(self, path: Path) -> None:
        """Write atomically (temp file + rename), so readers never see half a manifest; each write is a new
        generation."""
        self.generation = uuid.uuid4().hex
        write_json_atomic(path, self.__dict__)


def is_index(path: Path | str) -> bool:
    """Whether `path` is a MathScout index directory (it has a manifest and a document store)."""
    path = Path(path)
    return (path / MANIFEST).is_file() and (path / STORE).is_file()


_VERIFIED: set[tuple] = set()  # (index, component, manifest mtime) checked in this process


class IndexDir:
    """A built index directory. Opening it checks that it is complete; each component's files are checked
    against the sizes and checksums the build recorded the first time the component is used."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        if not is_index(self.path):
            raise IndexMissingError(
                f"no index at {self.path}: build it with 'mathscout index --input PATH --index {self.path}'"
            )
        self.manifest = Manifest.read(self.path / MANIFEST)
        self._store: DocumentStore | None = None

    def _verify(self, name: str, folder: Path, rebuild: str) -> None:
        """Sizes and checksums of the files `name` recorded at build time (older indexes recorded none)."""
        records = self.manifest.components.get(name, {}).get("files")
        if not records:
            return
        try:
            status = (self.path / MANIFEST).stat()
            stamp = (str(self.path.resolve()), name, status.st_ino, status.st_mtime_ns, status.st_ctime_ns)
        except OSError:
            stamp = None
        if stamp in _VERIFIED:
            return
        verify_folder(folder, records, rebuild)
        if stamp is not None:
            _VERIFIED.add(stamp)

    @property
    def store(self) -> DocumentStore:
        if self._store is None:
            self._verify(
                "store", self.path, f"rebuild the index with 'mathscout index --input PATH --index {self.path}'"
            )
            self._store = DocumentStore.open(self.path / STORE)
        return self._store

    @property
    def components(self) -> list[str]:
        return list(self.manifest.components)

    def build_hash(self, components: list[str], described: tuple[str, ...] = ()) -> str:
        """A hash of what results from these components depend on: the recorded sizes and CRC-32 of the store's and
        their files, and the bytes of the `described` files (paths inside the index, e.g. a trained model's
        description, which records its own files' CRC-32) that exist."""
        records: dict[str, Any] = {
            name: self.manifest.components.get(name, {}).get("files", {}) for name in ["store", *components]
        }
        for relative in described:
            path = self.path / relative
            if path.is_file():
                records[relative] = hashlib.sha256(path.read_bytes()).hexdigest()
        return hashlib.sha256(json.dumps(records, sort_keys=True).encode()).hexdigest()[:16]

    def component_path(self, name: str) -> Path:
        """The folder of a built component; a clear error naming the build command when it is missing."""
        if name not in self.manifest.components or not (self.path / name).exists():
            raise IndexMissingError(
                f"the index {self.path} has no '{name}' component: add it with "
                f"'mathscout index --index {self.path} --components {name}'"
            )
        self._verify(
            name, self.path / name, f"rebuild it with 'mathscout index --index {self.path} --components {name}'"
        )
        return self.path / name
