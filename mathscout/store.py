"""SQLite document/formula store: the index directory's source of truth for texts and formulas."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mathscout.errors import DamagedIndexError, IndexMissingError, MathScoutError
from mathscout.types import Document, Formula

ADD_BATCH = 10_000  # documents per committed transaction

_SCHEMA = """
CREATE TABLE IF NOT EXISTS documents (
    ordinal INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    title TEXT NOT NULL,
    text TEXT NOT NULL,
    metadata TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS formulas (
    ordinal INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    doc_id TEXT NOT NULL,
    latex TEXT NOT NULL,
    start INTEGER NOT NULL,
    end INTEGER NOT NULL,
    display INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS formulas_by_doc ON formulas(doc_id);
"""


@dataclass(frozen=True)
class DocumentSummary:
    """What a ranker knows of a document without reading it: its size and the metadata ingestion kept."""

    id: str
    length: int  # characters of text
    formulas: int
    metadata: dict[str, Any]


def _id_chunks(doc_ids: Iterable[str], size: int = 500) -> Iterator[tuple[list[str], str]]:
    """The distinct ids in chunks of at most `size` (SQLite's bound on host parameters), each with its `?,?,…`."""
    ids = list(dict.fromkeys(doc_ids))
    for start in range(0, len(ids), size):
        chunk = ids[start : start + size]
        yield chunk, ",".join("?" * len(chunk))


class DocumentStore:
    """Documents and their formulas in one SQLite file.

    Documents and formulas also get a dense integer `ordinal` (insertion order, from 0) that other
    index components (structure, dense) use as their internal id.
    """

    def __init__(self, path: Path, connection: sqlite3.Connection):
        self.path = path
        self._db = connection

    @classmethod
    def create(cls, path: Path) -> DocumentStore:
        """A new, empty store at `path` (which must not exist yet)."""
        path = Path(path)
        if path.exists():
            raise MathScoutError(f"refusing to overwrite an existing store: {path}")
        db = sqlite3.connect(str(path), check_same_thread=False)
        db.executescript(_SCHEMA)
        db.execute("PRAGMA journal_mode=WAL")
        return cls(path, db)

    @classmethod
    def open(cls, path: Path) -> DocumentStore:
        """Open an existing store read-only."""
        path = Path(path)
        if not path.is_file():
            raise IndexMissingError(f"no document store at {path}")
        uri = path.resolve().as_uri()  # percent-encodes '?', '#', spaces: any legal path opens
        # `immutable` when the folder cannot be written (a read-only mount): SQLite then takes no locks
        mode = "mode=ro" if os.access(path.parent, os.W_OK) else "mode=ro&immutable=1"
        rebuild = f"rebuild the index with 'mathscout index --input PATH --index {path.parent}'"
        try:
            db = sqlite3.connect(f"{uri}?{mode}", uri=True, check_same_thread=False)
            db.execute("PRAGMA trusted_schema=OFF")  # a stored view or trigger calls no function with side effects
            kinds = dict(db.execute("SELECT name, type FROM sqlite_master WHERE name IN ('documents', 'formulas')"))
            db.execute("SELECT 1 FROM documents LIMIT 1")
            db.execute("SELECT 1 FROM formulas LIMIT 1")
        except sqlite3.DatabaseError as exc:
            raise DamagedIndexError(f"the document store {path} is unreadable ({exc}); {rebuild}") from exc
        if kinds != {"documents": "table", "formulas": "table"}:  # a view may compute without end (a recursive query)
            db.close()
            found = ", ".join(f"{name} is a {kind}" for name, kind in sorted(kinds.items()) if kind != "table")
            raise DamagedIndexError(
                f"the document store {path} is not one MathScout wrote ({found or 'a table is missing'}); {rebuild}"
            )
        return cls(path, db)

    def add(self, documents: Iterable[Document], batch: int = ADD_BATCH) -> tuple[int, int]:
        """Append documents (ordinals continue from the current count); returns (docs, formulas) added.

        A document whose id is already stored is skipped (first one wins). Rows are committed every `batch`
        documents, so neither SQLite's journal nor its cache grows with the collection.
        """
        next_doc = self.count()
        next_formula = self.formula_count()
        docs = formulas = 0
        try:
            for doc in documents:
                try:
                    self._db.execute(
                        "INSERT INTO documents VALUES (?,?,?,?,?)",
                        (next_doc, doc.id, doc.title, doc.text, json.dumps(doc.metadata, ensure_ascii=False)),
                    )
                except sqlite3.IntegrityError:
                    continue
                next_doc += 1
                docs += 1
                self._db.executemany(
                    "INSERT INTO formulas VALUES (?,?,?,?,?,?,?)",
                    [
                        (next_formula + n, f.id, f.doc_id, f.latex, f.start, f.end, int(f.display))
                        for n, f in enumerate(doc.formulas)
                    ],
                )
                next_formula += len(doc.formulas)
                formulas += len(doc.formulas)
                if docs % batch == 0:
                    self._db.commit()
            self._db.commit()
        except BaseException:
            self._db.rollback()
            raise
        return docs, formulas

    def count(self) -> int:
        """Documents stored. Ordinals run from 0 without gaps (rows are only appended, each at the next ordinal), so
        this is the largest ordinal + 1: one lookup in the rowid tree, where COUNT(*) reads the whole table (1.4 s at
        1.5 M documents, asked whenever a component opens)."""
        return self._db.execute("SELECT COALESCE(MAX(ordinal) + 1, 0) FROM documents").fetchone()[0]

    def formula_count(self) -> int:
        """Formulas stored (as `count`: the largest ordinal + 1)."""
        return self._db.execute("SELECT COALESCE(MAX(ordinal) + 1, 0) FROM formulas").fetchone()[0]

    def get(self, doc_id: str) -> Document | None:
        """The document with this id, with its formulas, or None."""
        row = self._db.execute("SELECT id, title, text, metadata FROM documents WHERE id=?", (doc_id,)).fetchone()
        return self._document(row) if row else None

    def get_many(self, doc_ids: Iterable[str]) -> dict[str, Document]:
        """Documents by id (ids not stored are absent from the result)."""
        found = {}
        for doc_id in doc_ids:
            doc = self.get(doc_id)
            if doc is not None:
                found[doc_id] = doc
        return found

    def summaries(self, doc_ids: Iterable[str]) -> dict[str, DocumentSummary]:
        """Length, formula count and metadata of documents by id, in two queries (no text is read back)."""
        found: dict[str, DocumentSummary] = {}
        for chunk, marks in _id_chunks(doc_ids):
            counts = dict(
                self._db.execute(
                    f"SELECT doc_id, COUNT(*) FROM formulas WHERE doc_id IN ({marks}) GROUP BY doc_id", chunk
                ).fetchall()
            )
            for doc_id, length, metadata in self._db.execute(
                f"SELECT id, length(text), metadata FROM documents WHERE id IN ({marks})", chunk
            ):
                found[doc_id] = DocumentSummary(doc_id, length, counts.get(doc_id, 0), json.loads(metadata))
        return found

    def titles(self, doc_ids: Iterable[str]) -> dict[str, str]:
        """The non-empty titles of documents by id (documents without a title are absent)."""
        found: dict[str, str] = {}
        for chunk, marks in _id_chunks(doc_ids):
            found.update(
                self._db.execute(
                    f"SELECT id, title FROM documents WHERE id IN ({marks}) AND title != ''", chunk
                ).fetchall()
            )
        return found

    def title_sample(self, n: int) -> list[str]:
        """Up to n non-empty titles spread over the collection (every k-th document by ordinal): enough to estimate
        the average title length without reading a million titles."""
        step = max(1, self.count() // max(n, 1))
        spread = [
            r[0]
            for r in self._db.execute(
                "SELECT title FROM documents WHERE title != '' AND ordinal % ? = 0 LIMIT ?", (step, n)
            )
        ]
        return spread or [r[0] for r in self._db.execute("SELECT title FROM documents WHERE title != '' LIMIT ?", (n,))]

    def doc_id_at(self, ordinal: int) -> str:
        return self._db.execute("SELECT id FROM documents WHERE ordinal=?", (ordinal,)).fetchone()[0]

    def doc_ids(self) -> list[str]:
        """All document ids in ordinal order."""
        return [r[0] for r in self._db.execute("SELECT id FROM documents ORDER BY ordinal")]

    def iter_documents(self, batch: int = 1000) -> Iterator[Document]:
        """Every document in ordinal order, with formulas."""
        cursor = self._db.execute("SELECT id, title, text, metadata FROM documents ORDER BY ordinal")
        while rows := cursor.fetchmany(batch):
            yield from (self._document(r) for r in rows)

    def formula(self, formula_id: str) -> Formula | None:
        row = self._db.execute(
            "SELECT id, doc_id, latex, start, end, display FROM formulas WHERE id=?", (formula_id,)
        ).fetchone()
        return _formula(row) if row else None

    def formula_at(self, ordinal: int) -> Formula:
        row = self._db.execute(
            "SELECT id, doc_id, latex, start, end, display FROM formulas WHERE ordinal=?", (ordinal,)
        ).fetchone()
        return _formula(row)

    def iter_formulas(self, batch: int = 5000) -> Iterator[tuple[int, Formula]]:
        """(ordinal, formula) for every formula, in ordinal order."""
        cursor = self._db.execute(
            "SELECT ordinal, id, doc_id, latex, start, end, display FROM formulas ORDER BY ordinal"
        )
        while rows := cursor.fetchmany(batch):
            yield from ((r[0], _formula(r[1:])) for r in rows)

    def iter_formula_latex(
        self, batch: int = 5000, first: int = 0, end: int | None = None
    ) -> Iterator[tuple[int, int, str]]:
        """(formula ordinal, document ordinal, LaTeX) for every formula (with ordinals in [first, end)), in formula
        order (no table of all documents in memory: the join goes through the documents' id index)."""
        cursor = self._db.execute(
            "SELECT f.ordinal, d.ordinal, f.latex FROM formulas f JOIN documents d ON d.id = f.doc_id "
            "WHERE f.ordinal >= ? AND f.ordinal < ? ORDER BY f.ordinal",
            (first, 2**63 - 1 if end is None else end),
        )
        while rows := cursor.fetchmany(batch):
            yield from rows

    def close(self) -> None:
        self._db.close()

    def finish(self) -> None:
        """Close a store that was just built, in rollback-journal mode: one self-contained file that a
        read-only mount can open (a WAL database needs its -shm/-wal files)."""
        self._db.execute("PRAGMA journal_mode=DELETE")
        self._db.close()

    def _document(self, row) -> Document:
        doc_id, title, text, metadata = row
        rows = self._db.execute(
            "SELECT id, doc_id, latex, start, end, display FROM formulas WHERE doc_id=? ORDER BY ordinal", (doc_id,)
        ).fetchall()
        return Document(
            id=doc_id, title=title, text=text, metadata=json.loads(metadata), formulas=[_formula(r) for r in rows]
        )


def _formula(row) -> Formula:
    fid, doc_id, latex, start, end, display = row
    return Formula(id=fid, doc_id=doc_id, latex=latex, start=start, end=end, display=bool(display))
