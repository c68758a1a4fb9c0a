"""Index builds: everything is written into a temporary sibling folder and swapped in at the end.

A failed or interrupted build leaves the previous good index (if any) untouched; only MathScout indexes are
ever replaced (see `mathscout.index.safety`), one build at a time. Rebuilding an index keeps its
components (rebuilt over the new documents) and its tuned files (structure.json, fusion.json, trained
models) unless asked otherwise.
"""

from __future__ import annotations

import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from mathscout.corpus import IngestReport, estimate_documents, read_corpus
from mathscout.errors import DamagedIndexError, MathScoutError
from mathscout.index.components import (
    BuildOptions,
    ComponentSpec,
    available_components,
    component_spec,
    default_components,
)
from mathscout.index.integrity import record_file, record_folder
from mathscout.index.layout import MANIFEST, STORE, IndexDir, Manifest, is_index
from mathscout.index.safety import (
    build_lock,
    check_build_target,
    disk_error,
    index_entries,
    log,
    new_build_folder,
    remove_leftovers,
    swap_in,
)
from mathscout.isolated import run_isolated
from mathscout.notices import warning
from mathscout.progress import bar as progress_bar
from mathscout.store import DocumentStore
from mathscout.usage import process_usage

_log = log


def _warn(head: str, reasons: Sequence[str]) -> None:
    warning("\n".join([head, *(f"  - {reason}" for reason in reasons)]))


def store_record(report: IngestReport, building: Path) -> dict:
    """The manifest's record of a build's store: ingest time, skipped inputs, replaced characters, the file's CRC."""
    return {
        "seconds": round(report.seconds, 2),
        "skipped": report.skipped,
        "replaced_characters": report.replaced,
        "files": {STORE: record_file(building / STORE).to_json()},
    }


def ingest_inputs(inputs: Sequence[Path], store: DocumentStore) -> IngestReport:
    """Read `inputs` into `store` (every corpus format `mathscout.corpus.read_corpus` knows); the ingest report."""
    report = IngestReport()
    started = time.perf_counter()
    bar = progress_bar(total=estimate_documents(inputs), desc="ingest", unit=" docs", file=sys.stderr, mininterval=1.0)

    def counted(docs):
        for doc in docs:
            bar.update(1)
            yield doc

    # the store keeps the first document of an id (its unique index): no set of every id in memory
    added_docs, added_formulas = store.add(counted(read_corpus(inputs, report, distinct=False)))
    bar.close()
    report.duplicates += report.documents - added_docs
    report.documents, report.formulas = added_docs, added_formulas
    seconds = time.perf_counter() - started
    report.seconds = seconds
    _log(
        f"ingested {added_docs:,} documents, {added_formulas:,} formulas in {seconds:.1f} s "
        f"({added_docs / max(seconds, 1e-9):,.0f} docs/s, {added_formulas / max(seconds, 1e-9):,.0f} formulas/s)"
    )
    # what was left out or changed of the user's documents: a warning, with the first reasons
    if report.skipped:
        _warn(f"skipped {report.skipped:,} inputs; first reasons:", report.reasons)
    if report.replaced:
        _warn(f"replaced invalid Unicode in {report.replaced:,} records (kept); first ones:", report.replacements)
    if report.truncated:
        _warn(
            f"cut {report.truncated:,} over-long documents or titles to their bounds (kept); first ones:",
            report.truncations,
        )
    if report.duplicates:
        _warn(f"ignored {report.duplicates:,} documents whose id was already seen", [])
    return report


def _build_in_this_process(
    spec: ComponentSpec, store_path: Path, folder: Path, options: BuildOptions
) -> tuple[dict, float]:
    """Build one component from the store at `store_path`; its stats and this process's peak RSS (MiB)."""
    store = DocumentStore.open(store_path)
    try:
        stats = spec.factory().build(store, folder, options)
    finally:
        store.close()
    return stats, process_usage().peak_mib


def build_component(name: str, store: DocumentStore, folder: Path, options: BuildOptions = BuildOptions()) -> dict:
    """Build component `name` into the new folder `folder`, in a process of its own: a build holds at once only
    the memory of its largest component (bm25's JVM heap is gone before structure starts)."""
    folder.mkdir(parents=True)
    started = time.perf_counter()
    _log(f"building component '{name}' …")
    stats, peak_mib = run_isolated(
        _build_in_this_process, component_spec(name), store.path, folder, options, name=f"'{name}' build"
    )
    stats.setdefault("seconds", round(time.perf_counter() - started, 2))
    stats.setdefault("bytes", sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()))
    stats["process_peak_mib"] = round(peak_mib, 1)
    stats["files"] = record_folder(folder)  # checked when the component opens (mathscout.index.integrity)
    _log(
        f"component '{name}': {stats['seconds']:.1f} s, {stats['bytes'] / 2**20:.1f} MiB, "
        f"its process's peak {peak_mib:,.0f} MiB"
    )
    return stats


def old_components(index: Path) -> list[str] | None:
    """The components an index's manifest lists (None when the manifest is damaged: a rebuild replaces it)."""
    try:
        return list(Manifest.read(index / MANIFEST).components)
    except DamagedIndexError:
        return None


def kept_files(index: Path) -> list[Path]:
    """What a rebuild carries over besides components: tuned settings and models (not the store, the
    manifest, component folders or hidden build files)."""
    components = set(old_components(index) or available_components())
    return [
        p
        for p in index_entries(index)
        if p.name not in (MANIFEST, STORE) and p.name not in components and not p.name.startswith(".")
    ]


def _plan(index_path: Path, requested: Sequence[str] | None, fresh: bool) -> tuple[list[str], list[Path]]:
    """The components to build and the tuned files to keep, logging what a rebuild keeps or drops."""
    if not is_index(index_path):
        return (list(requested) if requested else default_components()), []
    listed = old_components(index_path)
    if listed is None:
        _log(f"the manifest of {index_path} is damaged: rebuilding the index over it")
    old = [n for n in listed or [] if n != "store"]
    if requested:
        names = list(requested)
        dropped = [n for n in old if n not in names]
        if dropped:  # what the index had and will not have: said even without -v
            warning(
                f"rebuilding {index_path} with --components {','.join(names)}: dropping its "
                f"{', '.join(dropped)} component(s) (leave out --components to keep every component)"
            )
    else:
        names = old or default_components()
        _log(f"rebuilding {index_path}: keeping its components {', '.join(names)} (rebuilt over the new documents)")
    kept = [] if fresh else kept_files(index_path)
    if kept:
        _log(
            f"keeping tuned files {', '.join(p.name for p in kept)} (--fresh drops them; re-tune them if the "
            "new documents differ much)"
        )
    elif fresh and kept_files(index_path):
        _log("--fresh: dropping the index's tuned files")
    return names, kept


def build_index(
    inputs: Sequence[Path | str],
    index_path: Path | str,
    components: Sequence[str] | None = None,
    fresh: bool = False,
    store_only: bool = False,
    options: BuildOptions = BuildOptions(),
) -> Manifest:
    """Ingest `inputs` into a new index at `index_path` (replacing an old index atomically).

    `components`: what to build (default: an existing index's components, else the defaults); `fresh`:
    do not carry the old index's tuned files over; `store_only`: the store and no component (components are
    then added one by one with `add_components`, as the scale benchmark does to measure each apart); `options`:
    what the component builds are given (`--workers`)."""
    index_path = Path(index_path)
    input_paths = [Path(p) for p in inputs]
    for path in input_paths:
        if not path.exists():
            raise MathScoutError(f"input not found: {path}")
    for name in components or []:
        component_spec(name)  # unknown names fail before any work
    check_build_target(index_path)
    try:
        index_path.parent.mkdir(parents=True, exist_ok=True)
        with build_lock(index_path):
            check_build_target(index_path)  # again under the lock
            removed = remove_leftovers(index_path.parent, index_path.name)
            if removed:
                _log(f"removed leftovers of interrupted builds: {', '.join(removed)}")
            names, kept = ([], []) if store_only else _plan(index_path, components, fresh)
            return _build(input_paths, index_path, names, kept, options)
    except OSError as exc:
        error = disk_error(exc, index_path)
        if error is None:
            raise
        raise error from exc
    except sqlite3.OperationalError as exc:
        if "full" in str(exc):
            raise MathScoutError(
                f"the disk holding {index_path} is full: free some space and build again "
                "(the previous index, if any, is unchanged)"
            ) from None
        raise


def _build(inputs: list[Path], index_path: Path, names: list[str], kept: list[Path], options: BuildOptions) -> Manifest:
    building = new_build_folder(index_path)
    try:
        store = DocumentStore.create(building / STORE)
        report = ingest_inputs(inputs, store)
        if store.count() == 0:
            raise MathScoutError(f"no documents found in {', '.join(map(str, inputs))}")
        documents, formulas = store.count(), store.formula_count()
        store.finish()
        manifest = Manifest(
            documents=documents,
            formulas=formulas,
            sources=[str(p.resolve()) for p in inputs],
            components={"store": store_record(report, building)},
        )
        store = DocumentStore.open(building / STORE)
        for name in names:
            manifest.components[name] = build_component(name, store, building / name, options)
        store.close()
        for path in kept:
            copy = shutil.copytree if path.is_dir() else shutil.copy2
            copy(path, building / path.name)
        manifest.write(building / MANIFEST)
        swap_in(building, index_path)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return manifest


def add_components(
    index_path: Path | str, components: Sequence[str], options: BuildOptions = BuildOptions()
) -> Manifest:
    """Build (or rebuild) components of an existing index, each swapped in atomically."""
    index = IndexDir(index_path)
    for name in components:
        component_spec(name)
    try:
        with build_lock(index.path):
            removed = []
            for name in components:
                removed += remove_leftovers(index.path, name)
            if removed:
                _log(f"removed leftovers of interrupted builds: {', '.join(removed)}")
            for name in components:
                _add_component(index, name, options)
    except OSError as exc:  # a read-only index, a full disk: one line
        error = disk_error(exc, index.path)
        if error is None:
            raise
        raise error from exc
    return index.manifest


def _add_component(index: IndexDir, name: str, options: BuildOptions) -> None:
    folder = Path(tempfile.mkdtemp(dir=index.path, prefix=f".{name}.building-"))
    try:
        shutil.rmtree(folder)
        stats = build_component(name, index.store, folder, options)
        swap_in(folder, index.path / name)
    except OSError as exc:
        shutil.rmtree(folder, ignore_errors=True)
        error = disk_error(exc, index.path)
        if error is None:
            raise
        raise error from exc
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    index.manifest = Manifest.read(index.path / MANIFEST)
    index.manifest.components[name] = stats
    index.manifest.write(index.path / MANIFEST)
