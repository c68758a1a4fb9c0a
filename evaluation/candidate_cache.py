"""First-stage candidates of many topics, generated once and kept on disk (a rerun reads them back for free).

    python -m mathscout.evaluation.candidate_cache --index DIR --topics T [--qrels Q --sample N] --out FILE.jsonl

A cache records the index, the retrievers (wanted and served), the depth and the build it was made with (the files of
the store and of the components served, and the trained colbert model's description); a cache made with other
retrievers (e.g. before the index got a dense component), another depth or another build (a rebuilt component, a
retrained model) is refused, so features are never computed over mismatched candidates. The cross-encoder's logits
record the model that gave them: after a retraining they are recomputed over the cached candidates.
Topics are written in chunks: an interrupted run resumes where it stopped. The file is JSON lines (`work_files`): a
cache someone else made is read as data, never run.
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path
from typing import Any

from mathscout.dense.cross import CrossEncoderInfo
from mathscout.errors import MathScoutError
from mathscout.evaluation.measures import read_qrels
from mathscout.evaluation.topics import load_topics
from mathscout.evaluation.work_files import WorkFile, as_number, as_scores, as_text, as_whole
from mathscout.index.layout import IndexDir
from mathscout.retrievers.candidates import (
    DEPTH,
    RETRIEVERS,
    CandidateGenerator,
    Candidates,
    QueryStats,
    lacks_cross,
)
from mathscout.retrievers.colbert_model import ColbertTraining
from mathscout.retrievers.equivalence import RewriteMatch, RewriteMatches
from mathscout.retrievers.registry import servable_modes
from mathscout.types import Hit, MatchedFormula, Query

CHUNK = 50  # topics between two saves
KIND, VERSION = "candidate cache", 2  # version 1 was a Python pickle (never read: it can run code)


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


def _cache_file(path: Path) -> WorkFile:
    return WorkFile(path, KIND, VERSION, "give another --cache file (a missing one is made)")


def read_cache(path: Path) -> dict:
    """A candidate cache file: {"meta": how it was made, "topics": topic id → Candidates (a later line of a topic
    replaces an earlier one), "appendable": whether the next save may append to it}."""
    file = _cache_file(path)
    contents = file.read(_topic_from_line, "a topic's candidates")
    meta = contents.header.get("meta")
    if not isinstance(meta, dict):
        raise file.error("its header has no meta object")
    topics = {candidates.query.id: candidates for candidates in contents.records}
    return {"meta": meta, "topics": topics, "appendable": contents.appendable}


def _topic_from_line(record: dict) -> Candidates:
    candidates = candidates_from_json(record["candidates"])
    if record["topic"] != candidates.query.id:
        raise ValueError("its topic is not its query's")
    return candidates


def _write(path: Path, data: dict) -> None:
    """The whole cache, replaced at once."""
    topics = data["topics"].values()
    _cache_file(path).write({"meta": data["meta"]}, (_topic_line(c) for c in topics))


def _append(path: Path, topics: list[Candidates]) -> None:
    _cache_file(path).append(_topic_line(c) for c in topics)


def _topic_line(candidates: Candidates) -> dict:
    return {"topic": candidates.query.id, "candidates": candidates_to_json(candidates)}


# --- Candidates as JSON: every field, typed on the way back ----------------------------------------------------------


def _hit_to_json(hit: Hit) -> dict:
    """A hit's fields, those at their defaults left out (a candidate's hits are mostly id, score and rank)."""
    out: dict[str, Any] = {"doc_id": hit.doc_id, "score": hit.score, "rank": hit.rank}
    if hit.components:
        out["components"] = hit.components
    if hit.formulas:
        out["formulas"] = [[f.formula_id, f.latex, f.score, f.highlight] for f in hit.formulas]
    for name in ("snippet", "title", "explanation"):
        if getattr(hit, name):
            out[name] = getattr(hit, name)
    return out


def _hit_from_json(value: dict) -> Hit:
    return Hit(
        as_text(value["doc_id"]),
        as_number(value["score"]),
        as_whole(value.get("rank", 0)),
        as_text(value.get("snippet", "")),
        [
            MatchedFormula(
                as_text(i), as_text(latex), as_number(score), [(as_whole(a), as_whole(b)) for a, b in highlight]
            )
            for i, latex, score, highlight in value.get("formulas", [])
        ],
        as_scores(value.get("components", {})),
        as_text(value.get("title", "")),
        as_text(value.get("explanation", "")),
    )


def _hits(value: Any) -> list[Hit]:
    return [_hit_from_json(h) for h in value]


def candidates_to_json(candidates: Candidates) -> dict:
    """One topic's candidates as JSON values (NaN where a feature is unknown: Python's json writes and reads it)."""
    c = candidates
    rewrites = c.rewrites
    return {
        "query": {"id": c.query.id, "text": c.query.text, "formula": c.query.formula},
        "stats": {
            "formulas": c.stats.formulas,
            "math_share": c.stats.math_share,
            "terms": c.stats.terms,
            "kind": c.stats.kind,
            "perfect_structure": c.stats.perfect_structure,
        },
        "runs": {name: [_hit_to_json(h) for h in hits] for name, hits in c.runs.items()},
        "missing": list(c.missing),
        "seconds": c.seconds,
        "rewrites": None
        if rewrites is None
        else {
            "forms": rewrites.forms,
            "matches": {doc: [m.tier, m.score] for doc, m in rewrites.matches.items()},
            "seconds": rewrites.seconds,
        },
        "titles": c.titles,
        "cross": None if c.cross is None else [_hit_to_json(h) for h in c.cross],
    }


def candidates_from_json(value: dict) -> Candidates:
    """`candidates_to_json`'s inverse; a TypeError, KeyError or ValueError for a value that is not one."""
    query, stats, rewrites = value["query"], value["stats"], value["rewrites"]
    formula = query["formula"]
    perfect = stats["perfect_structure"]
    forms = None if rewrites is None else rewrites["forms"]
    return Candidates(
        query=Query(as_text(query["id"]), as_text(query["text"]), None if formula is None else as_text(formula)),
        stats=QueryStats(
            as_whole(stats["formulas"]),
            as_number(stats["math_share"]),
            as_whole(stats["terms"]),
            as_text(stats["kind"]),
            None if perfect is None else as_number(perfect),
        ),
        runs={as_text(name): _hits(hits) for name, hits in value["runs"].items()},
        missing=tuple(as_text(m) for m in value["missing"]),
        seconds=as_scores(value["seconds"]),
        rewrites=None
        if rewrites is None
        else RewriteMatches(
            None if forms is None else as_whole(forms),
            {
                as_text(doc): RewriteMatch(as_number(tier), as_number(score))
                for doc, (tier, score) in rewrites["matches"].items()
            },
            as_number(rewrites["seconds"]),
        ),
        titles=None if value["titles"] is None else as_scores(value["titles"]),
        cross=None if value["cross"] is None else _hits(value["cross"]),
    )


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
    rewrite = True  # the next save writes the whole file (a new one, or a new header); else it appends
    if cache is not None and cache.is_file():
        data = read_cache(cache)
        rewrite = not data.pop("appendable")  # a last line cut by an interrupted write: the next save writes it whole
        made = data["meta"]
        if any(made.get(k) != meta[k] for k in ("depth", "retrievers", "used", "build")):
            raise MathScoutError(
                f"the candidate cache {cache} was made with {made}, not {meta}: give another --cache file"
            )
        if cross_depth > 0 and made.get("cross_model") != meta["cross_model"]:  # logits of another cross-encoder
            for candidates in data["topics"].values():
                candidates.cross = None
            made["cross_model"] = meta["cross_model"]
            rewrite = True
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
        unsaved: list[Candidates] = []
        replaced = False  # a topic of the file was appended again: the last save compacts the file
        for n, topic in enumerate(todo, 1):
            replaced = replaced or topic.id in known
            # candidates cached before the question–document features existed keep their runs and gain the features
            known[topic.id] = (
                generator.add_question_document(known[topic.id]) if topic.id in known else generator.generate(topic)
            )
            unsaved.append(known[topic.id])
            if cache is not None and (n % CHUNK == 0 or n == len(todo)):
                if rewrite or (n == len(todo) and replaced):
                    _write(cache, data)
                    rewrite = False
                else:
                    _append(cache, unsaved)
                unsaved = []
            if log and (n % CHUNK == 0 or n == len(todo)):
                print(f"[candidates] {n}/{len(todo)} topics, {time.perf_counter() - started:.0f} s", flush=True)
    return [known[t.id] for t in topics]


def _lacks_question_document(candidates: Candidates, used: list[str]) -> bool:
    """Cached before `rewrites`/`titles` existed (None), though the index could compute them (rewrites need structure
    search, title BM25 needs the bm25 component)."""
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
