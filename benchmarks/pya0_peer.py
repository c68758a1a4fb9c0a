"""pya0 (Approach Zero's C engine, PyPI `pya0==0.3.7`, the `peers` extra) as a benchmark peer.

Build-or-reuse a pya0 index of a document set, and search it with formula and keyword queries, so the
structure benchmark and the effectiveness runs compare MathScout with the original engine on the same
documents (see ../shared/PEERS.md for the API facts).

    python -m mathscout.benchmarks.pya0_peer build --docs ../shared/data/collection/docs.jsonl --out /work/cache/pya0/full
    python -m mathscout.benchmarks.pya0_peer run --index DIR --topics TOPICS --k 1000 --output RUN.trec

Documents: math found by `mathscout.corpus.find_math` goes inside `[imath]…[/imath]`; prose is reduced to
MathScout's own index terms (lower-cased, stopped, Porter-stemmed: `word_terms`), and queries get the same
treatment, so both sides are stemmed alike (the engine itself does not stem). pya0 wants numeric ids: the
internal id `writer_add_doc` returns is mapped to the collection id in `ids.tsv`. The C parser prints its
errors on stderr; the build sends file descriptor 2 to `build-stderr.log` and counts them. An index is
reused when its `peer-manifest.json` names the same documents (path, count and id digest); a build goes
to `DIR.partial` and is renamed when complete, so an interrupted build is never taken for a finished one.
The index is ~500k small files: keep it out of the repository (e.g. /work/cache/pya0/).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from mathscout.corpus import find_math
from mathscout.errors import MathScoutError
from mathscout.latex.tokens import word_terms

MANIFEST = "peer-manifest.json"
ID_MAP = "ids.tsv"
STDERR_LOG = "build-stderr.log"


@dataclass
class Pya0Manifest:
    """What a finished pya0 peer index holds and what building it cost."""

    source: str
    documents: int
    id_digest: str
    formulas: int
    parser_errors: int
    other_messages: int
    build_seconds: float
    content_bytes: int
    disk_bytes: int
    files: int


@dataclass(frozen=True)
class Pya0Hit:
    doc_id: str
    score: float


def _require_pya0():
    try:
        import pya0
    except ImportError as exc:  # the peer is optional: `pip install -e .[peers]`
        raise MathScoutError("pya0 is not installed (pip install 'mathscout[peers]' or pya0==0.3.7)") from exc
    return pya0


def pya0_document(text: str) -> tuple[str, int]:
    """A document in pya0's input form (prose as stemmed index terms, math in [imath]) and its formula count."""
    parts: list[str] = []
    pos = 0
    spans = find_math(text)
    for span in spans:
        parts.append(" ".join(word_terms(text[pos : span.start])))
        latex = " ".join(span.latex.replace("[/imath]", " ").split())
        parts.append(f"[imath]{latex}[/imath]")
        pos = span.end
    parts.append(" ".join(word_terms(text[pos:])))
    return " ".join(p for p in parts if p), len(spans)


def read_documents(path: Path, ids: set[str] | None = None, limit: int | None = None) -> Iterator[tuple[str, str]]:
    """(id, text) of a JSONL collection, optionally only `ids` and only the first `limit`."""
    n = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            if limit is not None and n >= limit:
                return
            record = json.loads(line)
            if ids is not None and str(record["id"]) not in ids:
                continue
            n += 1
            yield str(record["id"]), record["text"]


def id_digest(doc_ids: Iterable[str]) -> str:
    """Order-independent digest of a document id set."""
    h = hashlib.sha1()
    for doc_id in sorted(doc_ids):
        h.update(doc_id.encode() + b"\n")
    return h.hexdigest()[:16]


def indexed_ids(folder: Path) -> list[str]:
    """The collection ids a finished pya0 index holds (from its id map)."""
    path = folder / ID_MAP
    if not path.is_file():
        return []
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n").split("\t", 1)[1] for line in f if "\t" in line]


def _disk_usage(folder: Path) -> tuple[int, int, int]:
    """(apparent bytes, allocated bytes, file count) under a folder."""
    content = disk = files = 0
    for root, _, names in os.walk(folder):
        for name in names:
            st = os.stat(os.path.join(root, name))
            content += st.st_size
            disk += st.st_blocks * 512
            files += 1
    return content, disk, files


@contextmanager
def stderr_to(path: Path) -> Iterator[None]:
    """Send file descriptor 2 (where pya0's C parser prints) to a file for the duration."""
    sys.stderr.flush()
    saved = os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)


def count_messages(log: Path) -> tuple[int, int]:
    """(parser errors, other lines) in a pya0 stderr log."""
    errors = other = 0
    if log.is_file():
        with open(log, encoding="utf-8", errors="replace") as f:
            for line in f:
                if "Parser error" in line or "parser error" in line.lower():
                    errors += 1
                elif line.strip():
                    other += 1
    return errors, other


def read_manifest(folder: Path) -> Pya0Manifest | None:
    path = folder / MANIFEST
    if not path.is_file():
        return None
    return Pya0Manifest(**json.loads(path.read_text()))


def build_index(
    documents: Iterable[tuple[str, str]], out: Path, source: str = "", progress_every: int = 2000
) -> Pya0Manifest:
    """Build a pya0 index of `documents` at `out` (through `out.partial`); returns its manifest."""
    pya0 = _require_pya0()
    partial = out.with_name(out.name + ".partial")
    if partial.exists():
        shutil.rmtree(partial)
    partial.mkdir(parents=True)
    doc_ids: list[str] = []
    formulas = 0
    started = time.perf_counter()
    with stderr_to(partial / STDERR_LOG), open(partial / ID_MAP, "w", encoding="utf-8") as id_map:
        ix = pya0.index_open(str(partial / "index"))
        if ix is None:
            raise MathScoutError(f"pya0 could not create an index at {partial / 'index'}")
        writer = pya0.index_writer(ix)
        for doc_id, text in documents:
            content, n_formulas = pya0_document(text)
            internal = pya0.writer_add_doc(writer, content=content)
            id_map.write(f"{internal}\t{doc_id}\n")
            doc_ids.append(doc_id)
            formulas += n_formulas
            if progress_every and len(doc_ids) % progress_every == 0:
                print(
                    f"[pya0 build] {len(doc_ids):,} documents, {formulas:,} formulas, "
                    f"{time.perf_counter() - started:,.0f} s",
                    file=sys.stdout,
                    flush=True,
                )
        pya0.writer_flush(writer)
        pya0.writer_maintain(writer, force=True)
        pya0.writer_close(writer)
        pya0.index_close(ix)
    seconds = time.perf_counter() - started
    errors, other = count_messages(partial / STDERR_LOG)
    content_bytes, disk_bytes, files = _disk_usage(partial / "index")
    manifest = Pya0Manifest(
        source=source,
        documents=len(doc_ids),
        id_digest=id_digest(doc_ids),
        formulas=formulas,
        parser_errors=errors,
        other_messages=other,
        build_seconds=round(seconds, 2),
        content_bytes=content_bytes,
        disk_bytes=disk_bytes,
        files=files,
    )
    (partial / MANIFEST).write_text(json.dumps(asdict(manifest), indent=2))
    if out.exists():
        shutil.rmtree(out)
    partial.rename(out)
    return manifest


def reusable(folder: Path, wanted_ids: Iterable[str]) -> Pya0Manifest | None:
    """The manifest of a finished index at `folder` holding exactly `wanted_ids`, else None."""
    manifest = read_manifest(folder)
    if manifest is None:
        return None
    return manifest if id_digest(indexed_ids(folder)) == id_digest(wanted_ids) else None


def build_or_reuse(docs_path: Path, out: Path, ids: set[str] | None = None, limit: int | None = None) -> Pya0Manifest:
    """The manifest of a pya0 index of these JSONL documents at `out`, building it only when missing or different."""
    existing = reusable(out, (doc_id for doc_id, _ in read_documents(docs_path, ids, limit)))
    return existing or build_index(read_documents(docs_path, ids, limit), out, source=str(docs_path))


def store_documents(store) -> Iterator[tuple[str, str]]:
    """(id, text) of every document of a MathScout store (title first, as ingestion read it)."""
    for doc in store.iter_documents():
        yield doc.id, (f"{doc.title}\n{doc.text}" if doc.title and not doc.text.startswith(doc.title) else doc.text)


def build_or_reuse_for_index(index_path: Path, out: Path) -> Pya0Manifest:
    """A pya0 index of the same documents as a MathScout index directory (reused when it already matches)."""
    from mathscout.index.layout import IndexDir

    store = IndexDir(index_path).store
    existing = reusable(out, store.doc_ids())
    return existing or build_index(store_documents(store), out, source=str(index_path))


class Pya0Searcher:
    """A read-only pya0 index with its id map; queries are formulas (LaTeX) and keywords."""

    def __init__(self, folder: Path):
        self.pya0 = _require_pya0()
        self.folder = Path(folder)
        self.manifest = read_manifest(self.folder)
        if self.manifest is None:
            raise MathScoutError(f"no finished pya0 index at {folder} (missing {MANIFEST})")
        self.ids: dict[int, str] = {}
        with open(self.folder / ID_MAP, encoding="utf-8") as f:
            for line in f:
                internal, doc_id = line.rstrip("\n").split("\t")
                self.ids[int(internal)] = doc_id
        self.ix = self.pya0.index_open(str(self.folder / "index"), option="r")
        if self.ix is None:
            raise MathScoutError(f"pya0 could not open {folder / 'index'}")

    def search(self, formulas: Iterable[str] = (), terms: Iterable[str] = (), k: int = 1000) -> list[Pya0Hit]:
        """Top-k documents for formula (tex) and term keywords; `terms` are index terms (`word_terms`)."""
        query = [{"str": " ".join(f.split()), "type": "tex"} for f in formulas if f.strip()]
        query += [{"str": term, "type": "term"} for term in dict.fromkeys(terms)]
        if not query:
            return []
        with stderr_to(Path(os.devnull)):
            reply = json.loads(self.pya0.search(self.ix, query, topk=k))
        return [Pya0Hit(self.ids.get(h["docid"], str(h["docid"])), float(h["score"])) for h in reply.get("hits", [])]

    def close(self) -> None:
        if self.ix is not None:
            self.pya0.index_close(self.ix)
            self.ix = None


def topic_query(topic) -> tuple[list[str], list[str]]:
    """(formulas, keywords) of an evaluation topic: its formulas, and the words of its text outside math."""
    from mathscout.latex.tokens import query_formulas

    if getattr(topic, "formula", None):
        return [topic.formula], []
    text = getattr(topic, "text", "") or " ".join(
        p for p in (getattr(topic, "title", ""), getattr(topic, "body", "")) if p
    )
    formulas = [span.latex for span in query_formulas(text)]
    words = []
    pos = 0
    for span in find_math(text):
        words.append(text[pos : span.start])
        pos = span.end
    words.append(text[pos:])
    return formulas, [" ".join(words)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="build or query a pya0 peer index")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build (or reuse) a pya0 index of a JSONL collection")
    b.add_argument("--docs", type=Path, required=True)
    b.add_argument("--out", type=Path, required=True)
    b.add_argument("--limit", type=int)
    r = sub.add_parser("run", help="a TREC run of pya0 over evaluation topics")
    r.add_argument("--index", type=Path, required=True)
    r.add_argument("--topics", type=Path, required=True)
    r.add_argument("--k", type=int, default=1000)
    r.add_argument("--output", type=Path, required=True)
    r.add_argument("--max-formulas", type=int, default=0, help="keep at most N query formulas (0: all)")
    r.add_argument("--max-keywords", type=int, default=0, help="keep at most N keyword terms, the rarest (0: all)")
    r.add_argument("--df-index", type=Path, help="a MathScout index whose text lists give term document frequencies")
    args = parser.parse_args(argv)
    if args.command == "build":
        manifest = build_or_reuse(args.docs, args.out, limit=args.limit)
        print(json.dumps(asdict(manifest), indent=2))
    else:
        write_run(args.index, args.topics, args.k, args.output, args.max_formulas, args.max_keywords, args.df_index)


def write_run(
    index: Path,
    topics_path: Path,
    k: int,
    output: Path,
    max_formulas: int = 0,
    max_keywords: int = 0,
    df_index: Path | None = None,
) -> None:
    """Run pya0 over topics and write a TREC run (tag `pya0`); prints mean latency. With `max_keywords`, the
    rarest terms are kept (document frequencies from a MathScout index's text lists, else query order)."""
    from mathscout.evaluation.runs import encode_doc_id
    from mathscout.evaluation.topics import load_topics

    df = None
    if df_index is not None:
        from mathscout.index.layout import IndexDir
        from mathscout.structure.text_lists import TextLists

        df = TextLists.open(IndexDir(df_index).component_path("structure"))
    searcher = Pya0Searcher(index)
    topics = load_topics(topics_path)
    latencies = []
    with open(output, "w", encoding="utf-8") as out:
        for topic in topics:
            formulas, keywords = topic_query(topic)
            terms = [t for text in keywords for t in word_terms(text)]
            terms = list(dict.fromkeys(terms))
            if max_formulas:
                formulas = formulas[:max_formulas]
            if max_keywords:
                if df is not None:
                    terms = sorted(terms, key=lambda t: df.df(t) or 10**9)
                terms = terms[:max_keywords]
            t0 = time.perf_counter()
            hits = searcher.search(formulas, terms, k)
            latencies.append(time.perf_counter() - t0)
            for rank, hit in enumerate(hits, 1):
                out.write(f"{topic.id} Q0 {encode_doc_id(hit.doc_id)} {rank} {hit.score:.4f} pya0\n")
    mean = 1000 * sum(latencies) / max(len(latencies), 1)
    print(f"{len(topics)} topics, mean {mean:.1f} ms per query, run written to {output}")


if __name__ == "__main__":
    main()
