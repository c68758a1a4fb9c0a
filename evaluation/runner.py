"""`mathscout run`: search every topic of a topic file and write the run file."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, cast

from mathscout.errors import MathScoutError
from mathscout.evaluation.runs import format_run_lines, format_task2_lines, write_lines, write_run
from mathscout.evaluation.topics import load_topics
from mathscout.index.layout import IndexDir
from mathscout.limits import ARQMATH_RUN_K, RERANK_DEPTH, K
from mathscout.notices import warning
from mathscout.progress import bar as progress_bar
from mathscout.retrievers.base import Retriever
from mathscout.retrievers.registry import open_retriever
from mathscout.types import Hit

if TYPE_CHECKING:
    from mathscout.retrievers.structure import StructureRetriever


def run_topics(
    index: IndexDir,
    topics_path: Path | str,
    mode: str,
    k: int,
    output: Path | str,
    fmt: str = "trec",
    tag: str | None = None,
    options: dict | None = None,
    rerank: str | None = None,
    rerank_depth: int = 10,
    first_stage: Path | str | None = None,
    open_mode: Callable[..., Retriever] | None = None,
) -> str:
    """Search each topic (top `k`) with the `mode` retriever and write `output`; returns a summary line.

    `open_mode(index, mode, **options)` opens the retriever: the entry layer hands down the one mode resolver
    (`mathscout.agent.planned.open_mode`, with `auto`); without it, the registry's `open_retriever`.
    `rerank` (a `mathscout.retrievers.rerank.open_reranker` kind) reorders each topic's top `rerank_depth` hits;
    `first_stage` (a run file) replaces the `mode` search by that run's rankings (rerank a stored run).

    A topic whose search fails is reported on stderr and left out of the run; if every topic fails,
    nothing is written and a MathScoutError explains why.
    """
    k = _run_k(k, fmt)
    rerank_depth = RERANK_DEPTH.check(rerank_depth)
    tag = tag or f"mathscout-{mode}" + (f"-{rerank}{rerank_depth}" if rerank else "")
    format_run_lines({}, tag, fmt)  # a bad format or tag fails now, not after the whole run
    topics = load_topics(topics_path)
    try:
        opener = open_mode or open_retriever
        retriever = RunRetriever(first_stage, index) if first_stage else opener(index, mode, **(options or {}))
    except TypeError as exc:  # an option the mode does not take
        raise MathScoutError(f"mode '{mode}' does not accept these options {sorted(options or {})}: {exc}") from exc
    if rerank:
        from mathscout.retrievers.rerank import Reranked, open_reranker

        retriever = Reranked(retriever, open_reranker(rerank, store=index.store, index=index), rerank_depth)
    results: dict[str, list[Hit]] = {}
    failures: list[str] = []
    latencies: list[float] = []
    started = time.perf_counter()
    for topic in progress_bar(topics, desc=f"{mode} run", unit="topic", file=sys.stderr):
        t0 = time.perf_counter()
        try:
            hits = retriever.batch_search([topic], k=k)[topic.id]  # ranking only: runs need no snippets
        except Exception as exc:  # noqa: BLE001 — one bad topic must not cost the whole run
            failures.append(topic.id)
            warning(f"topic {topic.id} skipped: {_describe(exc)}")
            continue
        latencies.append(time.perf_counter() - t0)
        results[topic.id] = hits
    elapsed = time.perf_counter() - started
    if not results:
        raise MathScoutError(f"every one of the {len(topics)} topics failed to search; no run written")
    lines = write_run(results, output, tag, fmt)
    mean_ms = 1000 * sum(latencies) / len(latencies)
    skipped = ""
    if failures:
        skipped = f", {len(failures)} skipped ({', '.join(failures[:5])}{', …' if len(failures) > 5 else ''})"
    return (
        f"{output}: {len(results)} topics{skipped}, {lines:,} lines ({fmt}, tag {tag}) in {elapsed:.1f} s, "
        f"mean latency {mean_ms:.1f} ms/topic"
    )


def _run_k(k: int, fmt: str) -> int:
    """Hits per topic: K's range; an ARQMath run holds at most ARQMATH_RUN_K per topic (capped, with a notice)."""
    k = K.check(k)
    if fmt != "arqmath":
        return k
    capped, said = ARQMATH_RUN_K.cap(k)
    if said:
        warning(said)
    return capped


TASK2_MODES = ("structure",)  # Task 2 ranks formulas: the structure engine's formula-level results


def run_task2(
    index: IndexDir,
    topics_path: Path | str,
    mode: str,
    k: int,
    output: Path | str,
    fmt: str = "arqmath",
    tag: str | None = None,
    options: dict | None = None,
) -> str:
    """ARQMath Task 2 (formula retrieval): each topic's query formula → the top `k` formulas by structure similarity,
    written as `topic formula post rank score run` (`fmt` "arqmath", tab-separated; "trec" puts the formula id in
    the document column). Formula ids are the index's: official ARQMath ids for Posts XML, `<doc>#<n>` otherwise."""
    k = _run_k(k, fmt)
    if mode not in TASK2_MODES:
        raise MathScoutError(f"Task 2 runs rank formulas: use --mode {' or '.join(TASK2_MODES)} (not '{mode}')")
    tag = tag or f"mathscout-task2-{mode}"
    format_run_lines({}, tag, fmt)  # a bad format or tag fails now
    topics = list(load_topics(topics_path))
    without = [t.id for t in topics if not getattr(t, "formula", None)]
    if len(without) == len(topics):
        raise MathScoutError(f"{topics_path} has no formula topics (Task 2 topics carry <Latex>); use --task 1")
    retriever = cast("StructureRetriever", open_retriever(index, mode, **(options or {})))  # TASK2_MODES
    results: dict = {}
    started = time.perf_counter()
    for topic in progress_bar(topics, desc="task 2 run", unit="topic", file=sys.stderr):
        if topic.id in without:
            continue
        assert topic.formula is not None  # the topics without one are left out
        try:
            results[topic.id] = retriever.formula_hits(topic.formula, k)
        except Exception as exc:  # noqa: BLE001 — an unreadable query formula must not cost the whole run
            warning(f"topic {topic.id} skipped: {_describe(exc)}")
    if not any(results.values()):
        raise MathScoutError(f"no formula of the {len(topics)} topics matched; no run written")
    if fmt == "arqmath":
        lines = format_task2_lines(results, tag)
    else:
        lines = format_run_lines(
            {qid: [Hit(doc_id=f.id, score=s) for f, s in pairs] for qid, pairs in results.items()}, tag, fmt
        )
    write_lines(lines, output)
    empty = [qid for qid in (t.id for t in topics) if not results.get(qid)]
    missing = (
        f", {len(empty)} without results ({', '.join(empty[:5])}{', …' if len(empty) > 5 else ''})" if empty else ""
    )
    return (
        f"{output}: Task 2, {len(topics) - len(empty)} topics{missing}, {len(lines):,} lines ({fmt}, tag {tag}) "
        f"in {time.perf_counter() - started:.1f} s"
    )


class RunRetriever:
    """A stored run as a Retriever (PyTerrier's run-as-transformer): each topic gets the run's ranking."""

    def __init__(self, path: Path | str, index: IndexDir):
        from mathscout.evaluation.runs import read_run

        self.run = read_run(path)
        self.name = f"run:{Path(path).name}"
        self.store = index.store

    def search(self, query, k: int = 10) -> list[Hit]:
        qid = query.id if hasattr(query, "id") else "q"
        entries = self.run.topics.get(qid, [])[:k]
        return [Hit(doc_id=e.doc_id, score=e.score, rank=n) for n, e in enumerate(entries, start=1)]

    def batch_search(self, queries, k: int = 1000) -> dict[str, list[Hit]]:
        return {q.id: self.search(q, k) for q in queries}


def _describe(exc: Exception) -> str:
    return str(exc) if isinstance(exc, MathScoutError) else f"{type(exc).__name__}: {exc}"
