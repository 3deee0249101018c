"""What a parser hands to a chunker: text blocks that remember where they came from.

Offsets (``char_start``/``char_end``) index into :attr:`ParsedDocument.text`, the blocks' texts joined
by :data:`BLOCK_SEPARATOR` in order, so every chunk can point back at its exact source span.
Chunkers never merge text across two :class:`Section` s (a PDF section mode page range, or the
whole document when no sections are configured).
"""

from __future__ import annotations

from typing import Literal

import msgspec

BLOCK_SEPARATOR = "\n\n"

BlockKind = Literal["heading", "paragraph", "table", "list", "code", "page"]


class Block(msgspec.Struct, frozen=True, kw_only=True):
    """A run of extracted text: a heading, a paragraph, a table rendered as text, or a PDF page's text."""

    text: str
    kind: BlockKind
    char_start: int
    char_end: int
    page: int | None = None
    """1-based page number (PDF only)."""
    heading_path: tuple[str, ...] = ()
    """Headings above this block, outermost first; for a heading block it ends with the heading itself."""
    level: int | None = None
    """Heading level (1 = top) for heading blocks."""
    ocr: bool = False
    """The text was recognised from the page's image (OCR), not read from a text layer: it may hold misreadings."""


class Section(msgspec.Struct, frozen=True, kw_only=True):
    """Blocks a chunk may span. One per configured PDF page range, otherwise one for the document."""

    blocks: tuple[Block, ...]
    title: str | None = None
    page_start: int | None = None
    page_end: int | None = None


class ParsedDocument(msgspec.Struct, frozen=True, kw_only=True):
    """A document's text in reading order, after the parse config's page range and line filters."""

    media_type: str
    sections: tuple[Section, ...]
    page_count: int | None = None
    """Pages in the original file (PDF, or frames of an image), before any page range is applied."""
    ocr_pages: tuple[int, ...] = ()
    """Pages whose text is recognised from their image (their blocks say ``ocr``); after a parse that only checks
    a file (``recognise=False``), the pages that would be."""

    @property
    def blocks(self) -> tuple[Block, ...]:
        return tuple(b for s in self.sections for b in s.blocks)

    @property
    def text(self) -> str:
        return BLOCK_SEPARATOR.join(b.text for b in self.blocks)
