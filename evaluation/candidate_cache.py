"""First-stage candidates of many topics, generated once and kept on disk (a rerun reads them back for free).

    python -m mathscout.evaluation.candidate_cache --index DIR --topics T [--qrels Q --sample N] --out FILE.pkl

A cache records the index, the retrievers (wanted and served), the depth and the build it was made with (the files of
the store and of the components served, and the trained colbert model's description); a cache made with other
retrievers (e.g. before the index got a dense component), another depth or another build (a rebuilt component, a
retrained model) is refused, so features are never computed over mismatched candidates. The cross-encoder's logits
record the model that gave them: after a retraining they are recomputed over the cached candidates.
Topics are written in chunks: an interrupted run resumes where it stopped.
"""

from __future__ import annotations

import argparse
import pickle
import random
import time
from pathlib import Path
from typing import Any

from mathscout.dense.cross import CrossEncoderInfo
from mathscout.errors import MathScoutError
from mathscout.evaluation.measures import read_qrels
from mathscout.evaluation.topics import load_topics
from mathscout.index.layout import IndexDir
from mathscout.retrievers.candidates import DEPTH, RETRIEVERS, CandidateGenerator, Candidates, lacks_cross
from mathscout.retrievers.colbert_model import ColbertTraining
from mathscout.retrievers.registry import servable_modes
from mathscout.types import Query

CHUNK = 50  # topics between two saves


def choose_topics(
    topics_path: Path, qrels_path: Path | None, sample: int = 0, seed: int = 0, exclude: frozenset[str] = frozenset()
) -> list[Query]:
    """The topics of the file (only those the qrels judge, when given, and none of `exclude`), or a seeded random
    sample of them."""
    topics = [t for t in load_topics(topics_path) if t.id not in exclude]
    if qrels_path is not None:
        judged = read_qrels(qrels_path)
        topics = [t for t in topics if t.id in judged]
    if sample and sample < len(topics):
        topics = sorted(random.Random(seed).sample(topics, sample), key=lambda t: t.id)
    return topics


def read_cache(path: Path) -> dict:
    """A candidate cache file: {"meta": how it was made, "topics": topic id → Candidates}."""
    with open(path, "rb") as f:
        return pickle.load(f)


def _write(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        pickle.dump(data, f, protocol=pickle.HIGHEST_PROTOCOL)
    tmp.replace(path)


def cached_candidates(
    index: IndexDir,
    topics: list[Query],
    cache: Path | None,
    depth: int = DEPTH,
    retrievers: tuple[str, ...] = RETRIEVERS,
    log: bool = True,
    generator: CandidateGenerator | None = None,
    cross_depth: int = 0,
) -> list[Candidates]:
    """Candidates of every topic: read from `cache` where it has them, generated (and added to it) otherwise, by
    `generator` when the caller has opened one (of the same index, retrievers, depth and cross depth); with
    `cross_depth`, the index's cross-encoder logits of the top candidates too (added to cached candidates that lack
    them)."""
    used = servable_modes(index, retrievers)
    meta: dict[str, Any] = {
        "index": str(index.path.resolve()),
        "depth": depth,
        "retrievers": list(retrievers),
        "used": used,
        "build": index.build_hash(used, described=(ColbertTraining.FILE,)),
        "cross_model": index.build_hash([], described=(CrossEncoderInfo.FILE,)) if cross_depth > 0 else None,
    }
    data: dict[str, Any] = {"meta": meta, "topics": {}}
    if cache is not None and cache.is_file():
        data = read_cache(cache)
        made = data["meta"]
        if any(made.get(k) != meta[k] for k in ("depth", "retrievers", "used", "build")):
            raise MathScoutError(
                f"the candidate cache {cache} was made with {made}, not {meta}: give another --cache file"
            )
        if cross_depth > 0 and made.get("cross_model") != meta["cross_model"]:  # logits of another cross-encoder
            for candidates in data["topics"].values():
                candidates.cross = None
            made["cross_model"] = meta["cross_model"]
    known: dict[str, Candidates] = data["topics"]
    todo = [
        t
        for t in topics
        if t.id not in known
        or _lacks_question_document(known[t.id], meta["used"])
        or lacks_cross(known[t.id], cross_depth)
    ]
    if todo:
        generator = generator or CandidateGenerator(index, retrievers, depth, cross_depth)
        started = time.perf_counter()
        for n, topic in enumerate(todo, 1):
            # candidates cached before the question–document features existed keep their runs and gain the features
            known[topic.id] = (
                generator.add_question_document(known[topic.id]) if topic.id in known else generator.generate(topic)
            )
            if cache is not None and (n % CHUNK == 0 or n == len(todo)):
                _write(cache, data)
            if log and (n % CHUNK == 0 or n == len(todo)):
                print(f"[candidates] {n}/{len(todo)} topics, {time.perf_counter() - started:.0f} s", flush=True)
    return [known[t.id] for t in topics]


def _lacks_question_document(candidates: Candidates, used: list[str]) -> bool:
    """Cached before `rewrites`/`titles` existed (unpickled without them: the class defaults, None), though the
    index could compute them (rewrites need structure search, title BM25 needs the bm25 component)."""
    return (candidates.rewrites is None and "structure" in used) or (candidates.titles is None and "bm25" in used)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m mathscout.evaluation.candidate_cache", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--topics", type=Path, required=True)
    parser.add_argument("--qrels", type=Path, help="only the topics these qrels judge")
    parser.add_argument("--sample", type=int, default=0, help="a seeded random sample of the topics (0: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--depth", type=int, default=DEPTH)
    parser.add_argument(
        "--cross-depth", type=int, default=0, help="candidates the index's cross-encoder reads (0: none)"
    )
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    topics = choose_topics(args.topics, args.qrels, args.sample, args.seed)
    found = cached_candidates(IndexDir(args.index), topics, args.out, args.depth, cross_depth=args.cross_depth)
    print(f"{len(found)} topics' candidates in {args.out}")


if __name__ == "__main__":
    main()
