"""Text from documents is data, never markup: escaping for Markdown answers, and sanitising model answers.

Answers are Markdown with `$…$` math rendered by KaTeX. Document text (titles, passages, formulas, ids)
must not become links, images, raw HTML or autolinks there, and a model's answer — which may echo an
injected document — keeps only the links MathScout makes itself (citations to the page's own result cards).

- `document_markdown`: document text escaped for Markdown; math spans stay math (rendering), with the
  LaTeX commands that make links or load resources neutralised and Markdown link syntax broken inside them.
- `sanitize_answer`: a model's answer with images, links, raw HTML, autolinks and reference definitions
  made plain text; citations `[doc-id]` are kept (the page links them to its own cards afterwards).
"""

from __future__ import annotations

import re

from mathscout.corpus.math_spans import find_math

MARK = "**"  # highlight marks our own snippets insert (kept as Markdown bold)

# Outside math: the characters that start links, images, HTML, entities, code and escapes.
_ESCAPE_TEXT = re.compile(r"([\\`\[\]<>&!|~*_])")
_ENTITY = {"[": "&#91;", "]": "&#93;"}
# Bare links that Markdown renderers turn into live links (GFM autolink literals): break them with an escape.
_SCHEME = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]{1,20}):(?=//)")
_WWW = re.compile(r"\b(www)\.", re.I)
_EMAIL_AT = re.compile(r"(?<=[A-Za-z0-9._%+-])@(?=[A-Za-z0-9-]+\.)")
# Inside math: commands that make links, load files or attach HTML (KaTeX \href, \url, \includegraphics, \html*).
_UNSAFE_LATEX = re.compile(r"\\(href|url|includegraphics|htmlClass|htmlId|htmlStyle|htmlData|html[A-Za-z]*)\b")


def _escape_text(text: str) -> str:
    # brackets as entities: `\[` would open display math for the page's KaTeX (text either way, never a link)
    text = _ESCAPE_TEXT.sub(lambda m: _ENTITY.get(m.group(1)) or "\\" + m.group(1), text)
    text = _SCHEME.sub(r"\1\\:", text)
    text = _WWW.sub(r"\1\\.", text)
    return _EMAIL_AT.sub(r"\\@", text)


def safe_math(latex: str) -> str:
    """A formula body that renders as math and nothing else: no link or resource commands, no Markdown
    link/image/HTML syntax (`](`, `<`, `>` become `]{}(`, `\\lt`, `\\gt`, which render the same)."""
    latex = _UNSAFE_LATEX.sub(lambda m: r"\text{" + m.group(1) + "}", latex)
    latex = latex.replace("](", "]{}(").replace("<", r"\lt ").replace(">", r"\gt ")
    return latex.replace("`", r"\`")


def _math(text: str, span) -> str:
    """A math span of `text` with its delimiters, the formula made safe."""
    at = text.find(span.latex, span.start, span.end)
    if at < 0:
        return text[span.start : span.end]
    return text[span.start : at] + safe_math(span.latex) + text[at + len(span.latex) : span.end]


def _each_part(text: str, plain) -> str:
    """`plain` applied to the text outside math, each math span made safe."""
    pieces, position = [], 0
    for span in find_math(text):
        pieces += [plain(text[position : span.start]), _math(text, span)]
        position = span.end
    pieces.append(plain(text[position:]))
    return "".join(pieces)


def document_markdown(text: str, keep_marks: bool = False) -> str:
    """Document text for a Markdown answer: plain text escaped, `$…$` math kept (made safe), and — with
    `keep_marks` — MathScout's own `**…**` highlight marks kept as bold."""
    return _each_part(text, lambda plain: _escape_plain(plain, keep_marks))


def _escape_plain(text: str, keep_marks: bool) -> str:
    if not keep_marks:
        return _escape_text(text)
    return MARK.join(_escape_text(part) for part in text.split(MARK))


# --- answers ------------------------------------------------------------------------------------------------

_REF_DEFINITION = re.compile(r"^([ \t]{0,3})\[", re.M)


def sanitize_answer(text: str) -> str:
    """An answer with every image, link, raw HTML tag, autolink and reference definition made plain text;
    math (`$…$`) made safe; citations `[doc-id]` untouched."""
    return _each_part(text, _sanitize_plain)


def _sanitize_plain(text: str) -> str:
    """Break every construct that makes a link, image or HTML, whatever escapes precede it: `<` becomes the
    entity `&lt;` (no tag, comment or autolink can start), `](` becomes `]\\(` (no inline link or image),
    a line-initial `[` is escaped (no reference definition), bare URLs and e-mail addresses get an escape
    that stops autolinking. Text reads the same once rendered."""
    text = text.replace("<", "&lt;").replace("](", "]\\(")
    text = _REF_DEFINITION.sub(r"\1\\[", text)
    text = _SCHEME.sub(r"\1\\:", text)
    text = _WWW.sub(r"\1\\.", text)
    return _EMAIL_AT.sub(r"\\@", text)
