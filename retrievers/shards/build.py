"""`mathscout index --input … --index DIR --shards N [--ray auto|local|HOST:PORT]`: a sharded index.

The documents are ingested once into DIR's store (ordinals 0…n−1), split into N contiguous ordinal ranges, and each
shard (its own store and components) is built by a Ray task; then the collection-wide statistics are summed and
written into every shard (stats.py). Everything is built in a hidden sibling folder and swapped in at the end, with
the same safety rules as a single index (mathscout/index/safety.py).
"""

from __future__ import annotations

import itertools
import resource
import shutil
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from mathscout.errors import MathScoutError
from mathscout.index.builder import build_component, ingest_inputs, kept_files, store_record
from mathscout.index.components import BuildOptions, component_spec, default_components
from mathscout.index.integrity import record_file, record_folder
from mathscout.index.layout import MANIFEST, STORE, Manifest, is_index
from mathscout.index.safety import (
    build_lock,
    check_build_target,
    disk_error,
    log,
    new_build_folder,
    remove_leftovers,
    swap_in,
)
from mathscout.retrievers import registry  # noqa: F401  (offers every retriever's component to the builder, in Ray workers too)
from mathscout.retrievers.shards.cluster import connect, ray_module, worker_env
from mathscout.retrievers.shards.layout import SHARDS_FILE, ShardInfo, ShardSet
from mathscout.retrievers.shards.stats import GLOBAL, write_global_statistics
from mathscout.settings import settings
from mathscout.store import DocumentStore
from mathscout.usage import process_usage

MAX_SHARDS = 64
SHARDS_FOLDER = "shards"


def shard_ranges(documents: int, shards: int) -> list[tuple[int, int]]:
    """N contiguous ordinal ranges of (almost) equal size."""
    bounds = [round(i * documents / shards) for i in range(shards + 1)]
    return list(itertools.pairwise(bounds))


def copy_store_range(source: Path, target: Path, first: int, end: int) -> tuple[int, int]:
    """A store holding documents [first, end) of `source` (and their formulas), renumbered from 0; returns the
    first formula ordinal and the formula count."""
    DocumentStore.create(target).finish()
    db = sqlite3.connect(str(target))
    try:
        db.execute("ATTACH DATABASE ? AS src", (str(source),))
        db.execute(
            "INSERT INTO documents SELECT ordinal - ?, id, title, text, metadata FROM src.documents "
            "WHERE ordinal >= ? AND ordinal < ? ORDER BY ordinal",
            (first, first, end),
        )
        low, high, count = db.execute(
            "SELECT MIN(f.ordinal), MAX(f.ordinal), COUNT(*) FROM src.formulas f JOIN documents d ON d.id = f.doc_id"
        ).fetchone()
        if count and high - low + 1 != count:
            raise MathScoutError(f"the formulas of documents {first}–{end - 1} are not contiguous in {source}")
        low = low or 0
        db.execute(
            "INSERT INTO formulas SELECT f.ordinal - ?, f.id, f.doc_id, f.latex, f.start, f.end, f.display "
            "FROM src.formulas f WHERE f.ordinal >= ? AND f.ordinal < ? ORDER BY f.ordinal",
            (low, low, low + count),
        )
        db.commit()
        db.execute("DETACH DATABASE src")
    finally:
        db.close()
    return low, count


def build_cpus() -> float:
    """CPUs each shard's build task asks Ray for: MATHSCOUT_SHARD_BUILD_CPUS, or what is free when this process's open shard actors
    hold part of the cluster (a task asking for more than is free would wait for ever)."""
    free = float(ray_module().available_resources().get("CPU", 0.0))
    if free < 0.1:
        raise MathScoutError(
            "Ray has no free CPU for the shard builds (open sharded indexes' actors hold them): build "
            "in a new process or give Ray more CPUs"
        )
    return min(settings().shard_build_cpus, free)


STOP = ".stop"  # written beside the shard folders when a shard fails: the others stop before their next step


def _stop_requested(folder: Path) -> None:
    if (folder.parent / STOP).exists():
        raise MathScoutError(f"{folder.name} stopped: another shard failed")


def build_shard(source: str, folder: str, first: int, end: int, components: list[str], options: BuildOptions) -> dict:
    """One shard: its store (documents [first, end) of `source`), its components and its text lists (a Ray task);
    it stops before each step once another shard has failed (STOP)."""
    from mathscout.latex.aliases import VOCABULARY
    from mathscout.structure.text_lists import build_text_lists

    started = time.perf_counter()
    folder_path = Path(folder)
    _stop_requested(folder_path)
    folder_path.mkdir(parents=True)
    first_formula, formulas = copy_store_range(Path(source), folder_path / STORE, first, end)
    manifest = Manifest(
        documents=end - first,
        formulas=formulas,
        sources=[f"{source} [{first}, {end})"],
        components={"store": {"files": {STORE: record_file(folder_path / STORE).to_json()}}},
    )
    store = DocumentStore.open(folder_path / STORE)
    for name in components:
        _stop_requested(folder_path)
        manifest.components[name] = build_component(name, store, folder_path / name, options)
    if "structure" not in components:  # BM25 with global statistics scores from text lists (stats.py)
        (folder_path / "text").mkdir()
        build_text_lists(store, folder_path / "text", vocabulary=VOCABULARY)
        manifest.components["text"] = {"files": record_folder(folder_path / "text"), "vocabulary": VOCABULARY}
    store.close()
    manifest.write(folder_path / MANIFEST)
    return {
        "first_formula": first_formula,
        "formulas": formulas,
        "seconds": round(time.perf_counter() - started, 2),
        "components": {n: manifest.components[n].get("seconds") for n in components},
        **task_usage(),
    }


def task_usage() -> dict:
    """CPU seconds and peak RSS of this process (with its finished children): one shard's build, as each build task
    runs in a fresh Ray worker (max_calls=1)."""
    own, children = process_usage(), resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "cpu_seconds": round(own.cpu_seconds + children.ru_utime + children.ru_stime, 1),
        "peak_rss_mib": round(max(own.peak_mib, children.ru_maxrss / 1024), 1),
    }


def tuned_files(index_path: Path) -> list[Path]:
    """An existing index's tuned files (structure.json, fusion.json, the ranker …), which a rebuild keeps as a
    single-index rebuild does (`builder.kept_files`): the shards read the Zhong 2023 thesis Eq. 3.18 setting from the index folder."""
    if not is_index(index_path):
        return []
    return [p for p in kept_files(index_path) if p.name not in (SHARDS_FOLDER, SHARDS_FILE)]


def build_sharded_index(
    inputs: Sequence[Path | str],
    index_path: Path | str,
    shards: int,
    components: Sequence[str] | None = None,
    ray_address: str | None = None,
    fresh: bool = False,
    options: BuildOptions = BuildOptions(),
) -> Manifest:
    """Ingest `inputs`, split them into `shards` shards built as Ray tasks, write the global statistics into each;
    an existing index's tuned files are kept unless `fresh`. A shard task holds one Ray CPU: its path index is built
    in its own process unless `options` or MATHSCOUT_BUILD_WORKERS ask for more workers (parallel.py)."""
    index_path, input_paths = Path(index_path), [Path(p) for p in inputs]
    if not 1 <= shards <= MAX_SHARDS:
        raise MathScoutError(f"--shards must be 1–{MAX_SHARDS} (got {shards})")
    for path in input_paths:
        if not path.exists():
            raise MathScoutError(f"input not found: {path}")
    names = list(components or default_components())
    for name in names:
        component_spec(name)  # unknown names fail before any work
    check_build_target(index_path)
    address = connect(ray_address)
    try:
        index_path.parent.mkdir(parents=True, exist_ok=True)
        with build_lock(index_path):
            check_build_target(index_path)
            removed = remove_leftovers(index_path.parent, index_path.name)
            if removed:
                log(f"removed leftovers of interrupted builds: {', '.join(removed)}")
            kept = [] if fresh else tuned_files(index_path)
            if kept:
                log(f"keeping tuned files {', '.join(p.name for p in kept)} (--fresh drops them)")
            workers = options.workers or settings().build_workers or 1
            return _build(input_paths, index_path, shards, names, address, kept, replace(options, workers=workers))
    except OSError as exc:
        error = disk_error(exc, index_path)
        if error is None:
            raise
        raise error from exc


def _gather(ray, refs: list, folders: list[Path]) -> list[dict]:
    """Every shard task's result. A task that fails stops the others and is reported by its shard, with its cause:
    a MathScoutError or an OSError (a full disk: the caller names it) as raised, anything else in one line.

    The others are asked to stop (STOP, checked before each of their steps) and waited for, never `ray.cancel`led:
    cancelling a task while Ray dispatches it aborts the driver process ("Tried to complete task that was not
    pending", Ray's task manager; it killed a test run here)."""
    built = []
    for folder, ref in zip(folders, refs):
        try:
            built.append(ray.get(ref))
        except ray.exceptions.RayTaskError as exc:
            folder.parent.mkdir(parents=True, exist_ok=True)
            (folder.parent / STOP).touch()
            ray.wait(refs, num_returns=len(refs))  # every other task ended (built, stopped or failed)
            cause = exc.cause if isinstance(getattr(exc, "cause", None), BaseException) else exc
            if isinstance(cause, (MathScoutError, OSError)):
                raise cause from None
            first = (str(cause).strip().splitlines() or [""])[0]
            raise MathScoutError(
                f"building {folder.name} failed: {type(cause).__name__}: {first} "
                "(set MATHSCOUT_DEBUG=1 for the details)"
            ) from exc
    return built


def _build(
    inputs: list[Path],
    index_path: Path,
    shards: int,
    names: list[str],
    address: str,
    kept: list[Path],
    options: BuildOptions,
) -> Manifest:
    ray = ray_module()
    building = new_build_folder(index_path)
    try:
        started = time.perf_counter()
        store = DocumentStore.create(building / STORE)
        report = ingest_inputs(inputs, store)
        documents, formulas = store.count(), store.formula_count()
        store.finish()
        if documents < shards:
            raise MathScoutError(f"{documents} documents cannot make {shards} shards")
        ingested = time.perf_counter()
        ranges = shard_ranges(documents, shards)
        folders = [building / SHARDS_FOLDER / f"shard-{i:03d}" for i in range(shards)]
        task = ray.remote(num_cpus=build_cpus(), max_retries=1, max_calls=1, runtime_env=worker_env())(build_shard)
        log(f"building {shards} shards as Ray tasks ({address}) …")
        refs = [
            task.remote(str(building / STORE), str(folder), lo, hi, names, options)
            for folder, (lo, hi) in zip(folders, ranges)
        ]
        built = _gather(ray, refs, folders)
        shards_done = time.perf_counter()
        stats = write_global_statistics(folders)
        for folder in folders:  # the global statistics are part of each shard: checked when it opens
            manifest = Manifest.read(folder / MANIFEST)
            manifest.components[GLOBAL] = {"files": record_folder(folder / GLOBAL)}
            manifest.write(folder / MANIFEST)
        finished = time.perf_counter()
        infos = [
            ShardInfo(f"{SHARDS_FOLDER}/{folder.name}", lo, hi - lo, b["first_formula"], b["formulas"])
            for folder, (lo, hi), b in zip(folders, ranges, built)
        ]
        timings = {
            "ingest": round(ingested - started, 2),
            "shards": round(shards_done - ingested, 2),
            "statistics": round(finished - shards_done, 2),
            "total": round(finished - started, 2),
            "per_shard": [b["seconds"] for b in built],
            "per_shard_cpu_seconds": [b["cpu_seconds"] for b in built],
            "per_shard_peak_rss_mib": [b["peak_rss_mib"] for b in built],
            "ray": address,
        }
        ShardSet(
            infos,
            names,
            {"documents": stats.documents, "length_sum": stats.length_sum, "path_entries": stats.path_entries},
            timings,
        ).write(building)
        manifest = Manifest(
            documents=documents,
            formulas=formulas,
            sources=[str(p.resolve()) for p in inputs],
            components={
                "store": store_record(report, building),
                **{n: {"sharded": shards} for n in names},
            },
        )
        for path in kept:  # the index's fitted setting and models (the coordinator sends structure.json to the shards)
            (shutil.copytree if path.is_dir() else shutil.copy2)(path, building / path.name)
        manifest.write(building / MANIFEST)
        swap_in(building, index_path)
        log(
            f"sharded index {index_path}: {shards} shards in {timings['total']:.1f} s (ingest {timings['ingest']:.1f} s, "
            f"shards {timings['shards']:.1f} s, global statistics {timings['statistics']:.1f} s)"
        )
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return manifest
