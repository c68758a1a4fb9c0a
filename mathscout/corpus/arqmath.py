"""The official ARQMath collection: Math StackExchange `Posts` XML (`<posts><row …/></posts>`).

Documents are the answers (PostTypeId 2), each with its parent question's title, id (thread) and tags.
Formulas keep their official ARQMath formula ids (`<span class="math-container" id="…">`, the `Formula_Id`s of
Task 2 runs and qrels), matched in order by their LaTeX; a formula no span matches keeps `<post_id>#<n>`.
The file is streamed twice (questions, then answers), a bounded line at a time, so that a 10 GB dump never sits
in memory, nor does one over-long row.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from xml.parsers import expat

from mathscout.corpus.documents import make_document
from mathscout.corpus.html import html_to_text
from mathscout.corpus.ids import control_in_id
from mathscout.corpus.jsonl import bounded_lines, too_long
from mathscout.limits import MAX_ID_CHARS, MAX_LINE_BYTES, MAX_NESTING, MAX_TITLE_CHARS
from mathscout.terminal import has_control
from mathscout.types import Document

QUESTION, ANSWER = "1", "2"
_TAG = re.compile(r"<([^<>]+)>")
_SCORE = re.compile(r"-?[0-9]{1,18}")  # int() refuses more than 4,300 digits
_FORMULA_SPAN = re.compile(r"""<span\s[^>]*?class=["']math-container["'][^>]*?\sid=["']([^"'\s<>]+)["'][^>]*>""")


@dataclass(frozen=True)
class _Question:
    title: str
    tags: tuple[str, ...]
    accepted_answer: str


class _Stop(Exception):
    """Ends a Posts file's stream early, with the reason."""


def _rows(path: Path, report, label: str) -> Iterator[dict[str, str]]:
    """Attributes of every `<row>`, read a bounded line at a time by expat (no tree is built); a line over
    MAX_LINE_BYTES is skipped; broken XML, an entity declaration, elements nested deeper than MAX_NESTING or one tag
    longer than MAX_LINE_BYTES end the stream with a reason (rows before it are kept)."""
    parser = expat.ParserCreate()
    rows: list[dict[str, str]] = []
    state = {"depth": 0, "event": 0}  # elements open; byte offset of the last thing expat reported

    def start(name: str, attributes: dict[str, str]) -> None:
        state["depth"], state["event"] = state["depth"] + 1, parser.CurrentByteIndex
        if state["depth"] > MAX_NESTING:
            raise _Stop(f"elements nested deeper than {MAX_NESTING} levels")
        if name == "row":
            rows.append(attributes)

    def end(name: str) -> None:
        state["depth"], state["event"] = state["depth"] - 1, parser.CurrentByteIndex

    def entity(*_) -> None:
        raise _Stop("an entity declaration (Posts XML has none; entities are never expanded)")

    parser.StartElementHandler, parser.EndElementHandler, parser.EntityDeclHandler = start, end, entity
    parser.CharacterDataHandler = lambda _: state.__setitem__("event", parser.CurrentByteIndex)
    fed, where = 0, path.name
    try:
        with open(path, "rb") as f:
            for number, line in enumerate(bounded_lines(f), start=1):
                where = f"{path.name}:{number}"
                if line is None:
                    report.skip(where, too_long())
                    continue
                parser.Parse(line, False)
                fed += len(line)
                yield from rows
                rows.clear()
                if fed - state["event"] > MAX_LINE_BYTES:
                    raise _Stop(f"a tag longer than {MAX_LINE_BYTES >> 20} MiB")
            parser.Parse(b"", True)
            yield from rows
    except expat.ExpatError as exc:
        report.skip(path.name, f"broken XML ({exc}) while reading {label}; rows before it were kept")
    except _Stop as exc:
        report.skip(where, f"{exc}: stopped reading {label}; rows before it were kept")
    except OSError as exc:
        report.skip(path.name, f"unreadable ({exc.strerror or exc})")


def read_posts_xml(path: Path, report) -> Iterator[Document]:
    """Answers of an ARQMath `Posts` XML file as documents."""
    questions: dict[str, _Question] = {}
    for row in _rows(path, _NullReport(), "questions"):
        if row.get("PostTypeId") == QUESTION and row.get("Id"):
            questions[row["Id"]] = _Question(
                title=html_to_text(row.get("Title", "")[:MAX_TITLE_CHARS]),  # held for every question: bounded
                tags=tuple(_TAG.findall(row.get("Tags", "")[:MAX_TITLE_CHARS])),
                accepted_answer=row.get("AcceptedAnswerId", ""),
            )
    for row in _rows(path, report, "answers"):
        if row.get("PostTypeId") != ANSWER:
            continue
        post_id = row.get("Id", "")
        where = f"{path.name}:post {post_id or '?'}"
        if not post_id or len(post_id) > MAX_ID_CHARS:
            report.skip(
                where[:200], "answer without Id" if not post_id else f"'Id' longer than {MAX_ID_CHARS} characters"
            )
            continue
        if control := has_control(post_id):
            report.skip(where[:200], control_in_id("'Id'", control))
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
            "score": int(row["Score"]) if _SCORE.fullmatch(row.get("Score", "")) else None,
            "accepted": bool(question and question.accepted_answer == post_id),
            "tags": list(question.tags) if question else [],
        }
        document = make_document(
            post_id, text, question.title if question else "", metadata, report=report, where=where
        )
        yield official_formula_ids(document, _formula_spans(row.get("Body", "")))


def _formula_spans(body: str) -> list[tuple[str, str]]:
    """(official id, inner HTML) of each math-container span with an id, in one pass (a lazy `(.*?)</span>` rescans
    to the end of the body for every unclosed span: 53 s for 288 KB of them)."""
    spans, pos = [], 0
    while opener := _FORMULA_SPAN.search(body, pos):
        close = body.find("</span>", opener.end())
        if close < 0:  # none after this opener: none after a later one either
            break
        spans.append((opener.group(1), body[opener.end() : close]))
        pos = close + len("</span>")
    return spans


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
