"""Answers from evidence: the offline planner's extractive answer, and citation checks for any answer.

Citations are `[doc-id]`; an answer may only cite documents a tool returned in this question's session.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from mathscout.corpus.math_spans import find_math
from mathscout.events import Expansion, Rewrite
from mathscout.markup import document_markdown, safe_math
from mathscout.notices import warning
from mathscout.question import Question
from mathscout.rewrite.compute import Computation
from mathscout.types import Document, Hit, Query

CITED_PASSAGES = 3  # passages quoted in the extractive answer
ALSO_CITED = 4  # further documents listed by id
_CITATION = re.compile(r"\[([^\[\]\s,;]{1,200}(?:\s*[,;]\s*[^\[\]\s,;]{1,200})*)\](?!\()")
_MATH = re.compile(r"\$\$.+?\$\$|\$[^$\n]+\$", re.S)
_SPACES = re.compile(r"\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z$\\])|\n[ \t]*\n\s*")  # a paragraph ends a sentence too
_MARKS = re.compile(r"\*\*")  # snippets mark query matches **like this** (mathscout.render.MARK)
SUMMARY_SOURCES = 2  # sentences (from as many documents) in the opening summary
SUMMARY_SENTENCE = 220  # characters kept of each sentence
MIN_SUMMARY_SENTENCE = 30  # shorter sentences ("Almost.") are passed over when another follows
# The summary's candidates and their score (`mathscout bench answers --grid` on 400 train topics of the full collection;
# benchmarks/answers.py): every whole sentence of the top SUMMARY_HITS hits' texts (their first SUMMARY_TEXT_CHARS
# characters) scores SENTENCE_WEIGHTS[scorer] × its similarity to the question + CONTEXT_WEIGHT × its document title's
# similarity + PRIOR_WEIGHT / its hit's rank; the best sentence leads. Dense similarity picks a relevant document more
# often than the top hit (train: 54.2 % against 50.8 % at 5 hits and prior 0.2; 55.2 % at 10 hits for twice the encoding).
# Lexical similarity does not: every weight on it lowers the rate (46.5 % at prior 0.3; 50.8 % only once the prior
# outweighs it), so it only orders the sentences of one document (ties of the score): without titles the top hit leads.
# Dev, 600 topics, the hits of a bm25 + structure index: dense sentences (the default encoder, `--summary-model dense`)
# 39.2 % against the top hit's 36.3 % (McNemar p = 0.012) for +221 ms p50; lexical ones 36.3 % (the top hit's).
SUMMARY_HITS = 5
SUMMARY_TEXT_CHARS = 3000
PRIOR_WEIGHT = 0.2
SENTENCE_WEIGHTS = {"dense": 1.0, "lexical": 0.0}  # by scorer name; a scorer not listed weighs 1
# A title says what its answer answers. Untuned (the shared collection has no titles): a title matching the question
# whole outweighs the rank prior's span over the candidates (0.2 × (1 − 1/5) = 0.16); a half match, one rank step.
CONTEXT_WEIGHT = 0.25
FORMULA_WEIGHT = (
    1.0  # lexical: structure similarity beside BM25 of the words (untuned: it orders one document's sentences)
)
SIGNAL_WEIGHTS = {"dense": 1.0, "words": 1.0, "formulas": FORMULA_WEIGHT}


def _outside_math(text: str) -> list[tuple[int, int]]:
    """Spans of `text` outside `$…$`/`$$…$$` (brackets inside math are intervals, not citations)."""
    spans, last = [], 0
    for match in _MATH.finditer(text):
        spans.append((last, match.start()))
        last = match.end()
    spans.append((last, len(text)))
    return spans


def find_citations(text: str) -> list[tuple[int, int, list[str]]]:
    """(start, end, ids) of each bracketed citation outside math: `[12]`, `[a:1, b:2]`, `[x; y]`."""
    found = []
    for start, end in _outside_math(text):
        for match in _CITATION.finditer(text, start, end):
            ids = [part.strip() for part in re.split(r"[,;]", match.group(1)) if part.strip()]
            found.append((match.start(), match.end(), ids))
    return found


def check_citations(text: str, known: Iterable[str]) -> tuple[str, list[str], list[str]]:
    """(text with invented citations removed, cited known ids in order of first use, invented ids).

    A bracket group is a citation when one of its parts is a known id, or when it is a single id-like token;
    unknown parts (ids the tools never returned) are dropped. Other brackets (`[0, 1]`, `[a]`) are left alone."""
    known = set(known)
    cited: list[str] = []
    invented: list[str] = []
    pieces, last = [], 0
    for start, end, ids in find_citations(text):
        good = [i for i in ids if i in known]
        bad = [i for i in ids if i not in known and _looks_like_id(i)]
        if not good and (not bad or len(ids) > 1):  # `[0, 1]` with no known id is an interval, not a citation
            continue
        pieces.append(text[last:start])
        if good:
            pieces.append("[" + ", ".join(good) + "]")
        last = end
        cited += [i for i in good if i not in cited]
        invented += [i for i in bad if i not in invented]
    pieces.append(text[last:])
    cleaned = "".join(pieces)
    if invented:
        cleaned = re.sub(r"[ \t]+([.,;:])", r"\1", re.sub(r"[ \t]{2,}", " ", cleaned))
    return cleaned, cited, invented


def _looks_like_id(part: str) -> bool:
    """Document-id-like tokens: digits, or names with `:`/`-`/`_` and a digit (`demo:algebra-004`, `692`)."""
    return part.isdigit() or (any(c.isdigit() for c in part) and any(c in part for c in ":-_/#"))


def _one_line(text: str) -> str:
    return re.sub(r" ([?.,!;:])", r"\1", _SPACES.sub(" ", text)).strip()


def _formula_list(latex: Iterable[str], limit: int = 3) -> str:
    return ", ".join(f"${safe_math(_one_line(f))}$" for f in list(latex)[:limit])


# `_ * | ! ~ #` are cited as they are (14 % of the shared collection's ids hold `_`, e.g. MATH's
# `math:test/counting_and_probability/1003#solution`): the page links every citation of a hit to its card
_PLAIN_ID = re.compile(r"[^\[\]\s,;()<>`\\&]{1,200}")


def _cite(doc_id: str) -> str:
    """`[doc-id]`; an id that would break the citation or make markup (brackets, spaces, `<`, a backslash) is
    shown escaped (data, not markup; not linkable)."""
    return f"[{doc_id}]" if _PLAIN_ID.fullmatch(doc_id) else document_markdown(f"[{doc_id}]")


def _quoted(text: str, limit: int) -> str:
    """The user's or a document's words, on one line, cut before `limit` outside every formula (kept whole or dropped),
    as Markdown text with its formulas as math."""
    text = _one_line(text)
    return document_markdown(text if len(text) <= limit else _cut_outside_math(text, limit))


def computed_line(computation: Computation) -> str:
    """The computed result as the answer's first line, or one line saying why there is none."""
    if computation.statement:
        return f"**Computed by SymPy:** ${safe_math(_one_line(computation.statement))}$"
    reason = document_markdown(_one_line(computation.error or "")[:200])
    return f"**Not computed** ({computation.operation}): {reason}. The passages follow."


def _formula_at(spans: list, position: int):
    """The formula span (of `find_math`) that `position` lies strictly inside, or None."""
    return next((span for span in spans if span.start < position < span.end), None)


def _sentences(text: str) -> list[str]:
    """`text` split at sentence ends outside formulas (a period inside `\\[ a^2+b^2=c^2. \\]` ends no sentence)."""
    spans, pieces, last = find_math(text), [], 0
    for match in _SENTENCE_END.finditer(text):
        if _formula_at(spans, match.start()) is None:
            pieces.append(text[last : match.start()])
            last = match.end()
    pieces.append(text[last:])
    return [p for p in pieces if p]


def _cut_outside_math(sentence: str, limit: int) -> str:
    """`sentence` cut at a space before `limit` that lies outside every formula (a formula is kept whole or dropped)."""
    cut = sentence.rfind(" ", 0, limit)
    cut = cut if cut > 0 else limit
    if (formula := _formula_at(find_math(sentence), cut)) is not None:
        cut = formula.start
    return sentence[:cut].rstrip(" ,;:") + " …"


def _clip(sentence: str, limit: int = SUMMARY_SENTENCE) -> str:
    """A sentence for the summary: cut to `limit` never inside a formula, a lone `$` (a formula a snippet cut) dropped
    rather than left open."""
    if len(sentence) > limit:
        sentence = _cut_outside_math(sentence, limit)
    if sentence.count("$") % 2:
        sentence = sentence[: sentence.rfind("$")].rstrip() + " …"
    return sentence


@dataclass
class Candidate:
    """A sentence that may open the summary: its hit's document and rank (from 1), its place among the hit's sentences,
    the sentence as shown, and what a scorer measured of it against the question (`signals`, each in [0, 1])."""

    doc_id: str
    rank: int
    position: int
    sentence: str
    title: str = ""  # its document's title when the text does not start with it (Document.missing_title)
    signals: dict[str, float] = field(default_factory=dict)
    context: float = 0.0  # its title's similarity to the question (0 without a title)

    def similarity(self, weights: Mapping[str, float] | None = None) -> float:
        """The weighted mean of the sentence's signals (0 without any)."""
        weights = SIGNAL_WEIGHTS if weights is None else weights
        total = sum(weights.get(name, 1.0) for name in self.signals)
        return sum(weights.get(name, 1.0) * value for name, value in self.signals.items()) / total if total else 0.0

    def score(
        self,
        sentence_weight: float = 1.0,
        prior_weight: float = PRIOR_WEIGHT,
        context_weight: float = CONTEXT_WEIGHT,
        weights: Mapping[str, float] | None = None,
    ) -> float:
        """The sentence's similarity, its title's and its hit's rank prior (prior_weight / rank), weighted."""
        return sentence_weight * self.similarity(weights) + context_weight * self.context + prior_weight / self.rank


def _hit_sentences(hit: Hit, document: Document | None) -> list[str]:
    """The whole sentences of a hit, one line each, as the summary shows them: of its document's text (the first
    SUMMARY_TEXT_CHARS characters; paragraphs end sentences too), else of its snippet (marks removed; sentences the
    snippet's `…` cut are passed over when another is left, else shown with `…`). Sentences under
    MIN_SUMMARY_SENTENCE characters are passed over when a longer one is left."""
    if document is not None and document.text.strip():
        text = document.text[:SUMMARY_TEXT_CHARS]
        pieces = [_one_line(p) for p in _sentences(text)]
        sentences = (
            pieces[:-1] if len(document.text) > len(text) and len(pieces) > 1 else pieces
        )  # the last one was cut
    else:
        text = _one_line(_MARKS.sub("", hit.snippet))
        pieces = _sentences(text.strip("…").strip())
        sentences = pieces[1 if text.startswith("…") else 0 : len(pieces) - (1 if text.endswith("…") else 0)]
        if not sentences and pieces:  # only cut sentences were there: say so
            sentences = [("…" if text.startswith("…") else "") + pieces[0]]
    sentences = [s for s in sentences if s.strip()]
    long_enough = [s for s in sentences if len(s) >= MIN_SUMMARY_SENTENCE] or sentences
    return [_clip(s) for s in long_enough]


def summary_candidates(
    hits: list[Hit], documents: Mapping[str, Document], depth: int = SUMMARY_HITS
) -> list[Candidate]:
    """The sentences of the top `depth` hits, unscored, each with its document's title."""
    candidates = []
    for rank, hit in enumerate(hits[:depth], start=1):
        document = documents.get(hit.doc_id)
        title = _one_line(document.missing_title()) if document is not None else ""
        candidates += [
            Candidate(hit.doc_id, rank, position, sentence, title)
            for position, sentence in enumerate(_hit_sentences(hit, document))
        ]
    return candidates


def score_candidates(
    question: Question, candidates: list[Candidate], scorer: SentenceScorer, notices: list[str] | None = None
) -> None:
    """Each candidate's signals against the question and its title's similarity (a title says what its answer answers;
    a document without one gets 0). A scorer that fails leaves the
    candidates unscored (the hits' order decides) and says why in `notices` (else as a notice): the answer goes on."""
    titles = sorted({c.title for c in candidates if c.title})
    try:
        rows = scorer.signals(question, [c.sentence for c in candidates])
        title_rows = scorer.signals(question, titles) if titles else []
    except Exception as exc:  # noqa: BLE001 — a broken model must not end the answer
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        message = (
            f"The summary's {scorer.name} sentence scores failed ({reason}): the best hits' first sentences are quoted."
        )
        warning(message) if notices is None else notices.append(message)
        return
    similarity = {title: Candidate("", 1, 0, title, signals=row).similarity() for title, row in zip(titles, title_rows)}
    for candidate, signals in zip(candidates, rows):
        candidate.signals = signals
        candidate.context = similarity.get(candidate.title, 0.0)


def choose_summary(
    candidates: list[Candidate],
    sentence_weight: float = 1.0,
    prior_weight: float = PRIOR_WEIGHT,
    context_weight: float = CONTEXT_WEIGHT,
    weights: Mapping[str, float] | None = None,
    sources: int = SUMMARY_SOURCES,
) -> list[Candidate]:
    """The best-scoring sentence, then the best one of each further document, up to `sources`; ties go to the more
    similar sentence, then to the better hit, then to the earlier sentence."""
    ordered = sorted(
        candidates,
        key=lambda c: (
            -c.score(sentence_weight, prior_weight, context_weight, weights),
            -c.similarity(weights),
            c.rank,
            c.position,
        ),
    )
    chosen: list[Candidate] = []
    for candidate in ordered:
        if all(c.doc_id != candidate.doc_id for c in chosen):
            chosen.append(candidate)
        if len(chosen) == sources:
            break
    return chosen


def summary_line(
    hits: list[Hit],
    documents: Mapping[str, Document],
    question: Question | None = None,
    scorer: SentenceScorer | None = None,
    notices: list[str] | None = None,
) -> str:
    """One or two sentences from the top hits that answer the question best (with a scorer; else the best hits'
    first sentences), each cited (extractive: the documents' own words, escaped)."""
    candidates = summary_candidates(hits, documents)
    if question is not None and scorer is not None and candidates:
        score_candidates(question, candidates, scorer, notices)
    weight = SENTENCE_WEIGHTS.get(scorer.name, 1.0) if scorer is not None else 1.0
    pieces = [f"{document_markdown(c.sentence)} {_cite(c.doc_id)}" for c in choose_summary(candidates, weight)]
    return ("**In short:** " + " — ".join(pieces)) if pieces else ""


# --- sentence scorers: the strongest local model the index has ----------------------------------------------------


class SentenceScorer(Protocol):
    name: str

    def signals(self, question: Question, sentences: list[str]) -> list[dict[str, float]]:
        """For each sentence, named measures of how well it matches the question, each in [0, 1]."""


class DenseSentences:
    """Cosine of the question and each sentence under the index's dense encoder (the bi-encoder's inner product of
    normalised vectors, Zhong 2023 thesis §5.2.2): the question as a query, each sentence as a passage."""

    name = "dense"

    def __init__(self, encoder):
        self.encoder = encoder

    def signals(self, question: Question, sentences: list[str]) -> list[dict[str, float]]:
        from mathscout.dense.model import model_input_text
        from mathscout.retrievers.dense import query_vectors

        query = query_vectors(self.encoder, [Query(id="question", text=question.text)])[0]
        query = query / max(float(np.linalg.norm(query)), 1e-12)
        vectors = self.encoder.encode_texts([model_input_text(s) for s in sentences])
        return [{"dense": max(0.0, float(v))} for v in vectors @ query]


class _SentenceTitles:
    """Sentences offered to `TitleScorer` as the short texts it scores (ids: their positions)."""

    def __init__(self, sentences: list[str]):
        self.sentences = sentences

    def title_sample(self, n: int) -> list[str]:
        return self.sentences[:n]

    def titles(self, doc_ids: Iterable[str]) -> dict[str, str]:
        return {i: self.sentences[int(i)] for i in doc_ids}


class LexicalSentences:
    """Without dense vectors: Okapi BM25 of the question (words and math tokens) over each sentence alone
    (Zhong 2023 thesis Eq. 2.2 with the index's idf, as `TitleScorer` scores titles), scaled by the question's own, and the
    structure similarity of the question's formulas to the sentence's (Zhong 2023 thesis Eq. 3.16 with the index's
    path idf, as structure search highlights a match), scaled by each formula's similarity to itself."""

    name = "lexical"

    def __init__(self, bm25=None, structure=None):
        self.bm25, self.structure = bm25, structure

    def signals(self, question: Question, sentences: list[str]) -> list[dict[str, float]]:
        rows: list[dict[str, float]] = [{} for _ in sentences]
        if self.bm25 is not None:
            from mathscout.retrievers.title_bm25 import TitleScorer

            texts = [*sentences, question.text]  # the question's own score as a text of these: the scale's 1
            ids = [str(n) for n in range(len(texts))]
            scores = TitleScorer(_SentenceTitles(texts), self.bm25).scores(
                Query(id="question", text=question.text), ids
            )
            own = scores.get(ids[-1], 0.0)
            for row, i in zip(rows, ids):
                row["words"] = min(1.0, scores.get(i, 0.0) / own) if own > 0 else 0.0
        if self.structure is not None and question.formulas:
            for row, value in zip(rows, self._formula_similarities(question.formulas, sentences)):
                row["formulas"] = value
        return rows

    def _formula_similarities(self, formulas: list[str], sentences: list[str]) -> list[float]:
        """Per sentence: the mean over the question's formulas of its best match among the sentence's formulas."""
        from mathscout.latex.tokens import query_formulas
        from mathscout.structure.parser import parse_latex
        from mathscout.structure.paths import leaf_count, path_prefixes
        from mathscout.structure.scoring import MAX_FORMULA_LEAVES, formula_similarity

        lexer, eta = self.structure.searcher.lexer, self.structure.searcher.eta
        idf = functools.lru_cache(maxsize=None)(
            self.structure.highlight_idf
        )  # a path's weight, looked up once per answer
        parsed: dict[str, tuple | None] = {}

        def document_side(latex: str):
            """(tree, prefixes, leaves) of a formula the structure index would hold, else None (as PathIndexWriter.add)."""
            if latex not in parsed:
                tree = parse_latex(latex, lexer).tree
                leaves = leaf_count(tree) if tree is not None else 0
                prefixes = (
                    path_prefixes(tree, wildcard_paths=True)
                    if tree is not None and leaves <= MAX_FORMULA_LEAVES
                    else []
                )
                parsed[latex] = (tree, prefixes, leaves) if prefixes else None
            return parsed[latex]

        queries = []
        for latex in formulas:
            own = document_side(latex)
            if own is not None:
                best = formula_similarity(path_prefixes(own[0]), own[1], own[2], idf=idf, eta=eta)
                if best is not None and best.score > 0:
                    queries.append((path_prefixes(own[0]), best.score))
        values = []
        for sentence in sentences:
            sides = [
                side for span in query_formulas(sentence) if (side := document_side(span.latex.strip())) is not None
            ]
            total = 0.0
            for prefixes, own_score in queries:
                matches = [formula_similarity(prefixes, side[1], side[2], idf=idf, eta=eta) for side in sides]
                total += min(1.0, max((m.score for m in matches if m is not None), default=0.0) / own_score)
            values.append(total / len(queries) if queries else 0.0)
        return values


def extractive_answer(
    question: Question,
    hits: list[Hit],
    documents: Mapping[str, Document],
    rewrites: list[Rewrite],
    expansions: list[Expansion],
    computation: Computation | None = None,
    scorer: SentenceScorer | None = None,
    notices: list[str] | None = None,
) -> str:
    """Markdown: a computed result when the question ordered one, a cited one-line summary (the sentences of the top
    hits that `scorer` finds answer the question best), what was searched (the question echoed with its formulas),
    the top passages quoted with `[doc-id]` and matched formulas, more ids."""
    opening = [computed_line(computation)] if computation is not None else []
    if not hits:
        searched = _formula_list(question.formulas) if question.formulas else f"“{_quoted(question.text, 120)}”"
        nothing = (  # `$…$` as code: the answer is Markdown whose `$…$` are formulas (the page renders them)
            f"No document in this index matches {searched}. Try other words, a formula written between dollar signs "
            "(`$…$`), or another search mode."
        )
        return "\n\n".join([*opening, nothing])
    summary = summary_line(hits, documents, question, scorer, notices)
    opening += [summary] if summary else []
    lead = []
    if question.kind == "formula":
        lead.append(f"Documents matching {_formula_list(question.formulas)}")
    else:  # the question as asked, its formulas kept (its words alone read "solutions of?")
        lead.append(f"Documents matching “{_quoted(question.text, 160)}”")
    if rewrites:
        lead.append(f"also searched as {_formula_list(r.rewritten for r in rewrites)}")
    if expansions:
        related = [t for e in expansions for t, _ in e.related[:2]]
        lead.append(
            f"types {document_markdown(', '.join(e.type for e in expansions))}"
            + (f" (related: {document_markdown(', '.join(related[:4]))})" if related else "")
        )
    parts = opening + ["; ".join(lead) + ":"]
    for n, hit in enumerate(hits[:CITED_PASSAGES], start=1):
        document = documents.get(hit.doc_id)
        title = _quoted(document.title, 300) if document and document.title else ""
        line = f"{n}. " + (f"**{title}** " if title else "") + _cite(hit.doc_id)
        if hit.formulas:
            line += f" — matched formula {_formula_list(f.latex for f in hit.formulas[:2])}"
        passage = document_markdown(
            _one_line(hit.snippet or (document.text[:300] if document else "")), keep_marks=True
        )
        if passage:
            line += f"\n   > {passage}"
        parts.append(line)
    more = hits[CITED_PASSAGES : CITED_PASSAGES + ALSO_CITED]
    if more:
        parts.append("Also relevant: " + ", ".join(_cite(h.doc_id) for h in more) + ".")
    return "\n\n".join(parts)
