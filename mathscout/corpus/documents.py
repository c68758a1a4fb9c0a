"""What every corpus reader builds on: a document made from its text (formulas found, sizes bounded, Unicode made
valid) and the report of what ingestion read and skipped. The readers (jsonl.py, arqmath.py, folder.py) import it; the
package (`mathscout.corpus.read_corpus`) chooses the reader, so nothing here imports a reader."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from typing import Any

from mathscout.corpus.math_spans import MathSpan, find_math
from mathscout.limits import MAX_DOCUMENT_CHARS, MAX_TITLE_CHARS
from mathscout.types import Document, Formula

MAX_REASONS = 10


@dataclass
class IngestReport:
    """What ingestion read and what it skipped (with the first few reasons, `where: why`)."""

    documents: int = 0
    formulas: int = 0
    skipped: int = 0
    duplicates: int = 0
    reasons: list[str] = field(default_factory=list)
    seconds: float = 0.0
    replaced: int = 0  # records whose invalid Unicode was replaced by U+FFFD (kept, not skipped)
    replacements: list[str] = field(default_factory=list)
    truncated: int = 0  # documents kept cut to the size bounds of mathscout.limits
    truncations: list[str] = field(default_factory=list)

    def skip(self, where: str, reason: str) -> None:
        self.skipped += 1
        if len(self.reasons) < MAX_REASONS:
            self.reasons.append(f"{where}: {reason}")

    def replace(self, where: str, reason: str) -> None:
        """A record kept with some of its characters replaced."""
        self.replaced += 1
        if len(self.replacements) < MAX_REASONS:
            self.replacements.append(f"{where}: {reason}")

    def truncate(self, where: str, reason: str) -> None:
        """A record kept with its end cut off."""
        self.truncated += 1
        if len(self.truncations) < MAX_REASONS:
            self.truncations.append(f"{where}: {reason}")


_SURROGATE = re.compile("[\ud800-\udfff]")


def _valid(text: str) -> tuple[str, int]:
    """`text` with lone surrogates (not encodable as UTF-8) replaced by U+FFFD, and how many there were."""
    return _SURROGATE.subn("\ufffd", text)


def valid_unicode(doc: Document, report: IngestReport) -> Document:
    """The document with invalid Unicode replaced one character for one (formula offsets stay right),
    reported per record."""
    text, n_text = _valid(doc.text)
    title, n_title = _valid(doc.title)
    doc_id, n_id = _valid(doc.id)
    meta_json, n_meta = _valid(json.dumps(doc.metadata, ensure_ascii=False))
    replaced = n_text + n_title + n_id + n_meta
    if not replaced:
        return doc
    report.replace(f"document {doc_id}", f"{replaced} invalid Unicode character(s) replaced by U+FFFD")
    formulas = [replace(f, id=_valid(f.id)[0], doc_id=doc_id, latex=_valid(f.latex)[0]) for f in doc.formulas]
    return replace(doc, id=doc_id, text=text, title=title, metadata=json.loads(meta_json), formulas=formulas)


def make_document(
    doc_id: str,
    text: str,
    title: str = "",
    metadata: dict[str, Any] | None = None,
    report: IngestReport | None = None,
    where: str = "",
) -> Document:
    """A Document with its formulas found; formula ids are `<doc_id>#<ordinal>`. A text over MAX_DOCUMENT_CHARS is
    cut at a break outside formulas and a title over MAX_TITLE_CHARS cut, each reported as `where`."""
    spans = find_math(text)
    where = where or f"document {doc_id}"
    if len(text) > MAX_DOCUMENT_CHARS:
        cut = _safe_cut(text, spans, MAX_DOCUMENT_CHARS)
        if report is not None:
            report.truncate(
                where,
                f"text longer than {MAX_DOCUMENT_CHARS:,} characters: cut to its first {cut:,} "
                "at a break outside formulas",
            )
        text, spans = text[:cut], [s for s in spans if s.end <= cut]
    if len(title) > MAX_TITLE_CHARS:
        if report is not None:
            report.truncate(where, f"title longer than {MAX_TITLE_CHARS:,} characters ({len(title):,}): cut")
        title = title[:MAX_TITLE_CHARS]
    formulas = [
        Formula(id=f"{doc_id}#{n}", doc_id=doc_id, latex=s.latex, start=s.start, end=s.end, display=s.display)
        for n, s in enumerate(spans)
    ]
    return Document(id=doc_id, text=text, title=title, formulas=formulas, metadata=metadata or {})


def _safe_cut(text: str, spans: list[MathSpan], limit: int, look_back: int = 1000) -> int:
    """Where to cut `text` to at most `limit` characters: never inside a formula, at the last space or line break
    of the `look_back` characters before when there is one."""
    cut, floor = limit, 0
    for span in spans:  # in order, not overlapping
        if span.start >= cut:
            break
        if span.end > cut:
            cut = span.start
            break
        floor = span.end
    floor = max(floor, cut - look_back)
    space = max(text.rfind(" ", floor, cut), text.rfind("\n", floor, cut))
    return space if space > 0 else cut
