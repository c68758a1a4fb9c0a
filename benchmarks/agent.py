"""The offline planner per question: latency (p50/p95/mean, time per tool) and, with qrels, its ranking
against a single retriever.

    mathscout bench agent [--index DIR] [--topics FILE --qrels QRELS] [--limit 50] [--k 10] [--baseline bm25] [--rerank]

Without --topics it asks the demo questions (mathscout/data/demo_examples.json) and reports how often an
expected document is among the top 5. Warm: one question is answered first (JVM start, model loading).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from mathscout.agent.assistant import Assistant
from mathscout.config import DEMO_CORPUS, default_index_path
from mathscout.retrievers.indexing import ensure_demo_index

EXAMPLES = DEMO_CORPUS.parent / "demo_examples.json"


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _questions(args) -> list[tuple[str, str, set[str]]]:
    """(id, question, expected ids) — topics from a file, or the demo examples."""
    if args.topics:
        from mathscout.evaluation.topics import load_topics

        topics = load_topics(args.topics)[: args.limit]
        return [(t.id, f"${t.formula}$" if t.formula and not t.text.strip() else t.text, set()) for t in topics]
    examples = json.loads(EXAMPLES.read_text(encoding="utf-8"))[: args.limit]
    return [(f"demo-{n}", e["question"], set(e.get("expect", []))) for n, e in enumerate(examples, 1)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="mathscout bench agent", description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, help="index directory (default: the demo index)")
    parser.add_argument("--topics", type=Path, help="topic file (ARQMath XML or JSONL); default: the demo questions")
    parser.add_argument("--qrels", type=Path, help="qrels: evaluate the planner's hits against --baseline")
    parser.add_argument("--limit", type=int, default=50)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--baseline", default="bm25", help="the single retriever to compare with (with --qrels)")
    parser.add_argument("--rerank", action="store_true")
    args = parser.parse_args(argv)
    index = args.index or ensure_demo_index(default_index_path())
    assistant = Assistant(index, use_llm=False)
    questions = _questions(args)
    started = time.perf_counter()
    assistant.ask(questions[0][1], k=args.k, rerank=args.rerank)
    print(f"warm-up (opening retrievers, first question): {time.perf_counter() - started:.1f} s")

    seconds, per_tool, runs, found = [], defaultdict(list), {}, 0
    for qid, question, expected in questions:
        started = time.perf_counter()
        answer = assistant.ask(question, k=args.k, rerank=args.rerank)
        seconds.append(time.perf_counter() - started)
        for call in answer.trace:
            per_tool[call.tool].append(call.seconds)
        runs[qid] = answer.hits
        found += bool(expected & {h.doc_id for h in answer.hits[:5]})
    print(
        f"offline planner over {index}: {len(questions)} questions, k = {args.k}"
        + (", reranked" if args.rerank else "")
    )
    print(
        f"  per question: p50 {1000 * _percentile(seconds, 0.5):.0f} ms, p95 {1000 * _percentile(seconds, 0.95):.0f} ms, "
        f"mean {1000 * statistics.mean(seconds):.0f} ms, max {1000 * max(seconds):.0f} ms"
    )
    for tool, times in sorted(per_tool.items(), key=lambda item: -sum(item[1])):
        print(
            f"  {tool:<17} {len(times):>4} calls, mean {1000 * statistics.mean(times):7.1f} ms, "
            f"p95 {1000 * _percentile(times, 0.95):7.1f} ms"
        )
    if not args.topics:
        print(f"  an expected document in the top 5: {found} of {len(questions)} questions")
    if args.qrels:
        _compare(assistant, questions, runs, args)


def _compare(assistant: Assistant, questions, runs, args) -> None:
    from mathscout.evaluation.measures import compare_runs
    from mathscout.evaluation.report import format_comparison
    from mathscout.evaluation.runs import write_run

    baseline = assistant.toolbox.retriever(args.baseline)
    base_runs = {qid: baseline.search(question, k=args.k) for qid, question, _ in questions}
    with tempfile.TemporaryDirectory() as folder:
        base_path, agent_path = Path(folder) / f"{args.baseline}.trec", Path(folder) / "agent-offline.trec"
        write_run(base_runs, base_path, tag=args.baseline)
        write_run(runs, agent_path, tag="agent-offline")
        asked = {qid for qid, _, _ in questions}
        qrels = Path(folder) / "qrels.txt"  # only the topics asked, so that means are over them
        with open(args.qrels, encoding="utf-8") as f, open(qrels, "w", encoding="utf-8") as out:
            out.writelines(line for line in f if line.split() and line.split()[0] in asked)
        print(format_comparison(compare_runs([base_path, agent_path], qrels)))
