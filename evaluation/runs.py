"""Run files: write TREC (`qid Q0 docid rank score tag`), ARQMath Task 1 submissions
(`TopicID<TAB>PostID<TAB>Rank<TAB>Score<TAB>RunTag`) and ARQMath Task 2 submissions
(`TopicID<TAB>FormulaID<TAB>PostID<TAB>Rank<TAB>Score<TAB>RunTag`), and read any of them back (a Task 2 run is
read as formula ids, the ids its qrels judge).

Columns are whitespace-separated, so a document id holding whitespace (ProofWiki ids like
`pw:Euclid's Lemma`) is written with that whitespace and `%` percent-encoded (`pw:Euclid's%20Lemma`)
and decoded again on reading.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from mathscout.errors import MathScoutError
from mathscout.types import Formula, Hit

FORMATS = ("trec", "arqmath")
_NEEDS_ESCAPE = re.compile(r"[%\s]")


@dataclass(frozen=True)
class RunEntry:
    """One line of a run file."""

    doc_id: str
    rank: int
    score: float


@dataclass
class Run:
    """A run read from disk: entries per topic in file order (first occurrence of a document kept)."""

    topics: dict[str, list[RunEntry]]
    tag: str = ""
    format: str = "trec"
    duplicates_dropped: int = 0

    def scores(self) -> dict[str, dict[str, float]]:
        """`{topic: {doc: score}}`, the shape the measure providers take."""
        return {qid: {e.doc_id: e.score for e in entries} for qid, entries in self.topics.items()}

    def hits(self) -> dict[str, list[Hit]]:
        """`{topic: [Hit]}` in run order, what `write_run` writes."""
        return {qid: [Hit(doc_id=e.doc_id, score=e.score) for e in entries] for qid, entries in self.topics.items()}


RunLike = Path | str | Run | Mapping[str, Sequence[Hit]] | Mapping[str, Mapping[str, float]]


def as_run(run: RunLike, tag: str = "") -> Run:
    """A run from a file, or in memory: a `Run`, `{topic: [Hit]}` (a retriever's `batch_search`) or
    `{topic: {doc: score}}` (ir-measures' shape). Topics without hits are left out, as in a run file."""
    if isinstance(run, Run):
        return run
    if isinstance(run, (str, Path)):
        return read_run(run)
    topics: dict[str, list[RunEntry]] = {}
    for qid, found in run.items():
        pairs = (
            sorted(found.items(), key=lambda kv: -kv[1])
            if isinstance(found, Mapping)
            else [(h.doc_id, h.score) for h in ranked(found)]
        )
        first: dict[str, float] = {}
        for doc, score in pairs:
            first.setdefault(str(doc), float(score))  # a document's first entry, as read_run keeps it
        entries = [RunEntry(doc, rank, score) for rank, (doc, score) in enumerate(first.items(), start=1)]
        if entries:
            topics[str(qid)] = entries
    if not topics:
        raise MathScoutError("the run is empty: no topic has a hit")
    return Run(topics=topics, tag=tag)


def ranked(hits: Iterable[Hit]) -> list[Hit]:
    """Hits by score, best first; equal scores keep the retriever's order (a stable sort)."""
    return sorted(hits, key=lambda h: -h.score)


def format_run_lines(results: Mapping[str, list[Hit]], tag: str, fmt: str = "trec") -> list[str]:
    """The lines of a run file for `results` (topics in the mapping's order)."""
    if fmt not in FORMATS:
        raise MathScoutError(f"unknown run format '{fmt}' (use one of: {', '.join(FORMATS)})")
    _check_token("run tag", tag)
    lines = []
    for qid, hits in results.items():
        _check_token("topic id", qid)
        for rank, hit in enumerate(ranked(hits), start=1):
            if not hit.doc_id:
                raise MathScoutError(f"topic {qid}: a hit has an empty document id")
            doc_id = encode_doc_id(hit.doc_id)
            score = repr(float(hit.score))
            if fmt == "trec":
                lines.append(f"{qid} Q0 {doc_id} {rank} {score} {tag}")
            else:
                lines.append(f"{qid}\t{doc_id}\t{rank}\t{score}\t{tag}")
    return lines


def format_task2_lines(results: Mapping[str, list[tuple[Formula, float]]], tag: str) -> list[str]:
    """ARQMath Task 2 lines `topic formula post rank score run` (tab-separated), formulas best first."""
    _check_token("run tag", tag)
    lines = []
    for qid, formulas in results.items():
        _check_token("topic id", qid)
        ordered = sorted(formulas, key=lambda pair: -pair[1])
        for rank, (formula, score) in enumerate(ordered, start=1):
            lines.append(
                f"{qid}\t{encode_doc_id(formula.id)}\t{encode_doc_id(formula.doc_id)}\t{rank}\t{float(score)!r}\t{tag}"
            )
    return lines


def write_run(results: Mapping[str, list[Hit]], path: Path | str, tag: str, fmt: str = "trec") -> int:
    """Write `results` as a run file atomically (temp file + rename); returns the number of lines."""
    return write_lines(format_run_lines(results, tag, fmt), path)


def write_lines(lines: list[str], path: Path | str) -> int:
    """Write run lines atomically (temp file + rename); returns their number."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.writelines(line + "\n" for line in lines)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return len(lines)


def read_run(path: Path | str) -> Run:
    """Read a TREC run (6 whitespace-separated columns), an ARQMath Task 1 run (5 tab-separated columns) or an
    ARQMath Task 2 run (6 tab-separated columns, the second not `Q0`: its entries are formula ids). A document
    listed twice for a topic keeps its first line; the others are counted."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MathScoutError(f"cannot read the run file {path}: {exc}") from exc
    topics: dict[str, list[RunEntry]] = {}
    seen: dict[str, set[str]] = {}
    run = Run(topics=topics)
    fmt = None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        cols = line.split()
        if len(cols) == 6 and "\t" in line and cols[1] != "Q0":
            qid, doc_id, _post, rank, score, tag = cols
            line_fmt = "arqmath-task2"
        elif len(cols) == 6:
            qid, _, doc_id, rank, score, tag = cols
            line_fmt = "trec"
        elif len(cols) == 5:
            qid, doc_id, rank, score, tag = cols
            line_fmt = "arqmath"
        else:
            raise MathScoutError(
                f"{path}:{number}: expected a TREC run line 'qid Q0 docid rank score tag' or an ARQMath "
                f"line 'topic<TAB>post<TAB>rank<TAB>score<TAB>tag' (Task 2: 'topic<TAB>formula<TAB>post<TAB>rank<TAB>"
                f"score<TAB>tag'), got {len(cols)} columns"
            )
        if fmt is None:
            fmt, run.format, run.tag = line_fmt, line_fmt, tag
        elif line_fmt != fmt:
            raise MathScoutError(f"{path}:{number}: mixes {fmt} and {line_fmt} run lines")
        try:
            entry = RunEntry(doc_id=decode_doc_id(doc_id), rank=int(rank), score=float(score))
        except ValueError as exc:
            raise MathScoutError(f"{path}:{number}: rank must be an integer and score a number ({exc})") from exc
        if not math.isfinite(entry.score):
            raise MathScoutError(
                f"{path}:{number}: the score {score} is not a finite number (NaN and infinity cannot be "
                "ranked); fix the run"
            )
        if entry.doc_id in seen.setdefault(qid, set()):
            run.duplicates_dropped += 1
            continue
        seen[qid].add(entry.doc_id)
        topics.setdefault(qid, []).append(entry)
    if not topics:
        raise MathScoutError(f"the run file {path} is empty")
    return run


def encode_doc_id(doc_id: str) -> str:
    """`doc_id` with `%` and whitespace percent-encoded, so it fits in one run-file column."""
    return _NEEDS_ESCAPE.sub(lambda m: "".join(f"%{b:02X}" for b in m.group().encode("utf-8")), doc_id)


def decode_doc_id(column: str) -> str:
    """The inverse of encode_doc_id."""
    return unquote(column) if "%" in column else column


def _check_token(what: str, value: str) -> None:
    if not value or any(c.isspace() for c in value):
        raise MathScoutError(f"{what} {value!r} cannot be written to a run file (empty or contains whitespace)")
