"""Atomic index builds: everything is written into a temporary sibling folder and swapped in at the end.

A failed or interrupted build leaves the previous good index (if any) untouched; the temporary
folder is removed on failure.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from tqdm import tqdm

from mathscout.corpus import IngestReport, read_corpus
from mathscout.errors import MathScoutError
from mathscout.index.components import component, default_components
from mathscout.index.layout import MANIFEST, STORE, IndexDir, Manifest
from mathscout.store import DocumentStore


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _swap_in(built: Path, target: Path) -> None:
    """Replace `target` with `built` so that a good copy always exists under one of the two names."""
    if target.exists():
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        os.replace(target, old)
        os.replace(built, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(built, target)


def _ingest(inputs: Sequence[Path], store: DocumentStore) -> IngestReport:
    report = IngestReport()
    started = time.perf_counter()
    bar = tqdm(desc="ingest", unit=" docs", file=sys.stderr, mininterval=1.0)

    def counted(docs):
        for doc in docs:
            bar.update(1)
            yield doc

    added_docs, added_formulas = store.add(counted(read_corpus(inputs, report)))
    bar.close()
    seconds = time.perf_counter() - started
    report.seconds = seconds
    _log(
        f"ingested {added_docs:,} documents, {added_formulas:,} formulas in {seconds:.1f} s "
        f"({added_docs / max(seconds, 1e-9):,.0f} docs/s, {added_formulas / max(seconds, 1e-9):,.0f} formulas/s)"
    )
    if report.skipped:
        _log(f"skipped {report.skipped:,} inputs; first reasons:")
        for reason in report.reasons:
            _log(f"  - {reason}")
    if report.duplicates:
        _log(f"ignored {report.duplicates:,} documents whose id was already seen")
    return report


def _build_component(name: str, store: DocumentStore, folder: Path) -> dict:
    folder.mkdir(parents=True)
    started = time.perf_counter()
    _log(f"building component '{name}' …")
    stats = component(name).build(store, folder)
    stats.setdefault("seconds", round(time.perf_counter() - started, 2))
    stats.setdefault("bytes", sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()))
    _log(f"component '{name}': {stats['seconds']:.1f} s, {stats['bytes'] / 2**20:.1f} MiB")
    return stats


def build_index(inputs: Sequence[Path | str], index_path: Path | str, components: Sequence[str] | None = None) -> Manifest:
    """Ingest `inputs` into a new index at `index_path` (replacing any old one atomically)."""
    index_path = Path(index_path)
    inputs = [Path(p) for p in inputs]
    for path in inputs:
        if not path.exists():
            raise MathScoutError(f"input not found: {path}")
    names = list(components) if components else default_components()
    for name in names:
        component(name)  # unknown names fail before any work
    index_path.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(dir=index_path.parent, prefix=f".{index_path.name}.building-"))
    try:
        store = DocumentStore.create(building / STORE)
        report = _ingest(inputs, store)
        if store.count() == 0:
            raise MathScoutError(f"no documents found in {', '.join(map(str, inputs))}")
        manifest = Manifest(
            documents=store.count(),
            formulas=store.formula_count(),
            sources=[str(p.resolve()) for p in inputs],
            components={"store": {"seconds": round(report.seconds, 2), "skipped": report.skipped}},
        )
        for name in names:
            manifest.components[name] = _build_component(name, store, building / name)
        store.close()
        manifest.write(building / MANIFEST)
        _swap_in(building, index_path)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return manifest


def add_components(index_path: Path | str, components: Sequence[str]) -> Manifest:
    """Build (or rebuild) components of an existing index, each swapped in atomically."""
    index = IndexDir(index_path)
    for name in components:
        component(name)
    for name in components:
        folder = Path(tempfile.mkdtemp(dir=index.path, prefix=f".{name}.building-"))
        try:
            shutil.rmtree(folder)
            stats = _build_component(name, index.store, folder)
            _swap_in(folder, index.path / name)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        index.manifest = Manifest.read(index.path / MANIFEST)  # re-read: another build may have added a component meanwhile
        index.manifest.components[name] = stats
        index.manifest.write(index.path / MANIFEST)
    return index.manifest
