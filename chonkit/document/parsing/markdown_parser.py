"""Markdown via a real CommonMark parse (markdown-it-py), so ``#`` inside a code fence is no heading.

Block text is the text a reader sees: inline markup (emphasis, code spans, links, inline HTML) is read by
markdown-it's inline parser and dropped, a link keeping its text and an image its alt text; an HTML block keeps its
text without its tags. Lists keep their source lines (markers and nesting; the markup read line by line), tables
become `` | ``-joined rows like in other formats. Common extensions are read too: mkdocs/Python-Markdown
admonitions (``!!! note "Title"`` and an indented body, parsed as Markdown) and MyST's (a ``{note}`` fence), MyST
roles (``{doc}`text <target>```` is its text) and attribute lists ending a heading (``{ #id }``), which are dropped.
"""

from __future__ import annotations

import functools
import re

from markdown_it import MarkdownIt
from markdown_it.rules_block import StateBlock
from markdown_it.token import Token
from selectolax.lexbor import LexborHTMLParser

from chonkit.document.parsing.blocks import BlockBuilder
from chonkit.document.parsing.textcodec import decode_text

_FRONT_MATTER = re.compile(r"\A---[ \t]*\n.*?\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)
"""YAML front matter (Jekyll, Hugo, Obsidian) is metadata; CommonMark would read it as a heading."""
_LIST_OPEN = frozenset({"bullet_list_open", "ordered_list_open"})
_TEXT_TOKENS = frozenset({"inline", "fence", "code_block"})
_QUOTE_MARKERS = re.compile(r"^(?:[ \t]*>)+[ \t]?", re.MULTILINE)
_ADMONITION = re.compile(r"(?:!!!|\?\?\?\+?)[ \t]+(?P<kind>[\w-]+)(?:[ \t]+\"(?P<title>[^\"]*)\")?[ \t]*$")
_MYST_ADMONITION = re.compile(
    r"\{(?P<name>admonition|note|tip|hint|important|warning|caution|attention|danger|error|seealso)\}(?P<title>.*)",
    re.DOTALL,
)
"""A MyST directive fence whose body is Markdown (an admonition); other directives (toctree, include) stay code."""
_DIRECTIVE_OPTIONS = re.compile(r"\A(?:---\n.*?\n---\n|(?::[\w-]+:[^\n]*\n)+)", re.DOTALL)
"""A directive's options at the top of its body: ``:key: value`` lines or a YAML block between ``---`` lines."""
_MYST_ROLE = re.compile(r"\{[\w:.-]+\}\Z")
_ROLE_TARGET = re.compile(r"(.*?\S)\s*<[^<>]*>", re.DOTALL)
"""A MyST role's ``text <target>``: the text is what the reader sees."""
_HEADING_ATTRIBUTES = re.compile(r"[ \t]*\{:?[ \t]*[#.][^{}]*\}[ \t]*$")
_INLINE_MARKUP = frozenset("*_[]<>`&\\!~")
"""Characters without which inline text has no markup to read: it is taken as it is, without an inline parse."""
MAX_NESTING = 20
"""Container depth (a quote, or half a list level) read as structure. markdown-it follows containers by
recursion and silently drops whatever lies deeper than its ``maxNesting``; we read that as one paragraph."""


@functools.cache
def _markdown() -> MarkdownIt:
    # The block pass runs without inline rules (~4x faster); _plain parses inline only text that has markup.
    # markdown-it's own limit stays out of reach: _flatten_beyond_nesting stops every container before it.
    markdown = MarkdownIt("commonmark", {"maxNesting": MAX_NESTING + 2}).enable("table").disable("inline")
    markdown.block.ruler.before("table", "flatten_beyond_nesting", _flatten_beyond_nesting)
    markdown.block.ruler.before("fence", "admonition", _admonition)
    return markdown


@functools.cache
def _inline_markdown() -> MarkdownIt:
    return MarkdownIt("commonmark").enable("strikethrough")


def _admonition(state: StateBlock, start: int, end: int, silent: bool) -> bool:
    """``!!! kind "Title"`` and the lines indented under it: the title a paragraph, the body Markdown of its own."""
    if state.sCount[start] - state.blkIndent >= 4:
        return False
    match = _ADMONITION.match(state.src, state.bMarks[start] + state.tShift[start], state.eMarks[start])
    if match is None:
        return False
    if silent:
        return True
    body_end = start + 1
    last = start + 1
    while body_end < end and (state.isEmpty(body_end) or state.sCount[body_end] >= state.blkIndent + 4):
        body_end += 1
        if not state.isEmpty(body_end - 1):
            last = body_end
    title = match["title"] if match["title"] is not None else match["kind"].capitalize()
    state.push("admonition_open", "div", 1).map = [start, last]
    if title.strip():
        state.push("paragraph_open", "p", 1).map = [start, start + 1]
        inline = state.push("inline", "", 0)
        inline.content, inline.map, inline.children = title.strip(), [start, start + 1], []
        state.push("paragraph_close", "p", -1)
    indent, parent = state.blkIndent, state.parentType
    state.blkIndent, state.parentType = indent + 4, "admonition"
    state.md.block.tokenize(state, start + 1, last)
    state.blkIndent, state.parentType = indent, parent
    state.push("admonition_close", "div", -1)
    state.line = last
    return True


def _flatten_beyond_nesting(state: StateBlock, start: int, end: int, silent: bool) -> bool:
    """A block rule tried first on every line: at :data:`MAX_NESTING`, the rest of the container is a paragraph."""
    if state.level < MAX_NESTING:
        return False
    text = _QUOTE_MARKERS.sub("", state.getLines(start, end, state.blkIndent, False)).strip()
    state.push("paragraph_open", "p", 1).map = [start, end]
    inline = state.push("inline", "", 0)
    inline.content, inline.map, inline.children = text, [start, end], []
    state.push("paragraph_close", "p", -1)
    state.line = end
    return True


def parse_markdown(data: bytes, builder: BlockBuilder) -> None:
    """Add headings (ATX and setext), paragraphs, lists, code blocks, tables and quotes."""
    _add_markdown(_FRONT_MATTER.sub("", decode_text(data), count=1), builder, depth=0)


def _add_markdown(source: str, builder: BlockBuilder, *, depth: int) -> None:
    lines = source.split("\n")
    tokens = _markdown().parse(source)
    index = 0
    while index < len(tokens):
        token = tokens[index]
        if token.type == "heading_open":
            builder.add_heading(_HEADING_ATTRIBUTES.sub("", _plain(tokens[index + 1].content)), int(token.tag[1:]))
        elif token.type == "paragraph_open":
            builder.add(_plain(tokens[index + 1].content), "paragraph")
        elif token.type == "fence" and depth < MAX_NESTING and (directive := _MYST_ADMONITION.match(token.info)):
            title = directive["title"].strip() or directive["name"].capitalize()
            builder.add(_plain(title), "paragraph")
            _add_markdown(_DIRECTIVE_OPTIONS.sub("", token.content, count=1), builder, depth=depth + 1)
        elif token.type in ("fence", "code_block"):
            builder.add(token.content, "code")
        elif token.type == "html_block":
            builder.add(_html_text(token.content), "paragraph")
        elif token.type == "admonition_open":
            pass  # its title and body follow as blocks of their own
        elif token.nesting == 1:
            end = _closing_index(tokens, index)
            _add_container(token, tokens[index + 1 : end], lines, builder)
            index = end
        index += 1


def _add_container(token: Token, inner: list[Token], lines: list[str], builder: BlockBuilder) -> None:
    """A top-level list, table or blockquote as one block."""
    if token.type in _LIST_OPEN and token.map is not None:
        builder.add("\n".join(_plain(line) for line in lines[token.map[0] : token.map[1]]), "list")
    elif token.type == "table_open":
        builder.add(_table_text(inner), "table")
    else:  # blockquote: its text, quote markers dropped
        text = (_plain(t.content) if t.type == "inline" else t.content for t in inner if t.type in _TEXT_TOKENS)
        builder.add("\n".join(text), "paragraph")


def _closing_index(tokens: list[Token], open_index: int) -> int:
    """Index of the token closing the top-level container opened at ``open_index``."""
    level = tokens[open_index].level
    index = open_index + 1
    while tokens[index].level != level:
        index += 1
    return index


def _table_text(tokens: list[Token]) -> str:
    rows: list[str] = []
    cells: list[str] = []
    for token in tokens:
        if token.type == "inline":
            cells.append(" ".join(_plain(token.content).split()))
        elif token.type == "tr_close":
            rows.append(" | ".join(cells))
            cells = []
    return "\n".join(rows)


def _plain(source: str) -> str:
    """Inline Markdown as read: markup dropped, a link's text and an image's alt text kept, line breaks kept."""
    if _INLINE_MARKUP.isdisjoint(source):
        return source
    parts: list[str] = []
    for token in _inline_markdown().parseInline(source)[0].children or ():
        if token.type == "code_inline" and parts and (role := _MYST_ROLE.search(parts[-1])):
            parts[-1] = parts[-1][: role.start()]
            target = _ROLE_TARGET.fullmatch(token.content)
            parts.append(target[1] if target else token.content)
        elif token.type in ("text", "code_inline", "image"):
            parts.append(token.content)
        elif token.type in ("softbreak", "hardbreak"):
            parts.append("\n")
    return "".join(parts)


def _html_text(source: str) -> str:
    """An HTML block's text, tags dropped (and scripts and styles with their content), a line break before
    each block-level element."""
    tree = LexborHTMLParser(source)
    tree.strip_tags(["script", "style"])
    for node in tree.css("br, p, div, summary, li, tr, details"):
        node.insert_before("\n")
    root = tree.body or tree.root
    return "" if root is None else root.text(deep=True, separator="")
