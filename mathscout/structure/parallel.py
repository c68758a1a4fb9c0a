"""The path index built by worker processes, one contiguous range of formula ordinals each, merged on disk.

Each worker indexes its range exactly as the one-process writer does (index.py), with its own path and symbol
dictionaries numbered in order of first appearance, and flushes its entries as segments (segments.py). Numbered in
order of first appearance over the whole collection, the global dictionaries are worker 0's followed by each
later worker's paths (symbols) not seen before, in that worker's order: so worker 0's segments are already in
global ids, a later worker's are renumbered (rows re-keyed, symbol ids re-coded in the bytes) and then every
segment is merged as in a one-process build: the files are byte for byte those of a one-process build (only
meta.json's segment count differs). Memory: each worker holds what a one-process build holds for its range
(its dictionaries, one segment's buffer, its part of the formula table); the parent, while merging, the global
dictionaries and the formula table, as the one-process writer does at the end.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import queue
import shutil
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from mathscout.errors import MathScoutError
from mathscout.isolated import die_with_parent
from mathscout.progress import bar as progress_bar
from mathscout.settings import settings
from mathscout.structure.index import BuildReport, PathIndexWriter, default_segment_bytes, write_index_tables
from mathscout.structure.segments import Segment, merge_segments, remove_segments, renumber_segment
from mathscout.usage import process_usage

PROGRESS_EVERY = 2000  # formulas a worker indexes between two updates of its progress counter


def default_workers(workers: int | None = None) -> int:
    """`workers` (`mathscout index --workers`), else MATHSCOUT_BUILD_WORKERS, else min(2, CPU count)."""
    return workers or settings().build_workers or min(2, os.cpu_count() or 1)


@dataclass
class WorkerResult:
    """What one worker built: its segments, the files of its dictionaries and formula table, its report and costs."""

    number: int
    first: int
    end: int
    segments: list[tuple[str, str, int]]
    paths_file: str
    symbols_file: str
    table_file: str
    formulas: int
    indexed: int
    entries: int
    skipped: dict[str, int]
    seconds: float
    cpu_seconds: float
    peak_mib: float


@dataclass
class ParallelReport(BuildReport):
    """A BuildReport with each worker's range, time and peak RSS."""

    workers: list[dict] = field(default_factory=list)

    def as_stats(self, target: Path) -> dict:
        """BuildReport's stats with each worker's figures and the sum of their peaks (what the component records)."""
        return {
            **super().as_stats(target),
            "workers": self.workers,
            "workers_peak_mib_sum": round(sum(w["peak_mib"] for w in self.workers), 1),
        }


def _worker(number: int, store_path: str, first: int, end: int, folder: str, segment_bytes: int, done, results) -> None:
    """Index formulas [first, end) of the store into segments under `folder` (runs in a spawned process)."""
    die_with_parent()  # a killed build leaves no worker writing behind it
    try:
        from mathscout.store import DocumentStore

        started = time.perf_counter()
        work = Path(folder)
        writer = PathIndexWriter(end - first, work, segment_bytes, progress=False, first=first, segment_folder=work)
        store = DocumentStore.open(Path(store_path))
        for count, (fid, doc, latex) in enumerate(store.iter_formula_latex(first=first, end=end), 1):
            writer.add(fid, doc, latex)
            if count % PROGRESS_EVERY == 0:
                done.value = count
        store.close()
        part = writer.finish_part()
        done.value = writer.report.formulas
        usage = process_usage()
        report = writer.report
        results.put(
            (
                "ok",
                asdict(
                    WorkerResult(
                        number,
                        first,
                        end,
                        [(str(s.postings), str(s.table), s.groups) for s in part.segments],
                        str(part.paths_file),
                        str(part.symbols_file),
                        str(part.table_file),
                        report.formulas,
                        report.indexed,
                        report.entries,
                        dict(report.skipped),
                        time.perf_counter() - started,
                        usage.cpu_seconds,
                        usage.peak_mib,
                    )
                ),
            )
        )
    except BaseException as exc:  # noqa: BLE001 — the parent re-raises it (an OSError with its errno: a full disk stays recognisable)
        results.put(("error", number, type(exc).__name__, getattr(exc, "errno", None), str(exc)))


def _ranges(n_formulas: int, workers: int) -> list[tuple[int, int]]:
    bounds = [n_formulas * w // workers for w in range(workers + 1)]
    return [(bounds[w], bounds[w + 1]) for w in range(workers)]


def _run_workers(
    store_path: Path, n_formulas: int, work: Path, workers: int, segment_bytes: int, progress: bool
) -> list[WorkerResult]:
    """Start one spawned process per range, show their summed progress, collect their results (in range order)."""
    context = multiprocessing.get_context("spawn")  # never fork: a JVM or threads may live in this process
    results = context.Queue()
    ranges = _ranges(n_formulas, workers)
    counters = [context.Value("q", 0, lock=False) for _ in ranges]
    processes = []
    for number, (first, end) in enumerate(ranges):
        folder = work / f"worker-{number}"
        folder.mkdir(parents=True)
        processes.append(
            context.Process(
                target=_worker,
                name=f"path-index-worker-{number}",
                daemon=True,
                args=(number, str(store_path), first, end, str(folder), segment_bytes, counters[number], results),
            )
        )
    bar = progress_bar(
        total=n_formulas,
        desc=f"path index ({workers} workers)",
        unit=" formulas",
        file=sys.stderr,
        mininterval=2.0,
        disable=not progress,
    )
    collected: dict[int, WorkerResult] = {}
    try:
        for p in processes:
            p.start()
        while len(collected) < len(processes):
            try:
                message = results.get(timeout=1.0)
            except queue.Empty:
                dead = [p for p in processes if not p.is_alive() and p.exitcode not in (0, None)]
                if dead:
                    raise MathScoutError(
                        f"the structure build's {', '.join(p.name for p in dead)} stopped (exit code "
                        f"{dead[0].exitcode}) before it finished"
                    ) from None
            else:
                if message[0] == "error":
                    _, number, kind, errno, text = message
                    if errno is not None:
                        raise OSError(errno, f"path index worker {number}: {text}")
                    raise MathScoutError(f"the structure build's worker {number} failed: {kind}: {text}")
                result = WorkerResult(**message[1])
                collected[result.number] = result
            bar.update(sum(c.value for c in counters) - bar.n)
        for p in processes:
            p.join()
        bar.update(n_formulas - bar.n)
    finally:
        bar.close()
        for p in processes:
            if p.is_alive():
                p.terminate()
                p.join()
    return [collected[n] for n in range(len(processes))]


def _global_ids(results: list[WorkerResult]) -> tuple[list[str], list[str], list[tuple[np.ndarray, np.ndarray]]]:
    """Paths and symbols numbered in order of first appearance over all ranges, and each worker's id maps."""
    paths: dict[str, int] = {}
    symbols: dict[str, int] = {}
    maps = []
    for r in results:
        mine = json.loads(Path(r.paths_file).read_text(encoding="utf-8"))
        tid_map = np.fromiter((paths.setdefault(p, len(paths)) for p in mine), dtype=np.int32, count=len(mine))
        del mine
        mine = json.loads(Path(r.symbols_file).read_text(encoding="utf-8"))
        sym_map = np.fromiter((symbols.setdefault(s, len(symbols)) for s in mine), dtype=np.int64, count=len(mine))
        maps.append((tid_map, sym_map))
    return list(paths), list(symbols), maps


def _global_segments(
    results: list[WorkerResult], maps: list[tuple[np.ndarray, np.ndarray]], progress: bool
) -> list[Segment]:
    """Every worker's segments in global ids, in formula order (worker 0's need no renumbering)."""
    segments: list[Segment] = []
    later = [(r, maps[i]) for i, r in enumerate(results) if i > 0]
    bar = progress_bar(
        total=sum(len(r.segments) for r, _ in later),
        desc="path index renumber (segments)",
        unit=" segments",
        file=sys.stderr,
        mininterval=2.0,
        disable=not progress or not later,
    )
    with bar:
        for i, r in enumerate(results):
            for postings, table, groups in r.segments:
                segment = Segment(Path(postings), Path(table), groups)
                if i > 0:
                    target = Segment(
                        segment.postings.with_suffix(".global.bin"), segment.table.with_suffix(".global.rows"), groups
                    )
                    local, segment = segment, renumber_segment(segment, maps[i][0], maps[i][1], target)
                    remove_segments([local])
                    bar.update(1)
                segments.append(segment)
    return segments


def build_path_index_parallel(
    store_path: Path,
    n_formulas: int,
    target: Path,
    workers: int,
    progress: bool = True,
    segment_bytes: int | None = None,
) -> ParallelReport:
    """Index every formula of the store at `store_path` into `target` with `workers` processes (same files as
    index.build_path_index over store.iter_formula_latex())."""
    started = time.perf_counter()
    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    work = target / ".segments"
    try:
        results = _run_workers(
            Path(store_path), n_formulas, work, workers, segment_bytes or default_segment_bytes(), progress
        )
        paths, symbols, maps = _global_ids(results)
        segments = _global_segments(results, maps, progress)
        del maps
        byte_offsets, list_start, n_groups = merge_segments(segments, len(paths), target / "postings.bin", progress)
        remove_segments(segments)
        leaves = np.zeros(n_formulas, dtype=np.uint16)
        doc = np.full(n_formulas, -1, dtype=np.int32)
        for r in results:
            with np.load(r.table_file, allow_pickle=False) as table:
                leaves[r.first : r.end], doc[r.first : r.end] = table["leaves"], table["doc"]
        report = ParallelReport(
            formulas=sum(r.formulas for r in results),
            indexed=sum(r.indexed for r in results),
            entries=sum(r.entries for r in results),
            skipped=sum((Counter(r.skipped) for r in results), Counter()),
        )
        report.workers = [
            {
                "first": r.first,
                "end": r.end,
                "formulas": r.formulas,
                "segments": len(r.segments),
                "seconds": round(r.seconds, 2),
                "cpu_seconds": round(r.cpu_seconds, 2),
                "peak_mib": round(r.peak_mib, 1),
            }
            for r in results
        ]
        write_index_tables(
            target,
            byte_offsets,
            list_start,
            n_groups,
            leaves,
            doc,
            paths,
            symbols,
            report,
            {"segments": len(segments), "workers": len(results)},
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report.seconds = time.perf_counter() - started
    return report
