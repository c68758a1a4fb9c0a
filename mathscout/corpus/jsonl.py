"""JSONL collections: one `{"id", "text", optional "title" and metadata}` object per line."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path

from mathscout.types import Document


def open_maybe_gzip(path: Path, mode: str = "rb", **kwargs):
    """`path` opened for reading, through gzip when its name ends in `.gz` (`.jsonl.gz` collections)."""
    return (gzip.open if path.name.endswith(".gz") else open)(path, mode, **kwargs)


def _lines(path: Path, report):
    """Decoded lines; a line that is not valid UTF-8 is decoded with U+FFFD replacements and reported."""
    with open_maybe_gzip(path) as f:
        for number, raw in enumerate(f, start=1):
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError:
                report.replace(f"{path.name}:{number}", "invalid UTF-8 bytes replaced by U+FFFD")
                yield raw.decode("utf-8", errors="replace")


def read_jsonl(path: Path, report) -> Iterator[Document]:
    """Documents of a JSONL file; bad lines (not JSON, no id, empty text) are skipped with a reason."""
    from mathscout.corpus import make_document

    try:
        for number, line in enumerate(_lines(path, report), start=1):
            if not line.strip():
                continue
            where = f"{path.name}:{number}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                report.skip(where, f"not valid JSON ({exc.msg})")
                continue
            if not isinstance(record, dict):
                report.skip(where, "not a JSON object")
                continue
            doc_id, text = record.get("id"), record.get("text")
            if doc_id is None or str(doc_id).strip() == "":
                report.skip(where, "no 'id'")
                continue
            if not isinstance(text, str) or not text.strip():
                report.skip(where, f"document {doc_id}: empty or missing 'text'")
                continue
            if "\x00" in text:
                report.skip(where, f"document {doc_id}: binary content")
                continue
            title = record.get("title") if isinstance(record.get("title"), str) else ""
            metadata = {k: v for k, v in record.items() if k not in ("id", "text", "title")}
            yield make_document(str(doc_id), text, title, metadata)
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        report.skip(path.name, f"unreadable ({exc}); documents before the error were kept")
