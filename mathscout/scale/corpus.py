"""Scale corpora: a collection F times the size of a real one, made of variants of its documents.

Copy 0 is the real collection unchanged; copy c ≥ 1 re-reads it (streaming, one document at a time) and
writes for each document a *variant*:

- its sentences, a share of them (RECOMBINE) replaced by sentences (with their formulas) of recent documents
  of the same source, kind and tags (a bounded pool per group: POOL_DOCS documents);
- every formula's variables renamed by one permutation per document (Latin letters among themselves, same
  case; command names, `\\text{…}`-like arguments and environment names untouched), so the document stays
  consistent and formulas keep their structure but change symbols;
- a new id `<id>~<c>` (and thread id, if any).

Everything is seeded by (copy, document ordinal) through SHA-256, so the output is the same on every run.
What it cannot imitate: new vocabulary (words and token paths only recombine: no Heaps'-law growth of the
dictionaries), new formula structures, real topic drift, and the length distribution of a different site.
"""

from __future__ import annotations

import gzip
import hashlib
import html
import json
import random
import re
from collections import OrderedDict, deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from mathscout.corpus.jsonl import open_maybe_gzip
from mathscout.corpus.math_spans import find_math

POOL_DOCS = 64  # documents kept per (source, kind, tags) group for recombination
POOL_GROUPS = 256  # groups kept (least recently used dropped): bounded memory whatever the corpus
RECOMBINE = 0.3  # share of a variant's sentences taken from other documents of its group
_COMMAND = re.compile(r"\\(?:[A-Za-z]+|.)")
_LETTER = re.compile(r"[A-Za-z]")
_VERBATIM = {
    "text",
    "textrm",
    "textbf",
    "textit",
    "mathrm",
    "operatorname",
    "mbox",
    "begin",
    "end",
    "label",
    "ref",
    "tag",
    "hbox",
    "textsf",
    "texttt",
    "mathtt",
    "DeclareMathOperator",
    "newcommand",
    "renewcommand",
    "color",
}
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n{2,}")


@dataclass(frozen=True)
class ScaleReport:
    """What one scale corpus holds."""

    factor: int
    documents: int
    jsonl: Path
    xml: Path | None


def _seed(*parts: object) -> int:
    return int.from_bytes(hashlib.sha256("\x1f".join(map(str, parts)).encode("utf-8")).digest()[:8], "little")


def rename_variables(latex: str, mapping: dict[str, str]) -> str:
    """`latex` with every variable letter mapped (commands and verbatim arguments kept)."""
    out, at, n = [], 0, len(latex)
    while at < n:
        command = _COMMAND.match(latex, at)
        if command:
            out.append(command.group())
            at = command.end()
            name = command.group()[1:]
            if name in _VERBATIM:
                while at < n and latex[at] == " ":
                    out.append(" ")
                    at += 1
                if at < n and latex[at] == "{":  # copy the braced argument as it is
                    depth, start = 0, at
                    while at < n:
                        if latex[at] == "{":
                            depth += 1
                        elif latex[at] == "}":
                            depth -= 1
                            if depth == 0:
                                at += 1
                                break
                        at += 1
                    out.append(latex[start:at])
            continue
        ch = latex[at]
        out.append(mapping.get(ch, ch) if _LETTER.match(ch) else ch)
        at += 1
    return "".join(out)


def letter_permutation(rng: random.Random) -> dict[str, str]:
    lower = list("abcdefghijklmnopqrstuvwxyz")
    upper = list("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    new_lower, new_upper = lower[:], upper[:]
    rng.shuffle(new_lower)
    rng.shuffle(new_upper)
    return dict(zip(lower + upper, new_lower + new_upper))


def split_sentences(text: str) -> list[str]:
    """Sentences (with their formulas whole): split after . ! ? or at blank lines, never inside math."""
    spans = find_math(text)
    inside = [(s.start, s.end) for s in spans]
    pieces, start, k = [], 0, 0
    for m in _SENTENCE_END.finditer(text):
        while k < len(inside) and inside[k][1] <= m.start():
            k += 1
        if k < len(inside) and inside[k][0] < m.end() and m.start() < inside[k][1]:
            continue  # the break falls inside a formula
        piece = text[start : m.start()]
        if piece.strip():
            pieces.append(piece + m.group())
        start = m.end()
    if text[start:].strip():
        pieces.append(text[start:])
    return pieces


def rename_math(text: str, mapping: dict[str, str]) -> str:
    """`text` with the variables of every formula renamed (the words untouched)."""
    out, at = [], 0
    for span in find_math(text):
        out.append(text[at : span.start])
        out.append(rename_variables(text[span.start : span.end], mapping))
        at = span.end
    out.append(text[at:])
    return "".join(out)


class _Pools:
    """Recent documents' sentences per (source, kind, tags): POOL_DOCS per group, POOL_GROUPS groups."""

    def __init__(self):
        self.groups: OrderedDict[tuple, deque] = OrderedDict()

    def get(self, key: tuple) -> deque:
        pool = self.groups.get(key)
        if pool is None:
            pool = self.groups[key] = deque(maxlen=POOL_DOCS)
            if len(self.groups) > POOL_GROUPS:
                self.groups.popitem(last=False)
        self.groups.move_to_end(key)
        return pool


def variant(record: dict, copy: int, ordinal: int, pools: _Pools) -> dict:
    """A variant of one JSONL record for copy `copy` (see the module's docstring)."""
    rng = random.Random(_seed(copy, ordinal, record.get("id")))
    key = (record.get("source"), record.get("kind"), tuple(record.get("tags") or ()))
    pool = pools.get(key)
    sentences = split_sentences(record["text"])
    mixed = []
    for sentence in sentences:
        if pool and rng.random() < RECOMBINE:
            donor = pool[rng.randrange(len(pool))]
            mixed.append(donor[rng.randrange(len(donor))])
        else:
            mixed.append(sentence)
    if sentences:
        pool.append(sentences)
    text = rename_math("".join(mixed) or record["text"], letter_permutation(rng))
    out = dict(record)
    out["id"] = f"{record['id']}~{copy}"
    out["text"] = text
    if out.get("thread_id") not in (None, ""):
        out["thread_id"] = f"{record['thread_id']}~{copy}"
    return out


def _records(source: Path) -> Iterator[dict]:
    with open_maybe_gzip(source, "rt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def scale_records(source: Path, factor: int) -> Iterator[dict]:
    """The records of a `factor`× corpus: the real ones, then factor − 1 passes of variants."""
    yield from _records(source)
    for copy in range(1, factor):
        pools = _Pools()
        for ordinal, record in enumerate(_records(source)):
            yield variant(record, copy, ordinal, pools)


def _post_body(text: str) -> str:
    """Plain text with math → Math StackExchange HTML (paragraphs; formulas in math-container spans)."""
    out, at = [], 0
    for span in find_math(text):
        out.append(html.escape(text[at : span.start], quote=False))
        out.append(f'<span class="math-container">{html.escape(text[span.start : span.end], quote=False)}</span>')
        at = span.end
    out.append(html.escape(text[at:], quote=False))
    return "".join(f"<p>{p}</p>" for p in "".join(out).split("\n\n") if p.strip())


def _attr(value: str) -> str:
    return html.escape(value, quote=True).replace("\n", "&#xA;")


def write_scale_corpus(source: Path, factor: int, output: Path, xml: bool = False) -> ScaleReport:
    """Write the `factor`× corpus as `scale-<F>x.jsonl.gz` (and `scale-<F>x.Posts.xml`) in `output`, streaming."""
    output.mkdir(parents=True, exist_ok=True)
    jsonl = output / f"scale-{factor}x.jsonl.gz"
    xml_path = output / f"scale-{factor}x.Posts.xml" if xml else None
    partial = jsonl.with_name(jsonl.name + ".partial")
    xml_partial = xml_path.with_name(xml_path.name + ".partial") if xml_path else None
    documents = 0
    with gzip.open(partial, "wt", encoding="utf-8", compresslevel=3) as out:
        posts = open(xml_partial, "w", encoding="utf-8") if xml_partial else None  # noqa: SIM115 — closed in the finally
        try:
            if posts:
                posts.write('<?xml version="1.0" encoding="utf-8"?>\n<posts>\n')
            for record in scale_records(source, factor):
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
                documents += 1
                if posts:
                    thread = str(record.get("thread_id") or f"t{record['id']}")
                    tags = "".join(f"<{t}>" for t in record.get("tags") or ())
                    # one question row per answer (a thread's repeated rows carry the same title): no set of seen threads
                    posts.write(
                        f'  <row Id="{_attr("q" + thread)}" PostTypeId="1" Title="{_attr(record.get("title") or "")}" '
                        f'Tags="{_attr(tags)}" Body="" />\n'
                    )
                    posts.write(
                        f'  <row Id="{_attr(str(record["id"]))}" PostTypeId="2" ParentId="{_attr("q" + thread)}" '
                        f'Score="{int(record.get("score") or 0)}" Body="{_attr(_post_body(record["text"]))}" />\n'
                    )
            if posts:
                posts.write("</posts>\n")
        finally:
            if posts:
                posts.close()
    partial.replace(jsonl)
    if xml_partial:
        assert xml_path is not None  # the partial file's name is made from it
        xml_partial.replace(xml_path)
    return ScaleReport(factor, documents, jsonl, xml_path)
