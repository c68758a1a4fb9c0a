"""HTML post bodies (Math StackExchange / ARQMath) → plain text with math kept as `$…$`."""

from __future__ import annotations

import html
import re

_BLOCK_TAGS = {"p", "div", "br", "li", "ul", "ol", "pre", "blockquote", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "hr"}


# A tag: `<name attrs>` or `</name>`; quoted attribute values may not hold `<` or `>`, so a match attempt never
# runs past the next `<` or `>` and the whole scan stays linear (the standard library's HTMLParser rescans to
# the end of the input for every unterminated `<a href='`, which is quadratic).
_TAG = re.compile(r"""<(/?)([A-Za-z][A-Za-z0-9:-]*)((?:[^<>"']|"[^"<>]*"|'[^'<>]*')*)>""")
_CLASS = re.compile(r"""\bclass\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""", re.I)
_RAW_TEXT = {"script", "style"}  # contents are data up to the matching end tag


class _TextExtractor:
    """One linear pass over an HTML fragment: text, block breaks and math-container spans."""

    def __init__(self, html: str) -> None:
        self.html = html
        self.parts: list[str] = []
        self._math_depth = 0  # >0 while inside <span class="math-container">
        self._math_parts: list[str] = []
        self._span_stack: list[bool] = []

    def run(self) -> None:
        html, pos, n = self.html, 0, len(self.html)
        while pos < n:
            lt = html.find("<", pos)
            if lt < 0:
                self.data(html[pos:])
                break
            if lt > pos:
                self.data(html[pos:lt])
            pos = self.markup(lt)

    def markup(self, lt: int) -> int:
        """Handle what starts at `<` (a tag, comment or declaration; else a literal `<`); the next position."""
        html = self.html
        if html.startswith("<!--", lt):
            end = html.find("-->", lt + 4)
            return len(html) if end < 0 else end + 3
        if html.startswith(("<!", "<?"), lt):
            end = html.find(">", lt + 2)
            return len(html) if end < 0 else end + 1
        tag = _TAG.match(html, lt)
        if tag is None:
            self.data("<")
            return lt + 1
        name = tag.group(2).lower()
        if tag.group(1):
            self.end_tag(name)
        else:
            self.start_tag(name, tag.group(3))
            if tag.group(3).rstrip().endswith("/"):  # `<br />`: a start and an end tag, as HTMLParser reports it
                self.end_tag(name)
            elif name in _RAW_TEXT:
                close = html.lower().find(f"</{name}", tag.end())
                close = len(html) if close < 0 else close
                self.data(html[tag.end() : close], raw=True)
                return close
        return tag.end()

    def start_tag(self, tag: str, attributes: str) -> None:
        if tag == "span":
            found = _CLASS.search(attributes)
            is_math = found is not None and "math-container" in html.unescape(
                next(g for g in found.groups() if g is not None)
            )
            self._span_stack.append(is_math)
            if is_math:
                self._math_depth += 1
                if self._math_depth == 1:
                    self._math_parts = []
        elif tag in _BLOCK_TAGS and not self._math_depth:
            self.parts.append("\n")

    def end_tag(self, tag: str) -> None:
        if tag == "span" and self._span_stack:
            if self._span_stack.pop():
                self._math_depth -= 1
                if self._math_depth == 0:
                    self.parts.append(_as_math("".join(self._math_parts)))
        elif tag in _BLOCK_TAGS and not self._math_depth:
            self.parts.append("\n")

    def data(self, data: str, raw: bool = False) -> None:
        text = data if raw else html.unescape(data)
        (self._math_parts if self._math_depth else self.parts).append(text)


def _as_math(body: str) -> str:
    body = body.strip()
    if body.startswith(("$", "\\(", "\\[", "\\begin")):
        return body
    return f"${body}$" if body else ""


def html_to_text(markup: str) -> str:
    """Text of an HTML fragment: tags dropped, entities decoded, paragraphs as blank-line breaks,
    `<span class="math-container">` contents kept as `$…$` (or `$$…$$` when written so)."""
    parser = _TextExtractor(markup or "")
    parser.run()
    if parser._math_depth:  # an unclosed math span: keep what it held
        parser.parts.append(_as_math("".join(parser._math_parts)))
    lines = [line.strip() for line in "".join(parser.parts).splitlines()]
    text, blank = [], False
    for line in lines:
        if line:
            text.append(line)
            blank = False
        elif not blank and text:
            text.append("")
            blank = True
    return "\n".join(text).strip()
