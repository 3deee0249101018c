"""Visible HTML text as blocks, via selectolax's lexbor engine.

Why lexbor: it builds the same tree a browser does (implied end tags, misnested markup), in C, about
15x faster than the stdlib tokenizer. Its one weakness is scope scans that make block elements nested
tens of thousands deep quadratic, so, like Blink, we cap nesting depth before parsing (see
:func:`cap_nesting`). The tree is then walked with an explicit loop: no recursion, any depth.

A definition list's terms (``<dt>``) are headings one level below the heading the list is under: manuals name a
setting or a function there (``temp_buffers (integer)``, Sphinx's ``<dt class="sig">`` signatures) and describe
it in the ``<dd>``, so its description's chunks carry its name in their heading path. A term made only of links
is a table of contents' entry, not a heading; the text after a list is back under the list's own heading.
"""

from __future__ import annotations

import re

from selectolax.lexbor import LexborHTMLParser, LexborNode

from chonkit.document.parsing.blocks import BlockBuilder
from chonkit.document.parsing.html_clean import left_out_ids, walk
from chonkit.document.parsing.textcodec import decode_text

MAX_NESTING = 512
"""Blink's limit for the HTML parser's tree depth."""

_TAG = re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9-]*)(?=[\s/>])[^>]*>")
# Void elements never nest; the others may (legally) omit their end tag, so they do not deepen the tree.
_VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"})
_OPTIONAL_END = frozenset({"p", "li", "dt", "dd", "tr", "td", "th", "thead", "tbody", "tfoot", "option", "caption"})
_NOT_NESTING = _VOID | _OPTIONAL_END | {"html", "head", "body", "colgroup", "optgroup", "rb", "rt", "rp", "track"}
_SKIPPED = frozenset({"script", "style", "noscript", "template", "head", "-comment", "!doctype"})
_SECTIONING = frozenset({"article", "aside", "body", "footer", "header", "main", "nav", "section"})
_GROUPING = frozenset(
    {"address", "blockquote", "center", "details", "dialog", "div", "fieldset", "figcaption", "figure"}
)
_TEXT_BLOCKS = frozenset({"caption", "dd", "dl", "dt", "form", "hgroup", "hr", "li", "ol", "p", "summary", "ul"})
_BLOCK_TAGS = _SECTIONING | _GROUPING | _TEXT_BLOCKS
_HEADINGS = {f"h{level}": level for level in range(1, 7)}
_CONTAINERS = {"table": "table", "ul": "list", "ol": "list", "pre": "pre", "listing": "pre", "dt": "term"} | (
    dict.fromkeys(_HEADINGS, "heading")
)
_LINE_BREAK = "\x00"
"""Marks a ``<br>`` in collected text; the tree builder drops NUL characters, so it cannot clash."""


def parse_html(data: bytes, builder: BlockBuilder) -> None:
    """Add headings, paragraphs, lists, tables and ``<pre>`` blocks of the page's content (what
    :mod:`~chonkit.document.parsing.html_clean` does not leave out)."""
    tree = LexborHTMLParser(cap_nesting(decode_text(data)))
    root, left_out = left_out_ids(tree)
    if root is not None:
        _HtmlBlocks(builder, left_out).walk(root)


def cap_nesting(html: str) -> str:
    """Drop start and end tags nested deeper than :data:`MAX_NESTING`; their text is kept."""
    depth = 0

    def keep_shallow(match: re.Match[str]) -> str:
        nonlocal depth
        if match[2].lower() in _NOT_NESTING:
            return match[0]
        if match[1]:  # end tag
            depth = max(depth - 1, 0)
            return match[0] if depth < MAX_NESTING else ""
        depth += 1
        return match[0] if depth <= MAX_NESTING else ""

    return _TAG.sub(keep_shallow, html)


class _HtmlBlocks:
    """Turns enter/exit events of a depth-first walk into blocks.

    The outermost open container (table, list, heading, pre) owns all text inside it; anything nested
    in it (a list in a table cell) is flattened into its text.
    """

    def __init__(self, builder: BlockBuilder, hidden: set[int]) -> None:
        self._builder = builder
        self._hidden = hidden
        self._text: list[str] = []
        self._container: str | None = None
        self._container_tag = ""
        self._depth = 0  # nesting of the outermost container's own kind (a table in a table)
        self._lines: list[str] = []  # finished rows of a table or items of a list
        self._cells: list[str] = []
        self._item_indent = 0
        self._term_levels: list[int] = []  # the heading level of each open definition list's terms
        self._link_parts = 0  # where the text of the term's open link began in self._text
        self._link_chars = 0  # non-space characters of the open term's text inside links

    def walk(self, root: LexborNode) -> None:
        walk(root, self._enter, self._exit)
        self._flush_paragraph()

    def _enter(self, node: LexborNode) -> bool:
        """Handle a node's start; ``False`` means its subtree is not visited."""
        tag = node.tag or ""
        if tag == "-text":
            self._text.append(node.text_content or "")
            return False
        if tag in _SKIPPED or node.mem_id in self._hidden:
            return False
        if tag == "br":
            self._text.append(_LINE_BREAK if self._container in (None, "pre") else " ")
            return False
        if self._container is None:
            self._enter_outside(tag)
        else:
            self._enter_inside(tag, node)
        return True

    def _enter_outside(self, tag: str) -> None:
        """A start between containers: a container opens, or a block ends the paragraph before it."""
        kind = _CONTAINERS.get(tag)
        if kind is not None:
            self._flush_paragraph()
            self._container, self._container_tag, self._depth = kind, tag, 1
            self._item_indent = self._link_chars = 0
        elif tag in _BLOCK_TAGS:
            self._flush_paragraph()
            self._open_terms(tag)

    def _enter_inside(self, tag: str, node: LexborNode) -> None:
        """A start inside the open container: a nested one of its kind, a list item, a link in a term."""
        kind = _CONTAINERS.get(tag)
        if self._container == "term" and _is_link(tag, node):
            self._link_parts = len(self._text)
        elif kind == self._container:
            self._depth += 1
            if kind == "list":
                self._end_item()
        elif self._container == "list" and tag == "li":
            self._end_item()
            self._item_indent = self._depth - 1
        elif tag in _BLOCK_TAGS or tag in ("td", "th"):
            self._text.append(" ")

    def _exit(self, node: LexborNode) -> None:
        tag = node.tag or ""
        if self._container is None:
            if tag in _BLOCK_TAGS:
                self._flush_paragraph()
                if tag == "dl" and self._term_levels:
                    self._builder.close_headings(self._term_levels.pop())
            return
        if self._container == "term" and _is_link(tag, node):
            self._link_chars += _visible_chars(self._text[self._link_parts :])
        if _CONTAINERS.get(tag) == self._container:
            self._close_nested(tag)
        elif self._container == "table" and self._depth == 1 and tag in ("td", "th"):
            self._cells.append(_collapse(self._take_text()))
        elif self._container == "table" and self._depth == 1 and tag == "tr":
            self._end_row()
        elif self._container == "list" and tag == "li":
            self._end_item()
        elif tag in _BLOCK_TAGS:
            self._text.append(" ")

    def _close_nested(self, tag: str) -> None:
        """An element of the open container's kind ends: the container itself, or one nested in it."""
        self._depth -= 1
        if self._depth == 0:
            self._end_container()
        elif _CONTAINERS.get(tag) == "list":
            self._end_item()
            self._item_indent = self._depth - 1

    def _end_container(self) -> None:
        container, self._container = self._container, None
        if container == "table":
            self._end_row()
            self._builder.add("\n".join(self._lines), "table")
        elif container == "list":
            self._end_item()
            self._builder.add("\n".join(self._lines), "list")
        elif container == "heading":
            self._builder.add_heading(_collapse(self._take_text()), _HEADINGS[self._container_tag])
        elif container == "term":
            self._end_term()
        else:
            self._builder.add("".join(self._take_text()).replace(_LINE_BREAK, "\n"), "code")
        self._lines = []

    def _open_terms(self, tag: str) -> None:
        if tag == "dl":
            self._term_levels.append(self._builder.heading_level + 1)

    def _end_term(self) -> None:
        parts = self._take_text()
        term = _collapse(parts)
        if self._term_levels and self._link_chars < _visible_chars(parts):
            self._builder.add_heading(term, self._term_levels[-1])
        else:  # a table of contents' entry, or a term outside any list
            self._builder.add(term, "paragraph")

    def _end_row(self) -> None:
        if stray := _collapse(self._take_text()):
            self._cells.append(stray)
        if any(self._cells):
            self._lines.append(" | ".join(self._cells))
        self._cells = []

    def _end_item(self) -> None:
        if item := _collapse(self._take_text()):
            self._lines.append("  " * self._item_indent + "- " + item)

    def _flush_paragraph(self) -> None:
        lines = ("".join(self._take_text())).split(_LINE_BREAK)
        self._builder.add("\n".join(" ".join(line.split()) for line in lines), "paragraph")

    def _take_text(self) -> list[str]:
        text, self._text = self._text, []
        return text


def _is_link(tag: str, node: LexborNode) -> bool:
    return tag == "a" and node.attributes.get("href") is not None


def _visible_chars(parts: list[str]) -> int:
    return len("".join("".join(parts).split()))


def _collapse(parts: list[str]) -> str:
    """HTML whitespace rules: runs of whitespace (and line breaks) read as one space."""
    return " ".join("".join(parts).replace(_LINE_BREAK, " ").split())
