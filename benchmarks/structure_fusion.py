"""Eq. 3.18 fusion study: dump each topic's per-formula and BM25 document scores once, then write TREC runs for
any λ_m / formula selection / text part without searching again (thesis §3.2.3, §3.3.3 Fig. 3.10).

    python -m benchmarks.structure_fusion dump --index DIR --topics T --depth 100 --out DUMP.pkl [--sample N]
    python -m benchmarks.structure_fusion runs --dump DUMP.pkl --out-dir DIR --lambdas 0.1,0.5,2.5 --max-formulas 0,3
    python -m benchmarks.structure_fusion tune --dump TRAIN.pkl --qrels Q --lambdas … --max-formulas …

The dump holds, per topic: each readable query formula's width (its widest node's upper bound) and its
per-document top `depth` (the structure mode's per-document pruned search, GBP-LEN), BM25 over the words
without the math (Eq. 3.18's BM25(Q_text, D_text)) and BM25 over the whole query (the bm25 mode's math-aware
terms). A run from the dump is the same arithmetic as `StructureRetriever._fused` (λ_m · Σ_f S_f + text; 0
outside a list), so `mathscout run --mode structure --set lambda_m=… --set max_formulas=… --set depth=…`
reproduces it (checked by `check`). Tuning picks the best setting on a topic set (use train topics, never dev).
"""

from __future__ import annotations

import argparse
import pickle
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

from evaluation.topics import load_topics
from mathscout.errors import QueryError
from mathscout.index.layout import IndexDir
from mathscout.types import Query
from retrievers.base import prepare_query


def dump(index: Path, topics_path: Path, depth: int, out: Path, sample: int = 0, seed: int = 13,
         max_formulas: int = 0, qrels: Path | None = None) -> None:
    from retrievers.bm25 import BM25Retriever
    from retrievers.structure import StructureRetriever, _split

    retriever = StructureRetriever(IndexDir(index), depth=depth)
    bm25 = BM25Retriever(IndexDir(index))
    topics = load_topics(topics_path)
    if qrels is not None:  # only the topics that have judgements
        judged = {line.split()[0] for line in open(qrels, encoding="utf-8") if line.strip()}
        topics = [t for t in topics if t.id in judged]
    if sample and sample < len(topics):
        topics = sorted(random.Random(seed).sample(topics, sample), key=lambda t: t.id)
    doc_ids = retriever.store.doc_ids()
    records = {}
    started = time.perf_counter()
    for n, topic in enumerate(topics, 1):
        query = prepare_query(topic)
        formulas, words = _split(query)
        prepared = retriever._prepare_all(formulas)
        if max_formulas:
            prepared = sorted(prepared, key=lambda q: -q.width)[:max_formulas]
        per_formula = []
        for q in prepared:
            hits = retriever.searcher.search(q, depth, retriever.strategy, per_document=True)
            per_formula.append((q.width, {doc_ids[h.doc]: h.score for h in hits}))
        text = {doc_ids[d]: s for d, s in retriever._bm25_scores(words, depth).items()} if words else {}
        try:
            full = {h.doc_id: h.score for h in bm25.rank(query, depth)}
        except QueryError:
            full = {}
        records[topic.id] = {"formulas": per_formula, "words": text, "full": full, "n_formulas": len(formulas)}
        if n % 20 == 0:
            print(f"[dump] {n}/{len(topics)} topics, {time.perf_counter() - started:.0f} s", flush=True)
    with open(out, "wb") as f:
        pickle.dump({"depth": depth, "topics": records}, f)
    print(f"{len(records)} topics dumped to {out} in {time.perf_counter() - started:.0f} s")


def fuse(record: dict, lambda_m: float, max_formulas: int = 0, text: str = "words", k: int = 1000) -> list[tuple[str, float]]:
    """Eq. 3.18 for one topic: λ_m · Σ over the (widest `max_formulas`) formulas + the text part, top k."""
    formulas = record["formulas"]
    if max_formulas:
        formulas = sorted(formulas, key=lambda f: -f[0])[:max_formulas]
    math: dict[str, float] = defaultdict(float)
    for _, hits in formulas:
        for doc, score in hits.items():
            math[doc] += score
    text_scores = record[text] if text != "none" else {}
    scores = {d: lambda_m * math.get(d, 0.0) + text_scores.get(d, 0.0) for d in set(math) | set(text_scores)}
    return sorted(((d, s) for d, s in scores.items() if s > 0), key=lambda x: (-x[1], x[0]))[:k]


def write_run(records: dict, path: Path, tag: str, **options) -> None:
    from evaluation.runs import encode_doc_id

    with open(path, "w", encoding="utf-8") as out:
        for topic_id, record in records.items():
            for rank, (doc, score) in enumerate(fuse(record, **options), 1):
                out.write(f"{topic_id} Q0 {encode_doc_id(doc)} {rank} {score:.6f} {tag}\n")


def _grid(args) -> list[dict]:
    lambdas = [float(x) for x in args.lambdas.split(",")]
    maxes = [int(x) for x in args.max_formulas.split(",")]
    texts = args.text.split(",")
    return [{"lambda_m": lam, "max_formulas": m, "text": t} for lam in lambdas for m in maxes for t in texts]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump")
    d.add_argument("--index", type=Path, required=True)
    d.add_argument("--topics", type=Path, required=True)
    d.add_argument("--depth", type=int, default=100)
    d.add_argument("--out", type=Path, required=True)
    d.add_argument("--sample", type=int, default=0)
    d.add_argument("--max-formulas", type=int, default=0, help="dump only the N widest formulas per topic (0: all)")
    d.add_argument("--qrels", type=Path, help="dump only the topics these qrels judge")
    for name in ("runs", "tune"):
        p = sub.add_parser(name)
        p.add_argument("--dump", type=Path, required=True)
        p.add_argument("--lambdas", default="0.05,0.1,0.25,0.5,1,2.5")
        p.add_argument("--max-formulas", default="0,1,2,3,5")
        p.add_argument("--text", default="words,full")
        p.add_argument("--k", type=int, default=1000)
        p.add_argument("--out-dir", type=Path)
        p.add_argument("--qrels", type=Path)
        p.add_argument("--prime", action="store_true")
        p.add_argument("--measure", default=None, help="measure to maximise (default nDCG@10, or ndcg′ with --prime)")
    args = parser.parse_args(argv)
    if args.command == "dump":
        dump(args.index, args.topics, args.depth, args.out, args.sample, max_formulas=args.max_formulas, qrels=args.qrels)
        return
    records = pickle.load(open(args.dump, "rb"))["topics"]
    out_dir = args.out_dir or args.dump.parent
    out_dir.mkdir(parents=True, exist_ok=True)
    results = []
    for options in _grid(args):
        name = f"{args.dump.stem}.lam{options['lambda_m']}.mf{options['max_formulas']}.{options['text']}.trec"
        path = out_dir / name
        write_run(records, path, "mathscout-structure", k=args.k, **options)
        if args.command == "tune":
            from evaluation.measures import evaluate_run

            result = evaluate_run(path, args.qrels, prime=args.prime)
            means = result.to_json()["summary"]
            results.append((options, means))
            print(options, {k: round(v, 4) for k, v in means.items() if isinstance(v, float)}, flush=True)
        else:
            print(path)
    if results:
        key = args.measure or next(k for k in results[0][1] if "ndcg" in k.lower())
        best = max(results, key=lambda r: r[1][key])
        print(f"best by {key}: {best[0]} → {best[1][key]:.4f}")


if __name__ == "__main__":
    sys.exit(main())
