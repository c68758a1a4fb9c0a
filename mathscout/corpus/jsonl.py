"""JSONL collections: one `{"id", "text", optional "title" and metadata}` object per line."""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterator
from pathlib import Path

from mathscout.corpus.documents import make_document
from mathscout.corpus.ids import control_in_id
from mathscout.limits import MAX_ID_CHARS, MAX_LINE_BYTES, MAX_NESTING
from mathscout.terminal import has_control
from mathscout.types import Document


def open_maybe_gzip(path: Path, mode: str = "rb", **kwargs):
    """`path` opened for reading, through gzip when its name ends in `.gz` (`.jsonl.gz` collections)."""
    return (gzip.open if path.name.endswith(".gz") else open)(path, mode, **kwargs)


def bounded_lines(f, limit: int = MAX_LINE_BYTES) -> Iterator[bytes | None]:
    """The lines of a binary stream, never holding more than `limit` bytes: a longer line is read past in chunks
    of `limit` bytes and given as None."""
    while line := f.readline(limit + 1):
        if len(line) <= limit or line.endswith(b"\n"):
            yield line
            continue
        while (rest := f.readline(limit)) and not rest.endswith(b"\n"):
            pass
        yield None


def too_long(limit: int = MAX_LINE_BYTES) -> str:
    """The notice of a line skipped for its length."""
    return f"line longer than {limit >> 20} MiB: skipped"


def _lines(path: Path, report):
    """(number, decoded line or None when too long); a line that is not valid UTF-8 is decoded with U+FFFD
    replacements and reported."""
    with open_maybe_gzip(path) as f:
        for number, raw in enumerate(bounded_lines(f), start=1):
            try:
                yield number, raw if raw is None else raw.decode("utf-8")
            except UnicodeDecodeError:
                assert raw is not None  # decoding it raised
                report.replace(f"{path.name}:{number}", "invalid UTF-8 bytes replaced by U+FFFD")
                yield number, raw.decode("utf-8", errors="replace")


def nested_deeper(value, limit: int = MAX_NESTING) -> bool:
    """Whether a parsed JSON value nests lists/objects deeper than `limit` (checked without recursion)."""
    stack = [(value, 1)]
    while stack:
        value, depth = stack.pop()
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def record_id(value) -> tuple[str | None, str]:
    """A JSON id as a string, or None and why: strings and whole numbers are ids; floats are not (their text is
    rounded: 1e16+1 and 1.10 would not match the qrels), nor booleans, lists, objects or over-long ids."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        kind = "boolean" if isinstance(value, bool) else "float" if isinstance(value, float) else type(value).__name__
        return None, f"'id' is a {kind} (ids are strings or whole numbers)" if value is not None else "no 'id'"
    doc_id = str(value)
    if not doc_id.strip():
        return None, "no 'id'"
    if len(doc_id) > MAX_ID_CHARS:
        return None, f"'id' longer than {MAX_ID_CHARS} characters"
    if control := has_control(doc_id):
        return None, control_in_id("'id'", control)
    return doc_id, ""


def read_jsonl(path: Path, report) -> Iterator[Document]:
    """Documents of a JSONL file; bad lines (too long, not JSON, nested too deep, a bad id, empty text) are
    skipped with a reason."""
    try:
        for number, line in _lines(path, report):
            where = f"{path.name}:{number}"
            if line is None:
                report.skip(where, too_long())
                continue
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except RecursionError:
                report.skip(where, f"nested deeper than {MAX_NESTING} levels")
                continue
            except json.JSONDecodeError as exc:
                report.skip(where, f"not valid JSON ({exc.msg})")
                continue
            except ValueError:  # Python reads no integer of more than 4,300 digits
                report.skip(where, "not valid JSON (a number of more than 4,300 digits)")
                continue
            if not isinstance(record, dict):
                report.skip(where, "not a JSON object")
                continue
            if nested_deeper(record):
                report.skip(where, f"nested deeper than {MAX_NESTING} levels")
                continue
            doc_id, why = record_id(record.get("id"))
            text = record.get("text")
            if doc_id is None:
                report.skip(where, why)
                continue
            if not isinstance(text, str) or not text.strip():
                report.skip(where, f"document {doc_id}: empty or missing 'text'")
                continue
            if "\x00" in text:
                report.skip(where, f"document {doc_id}: binary content")
                continue
            title = record.get("title")
            title = title if isinstance(title, str) else ""
            metadata = {k: v for k, v in record.items() if k not in ("id", "text", "title")}
            yield make_document(doc_id, text, title, metadata, report=report, where=where)
    except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
        report.skip(path.name, f"unreadable ({exc}); documents before the error were kept")
