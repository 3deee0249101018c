"""Markdown via a real CommonMark parse (markdown-it-py), so ``#`` inside a code fence is no heading.

Block text keeps its inline Markdown (``*emphasis*``, links): it reads fine and loses nothing. Lists
keep their source lines (markers and nesting), tables become `` | ``-joined rows like in other formats.
"""

from __future__ import annotations

import functools
import re

from markdown_it import MarkdownIt
from markdown_it.rules_block import StateBlock
from markdown_it.token import Token

from chonkit.document.parsing.blocks import BlockBuilder
from chonkit.document.parsing.textcodec import decode_text

_FRONT_MATTER = re.compile(r"\A---[ \t]*\n.*?\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)
"""YAML front matter (Jekyll, Hugo, Obsidian) is metadata; CommonMark would read it as a heading."""
_LIST_OPEN = frozenset({"bullet_list_open", "ordered_list_open"})
_TEXT_TOKENS = frozenset({"inline", "fence", "code_block"})
_QUOTE_MARKERS = re.compile(r"^(?:[ \t]*>)+[ \t]?", re.MULTILINE)
MAX_NESTING = 20
"""Container depth (a quote, or half a list level) read as structure. markdown-it follows containers by
recursion and silently drops whatever lies deeper than its ``maxNesting``; we read that as one paragraph."""


@functools.cache
def _markdown() -> MarkdownIt:
    # Only block structure is needed: skipping the inline pass (emphasis, links) makes parsing ~4x faster.
    # markdown-it's own limit stays out of reach: _flatten_beyond_nesting stops every container before it.
    markdown = MarkdownIt("commonmark", {"maxNesting": MAX_NESTING + 2}).enable("table").disable("inline")
    markdown.block.ruler.before("table", "flatten_beyond_nesting", _flatten_beyond_nesting)
    return markdown


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
    source = _FRONT_MATTER.sub("", decode_text(data), count=1)
    lines = source.split("\n")
    tokens = _markdown().parse(source)
    index = 0
    while index < len(tokens):
        token = tokens[index]
        if token.type == "heading_open":
            builder.add_heading(tokens[index + 1].content, int(token.tag[1:]))
        elif token.type == "paragraph_open":
            builder.add(tokens[index + 1].content, "paragraph")
        elif token.type in ("fence", "code_block"):
            builder.add(token.content, "code")
        elif token.type == "html_block":
            builder.add(token.content, "paragraph")
        elif token.nesting == 1:
            end = _closing_index(tokens, index)
            inner = tokens[index + 1 : end]
            if token.type in _LIST_OPEN and token.map is not None:
                builder.add("\n".join(lines[token.map[0] : token.map[1]]), "list")
            elif token.type == "table_open":
                builder.add(_table_text(inner), "table")
            else:  # blockquote: its text, quote markers dropped
                builder.add("\n".join(t.content for t in inner if t.type in _TEXT_TOKENS), "paragraph")
            index = end
        index += 1


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
            cells.append(" ".join(token.content.split()))
        elif token.type == "tr_close":
            rows.append(" | ".join(cells))
            cells = []
    return "\n".join(rows)
