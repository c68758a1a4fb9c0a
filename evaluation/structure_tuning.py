"""`mathscout train structure`: Eq. 3.18's λ_m, formula selection and text part tuned on train topics and stored
with an index (`structure.json`), which the structure mode then uses instead of the thesis defaults.

Dump each topic's per-formula and BM25 document scores once, then write TREC runs for any λ_m / formula
selection / text part without searching again (thesis §3.2.3, §3.3.3 Fig. 3.10):

    mathscout train structure --index DIR [--sample 1000]     dump the train topics, tune, write DIR/structure.json
    mathscout train structure dump --index DIR --topics T --depth 100 --out DUMP.pkl [--sample N]
    mathscout train structure runs --dump DUMP.pkl --out-dir DIR --lambdas 0.1,0.5,2.5 --max-formulas 0,3
    mathscout train structure tune --dump TRAIN.pkl --qrels Q --lambdas … --max-formulas … [--index DIR]

The dump holds, per topic: each readable query formula's width (its widest node's upper bound) and its
per-document top `depth` (the structure mode's per-document pruned search, GBP-LEN), BM25 over the words
without the math (Eq. 3.18's BM25(Q_text, D_text)) and BM25 over the whole query (the bm25 mode's math-aware
terms). A run from the dump is the same arithmetic as `StructureRetriever._fused` (λ_m · Σ_f S_f + text; 0
outside a list), so `mathscout run --mode structure --set lambda_m=… --set max_formulas=… --set depth=…`
reproduces it. Tuning picks the best setting on a topic set (use train topics, never dev).
"""

from __future__ import annotations

import argparse
import pickle
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

from evaluation.measures import evaluate_run, read_qrels
from evaluation.topics import load_topics, require_train_topics
from mathscout.config import SHARED_COLLECTION
from mathscout.errors import QueryError
from mathscout.index.layout import IndexDir
from mathscout.structure.scoring import math_text_score
from retrievers.base import prepare_query


def dump(index: Path, topics_path: Path, depth: int, out: Path, sample: int = 0, seed: int = 13,
         max_formulas: int = 0, qrels: Path | None = None) -> None:
    from retrievers.bm25 import BM25Retriever
    from retrievers.structure import StructureRetriever, _split

    retriever = StructureRetriever(IndexDir(index), depth=depth, max_formulas=0)
    bm25 = BM25Retriever(IndexDir(index))
    topics = load_topics(topics_path)
    if qrels is not None:  # only the topics that have judgements
        judged = read_qrels(qrels)
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


def _read_dump(path: Path) -> dict:
    with open(path, "rb") as f:
        return pickle.load(f)["topics"]


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
    scores = {d: math_text_score(math.get(d, 0.0), text_scores.get(d, 0.0), lambda_m) for d in set(math) | set(text_scores)}
    return sorted(((d, s) for d, s in scores.items() if s > 0), key=lambda x: (-x[1], x[0]))[:k]


def write_run(records: dict, path: Path, tag: str, **options) -> None:
    from evaluation.runs import encode_doc_id

    with open(path, "w", encoding="utf-8") as out:
        for topic_id, record in records.items():
            for rank, (doc, score) in enumerate(fuse(record, **options), 1):
                out.write(f"{topic_id} Q0 {encode_doc_id(doc)} {rank} {score:.6f} {tag}\n")


def _grid(lambdas: str, max_formulas: str, text: str) -> list[dict]:
    """Every combination of the comma-separated λ_m, widest-formula counts and text parts."""
    return [{"lambda_m": float(lam), "max_formulas": int(m), "text": t}
            for lam in lambdas.split(",") for m in max_formulas.split(",") for t in text.split(",")]


def _write_runs(records: dict, grid: list[dict], out_dir: Path, stem: str, k: int) -> list[tuple[dict, Path]]:
    """One TREC run per setting of the grid."""
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = []
    for options in grid:
        path = out_dir / f"{stem}.lam{options['lambda_m']}.mf{options['max_formulas']}.{options['text']}.trec"
        write_run(records, path, "mathscout-structure", k=k, **options)
        runs.append((options, path))
    return runs


def tune(records: dict, qrels: Path, grid: list[dict], out_dir: Path, stem: str, k: int = 1000, prime: bool = False,
         measure: str | None = None) -> tuple[dict, str, float]:
    """Score every setting of the grid on the dumped topics; (best setting, measure, its value)."""
    # score the dumped topics only: a sample's mean must not count the qrels' other topics as 0
    with open(qrels, encoding="utf-8") as f:
        judged = [line for line in f if line.split()[:1] and line.split()[0] in records]
    own_qrels = out_dir / f"{stem}.qrels.txt"
    out_dir.mkdir(parents=True, exist_ok=True)
    own_qrels.write_text("".join(judged), encoding="utf-8")
    results = []
    for options, path in _write_runs(records, grid, out_dir, stem, k):
        means = evaluate_run(path, own_qrels, prime=prime).to_json()["summary"]
        results.append((options, means))
        print(options, {name: round(v, 4) for name, v in means.items() if isinstance(v, float)}, flush=True)
    key = measure or next(name for name in results[0][1] if "ndcg" in name.lower())
    best, means = max(results, key=lambda r: r[1][key])
    print(f"best by {key}: {best} → {means[key]:.4f}")
    return best, key, means[key]


def store(index: Path, best: dict, measure: str, value: float, topics: int, source: str) -> Path:
    """Keep the tuned setting with the index: the structure mode uses it from now on."""
    from retrievers.structure import StructureSettings

    require_train_topics(Path(source), what="tuning")
    settings = StructureSettings(**best, tuned_on=source, topics=topics, measure=measure, score=round(value, 4))
    saved = settings.write(IndexDir(index))
    print(f"stored in {saved}: the structure mode of this index now uses it")
    return saved


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help"):
        argv = ["fit", *argv]
    parser = argparse.ArgumentParser(prog="mathscout train structure", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    f = sub.add_parser("fit", help="dump train topics, tune, store the best setting with the index")
    f.add_argument("--index", type=Path, required=True)
    f.add_argument("--topics", type=Path, default=SHARED_COLLECTION / "topics.train.jsonl")
    f.add_argument("--qrels", type=Path, default=SHARED_COLLECTION / "qrels.train.txt")
    f.add_argument("--sample", type=int, default=1000, help="random sample of the judged train topics (0: all)")
    f.add_argument("--depth", type=int, default=100)
    f.add_argument("--lambdas", default="0.05,0.1,0.2,0.3,0.5,1,2.5")
    f.add_argument("--max-formulas", default="0,1,3,5")
    f.add_argument("--text", default="words,full")
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
        if name == "tune":
            p.add_argument("--qrels", type=Path, required=True)
            p.add_argument("--prime", action="store_true")
            p.add_argument("--measure", default=None, help="measure to maximise (default nDCG@10, or ndcg′ with --prime)")
            p.add_argument("--index", type=Path, help="store the best setting in this index (structure.json)")
            p.add_argument("--source", default="", help="the topics the dump came from (recorded in structure.json)")
    args = parser.parse_args(argv)
    if args.command == "dump":
        dump(args.index, args.topics, args.depth, args.out, args.sample, max_formulas=args.max_formulas, qrels=args.qrels)
        return
    grid = _grid(args.lambdas, args.max_formulas, args.text)
    if args.command == "fit":
        import tempfile

        require_train_topics(args.topics, args.qrels, what="tuning")
        with tempfile.TemporaryDirectory(prefix="mathscout-tune-") as tmp:
            dumped = Path(tmp) / "train.pkl"
            dump(args.index, args.topics, args.depth, dumped, args.sample, qrels=args.qrels)
            records = _read_dump(dumped)
            best, key, value = tune(records, args.qrels, grid, Path(tmp), "train")
        store(args.index, best, key, value, len(records), args.topics.name)
        return
    records = _read_dump(args.dump)
    out_dir = args.out_dir or args.dump.parent
    if args.command == "runs":
        for _, path in _write_runs(records, grid, out_dir, args.dump.stem, args.k):
            print(path)
        return
    best, key, value = tune(records, args.qrels, grid, out_dir, args.dump.stem, args.k, args.prime, args.measure)
    if args.index is not None:
        store(args.index, best, key, value, len(records), args.source or args.dump.name)


if __name__ == "__main__":
    sys.exit(main())
