"""Corpus ingestion: JSONL collections, ARQMath `Posts` XML, and folders of .md/.tex/.txt notes.

The readers build on `mathscout.corpus.documents` (a document from its text, the ingest report), never on this
package, which chooses among them: no import leads back here."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from mathscout.corpus.documents import IngestReport, make_document, valid_unicode
from mathscout.corpus.html import html_to_text
from mathscout.corpus.math_spans import MathSpan, find_math
from mathscout.types import Document


def read_corpus(paths: Sequence[Path | str], report: IngestReport, distinct: bool = True) -> Iterator[Document]:
    """Documents from every input: `.jsonl`/`.jsonl.gz` files, ARQMath `Posts` `.xml` files, folders.

    Unreadable inputs are skipped with a reason in `report`. With `distinct`, documents whose id was already seen
    are counted in `report.duplicates` and dropped, which holds every id in memory; a store drops them on disk
    instead (`mathscout.index.builder.ingest_inputs`: memory that does not grow with the collection).
    """
    from mathscout.corpus.arqmath import read_posts_xml
    from mathscout.corpus.folder import read_folder
    from mathscout.corpus.jsonl import read_jsonl

    seen: set[str] = set()
    for path in map(Path, paths):
        if path.is_dir():
            source = read_folder(path, report)
        elif path.name.endswith((".jsonl", ".jsonl.gz", ".json")):
            source = read_jsonl(path, report)
        elif path.suffix == ".xml":
            source = read_posts_xml(path, report)
        else:
            source = read_folder(path, report)  # a single .md/.tex/.txt file
        for doc in source:
            doc = valid_unicode(doc, report)
            if distinct:
                if doc.id in seen:
                    report.duplicates += 1
                    continue
                seen.add(doc.id)
            report.documents += 1
            report.formulas += len(doc.formulas)
            yield doc


def estimate_documents(paths: Sequence[Path | str]) -> int | None:
    """About how many documents `read_corpus` will yield (for a progress bar's ETA): JSONL lines, XML rows of
    answers (`PostTypeId="2"`), files of a folder; counted in 1 MiB blocks without parsing. None if unreadable."""
    from mathscout.corpus.folder import NOTE_SUFFIXES, folder_files
    from mathscout.corpus.jsonl import open_maybe_gzip

    def count(path: Path, needle: bytes) -> int:
        total, tail = 0, b""
        with open_maybe_gzip(path) as f:
            while block := f.read(1 << 20):
                data = tail + block
                total += data.count(needle)
                tail = data[-(len(needle) - 1) :] if len(needle) > 1 else b""  # too short to hold a whole needle
        return total

    total = 0
    try:
        for path in map(Path, paths):
            if path.is_dir():
                total += sum(1 for p, _ in folder_files(path) if p.name.lower().endswith(NOTE_SUFFIXES))
            elif path.name.endswith((".jsonl", ".jsonl.gz", ".json")):
                total += count(path, b"\n")
            elif path.suffix == ".xml":
                total += count(path, b'PostTypeId="2"')
            else:
                total += 1
    except (OSError, EOFError):
        return None
    return total


__all__ = [
    "IngestReport",
    "MathSpan",
    "estimate_documents",
    "find_math",
    "html_to_text",
    "make_document",
    "read_corpus",
]
