"""`mathscout train structure`: Zhong 2023 thesis Eq. 3.18's λ_m, formula selection and text part tuned on train topics and stored
with an index (`structure.json`), which the structure mode then uses instead of the thesis defaults.

Dump each topic's per-formula and BM25 document scores once, then write TREC runs for any λ_m / formula
selection / text part without searching again (Zhong 2023 thesis §3.2.3, §3.3.3 Fig. 3.10):

    mathscout train structure --index DIR [--sample 1000]     dump the train topics, tune, write DIR/structure.json
    mathscout train structure dump --index DIR --topics T --depth 100 --out DUMP.jsonl [--sample N]
    mathscout train structure runs --dump DUMP.jsonl --out-dir DIR --lambdas 0.1,0.5,2.5 --max-formulas 0,3
    mathscout train structure tune --dump TRAIN.jsonl --qrels Q --lambdas … --max-formulas … [--index DIR]

The dump holds, per topic: each readable query formula's width (its widest node's upper bound) and its
per-document top `depth` (the structure mode's per-document pruned search, GBP-LEN), BM25 over the words
without the math (Zhong 2023 thesis, Eq. 3.18's BM25(Q_text, D_text)) and BM25 over the whole query (the bm25 mode's math-aware
terms). A run from the dump is the same arithmetic as `StructureRetriever.fused` (λ_m · Σ_f S_f + text; 0
outside a list), so `mathscout run --mode structure --set lambda_m=… --set max_formulas=… --set depth=…`
reproduces it. Tuning picks the best setting on a topic set (use train topics, never dev).

`fit` picks one setting per query kind (`mathscout.retrievers.structure.QUERY_KINDS`, the planner's classification): for
questions with words and formulas, and for questions with words only, on the train topics of that kind; for
formula-only queries on formula queries made from the collection's formulas (`mathscout bench formulas`' four
kinds, source formulas drawn only from the *fitting* half of the documents; the reporting half stays unseen),
choosing between structure similarity alone (Zhong 2023 thesis, Eq. 3.16) and Eq. 3.18 with BM25 over the query's math tokens, for
every document ("full") or only for those holding part of the query ("parts", `mathscout.retrievers.structure.KindSetting`): the
best mean among the settings that keep every transformation kind at least at structure alone's level (BM25 over
renamed variable letters must not buy sub-expressions with renamed queries). Formula-only queries rank by match
tier first (`mathscout.structure.search.match_tier`), here as in the structure mode. It reports each kind's
measure before (the index's current setting) and after, and stores all of them with how each was fitted.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from mathscout.config import SHARED_COLLECTION
from mathscout.errors import MathScoutError, QueryError
from mathscout.evaluation.measures import evaluate_run, read_qrels
from mathscout.evaluation.topics import load_topics, require_train_topics
from mathscout.evaluation.work_files import WorkFile, as_number, as_scores, as_text
from mathscout.index.layout import IndexDir
from mathscout.retrievers.base import prepare_query
from mathscout.structure.scoring import LAMBDA_M, fuse_math_text


def dump(
    index: Path,
    topics_path: Path,
    depth: int,
    out: Path,
    sample: int = 0,
    seed: int = 13,
    max_formulas: int = 0,
    qrels: Path | None = None,
) -> None:
    from mathscout.retrievers.bm25 import BM25Retriever
    from mathscout.retrievers.structure import StructureRetriever, query_kind, split_query

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
        formulas, words = split_query(query)
        prepared = retriever.prepare_all(formulas)
        if max_formulas:
            prepared = sorted(prepared, key=lambda q: -q.width)[:max_formulas]
        per_formula, full = _top_lists(retriever, bm25, doc_ids, prepared, query, depth)
        text = {doc_ids[d]: s for d, s in retriever.bm25_scores(words, depth).items()} if words else {}
        records[topic.id] = {
            "formulas": per_formula,
            "words": text,
            "full": full,
            "n_formulas": len(formulas),
            "kind": query_kind(query),
        }
        if n % 20 == 0:
            print(f"[dump] {n}/{len(topics)} topics, {time.perf_counter() - started:.0f} s", flush=True)
    _dump_file(out).write({"depth": depth}, ({"topic": tid, "record": r} for tid, r in records.items()))
    print(f"{len(records)} topics dumped to {out} in {time.perf_counter() - started:.0f} s")


def _top_lists(retriever, bm25, doc_ids: list[str], prepared: list, query, depth: int) -> tuple[list, dict]:
    """One query's dumped lists: each prepared formula's (width, per-document structure top `depth`, each
    document's match tier) and BM25's top `depth` over the whole query ({} when BM25 cannot use it)."""
    per_formula = []
    for q in prepared:
        hits = retriever.searcher.search(q, depth, retriever.strategy, per_document=True)
        per_formula.append((q.width, {doc_ids[h.doc]: h.score for h in hits}, {doc_ids[h.doc]: h.tier for h in hits}))
    try:
        full = {h.doc_id: h.score for h in bm25.rank(query, depth).hits}
    except QueryError:
        full = {}
    return per_formula, full


def _dump_file(path: Path) -> WorkFile:
    """A dump is JSON lines (`work_files`): one someone else made is read as data, never run."""
    return WorkFile(path, "structure dump", 2, "make it again with 'mathscout train structure dump'")


def _read_dump(path: Path) -> dict:
    """Topic id → its record (formulas: [width, document scores, document tiers] each; words, full: document scores)."""
    contents = _dump_file(path).read(lambda line: (as_text(line["topic"]), _record(line["record"])), "a topic's record")
    return dict(contents.records)


def _record(value: dict) -> dict:
    record = {
        "formulas": [
            (as_number(width), as_scores(documents), as_scores(tiers)) for width, documents, tiers in value["formulas"]
        ],
        "words": as_scores(value["words"]),
        "full": as_scores(value["full"]),
        "n_formulas": as_number(value["n_formulas"]),
    }
    if "kind" in value:
        record["kind"] = as_text(value["kind"])
    return record


def _with_kinds(records: dict, topics_path: Path) -> dict:
    """Records of dumps that hold no query kinds get them from their topics."""
    from mathscout.retrievers.structure import query_kind

    missing = {tid for tid, r in records.items() if "kind" not in r}
    if missing:
        for topic in load_topics(topics_path):
            if topic.id in missing:
                records[topic.id]["kind"] = query_kind(prepare_query(topic))
    return records


def fuse(
    record: dict, lambda_m: float, max_formulas: int = 0, text: str = "words", k: int = 1000
) -> list[tuple[str, float]]:
    """Zhong 2023 thesis, Eq. 3.18 for one topic: λ_m · Σ over the (widest `max_formulas`) formulas + the text part, top k. A formula
    query (kind "formula") ranks by its formula's match tier first, as the structure mode does (`_by_tier`); the
    score is then tier + score / the best score."""
    formulas = record["formulas"]
    if max_formulas:
        formulas = sorted(formulas, key=lambda f: -f[0])[:max_formulas]
    text_scores = record["full" if text == "parts" else text] if text != "none" else {}
    tiers = formulas[0][2] if record.get("kind") == "formula" and formulas and len(formulas[0]) > 2 else None
    # "parts": whole-structure matches by Zhong 2023 thesis Eq. 3.16 alone (`StructureRetriever.fused`)
    whole = [d for d, tier in tiers.items() if tier > 0] if text == "parts" and tiers is not None else ()
    _, scores = fuse_math_text((hits.items() for _, hits, *_ in formulas), text_scores, lambda_m, whole)
    if tiers is not None and scores:
        top = max(scores.values())
        scores = {d: tiers.get(d, 0) + s / top for d, s in scores.items()}
    return sorted(scores.items(), key=lambda x: (-x[1], x[0]))[:k]


def write_run(records: dict, path: Path, tag: str, **options) -> None:
    from mathscout.evaluation.runs import encode_doc_id

    with open(path, "w", encoding="utf-8") as out:
        for topic_id, record in records.items():
            for rank, (doc, score) in enumerate(fuse(record, **options), 1):
                out.write(f"{topic_id} Q0 {encode_doc_id(doc)} {rank} {score:.6f} {tag}\n")


def _grid(lambdas: str, max_formulas: str, text: str) -> list[dict]:
    """Every combination of the comma-separated λ_m, widest-formula counts and text parts."""
    return [
        {"lambda_m": float(lam), "max_formulas": int(m), "text": t}
        for lam in lambdas.split(",")
        for m in max_formulas.split(",")
        for t in text.split(",")
    ]


def _write_runs(records: dict, grid: list[dict], out_dir: Path, stem: str, k: int) -> list[tuple[dict, Path]]:
    """One TREC run per setting of the grid."""
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = []
    for options in grid:
        path = out_dir / f"{stem}.lam{options['lambda_m']}.mf{options['max_formulas']}.{options['text']}.trec"
        write_run(records, path, "mathscout-structure", k=k, **options)
        runs.append((options, path))
    return runs


def tune(
    records: dict,
    qrels: Path,
    grid: list[dict],
    out_dir: Path,
    stem: str,
    k: int = 1000,
    prime: bool = False,
    measure: str | None = None,
) -> tuple[dict, str, float]:
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


def dump_formula_queries(index: Path, sample: int, depth: int, seed: int = 13) -> tuple[dict, list[str]]:
    """Formula-only queries of the four kinds (`mathscout bench formulas`) made from the *fitting* half of the
    documents, dumped like topics (structure top `depth` and BM25 over the whole query), and their qrels lines
    (relevant: the documents holding the source formula's operator tree)."""
    from mathscout.evaluation.formula_queries import build_queries
    from mathscout.evaluation.runs import encode_doc_id
    from mathscout.retrievers.bm25 import BM25Retriever
    from mathscout.retrievers.structure import StructureRetriever
    from mathscout.types import Query

    index_dir = IndexDir(index)
    retriever = StructureRetriever(index_dir, depth=depth, max_formulas=0)
    bm25 = BM25Retriever(index_dir)
    doc_ids = retriever.store.doc_ids()
    started = time.perf_counter()
    queries = build_queries(index_dir, sample, seed, half="fitting")
    records: dict[str, dict] = {}
    qrels: list[str] = []
    for n, q in enumerate(queries):
        qid = f"formula-{q['kind']}-{n}"
        try:
            prepared = [retriever.searcher.prepare(q["latex"])]
        except QueryError:
            prepared = []
        per_formula, full = _top_lists(retriever, bm25, doc_ids, prepared, Query(id=qid, text=f"${q['latex']}$"), depth)
        records[qid] = {
            "formulas": per_formula,
            "words": {},
            "full": full,
            "n_formulas": 1,
            "kind": "formula",
            "formula_kind": q["kind"],
        }
        qrels.extend(f"{qid} 0 {encode_doc_id(doc)} 1\n" for doc in q["relevant"])
    print(f"{len(records)} formula queries from the fitting half dumped in {time.perf_counter() - started:.0f} s")
    return records, qrels


def _current(index: Path) -> dict[str, dict]:
    """The setting each kind has now (stored, or the structure mode's defaults) as a grid entry."""
    from mathscout.retrievers.structure import StructureRetriever

    settings = StructureRetriever(IndexDir(index)).kind_settings
    return {
        kind: {"lambda_m": s.lambda_m, "max_formulas": s.max_formulas, "text": s.text} for kind, s in settings.items()
    }


def fit_kinds(
    index: Path,
    records: dict,
    qrels: Path,
    grid: list[dict],
    out_dir: Path,
    source: str,
    formula_records: dict,
    formula_qrels: list[str],
) -> dict[str, KindFit]:
    """One setting per query kind (Zhong 2023 thesis Eq. 3.18 λ_m, formulas, text part): questions of each kind on their
    train topics, formula-only queries on formula queries from the fitting half. Each with its score before."""
    current = _current(index)
    fits: dict[str, KindFit] = {}
    for kind in ("mixed", "text"):
        subset = {tid: r for tid, r in records.items() if r.get("kind") == kind}
        if not subset:
            continue
        before = tune(subset, qrels, [current[kind]], out_dir, f"{kind}-before")[2]
        best, key, value = tune(subset, qrels, grid, out_dir, kind)
        fits[kind] = KindFit(kind, best, key, value, before, len(subset), f"{source} ({kind} questions)")
    if formula_records:
        lambdas = sorted({g["lambda_m"] for g in grid} | set(FORMULA_LAMBDAS))
        formula_grid = [STRUCTURE_ALONE] + [
            {"lambda_m": lam, "max_formulas": 0, "text": text} for text in ("full", "parts") for lam in lambdas
        ]
        best, value, before = fit_formula_kind(formula_records, formula_qrels, formula_grid, current["formula"])
        fits["formula"] = KindFit(
            "formula",
            best,
            "nDCG@10",
            value,
            before,
            len(formula_records),
            "formula queries from the fitting half of the documents (renamed, re-rendered, "
            "transformed, sub-expression), no kind below structure alone",
        )
    return fits


STRUCTURE_ALONE = {
    "lambda_m": LAMBDA_M,
    "max_formulas": 0,
    "text": "words",
}  # Zhong 2023 thesis, Eq. 3.16 alone (the thesis default)
FORMULA_LAMBDAS = (5.0, 10.0, 25.0, 100.0)  # large λ_m: structure first, BM25 over the math tokens breaking near-ties
# nDCG@10 differences below this count as equal when a kind is compared with structure alone: on 100 queries per kind
# it is under a third of one query's first hit moving down one rank (1 − 1/log2(3) = 0.37 → 0.0037)
EQUAL_WITHIN = 0.001


def formula_kind_means(records: dict, relevant: dict[str, set[str]], options: dict) -> dict[str, float]:
    """nDCG@10 (binary, as `mathscout bench formulas`) of one setting on formula queries, per transformation kind
    and over all ("all")."""
    from mathscout.evaluation.formula_queries import ndcg10

    by_kind: dict[str, list[float]] = defaultdict(list)
    for qid, record in records.items():
        ranked = [d for d, _ in fuse(record, k=10, **options)]
        by_kind[record["formula_kind"]].append(ndcg10(ranked, relevant.get(qid, set())))
    means = {kind: sum(v) / len(v) for kind, v in sorted(by_kind.items())}
    means["all"] = sum(sum(v) for v in by_kind.values()) / sum(len(v) for v in by_kind.values())
    return means


def fit_formula_kind(
    records: dict, qrels_lines: list[str], grid: list[dict], current: dict
) -> tuple[dict, float, float]:
    """The formula-only setting: the best mean over all formula queries among the settings that keep *every*
    transformation kind at least at structure alone's level, within EQUAL_WITHIN (renamed variables must not be
    traded for the other kinds; structure alone always qualifies). (best setting, its mean, the current setting's mean)."""
    from mathscout.evaluation.runs import decode_doc_id

    relevant: dict[str, set[str]] = defaultdict(set)
    for line in qrels_lines:
        qid, _, doc, _ = line.split()
        relevant[qid].add(decode_doc_id(doc))
    floor = formula_kind_means(records, relevant, STRUCTURE_ALONE)
    before = formula_kind_means(records, relevant, current)["all"]
    best, best_means = STRUCTURE_ALONE, floor
    for options in grid:
        means = formula_kind_means(records, relevant, options)
        keeps = all(means[kind] >= floor[kind] - EQUAL_WITHIN for kind in floor)
        print(
            options,
            {kind: round(v, 4) for kind, v in means.items()},
            "" if keeps else "(a kind below structure alone)",
            flush=True,
        )
        if keeps and means["all"] > best_means["all"]:
            best, best_means = options, means
    print(f"formula-only: {best} → nDCG@10 {best_means['all']:.4f} (structure alone {floor['all']:.4f})")
    return best, best_means["all"], before


@dataclass
class KindFit:
    """The setting fitted for one query kind, its measure on the fitting queries, and the measure before."""

    kind: str
    best: dict
    measure: str
    score: float
    before: float
    queries: int
    tuned_on: str


def store(
    index: Path,
    best: dict,
    measure: str,
    value: float,
    topics: int,
    source: str,
    kinds: dict[str, KindFit] | None = None,
) -> Path:
    """Keep the tuned setting with the index: the structure mode uses it from now on (the top level is the setting
    of questions with words and formulas; `kinds` one per query kind)."""
    from mathscout.retrievers.structure import StructureSettings

    require_train_topics(Path(source), what="tuning")
    stored_kinds = {
        fit.kind: {
            **fit.best,
            "tuned_on": fit.tuned_on,
            "queries": fit.queries,
            "measure": fit.measure,
            "score": round(fit.score, 4),
            "before": round(fit.before, 4),
        }
        for fit in (kinds or {}).values()
    }
    settings = StructureSettings(
        **best, tuned_on=source, topics=topics, measure=measure, score=round(value, 4), kinds=stored_kinds or None
    )
    saved = settings.write(IndexDir(index))
    print(f"stored in {saved}: the structure mode of this index now uses it")
    return saved


def report(fits: dict[str, KindFit]) -> None:
    """Every kind before and after, on the queries it was fitted on."""
    print("kind      queries  measure    before  after   setting")
    for fit in fits.values():
        print(f"{fit.kind:9s} {fit.queries:7d}  {fit.measure:9s}  {fit.before:.4f}  {fit.score:.4f}  {fit.best}")


def refuse_sharded(index: Path) -> None:
    """Fitting searches the index's structure lists directly, which a sharded index keeps in its shards: one line
    that says how a sharded index gets a fitted setting (its shards read it from the index folder)."""
    from mathscout.retrievers.shards.layout import is_sharded

    if is_sharded(index):
        raise MathScoutError(
            f"{index} is a sharded index: fit the setting on a single index of the same documents "
            f"('mathscout train structure --index SINGLE') and copy SINGLE/structure.json into {index} "
            f"(every shard scores with it), or store a tuned dump with 'mathscout train structure tune "
            f"--dump D --qrels Q --index {index}'"
        )


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help")):
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
    f.add_argument(
        "--formula-sample",
        type=int,
        default=100,
        help="formula-only queries per kind from the fitting half of the documents (0: keep structure alone)",
    )
    f.add_argument(
        "--dump", type=Path, help="reuse a `dump` of the train topics (same --topics) instead of searching them"
    )
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
            p.add_argument(
                "--measure", default=None, help="measure to maximise (default nDCG@10, or ndcg′ with --prime)"
            )
            p.add_argument("--index", type=Path, help="store the best setting in this index (structure.json)")
            p.add_argument("--source", default="", help="the topics the dump came from (recorded in structure.json)")
    args = parser.parse_args(argv)
    if args.command in ("fit", "dump"):
        refuse_sharded(args.index)
    if args.command == "dump":
        dump(
            args.index, args.topics, args.depth, args.out, args.sample, max_formulas=args.max_formulas, qrels=args.qrels
        )
        return
    grid = _grid(args.lambdas, args.max_formulas, args.text)
    if args.command == "fit":
        import tempfile

        require_train_topics(args.topics, args.qrels, what="tuning")
        with tempfile.TemporaryDirectory(prefix="mathscout-tune-") as tmp:
            dumped = args.dump or Path(tmp) / "train.jsonl"
            if args.dump is None:
                dump(args.index, args.topics, args.depth, dumped, args.sample, qrels=args.qrels)
            records = _with_kinds(_read_dump(dumped), args.topics)
            formula_records, formula_qrels = (
                dump_formula_queries(args.index, args.formula_sample, args.depth) if args.formula_sample else ({}, [])
            )
            fits = fit_kinds(
                args.index, records, args.qrels, grid, Path(tmp), args.topics.name, formula_records, formula_qrels
            )
            topics = len(records)
            if "mixed" in fits:
                best, key, value, topics = (
                    fits["mixed"].best,
                    fits["mixed"].measure,
                    fits["mixed"].score,
                    fits["mixed"].queries,
                )
            else:  # no question with words and formulas: one setting for all the topics
                best, key, value = tune(records, args.qrels, grid, Path(tmp), "train")
        report(fits)
        store(args.index, best, key, value, topics, args.topics.name, fits)
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
    main()
