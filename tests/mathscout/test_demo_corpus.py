"""The embedded demo corpus (mathscout/data/demo/*.jsonl) and its example questions."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from mathscout.config import DEMO_CORPUS
from mathscout.corpus import IngestReport, read_corpus
from mathscout.corpus.math_spans import find_math

EXAMPLES = DEMO_CORPUS.parent / "demo_examples.json"
MAIN_AREAS = ("algebra", "calculus", "number-theory", "linear-algebra", "probability", "combinatorics", "real-analysis")
MINOR_AREAS = ("geometry", "trigonometry", "complex-numbers", "differential-equations")
MATH_MARKER = re.compile(r"\$|\\\(|\\\[|\\begin\{")
ID_PATTERN = re.compile(r"demo:(?P<area>[a-z-]+)-\d{3}")


@pytest.fixture(scope="module")
def records() -> list[dict]:
    """Every line of every area file, parsed (a bad line fails here with its file and number)."""
    parsed = []
    for path in sorted(DEMO_CORPUS.glob("*.jsonl")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            try:
                parsed.append(json.loads(line))
            except json.JSONDecodeError as exc:
                pytest.fail(f"{path.name}:{number} is not valid JSON: {exc}")
            parsed[-1]["_file"] = path.stem
    return parsed


def test_every_record_has_the_documented_fields(records):
    for r in records:
        assert isinstance(r["title"], str) and r["title"].strip(), r["id"]
        assert isinstance(r["text"], str) and r["text"].strip(), r["id"]
        assert isinstance(r["tags"], list) and r["tags"] and all(isinstance(t, str) for t in r["tags"]), r["id"]
        match = ID_PATTERN.fullmatch(r["id"])
        assert match and match["area"] == r["area"] == r["_file"], r["id"]


def test_corpus_is_large_with_unique_ids(records):
    ids = [r["id"] for r in records]
    assert len(ids) >= 300
    assert len(set(ids)) == len(ids), [i for i, n in Counter(ids).items() if n > 1]


def test_every_area_is_well_covered(records):
    per_area = Counter(r["area"] for r in records)
    assert set(per_area) == set(MAIN_AREAS) | set(MINOR_AREAS)
    for area in MAIN_AREAS:
        assert per_area[area] >= 25, area
    for area in MINOR_AREAS:
        assert per_area[area] >= 10, area


def test_answers_are_short(records):
    for r in records:
        assert 40 <= len(r["text"].split()) <= 200, r["id"]


def test_only_the_plain_text_documents_lack_math(records):
    plain = [r for r in records if "plain-text" in r["tags"]]
    assert 3 <= len(plain) <= 10
    for r in records:
        has_math = MATH_MARKER.search(r["text"]) is not None
        assert has_math != ("plain-text" in r["tags"]), r["id"]


def test_ingestion_keeps_every_document_and_finds_its_formulas(records):
    report = IngestReport()
    documents = {d.id: d for d in read_corpus([DEMO_CORPUS], report)}
    assert report.skipped == 0, report.reasons
    assert len(documents) == len(records)
    for r in records:
        if "plain-text" not in r["tags"]:
            assert documents[r["id"]].formulas, r["id"]


def test_currency_amounts_are_not_taken_for_math(records):
    currency = [r for r in records if "currency" in r["tags"]]
    assert len(currency) >= 3
    for r in currency:
        amounts = [m.start() for m in re.finditer(r"\$\d", r["text"])]
        assert amounts, r["id"]
        inside = {i for s in find_math(r["text"]) for i in range(s.start, s.end)}
        assert not inside.intersection(amounts), r["id"]


def test_notation_is_varied(records):
    texts = [r["text"] for r in records]
    for marker in (
        "$$",
        "\\(",
        "\\[",
        "\\begin{align}",
        "\\dfrac",
        "\\leq",
        "\\binom",
        "\\choose",
        "\\begin{pmatrix}",
        "\\mathbb{R}",
        "\\left(",
    ):
        assert sum(marker in t for t in texts) >= 1, marker


def test_examples_point_at_existing_documents(records):
    examples = json.loads(EXAMPLES.read_text(encoding="utf-8"))
    ids = {r["id"] for r in records}
    assert len(examples) == 12
    for example in examples:
        assert set(example) == {"question", "expect"}
        assert find_math(example["question"]), example["question"]
        assert example["expect"] and set(example["expect"]) <= ids, example
