"""Type detection speed (Stathopoulos & Teufel 2016 §4.1: longest match over normalised words, formulas as "@@@").

    mathscout bench types [--docs N] [--collection docs.jsonl]

Times, in one process over the first N documents of the collection, the tokeniser alone (formula
spans, normalisation) and the full detection (tokeniser + longest match in the dictionary trie), and
prints tokens/s and documents/s for each.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path

from mathscout.types_expansion.detect import default_detector, scan
from mathscout.types_expansion.dictionary import SHARED_DOCS


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="mathscout bench types", description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=5000)
    parser.add_argument("--collection", type=Path, default=SHARED_DOCS)
    args = parser.parse_args(argv)
    with open(args.collection, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in itertools.islice(f, args.docs)]
    detector = default_detector()
    for text in texts:  # warm the caches of the word normaliser (the steady state of a long indexing run)
        scan(text)

    started = time.perf_counter()
    tokens = sum(len(scan(t).keys) for t in texts)
    scan_seconds = time.perf_counter() - started
    started = time.perf_counter()
    mentions = sum(len(detector.types_of(t)) for t in texts)
    detect_seconds = time.perf_counter() - started

    print(
        f"type detection over {len(texts):,} documents of {args.collection} ({tokens:,} tokens, "
        f"{len(detector):,} dictionary types, {mentions:,} mentions), one process, warm"
    )
    print(f"{'stage':<28} {'s':>7} {'tokens/s':>12} {'docs/s':>9}")
    for stage, seconds in (("tokenise + normalise", scan_seconds), ("detect (tokenise + match)", detect_seconds)):
        print(f"{stage:<28} {seconds:7.2f} {tokens / seconds:12,.0f} {len(texts) / seconds:9,.0f}")
