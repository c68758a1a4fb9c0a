"""Hit cards for the search results panel, and citation links from an answer to its cards.

Cards are plain HTML blocks (no blank lines inside, so Markdown leaves them alone); Gradio's Markdown
component renders the `$…$` / `$$…$$` math inside them with KaTeX. Matched formula parts are coloured with
`\\color`, query terms in snippets are wrapped in `<mark>`.
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from mathscout.corpus.math_spans import find_math
from mathscout.latex.tokens import lex, query_terms
from mathscout.markup import safe_math
from mathscout.render import MARK, make_snippet, match_formulas
from mathscout.retrievers.registry import available_modes, score_meanings
from mathscout.retrievers.scores import explain_score
from mathscout.structure.parser import parse_latex
from mathscout.types import Document, Hit, MatchedFormula

HIGHLIGHT_COLOUR = "#d9480f"
MAX_FORMULAS_PER_CARD = 2
MAX_RENDERED_FORMULA = 400  # longer formulas are shown as source with the matched parts marked
FULL_TEXT_CHARS = 1_500

_THREAD = re.compile(r"^(?P<prefix>\w+):(?P<site>[a-z0-9.-]+\.[a-z]{2,}):(?P<qid>\d+)$")
_POST_ID = re.compile(r"^(?:\w+:)?(?P<n>\d+)$")
_CITATION = re.compile(r"\[([^\[\]\n]{1,300})\](?!\()")
_SAFE_ATOM = re.compile(r"^(?:[A-Za-z0-9.]+|[-+=<>*/!|]|\\[A-Za-z]+)$")
# A coloured token keeps its spacing class: `{\color{…}+}` alone would be an ordinary symbol ("a+b" cramped).
_BINARY = frozenset(
    "+ - * \\pm \\mp \\times \\cdot \\div \\cup \\cap \\circ \\oplus \\otimes \\wedge \\vee \\setminus".split()
)
_RELATION = frozenset(
    """= < > \\le \\leq \\ge \\geq \\ne \\neq \\approx \\equiv \\sim \\simeq \\cong \\to
    \\rightarrow \\leftarrow \\Rightarrow \\Leftarrow \\iff \\implies \\in \\notin \\subset \\subseteq \\supset
    \\supseteq \\mid \\propto \\mapsto \\ll \\gg \\perp \\leftrightarrow \\Leftrightarrow""".split()
)
_OPERATOR_WITH_LIMITS = frozenset(
    """\\sum \\prod \\coprod \\lim \\limsup \\liminf \\max \\min \\sup \\inf \\bigcup
    \\bigcap \\det \\gcd""".split()
)
_OPERATOR = frozenset(
    """\\int \\iint \\iiint \\oint \\sin \\cos \\tan \\cot \\sec \\csc \\log \\ln \\exp \\arcsin
    \\arccos \\arctan \\sinh \\cosh \\tanh \\arg \\deg \\dim \\ker \\lg""".split()
)
_NEEDS_ARGUMENT = frozenset(
    """frac dfrac tfrac cfrac sqrt binom dbinom tbinom text textrm textit textbf mathrm mathbf mathit mathbb
    mathcal mathscr mathfrak mathsf mathtt operatorname begin end left right big Big bigg Bigg bigl bigr
    Bigl Bigr overline underline hat bar vec tilde dot ddot widehat widetilde overrightarrow overleftarrow
    pmod bmod stackrel overset underset xrightarrow xleftarrow not color textcolor boxed displaystyle
    limits nolimits substack""".split()
)
_ALIGNMENT = re.compile(r"(?<!\\)&|\\\\")
_BRACELESS_ARGUMENT = re.compile(r"(?:[\^_]|\\[A-Za-z]+)\s*$")
_DELIMITER_SIZER = re.compile(r"\\(?:left|right|middle|[bB]igg?[lrm]?)\s*$")


def anchor(turn: int, rank: int) -> str:
    """The element id of a hit card: unique per question of the session, so old citations still work."""
    return f"hit-{turn}-{rank}"


def _markdown_text(text: str) -> str:
    return re.sub(r"([\\`*_\[\]|#<>])", r"\\\1", text)


def link_citations(text: str, hits: Sequence[Hit], turn: int) -> str:
    """Turn `[doc-id]` (and `[id1, id2]`) citations of hits into links to their cards."""
    ranks = {h.doc_id: h.rank for h in hits}

    def link(doc_id: str) -> str:
        return f"[{_markdown_text(doc_id)}](#{anchor(turn, ranks[doc_id])})"

    def replace(match: re.Match) -> str:
        ids = [part.strip() for part in re.split(r"[,;]", match.group(1))]
        if not ids or not all(i in ranks for i in ids):
            return match.group(0)
        return "[" + ", ".join(link(i) for i in ids) + "]"

    return _CITATION.sub(replace, text)


def original_url(document: Document) -> str | None:
    """A link to where the document was published, when its metadata tells: an explicit `url`, or a Stack
    Exchange thread id (`mse:math.stackexchange.com:154`) — the answer itself when the document id is its
    post id (answer ids are larger than their question's id), else the question thread."""
    url = document.metadata.get("url")
    if isinstance(url, str) and url.startswith(("http://", "https://")):
        return url
    thread = _THREAD.match(str(document.metadata.get("thread_id") or ""))
    if not thread:
        return None
    site, question = thread["site"], int(thread["qid"])
    post = _POST_ID.match(document.id)
    if post and int(post["n"]) > question:
        return f"https://{site}/a/{post['n']}"
    return f"https://{site}/q/{question}"


def source_label(document: Document) -> str:
    """Where a document comes from, in a few words (site, source collection or demo area)."""
    meta = document.metadata
    thread = _THREAD.match(str(meta.get("thread_id") or ""))
    if thread:
        return thread["site"]
    if meta.get("area"):
        return f"demo corpus · {meta['area']}"
    source = str(meta.get("source") or "")
    return source.split("/")[0] if source else (document.id.split(":")[0] if ":" in document.id else "")


def title_of(document: Document, limit: int = 110) -> str:
    """The document's title, or its first line (encyclopedia entries) / first words, cut at a word before `limit`
    characters but never inside a formula (a cut formula cannot be rendered): a formula the cut would fall in is kept
    whole when it ends within half as much again, else left out (kept when the title starts with it)."""
    title = " ".join((document.title or document.text.strip().split("\n", 1)[0]).split())
    if len(title) <= limit:
        return title
    cut = title.rfind(" ", 0, limit)
    cut = cut if cut > limit // 2 else limit
    for span in find_math(title):
        if span.start < cut < span.end or span.start < limit < span.end:  # the cut or the limit falls in it
            cut = (
                span.end if span.end <= limit * 3 // 2 else (span.start or (span.end if span.end <= 3 * limit else cut))
            )
            break
    return title[:cut].rstrip() + " …"


def _plain_html(text: str) -> str:
    """Text outside formulas as HTML: escaped, and every `$` written `&#36;` in an element of its own, where neither the
    page's Markdown (which takes `$…$` in the source for math) nor KaTeX's auto-render (one text node at a time) can
    pair it with another: a price ("$10 or $16") stays text."""
    return html.escape(text, quote=False).replace("$", '<span class="ms-dollar">&#36;</span>')


def math_text_html(text: str) -> str:
    """Text with formulas as HTML for the results panel: its formulas (`find_math`'s, under any delimiter) as `$…$` on
    one line, made safe (`mathscout.markup.safe_math`), which KaTeX renders as in the snippets; the rest escaped text."""
    pieces, position = [], 0
    for span in find_math(text):
        latex = safe_math(" ".join(span.latex.split()))
        pieces += [_plain_html(text[position : span.start]), f"${html.escape(latex, quote=False)}$"]
        position = span.end
    pieces.append(_plain_html(text[position:]))
    return "".join(pieces)


def title_html(document: Document) -> str:
    """The card's title (`title_of`) with its formulas rendered (`math_text_html`)."""
    return math_text_html(title_of(document))


def _safe_to_colour(latex: str, start: int, end: int) -> bool:
    raw = latex[start:end]
    if not _SAFE_ATOM.match(raw) or _DELIMITER_SIZER.search(latex[:start]):
        return False
    if raw.startswith("\\") and raw[1:] in _NEEDS_ARGUMENT:
        return False
    # `x^22` is x² 2 and `\frac12` is ½: colouring "22" or "12" whole would change the formula
    return not (len(raw) > 1 and not raw.startswith("\\") and _BRACELESS_ARGUMENT.search(latex[:start]))


def _coloured(token: str) -> str:
    coloured = f"{{\\color{{{HIGHLIGHT_COLOUR}}}{token}}}"
    if token in _BINARY:
        return f"\\mathbin{coloured}"
    if token in _RELATION:
        return f"\\mathrel{coloured}"
    if token in _OPERATOR_WITH_LIMITS:
        return f"\\mathop{coloured}"
    if token in _OPERATOR:
        return f"\\mathop{coloured}\\nolimits"
    return coloured


def coloured_latex(latex: str, spans: Sequence[tuple[int, int]]) -> str | None:
    """`latex` with the tokens inside `spans` coloured, or None when that cannot be done safely."""
    if not spans:
        return latex
    inside = [t for t in lex(latex) if not t.is_word and any(s <= t.start and t.end <= e for s, e in spans)]
    pieces, position, coloured = [], 0, 0
    for token in sorted(inside, key=lambda t: t.start):
        if token.start < position or not _safe_to_colour(latex, token.start, token.end):
            continue
        pieces += [latex[position : token.start], _coloured(latex[token.start : token.end])]
        position, coloured = token.end, coloured + 1
    if not coloured:
        return None
    result = "".join(pieces) + latex[position:]
    original = parse_latex(latex)
    return result if parse_latex(result).complete or not original.complete else None


def _aligned(latex: str) -> str:
    """The body of an align environment (`&` or `\\\\` outside any environment) wrapped in `aligned`, which
    KaTeX renders; other formulas unchanged."""
    if _ALIGNMENT.search(latex) and "\\begin" not in latex:
        return f"\\begin{{aligned}}{latex}\\end{{aligned}}"
    return latex


def renderable_math(text: str) -> str:
    """Markdown whose `$…$` / `$$…$$` formulas KaTeX can render: align bodies wrapped, formulas on one line."""
    pieces, position = [], 0
    for span in find_math(text):
        if text[span.start] != "$":
            continue
        fence = "$$" if span.display else "$"
        pieces += [text[position : span.start], fence, _aligned(" ".join(span.latex.split())), fence]
        position = span.end
    return "".join(pieces) + text[position:]


def _marked_source(latex: str, spans: Sequence[tuple[int, int]]) -> str:
    pieces, position = [], 0
    for start, end in sorted(spans):
        if start >= position:
            pieces += [html.escape(latex[position:start]), "<mark>", html.escape(latex[start:end]), "</mark>"]
            position = end
    pieces.append(html.escape(latex[position:]))
    return '<code class="ms-latex">' + " ".join("".join(pieces).split()) + "</code>"


def formula_html(matched: MatchedFormula) -> str:
    """A matched formula, rendered with its matched part coloured (or as marked-up source).

    The highlight spans index the formula as stored, so whitespace is collapsed only afterwards."""
    latex, rendered = matched.latex, None
    if len(latex) <= MAX_RENDERED_FORMULA and "$" not in latex and parse_latex(latex).complete:  # else: escaped code
        rendered = coloured_latex(latex, matched.highlight) if matched.highlight else latex
    if rendered is None:
        return f'<div class="ms-formula ms-formula-source">{_marked_source(latex, matched.highlight)}</div>'
    rendered = _aligned(" ".join(rendered.split()))
    return f'<div class="ms-formula">$${html.escape(rendered, quote=False)}$$</div>'


def _snippet_html(snippet: str) -> str:
    """A `**…**`-marked snippet as HTML with `<mark>` (math inside stays for KaTeX)."""
    parts = snippet.split(MARK)
    return "".join(
        f"<mark>{html.escape(p, quote=False)}</mark>" if i % 2 else html.escape(p, quote=False)
        for i, p in enumerate(parts)
    )


def _full_text_html(document: Document) -> str:
    """The start of the document, paragraphs kept, formulas on one line (so KaTeX can read them)."""
    text, pieces, position = document.text[:FULL_TEXT_CHARS], [], 0
    for formula in sorted(document.formulas, key=lambda f: f.start):
        if formula.start < position or formula.end > len(text):
            continue
        pieces.append(_plain_html(text[position : formula.start]).replace("\n", "<br>"))
        pieces.append(html.escape(" ".join(text[formula.start : formula.end].split()), quote=False))
        position = formula.end
    rest = text[position:]
    if len(document.text) > FULL_TEXT_CHARS:
        rest = rest[: rest.rfind(" ")] if " " in rest else rest
        rest += " …"
    pieces.append(_plain_html(rest).replace("\n", "<br>"))
    return "".join(pieces)


def _score(value: float) -> str:
    return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"


@functools.cache
def score_chips() -> dict[str, tuple[str, str]]:
    """The one table of the scores a card shows as chips: a hit component's name → (its label, what it means). Each
    search mode's score, labelled as the page's mode menu names the mode (its registry label's first words: `bm25` is
    "text") and explained by the registry's `score`, and the reranker's. A hit's other components (a rewrite's form
    number, the match tier) are not scores a reader can weigh: the main score's explanation names them."""
    meanings = score_meanings()
    chips = {
        name: ((spec.label or name).split(" — ")[0], meanings.get(name) or spec.description)
        for name, spec in available_modes().items()
    }
    chips["rerank"] = ("rerank", "the reranker's score of the first stage's top hits")
    return chips


def scores_html(hit: Hit, mode: str) -> str:
    """The hit's score, explained in its tooltip, then a chip for each of its components in `score_chips()`."""
    chips = [
        f'<span class="ms-score ms-score-main" title="{html.escape(explain_score(hit))} ({html.escape(mode)})">'
        f"score {_score(hit.score)}</span>"
    ]
    shown = score_chips()
    for name, value in hit.components.items():
        if name not in shown:
            continue
        label, meaning = shown[name]
        chips.append(
            f'<span class="ms-score" title="{html.escape(meaning)}">{html.escape(label, quote=False)} {_score(value)}'
            "</span>"
        )
    return '<div class="ms-scores">' + "".join(chips) + "</div>"


@dataclass
class CardContext:
    """What every card of one answer shares: the question's terms and the answer's turn and mode."""

    question: str
    turn: int
    mode: str

    def __post_init__(self) -> None:
        self.terms = query_terms(self.question)


def hit_card(hit: Hit, document: Document | None, context: CardContext) -> str:
    """One search result as an HTML block: rank, title, id, source, link, scores, formulas, snippet."""
    card_id = anchor(context.turn, hit.rank)
    if document is None:
        return (
            f'<div class="ms-hit" id="{card_id}"><div class="ms-hit-head"><span class="ms-rank">{hit.rank}'
            f"</span> <code>{html.escape(hit.doc_id)}</code> (document not in the store)</div></div>"
        )
    url = original_url(document)
    meta = [f"<code>{html.escape(document.id)}</code>", html.escape(source_label(document))]
    if url:
        meta.append(f'<a href="{html.escape(url)}" target="_blank" rel="noopener">original post ↗</a>')
    formulas = hit.formulas or match_formulas(document, context.terms)
    snippet = hit.snippet or make_snippet(document, context.terms)
    return "".join(
        [
            f'<div class="ms-hit" id="{card_id}">',
            f'<div class="ms-hit-head"><span class="ms-rank">{hit.rank}</span> '
            f'<span class="ms-title">{title_html(document)}</span></div>',
            '<div class="ms-meta">' + " · ".join(m for m in meta if m) + "</div>",
            scores_html(hit, context.mode),
            "".join(formula_html(f) for f in formulas[:MAX_FORMULAS_PER_CARD]),
            f'<div class="ms-snippet">{_snippet_html(snippet)}</div>',
            f'<details class="ms-full"><summary>Full text</summary><div>{_full_text_html(document)}</div></details>',
            "</div>",
        ]
    )


def results_html(hits: Sequence[Hit], documents: Mapping[str, Document], context: CardContext) -> str:
    """All cards of one answer, best first."""
    if not hits:
        return '<div class="ms-empty">No documents matched. Try other words, another mode, or a simpler formula.</div>'
    return "\n".join(hit_card(h, documents.get(h.doc_id), context) for h in hits)
