"""Assemble parser output into blocks whose offsets point into the document's joined text.

Every parser feeds text to one :class:`BlockBuilder`, so offsets, heading paths and line filters are
computed in one place and behave the same for every format.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from chonkit.document.parsed import BLOCK_SEPARATOR, Block, BlockKind, ParsedDocument, Section
from chonkit.document.parsing.line_filters import LineFilter

_LEADING_BLANK_LINES = re.compile(r"\A(?:[^\S\n]*\n)+")


class BlockBuilder:
    """Collects blocks in reading order and groups them into sections.

    Args:
        line_filters: compiled patterns; a line in which any of them is found is removed.
    """

    def __init__(self, line_filters: Sequence[LineFilter] = ()) -> None:
        self._filters = tuple(line_filters)
        self._offset = 0
        self._blocks: list[Block] = []
        self._sections: list[Section] = []
        self._headings: list[tuple[int, str]] = []
        self._heading_path: tuple[str, ...] = ()
        self.saw_text = False
        """Whether any text was extracted before line filters ran (tells "empty" from "all filtered")."""

    @property
    def has_blocks(self) -> bool:
        return bool(self._blocks) or any(section.blocks for section in self._sections)

    def add(self, text: str, kind: BlockKind, *, page: int | None = None, ocr: bool = False) -> None:
        """Add a block under the current headings; blank text (after filtering) adds nothing."""
        text = self._clean(text, keep_indent=kind == "code")
        if text:
            self._append(text, kind, page=page, heading_path=self._heading_path, ocr=ocr)

    def add_heading(self, text: str, level: int, *, page: int | None = None) -> None:
        """Add a heading and make it the innermost entry of the heading path of what follows."""
        text = self._clean(" ".join(text.split()), keep_indent=False)
        if not text:
            return
        while self._headings and self._headings[-1][0] >= level:
            self._headings.pop()
        self._headings.append((level, text))
        self._heading_path = tuple(title for _, title in self._headings)
        self._append(text, "heading", page=page, heading_path=self._heading_path, level=level)

    def close_headings(self, level: int) -> None:
        """End the headings of ``level`` and below without a new one: what follows is back under the outer ones.

        A definition list's terms head their definitions only; the text after the list is not under its last term.
        """
        while self._headings and self._headings[-1][0] >= level:
            self._headings.pop()
        self._heading_path = tuple(title for _, title in self._headings)

    @property
    def heading_level(self) -> int:
        """The level of the innermost open heading (0 outside every heading)."""
        return self._headings[-1][0] if self._headings else 0

    def end_section(self, *, page_start: int | None = None, page_end: int | None = None) -> None:
        """Close the blocks added so far into a section that chunks may not cross."""
        self._sections.append(Section(blocks=tuple(self._blocks), page_start=page_start, page_end=page_end))
        self._blocks = []

    def build(
        self, *, media_type: str, page_count: int | None = None, ocr_pages: tuple[int, ...] = ()
    ) -> ParsedDocument:
        if self._blocks or not self._sections:
            self.end_section()
        return ParsedDocument(
            media_type=media_type, sections=tuple(self._sections), page_count=page_count, ocr_pages=ocr_pages
        )

    def _clean(self, text: str, *, keep_indent: bool) -> str:
        # NUL cannot be stored in PostgreSQL text and never carries meaning in a document.
        text = text.replace("\x00", "")
        if not self.saw_text and text and not text.isspace():
            self.saw_text = True
        if self._filters:
            lines = text.split("\n")
            kept = [line for line in lines if not self._filtered(line)]
            if len(kept) != len(lines):
                text = "\n".join(kept)
        # Code keeps the indentation of its first line; everything else is trimmed.
        return _LEADING_BLANK_LINES.sub("", text.rstrip()) if keep_indent else text.strip()

    def _filtered(self, line: str) -> bool:
        # surrogatepass: a lone surrogate from a broken document must not make the filter fail.
        encoded = line.encode("utf-8", "surrogatepass")
        return any(pattern.search(encoded) for pattern in self._filters)

    def _append(
        self,
        text: str,
        kind: BlockKind,
        *,
        page: int | None = None,
        heading_path: tuple[str, ...] = (),
        level: int | None = None,
        ocr: bool = False,
    ) -> None:
        start = self._offset
        end = start + len(text)
        block = Block(
            text=text,
            kind=kind,
            char_start=start,
            char_end=end,
            page=page,
            heading_path=heading_path,
            level=level,
            ocr=ocr,
        )
        self._blocks.append(block)
        self._offset = end + len(BLOCK_SEPARATOR)
