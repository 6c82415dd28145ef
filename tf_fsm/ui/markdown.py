"""Agent-written Markdown as HTML a browser may show: secrets redacted first, raw HTML in the
Markdown escaped by the parser, and the HTML it makes passed through nh3 (a maintained
allow-list sanitizer), so no script, event handler or `javascript:` URL from an artifact can
run. The page's Content-Security-Policy (tf_fsm.ui.app) is a second wall, not the first."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from typing import Any

#: the tags an artifact may use: what CommonMark produces, nothing active
TAGS = {
    "a", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr",
    "li", "ol", "p", "pre", "strong", "table", "tbody", "td", "th", "thead", "tr", "ul",
}  # fmt: skip
#: links may go to the web or to mail, nowhere else (no javascript:, data:, file:)
URL_SCHEMES = {"http", "https", "mailto"}
_HEADING = re.compile(r"<(/?)h([1-6])>")  # as nh3 writes them: no attribute survives


@cache
def _parser() -> Any:
    from markdown_it import MarkdownIt

    # html=False: a <script> in the Markdown is text, not a tag
    return MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")


def to_html(text: str, redact: Callable[[str], str], top: int = 1) -> str:
    """Sanitized HTML of the Markdown `text` (redacted with `redact` first). Its headings start
    at level `top` (a `#` becomes `<h{top}>`, none deeper than h6), so that a document shown
    under a page's own heading keeps the page's outline (the page has one h1)."""
    import nh3

    html = _parser().render(redact(text))
    clean: str = nh3.clean(
        html,
        tags=TAGS,
        attributes={"a": {"href", "title"}, "td": {"align"}, "th": {"align"}},
        url_schemes=URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
    )
    if top == 1:
        return clean
    return _HEADING.sub(lambda m: f"<{m[1]}h{min(6, int(m[2]) + top - 1)}>", clean)
