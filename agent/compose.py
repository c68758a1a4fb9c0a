"""Answers from evidence: the offline planner's extractive answer, and citation checks for any answer.

Citations are `[doc-id]`; an answer may only cite documents a tool returned in this question's session.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from mathscout.corpus.math_spans import find_math
from mathscout.events import Expansion, Rewrite
from mathscout.question import Question
from mathscout.markup import document_markdown, safe_math
from mathscout.rewrite.compute import Computation
from mathscout.types import Document, Hit

CITED_PASSAGES = 3  # passages quoted in the extractive answer
ALSO_CITED = 4  # further documents listed by id
_CITATION = re.compile(r"\[([^\[\]\s,;]{1,200}(?:\s*[,;]\s*[^\[\]\s,;]{1,200})*)\](?!\()")
_MATH = re.compile(r"\$\$.+?\$\$|\$[^$\n]+\$", re.S)
_SPACES = re.compile(r"\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z$\\])")
_MARKS = re.compile(r"\*\*")
MARK_PAIR = "**"  # snippets mark query matches **like this** (mathscout.render.MARK)
SUMMARY_SOURCES = 2  # hits whose first sentence makes the opening summary
SUMMARY_SENTENCE = 220  # characters kept of each sentence
MIN_SUMMARY_SENTENCE = 30  # shorter sentences ("Almost.") are passed over when another follows


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
    """The user's or a document's words, on one line, cut to `limit`, as Markdown text."""
    return document_markdown(_one_line(text)[:limit])


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
            pieces.append(text[last:match.start()])
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


def _best_sentence(snippet: str) -> str:
    """The snippet's first whole sentence holding a marked match (`**…**`), else its first whole one of some length;
    sentences cut by the snippet's `…` at either end are passed over when another is left. Cut to SUMMARY_SENTENCE,
    never inside a formula."""
    text = _one_line(snippet)
    pieces = _sentences(text.strip("…").strip())
    whole = pieces[1 if text.startswith("…") else 0 : len(pieces) - (1 if text.endswith("…") else 0)]
    sentences = whole or pieces
    long_enough = [p for p in sentences if len(_MARKS.sub("", p)) >= MIN_SUMMARY_SENTENCE] or sentences or [""]
    sentence = _MARKS.sub("", next((p for p in long_enough if MARK_PAIR in p), long_enough[0]))
    if not whole and text.startswith("…") and sentence:
        sentence = "…" + sentence  # only a cut sentence was there: say so
    if len(sentence) > SUMMARY_SENTENCE:
        sentence = _cut_outside_math(sentence, SUMMARY_SENTENCE)
    if sentence.count("$") % 2:  # a lone `$` (a formula the snippet cut) is dropped, not left open
        sentence = sentence[: sentence.rfind("$")].rstrip() + " …"
    return sentence


def summary_line(hits: list[Hit], documents: Mapping[str, Document]) -> str:
    """One or two sentences from the best hits, each cited (extractive: the documents' own words, escaped)."""
    pieces = []
    for hit in hits[:SUMMARY_SOURCES]:
        document = documents.get(hit.doc_id)
        sentence = _best_sentence(hit.snippet or (document.text[:400] if document else ""))
        if sentence:
            pieces.append(f"{document_markdown(sentence)} {_cite(hit.doc_id)}")
    return ("**In short:** " + " — ".join(pieces)) if pieces else ""


def extractive_answer(question: Question, hits: list[Hit], documents: Mapping[str, Document],
                      rewrites: list[Rewrite], expansions: list[Expansion],
                      computation: Computation | None = None) -> str:
    """Markdown: a computed result when the question ordered one, a cited one-line summary, what was searched,
    the top passages quoted with `[doc-id]` and matched formulas, more ids."""
    opening = [computed_line(computation)] if computation is not None else []
    if not hits:
        searched = _formula_list(question.formulas) if question.formulas else f"“{_quoted(question.text, 120)}”"
        nothing = (f"No document in this index matches {searched}. Try other words, a formula written between $…$, "
                   "or another search mode.")
        return "\n\n".join([*opening, nothing])
    summary = summary_line(hits, documents)
    opening += [summary] if summary else []
    lead = []
    if question.formulas:
        lead.append(f"Documents matching {_formula_list(question.formulas)}")
        if question.kind == "mixed":
            lead[-1] += f" and “{_quoted(question.words, 120)}”"
    else:
        lead.append(f"Documents matching “{_quoted(question.text, 160)}”")
    if rewrites:
        lead.append(f"also searched as {_formula_list(r.rewritten for r in rewrites)}")
    if expansions:
        related = [t for e in expansions for t, _ in e.related[:2]]
        lead.append(f"types {document_markdown(', '.join(e.type for e in expansions))}"
                    + (f" (related: {document_markdown(', '.join(related[:4]))})" if related else ""))
    parts = opening + ["; ".join(lead) + ":"]
    for n, hit in enumerate(hits[:CITED_PASSAGES], start=1):
        document = documents.get(hit.doc_id)
        title = _quoted(document.title, 300) if document and document.title else ""
        line = f"{n}. " + (f"**{title}** " if title else "") + _cite(hit.doc_id)
        if hit.formulas:
            line += f" — matched formula {_formula_list(f.latex for f in hit.formulas[:2])}"
        passage = document_markdown(_one_line(hit.snippet or (document.text[:300] if document else "")), keep_marks=True)
        if passage:
            line += f"\n   > {passage}"
        parts.append(line)
    more = hits[CITED_PASSAGES : CITED_PASSAGES + ALSO_CITED]
    if more:
        parts.append("Also relevant: " + ", ".join(_cite(h.doc_id) for h in more) + ".")
    return "\n\n".join(parts)
