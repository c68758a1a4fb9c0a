"""Topic files → queries. The format is detected from the content:

- ARQMath Task 1 XML (`<Topic number="A.1"><Title>…<Question>…<Tags>…`): title + question, HTML → text
  with math as `$…$`;
- ARQMath Task 2 XML (`B.*` topics with `<Latex>`): the query formula;
- JSONL `{"id", "title", "body", "tags"?}` (the collection's topics) or `{"id", "query"}` (formula queries);
- NTCIR-12 formula browsing topics: `id<TAB>latex` lines (`\\qvar{…}` wildcards kept as written); a first line
  that names the columns (`id<TAB>query`, `qid<TAB>latex`, …) is a header and skipped.
"""

from __future__ import annotations

import argparse
import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from mathscout.config import SHARED_COLLECTION
from mathscout.corpus.html import html_to_text
from mathscout.errors import MathScoutError
from mathscout.types import Query


@dataclass(frozen=True)
class Topic(Query):
    """A query read from a topic file, with the topic's tags when the file has them."""

    tags: tuple[str, ...] = ()


# The shared collection's sources and their shares of its dev questions (data README: 300 MSE, 90 MathOverflow,
# 150 MATH, 30 ProofNet, 15 physics, 15 stats of 600); its train questions are 78 % MATH problems.
COLLECTION_MIX = {"mse": 0.5, "mo": 0.15, "math": 0.25, "proofnet": 0.05, "phys": 0.025, "stats": 0.025}


def source_of(topic_id: str) -> str:
    """A shared-collection question's source: its id's prefix (`mse:math.stackexchange.com:440` → mse)."""
    return topic_id.partition(":")[0]


def in_collection_mix(topic_ids: list[str], mix: dict[str, float] = COLLECTION_MIX) -> list[str]:
    """`topic_ids` reordered so that every prefix holds the sources in `mix`'s shares as far as each lasts (smooth
    weighted round robin; each source keeps its own order); unchanged when a topic's source is not in `mix` (another
    collection's topics)."""
    queues: dict[str, list[str]] = {}
    for topic in topic_ids:
        queues.setdefault(source_of(topic), []).append(topic)
    if not queues or any(source not in mix for source in queues):
        return list(topic_ids)
    taken = dict.fromkeys(queues, 0)
    order: list[str] = []
    while len(order) < len(topic_ids):
        left = [s for s in queues if taken[s] < len(queues[s])]
        total = sum(mix[s] for s in left)
        source = max(left, key=lambda s: mix[s] / total * (len(order) + 1) - taken[s])
        order.append(queues[source][taken[source]])
        taken[source] += 1
    return order


def add_train_topic_arguments(parser: argparse.ArgumentParser) -> None:
    """A trainer's --topics and --qrels, the shared collection's train files by default."""
    parser.add_argument("--topics", type=Path, default=SHARED_COLLECTION / "topics.train.jsonl")
    parser.add_argument("--qrels", type=Path, default=SHARED_COLLECTION / "qrels.train.txt")


def require_train_topics(*paths: Path | str, what: str) -> None:
    """Refuse dev topic or qrels files for training and tuning: the dev topics are for evaluation."""
    if any("dev" in Path(p).name for p in paths):
        raise MathScoutError(f"{what} reads train topics only: the dev topics are for evaluation")


def load_topics(path: Path | str) -> list[Query]:
    """All topics of `path`, in file order; a clear MathScoutError when the file cannot be used."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MathScoutError(f"cannot read the topic file {path}: {exc}") from exc
    start = text.lstrip()[:1]
    if start == "<":
        topics = _xml_topics(text, path)
    elif start == "{":
        topics = _jsonl_topics(text, path)
    elif start:
        topics = _tsv_formula_topics(text, path)
    else:
        raise MathScoutError(f"the topic file {path} is empty")
    if not topics:
        raise MathScoutError(f"no topics found in {path}")
    seen: set[str] = set()
    for topic in topics:
        if topic.id in seen:
            raise MathScoutError(f"{path}: topic id '{topic.id}' appears twice")
        seen.add(topic.id)
    return topics


def _xml_topics(text: str, path: Path) -> list[Query]:
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise MathScoutError(f"{path} is not well-formed XML ({exc})") from exc
    topics: list[Query] = []
    for element in root.iter("Topic"):
        topic_id = (element.get("number") or "").strip()
        if not topic_id:
            raise MathScoutError(f"{path}: a <Topic> has no number attribute")
        tags = tuple(t.strip() for t in _child_text(element, "Tags").split(",") if t.strip())
        latex = _child_text(element, "Latex").strip()
        if latex:  # Task 2: the query is the formula
            topics.append(Topic(id=topic_id, text=f"${latex}$", formula=latex, tags=tags))
            continue
        title = html_to_text(_child_text(element, "Title")).strip()
        question = html_to_text(_child_text(element, "Question")).strip()
        topics.append(Topic(id=topic_id, text="\n\n".join(p for p in (title, question) if p), tags=tags))
    return topics


def _child_text(element: ET.Element, tag: str) -> str:
    child = element.find(tag)
    return "" if child is None or child.text is None else child.text


def _jsonl_topics(text: str, path: Path) -> list[Query]:
    topics: list[Query] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise MathScoutError(f"{path}:{number}: not valid JSON ({exc})") from exc
        if not isinstance(record, dict) or "id" not in record:
            raise MathScoutError(f'{path}:{number}: expected an object with an "id"')
        topic_id = str(record["id"])
        tags = tuple(str(t) for t in record.get("tags") or ())
        if "query" in record:
            topics.append(_formula_query(topic_id, str(record["query"]), tags))
        elif "title" in record or "body" in record:
            parts = (str(record.get("title") or "").strip(), str(record.get("body") or "").strip())
            topics.append(Topic(id=topic_id, text="\n\n".join(p for p in parts if p), tags=tags))
        else:
            raise MathScoutError(f'{path}:{number}: expected "title"/"body" or "query" fields')
    return topics


def _formula_query(topic_id: str, query: str, tags: tuple[str, ...]) -> Topic:
    """A formula query: bare LaTeX or one `$…$` formula becomes a formula topic; text mixing words and
    `$…$` formulas stays a text query."""
    query = query.strip()
    inner = query.strip("$").strip() if query.startswith("$") and query.endswith("$") else None
    if inner is not None and "$" not in inner:
        return Topic(id=topic_id, text=f"${inner}$", formula=inner, tags=tags)
    if "$" in query:
        return Topic(id=topic_id, text=query, tags=tags)
    return Topic(id=topic_id, text=f"${query}$", formula=query, tags=tags)


_ID_COLUMNS = {"id", "qid", "query_id", "topic", "topic_id", "topicid", "number"}
_QUERY_COLUMNS = {"latex", "query", "formula", "text", "title"}


def _tsv_formula_topics(text: str, path: Path) -> list[Query]:
    topics: list[Query] = []
    lines = [(number, line) for number, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if lines and _is_header(lines[0][1]):
        lines = lines[1:]
    for number, line in lines:
        topic_id, tab, latex = line.partition("\t")
        if not tab or not topic_id.strip() or not latex.strip():
            raise MathScoutError(
                f"{path}:{number}: unrecognised topic line (expected ARQMath XML, JSONL, or 'id<TAB>latex')"
            )
        topics.append(Topic(id=topic_id.strip(), text=f"${latex.strip()}$", formula=latex.strip()))
    return topics


def _is_header(line: str) -> bool:
    """A first line naming the columns (`id<TAB>query`), not a topic."""
    first, _, second = line.partition("\t")
    return first.strip().lower() in _ID_COLUMNS and second.strip().lower() in _QUERY_COLUMNS
