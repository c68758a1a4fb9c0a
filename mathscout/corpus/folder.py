"""Folders of notes: `.md`, `.tex`, `.txt` files (plus any `.jsonl`/`.xml` collections inside)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from mathscout.types import Document

NOTE_SUFFIXES = (".md", ".tex", ".txt")
_TEX_TITLE = re.compile(r"\\(?:title|section\*?|chapter\*?)\{([^}]*)\}")


def _title(text: str, suffix: str) -> str:
    if suffix == ".tex" and (m := _TEX_TITLE.search(text)):
        return m.group(1).strip()
    for line in text.splitlines():
        if line.strip():
            return line.strip().lstrip("#").strip()[:200]
    return ""


def _read_note(path: Path, doc_id: str, report) -> Document | None:
    from mathscout.corpus import make_document

    data = path.read_bytes()
    if b"\x00" in data[:8192]:
        report.skip(doc_id, "binary file")
        return None
    text = data.decode("utf-8", errors="replace")
    if "\ufffd" in text and text.count("\ufffd") > len(text) // 20:
        report.skip(doc_id, "not UTF-8 text")
        return None
    if not text.strip():
        report.skip(doc_id, "empty file")
        return None
    return make_document(doc_id, text, _title(text, path.suffix.lower()), {"path": doc_id})


def read_folder(root: Path, report) -> Iterator[Document]:
    """Every note below `root` (id = path relative to `root`), and collections found inside it."""
    from mathscout.corpus.arqmath import read_posts_xml
    from mathscout.corpus.jsonl import read_jsonl

    files = sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else [root]
    base = root if root.is_dir() else root.parent
    for path in files:
        rel = path.relative_to(base).as_posix()
        name = path.name.lower()
        try:
            if name.endswith(NOTE_SUFFIXES):
                doc = _read_note(path, rel, report)
                if doc is not None:
                    yield doc
            elif name.endswith((".jsonl", ".jsonl.gz")):
                yield from read_jsonl(path, report)
            elif name.endswith(".xml"):
                yield from read_posts_xml(path, report)
            elif root.is_file():
                report.skip(rel, "unsupported file type (expected .jsonl, .xml, .md, .tex or .txt)")
        except OSError as exc:
            report.skip(rel, f"unreadable ({exc.strerror or exc})")
