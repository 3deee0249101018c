"""What the chunker returns: chunks that point back at their exact source span."""

from __future__ import annotations

import msgspec


class Chunk(msgspec.Struct, frozen=True, kw_only=True):
    """A piece of a document, as embedded (``text``) and as found in the source (``content``).

    ``doc.text[char_start:char_end] == content`` always holds, so a citation can highlight the exact
    source; ``text`` is ``content`` after a header of the headings above it (``structure``, and ``fixed`` with
    ``repeat_headings``), so ``text`` always ends with ``content``.
    """

    index: int
    text: str
    content: str
    char_start: int
    char_end: int
    page_start: int | None
    page_end: int | None
    heading_path: tuple[str, ...]
    token_count: int
    """Tokens of ``text`` as counted by the tokenizer handed to the chunker (the model's, in production)."""
    parent_index: int | None = None
    ocr: bool = False
    """Some of its text was recognised from a page image (OCR), so it may hold misreadings."""


class ChunkResult(msgspec.Struct, frozen=True, kw_only=True):
    """Chunks to embed, parents to store (``parent_child`` only), and what is too long for the model."""

    chunks: list[Chunk]
    parents: list[Chunk] = msgspec.field(default_factory=list)
    oversized: list[int] = msgspec.field(default_factory=list)
    """Indexes of chunks longer than ``max_tokens``. They are still in ``chunks``: never silently truncated."""
