"""Readable search output: snippets around the best-matching passage, highlighted terms and formulas.

Highlights are marked `**…**` in snippets (readable as Markdown and in JSON); on a terminal they are
shown in bold colour instead.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import NamedTuple, TextIO

from mathscout.latex.tokens import formula_terms, is_math_term, lex, math_term, query_terms, word_term_spans
from mathscout.settings import settings
from mathscout.store import DocumentStore
from mathscout.terminal import printable
from mathscout.types import Document, Formula, Hit, MatchedFormula

SNIPPET_CHARS = 320
CONTEXT_BEFORE = 60  # characters shown before the first match of the chosen passage
LONG_FORMULA = 160  # longer formulas are abbreviated in snippets and formula lists
MAX_MATCHES = 5000  # matches considered when choosing the passage of a very long document
MIN_FORMULA_SCORE = 0.35  # share of the query's math weight a formula must match to count as matched
MARK = "**"

_HIGHLIGHT = re.compile(r"\*\*(.+?)\*\*", re.S)
_SPACES = re.compile(r"\s+")


class _Match(NamedTuple):
    start: int
    end: int
    terms: tuple[str, ...]
    is_formula: bool = False


def _weights(query_terms: Mapping[str, float] | Iterable[str]) -> dict[str, float]:
    if isinstance(query_terms, Mapping):
        return {t: float(w) for t, w in query_terms.items() if w > 0}
    return dict.fromkeys(query_terms, 1.0)


def _formula_score(latex: str, math_weights: Mapping[str, float], total: float) -> tuple[float, set[str]]:
    """Share of the query's math weight that the formula matches, and the matched index terms."""
    shared = set(formula_terms(latex)).intersection(math_weights)
    return (math.fsum(math_weights[t] for t in shared) / total if total else 0.0), shared


def _math_weights(weights: Mapping[str, float]) -> tuple[dict[str, float], float]:
    math_only = {t: w for t, w in weights.items() if is_math_term(t)}
    return math_only, math.fsum(math_only.values())


def match_formulas(
    document: Document, query_terms: Mapping[str, float] | Iterable[str], limit: int = 3
) -> list[MatchedFormula]:
    """The document's formulas that share math tokens with the query, best first (weights: e.g. idf)."""
    math_weights, total = _math_weights(_weights(query_terms))
    if not total:
        return []
    found: dict[str, MatchedFormula] = {}
    for formula in document.formulas:
        score, shared = _formula_score(formula.latex, math_weights, total)
        if score < MIN_FORMULA_SCORE or formula.latex in found:
            continue
        spans = [(t.start, t.end) for t in lex(formula.latex) if not t.is_word and math_term(t.text) in shared]
        found[formula.latex] = MatchedFormula(formula.id, formula.latex, round(score, 4), spans)
    return sorted(found.values(), key=lambda m: -m.score)[:limit]


def _matches(document: Document, weights: Mapping[str, float]) -> list[_Match]:
    """Spans of the text that match the query: single words, and whole formulas that match enough."""
    text, position = document.text, 0
    matches: list[_Match] = []
    math_weights, total = _math_weights(weights)

    def words(start: int, end: int) -> None:
        matches.extend(_Match(s, e, (t,)) for t, s, e in word_term_spans(text, start, end) if t in weights)

    for formula in _ordered(document):
        words(position, formula.start)
        score, shared = _formula_score(formula.latex, math_weights, total)
        if score >= MIN_FORMULA_SCORE:
            matches.append(_Match(formula.start, formula.end, tuple(sorted(shared)), True))
        position = formula.end
    words(position, len(text))
    return matches


def _ordered(document: Document) -> list[Formula]:
    """The document's formulas in text order, overlapping ones dropped."""
    kept, position = [], 0
    for formula in sorted(document.formulas, key=lambda f: f.start):
        if formula.start >= position:
            kept.append(formula)
            position = formula.end
    return kept


def _best_window(matches: list[_Match], weights: Mapping[str, float]) -> int:
    """Index of the match that starts the passage with the most (distinct, weighted) query terms."""
    best, best_score = 0, -1.0
    for i, first in enumerate(matches):
        seen: set[str] = set()
        for match in matches[i:]:
            if match.start - first.start > SNIPPET_CHARS - CONTEXT_BEFORE:
                break
            seen.update(match.terms)
        score = math.fsum(weights.get(t, 0.0) for t in seen)  # exact: the same whatever the set's order
        if score > best_score:
            best, best_score = i, score
    return best


def _shown_formula(text: str, formula: Formula) -> str:
    """The formula as written, long ones abbreviated (`$\\begin{align} … $`)."""
    span = text[formula.start : formula.end]
    if len(span) <= LONG_FORMULA:
        return span
    body = text.find(formula.latex, formula.start, formula.end)
    closing = text[body + len(formula.latex) : formula.end] if body >= 0 else ""
    return span[: LONG_FORMULA - 10].rstrip() + " …" + closing


def make_snippet(document: Document, query_terms: Mapping[str, float] | Iterable[str]) -> str:
    """About SNIPPET_CHARS characters around the passage with the most query terms, matches marked `**…**`."""
    weights = _weights(query_terms)
    text = document.text
    matches = _matches(document, weights)[:MAX_MATCHES]
    formulas = _ordered(document)
    start = 0
    if matches:
        first = matches[_best_window(matches, weights)]
        start = max(0, first.start - CONTEXT_BEFORE)
        space = text.find(" ", start, first.start)
        start = space + 1 if start > 0 and space >= 0 else start
    for f in formulas:
        if f.start < start < f.end:
            start = f.start
    matched_formulas = {(m.start, m.end) for m in matches if m.is_formula}
    words = [m for m in matches if not m.is_formula]
    pieces: list[str] = []
    budget, position = SNIPPET_CHARS, start
    upcoming = iter([f for f in formulas if f.start >= start] + [None])
    formula: Formula | None = next(upcoming)
    while position < len(text) and budget > 0:
        segment_end = formula.start if formula else len(text)
        if position < segment_end:
            cut = min(segment_end, position + budget)
            if cut < segment_end:
                space = text.rfind(" ", position, cut)
                cut = space if space > position else cut
            budget -= cut - position
            for match in words:
                if match.start >= position and match.end <= cut:
                    pieces += [text[position : match.start], MARK, text[match.start : match.end], MARK]
                    position = match.end
            pieces.append(text[position:cut])
            position = cut
            continue
        assert formula is not None  # without one the text runs to its end, taken above
        shown = _shown_formula(text, formula)
        pieces.append(MARK + shown + MARK if (formula.start, formula.end) in matched_formulas else shown)
        budget -= len(shown)
        position = formula.end
        formula = next(upcoming)
    body = _SPACES.sub(" ", "".join(pieces)).strip()
    return ("…" if start > 0 else "") + body + ("…" if position < len(text) else "")


# ---- printing ------------------------------------------------------------------------------------


class _Style:
    def __init__(self, colour: bool):
        self.colour = colour

    def __call__(self, text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.colour else text

    def highlights(self, snippet: str) -> str:
        return _HIGHLIGHT.sub(lambda m: self(m.group(1), "1;33"), snippet) if self.colour else snippet

    def formula(self, matched: MatchedFormula) -> str:
        """`$latex$` with matched tokens in colour; long formulas shown around their first match."""
        latex, spans = matched.latex, sorted(matched.highlight)
        start = max(0, spans[0][0] - 20) if spans and len(latex) > LONG_FORMULA else 0
        end = min(len(latex), start + LONG_FORMULA)
        pieces, position = [], start
        for span_start, span_end in spans if self.colour else []:
            if span_start >= position and span_end <= end:
                pieces += [printable(latex[position:span_start]), self(printable(latex[span_start:span_end]), "1;33")]
                position = span_end
        pieces.append(printable(latex[position:end]))
        shown = _SPACES.sub(" ", "".join(pieces)).strip()
        return "$" + ("… " if start else "") + shown + (" …" if end < len(latex) else "") + "$"


def explain_hits(hits: list[Hit], store: DocumentStore, query: str) -> dict[str, Document]:
    """Fill titles, and snippets/formulas that the retriever left empty; return the hits' documents."""
    documents = store.get_many(h.doc_id for h in hits)
    terms = None
    for hit in hits:
        document = documents.get(hit.doc_id)
        if document is not None:
            hit.title = document.title
        if document is None or hit.snippet:
            continue
        terms = terms if terms is not None else query_terms(query)
        hit.snippet = make_snippet(document, terms)
        hit.formulas = hit.formulas or match_formulas(document, terms)
    return documents


def score_legend(explained: str) -> tuple[str, str]:
    """An `explain_score` text split into (figures, 'NAME = MEANING'): the legend a printer says once for every hit
    whose score means the same; ('…', '') when the text has no meaning part."""
    figures, _, meaning = explained.partition(" = ")
    first_number = re.match(r"(.*?)\s+[-+]?(?:\d|\.\d|nan|inf)", figures)  # the figures' words before their number
    name = first_number.group(1).strip() if first_number else "score"
    return figures, f"{name} = {meaning}" if meaning else ""


def print_hit_records(records: list[dict], query: str, out: TextIO) -> None:
    """Print hits as the schema gives them (`mathscout.schema.hit_record(hit).to_dict()`, from this process or from
    a server's JSON)."""
    if not records:
        print(f"no results for {printable(repr(query))}", file=out)
        return
    style = _Style(out.isatty() and not settings().no_color)
    split = [
        score_legend(printable(r.get("score_explained") or f"score {r['score']:.3g}", lines=False)) for r in records
    ]
    legend = list(dict.fromkeys(meaning for _, meaning in split if meaning))
    if legend:  # what the scores mean, once (each hit then shows its figures)
        print(style("scores: " + "; ".join(legend), "2"), file=out)
        print(file=out)
    for record, (figures, _) in zip(records, split, strict=True):
        # every value is made printable before the colours are added: document text is shown, never obeyed
        title = printable(_SPACES.sub(" ", record.get("title") or "").strip(), lines=False)
        doc_id = printable(record["doc_id"], lines=False)
        header = f"{record['rank']:>3}. {style(doc_id, '1')}  {style(figures, '2')}"
        print(header + (f"  {style(title, '1;36')}" if title else ""), file=out)
        if record.get("snippet"):  # the matches in the terminal's bold colour; no marks at all when not a terminal
            marks = (record.get("marks") or []) if style.colour else []
            print(f"     {style.highlights(printable(marked_snippet(record['snippet'], marks)))}", file=out)
        formulas = [MatchedFormula(**f) for f in record.get("formulas") or []]
        if formulas:
            print("     formulas: " + "   ".join(style.formula(f) for f in formulas), file=out)
        print(file=out)


def plain_snippet(snippet: str) -> tuple[str, list[tuple[int, int]]]:
    """A snippet without its `**…**` match marks, and the marked ranges in the plain text."""
    pieces = snippet.split(MARK)
    closed = len(pieces) if len(pieces) % 2 else len(pieces) - 1  # an unpaired last mark closes nothing
    text, marks, position = [], [], 0
    for n, piece in enumerate(pieces):
        if n % 2 and n < closed and piece:
            marks.append((position, position + len(piece)))
        text.append(piece if n < closed or not n % 2 else MARK + piece)
        position += len(text[-1])
    return "".join(text), marks


def marked_snippet(snippet: str, marks: list[tuple[int, int]] | list[list[int]]) -> str:
    """The snippet with `**…**` around its marks again (the terminal's and the page's rendering)."""
    pieces, position = [], 0
    for start, end in sorted((int(a), int(b)) for a, b in marks):
        if start < position or end > len(snippet):
            continue
        pieces += [snippet[position:start], MARK, snippet[start:end], MARK]
        position = end
    pieces.append(snippet[position:])
    return "".join(pieces)
