"""HTML post bodies (Math StackExchange / ARQMath) → plain text with math kept as `$…$`."""

from __future__ import annotations

from html.parser import HTMLParser

_BLOCK_TAGS = {"p", "div", "br", "li", "ul", "ol", "pre", "blockquote", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "hr"}


class _TextExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._math_depth = 0  # >0 while inside <span class="math-container">
        self._math_parts: list[str] = []
        self._span_stack: list[bool] = []

    def handle_starttag(self, tag, attrs):
        if tag == "span":
            is_math = "math-container" in (dict(attrs).get("class") or "")
            self._span_stack.append(is_math)
            if is_math:
                self._math_depth += 1
                if self._math_depth == 1:
                    self._math_parts = []
        elif tag in _BLOCK_TAGS and not self._math_depth:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if tag == "span" and self._span_stack:
            if self._span_stack.pop():
                self._math_depth -= 1
                if self._math_depth == 0:
                    self.parts.append(_as_math("".join(self._math_parts)))
        elif tag in _BLOCK_TAGS and not self._math_depth:
            self.parts.append("\n")

    def handle_data(self, data):
        (self._math_parts if self._math_depth else self.parts).append(data)


def _as_math(body: str) -> str:
    body = body.strip()
    if body.startswith("$") or body.startswith("\\(") or body.startswith("\\[") or body.startswith("\\begin"):
        return body
    return f"${body}$" if body else ""


def html_to_text(html: str) -> str:
    """Text of an HTML fragment: tags dropped, entities decoded, paragraphs as blank-line breaks,
    `<span class="math-container">` contents kept as `$…$` (or `$$…$$` when written so)."""
    parser = _TextExtractor()
    parser.feed(html or "")
    parser.close()
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
