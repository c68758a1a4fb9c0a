"""Folders of notes: `.md`, `.tex`, `.txt` files (plus any `.jsonl`/`.xml` collections inside)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

from mathscout.corpus.documents import make_document
from mathscout.corpus.ids import control_in_id
from mathscout.limits import MAX_DOCUMENT_CHARS, MAX_ID_CHARS
from mathscout.terminal import has_control
from mathscout.types import Document

NOTE_SUFFIXES = (".md", ".tex", ".txt")
MAX_NOTE_BYTES = 4 * MAX_DOCUMENT_CHARS  # UTF-8 takes at most 4 bytes a character: more is never needed
_TEX_TITLE = re.compile(r"\\(?:title|section\*?|chapter\*?)\{([^}]*)\}")


def _title(text: str, suffix: str) -> str:
    if suffix == ".tex" and (m := _TEX_TITLE.search(text)):
        return m.group(1).strip()
    for line in text.splitlines():
        if line.strip():
            return line.strip().lstrip("#").strip()[:200]
    return ""


def _read_note(path: Path, doc_id: str, report) -> Document | None:
    with open(path, "rb") as f:
        data = f.read(MAX_NOTE_BYTES + 1)  # a longer note is cut: never read whole
    if b"\x00" in data[:8192]:
        report.skip(doc_id, "binary file")
        return None
    text = data[:MAX_NOTE_BYTES].decode("utf-8", errors="replace")
    if "\ufffd" in text and text.count("\ufffd") > len(text) // 20:
        report.skip(doc_id, "not UTF-8 text")
        return None
    if not text.strip():
        report.skip(doc_id, "empty file")
        return None
    if len(data) > MAX_NOTE_BYTES and len(text) <= MAX_DOCUMENT_CHARS:  # longer texts: make_document cuts, reports
        report.truncate(doc_id, f"file longer than {MAX_NOTE_BYTES >> 20} MiB: cut")
    return make_document(doc_id, text, _title(text, path.suffix.lower()), {"path": doc_id}, report=report)


def folder_files(root: Path, report=None) -> Iterator[tuple[Path, str]]:
    """(path, path relative to `root`) of every regular file below `root` in path order, without recursion: links
    are followed only to files inside `root` (others are skipped with a reason), directory links never (no loops)."""
    inside = root.resolve()

    def entries(folder: str) -> list[os.DirEntry]:
        try:
            with os.scandir(folder) as found:
                return sorted(found, key=lambda e: e.name, reverse=True)
        except OSError as exc:
            if report is not None:
                report.skip(Path(folder).relative_to(root).as_posix(), f"unreadable folder ({exc.strerror or exc})")
            return []

    pending = entries(str(root))
    while pending:
        entry = pending.pop()
        path = Path(entry.path)
        rel = path.relative_to(root).as_posix()
        if entry.is_dir(follow_symlinks=False):
            pending += entries(entry.path)
        elif entry.is_file(follow_symlinks=False):
            yield path, rel
        elif entry.is_symlink():
            why = _link_out(path, inside)
            if why is None:
                yield path, rel
            elif why and report is not None:
                report.skip(rel, why)


def _link_out(link: Path, inside: Path) -> str | None:
    """None for a link to a file inside `inside`; else why it is skipped ("" for a folder link inside: its files
    are read under their own path)."""
    try:
        target = link.resolve(strict=True)
    except (OSError, RuntimeError):  # missing target, or a loop of links
        return "a broken link or a loop of links: skipped"
    if not target.is_relative_to(inside):
        return f"a link to a {'folder' if target.is_dir() else 'file'} outside the folder: skipped"
    return None if target.is_file() else ""


def read_folder(root: Path, report) -> Iterator[Document]:
    """Every note below `root` (id = path relative to `root`), and collections found inside it."""
    from mathscout.corpus.arqmath import read_posts_xml
    from mathscout.corpus.jsonl import read_jsonl

    files = folder_files(root, report) if root.is_dir() else [(root, root.name)]
    for path, rel in files:
        name = path.name.lower()
        try:
            if name.endswith(NOTE_SUFFIXES) and len(rel) > MAX_ID_CHARS:
                report.skip(rel[:80] + "…", f"path longer than {MAX_ID_CHARS} characters (a note's id is its path)")
            elif name.endswith(NOTE_SUFFIXES) and (control := has_control(rel)):
                report.skip(rel, control_in_id("its path (a note's id)", control))
            elif name.endswith(NOTE_SUFFIXES):
                doc = _read_note(path, rel, report)
                if doc is not None:
                    yield doc
            elif name.endswith((".jsonl", ".jsonl.gz")):
                yield from read_jsonl(path, report)
            elif name.endswith(".xml"):
                yield from read_posts_xml(path, report)
            elif not root.is_dir():
                report.skip(rel, "unsupported file type (expected .jsonl, .xml, .md, .tex or .txt)")
        except OSError as exc:
            report.skip(rel, f"unreadable ({exc.strerror or exc})")
