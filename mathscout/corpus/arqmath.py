"""The official ARQMath collection: Math StackExchange `Posts` XML (`<posts><row …/></posts>`).

Documents are the answers (PostTypeId 2), each with its parent question's title, id (thread) and tags.
Formulas keep their official ARQMath formula ids (`<span class="math-container" id="…">`, the `Formula_Id`s of
Task 2 runs and qrels), matched in order by their LaTeX; a formula no span matches keeps `<post_id>#<n>`.
The file is streamed twice (questions, then answers) so that a 10 GB dump never sits in memory.
"""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from mathscout.corpus.html import html_to_text
from mathscout.types import Document

QUESTION, ANSWER = "1", "2"
_TAG = re.compile(r"<([^<>]+)>")
_FORMULA_SPAN = re.compile(r"""<span\s[^>]*?class=["']math-container["'][^>]*?\sid=["']([^"'\s<>]+)["'][^>]*>(.*?)</span>""", re.S)


@dataclass(frozen=True)
class _Question:
    title: str
    tags: tuple[str, ...]
    accepted_answer: str


def _rows(path: Path, report, label: str) -> Iterator[dict[str, str]]:
    """Attributes of every `<row>`; a parse error ends the stream with a reason (rows before it are kept)."""
    try:
        root = None
        for event, elem in ET.iterparse(path, events=("start", "end")):
            if root is None:
                root = elem
            if event != "end":
                continue
            if elem.tag == "row":
                yield dict(elem.attrib)
            elem.clear()
            if root is not elem:
                root.clear()  # cleared rows would otherwise stay attached to <posts>, ~0.5 KB each
    except ET.ParseError as exc:
        report.skip(path.name, f"broken XML ({exc}) while reading {label}; rows before it were kept")
    except OSError as exc:
        report.skip(path.name, f"unreadable ({exc.strerror or exc})")


def read_posts_xml(path: Path, report) -> Iterator[Document]:
    """Answers of an ARQMath `Posts` XML file as documents."""
    from mathscout.corpus import make_document

    questions: dict[str, _Question] = {}
    for row in _rows(path, _NullReport(), "questions"):
        if row.get("PostTypeId") == QUESTION and row.get("Id"):
            questions[row["Id"]] = _Question(
                title=html_to_text(row.get("Title", "")),
                tags=tuple(_TAG.findall(row.get("Tags", ""))),
                accepted_answer=row.get("AcceptedAnswerId", ""),
            )
    for row in _rows(path, report, "answers"):
        if row.get("PostTypeId") != ANSWER:
            continue
        post_id = row.get("Id", "")
        where = f"{path.name}:post {post_id or '?'}"
        if not post_id:
            report.skip(where, "answer without Id")
            continue
        text = html_to_text(row.get("Body", ""))
        if not text:
            report.skip(where, "empty answer body")
            continue
        parent = row.get("ParentId", "")
        question = questions.get(parent)
        metadata = {
            "thread_id": parent,
            "kind": "answer",
            "source": "arqmath",
            "score": int(row["Score"]) if row.get("Score", "").lstrip("-").isdigit() else None,
            "accepted": bool(question and question.accepted_answer == post_id),
            "tags": list(question.tags) if question else [],
        }
        yield official_formula_ids(make_document(post_id, text, question.title if question else "", metadata),
                                   _FORMULA_SPAN.findall(row.get("Body", "")))


def _same_latex(text: str) -> str:
    return "".join(html.unescape(_TAG.sub("", text)).strip().strip("$").split())


def official_formula_ids(document: Document, spans: list[tuple[str, str]]) -> Document:
    """The document with each formula renamed to the official id of the next `(id, inner HTML)` span holding the same
    LaTeX (in order; spans without a formula are passed over); formulas no span matches keep their ids."""
    if not spans:
        return document
    renamed, position, used = [], 0, set()
    for formula in document.formulas:
        key = _same_latex(formula.latex)
        for n in range(position, len(spans)):
            official, inner = spans[n]
            if _same_latex(inner) == key and official not in used:
                formula, position = replace(formula, id=official), n + 1
                used.add(official)
                break
        renamed.append(formula)
    return replace(document, formulas=renamed)


class _NullReport:
    """The first (questions) pass reports nothing: the answers pass meets the same errors and reports them."""

    def skip(self, where: str, reason: str) -> None:
        pass
