"""``chunk()``: a parsed document in, chunks (and parents) out, as the collection's config says.

Every strategy works one :class:`Section` at a time, so no chunk ever mixes two sections, and
yields source spans; this module turns spans into :class:`Chunk` s, counting all their tokens in
one tokenizer call and reporting (never truncating) the ones longer than the model accepts.

A chunk's ``text`` is a *header* (the headings it sits under; none for ``parent_child`` or ``fixed`` without
``repeat_headings``) followed by its ``content``, so ``text[len(text) - (char_end - char_start):]`` is always the
source span: what a reader strips to join neighbouring chunks.
"""

from __future__ import annotations

import functools
import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import dataclass

from chonkit.document.chunking.config import (
    ChunkConfig,
    FixedChunking,
    ParentChildChunking,
    StructureChunking,
    validate_chunk_config,
)
from chonkit.document.chunking.models import Chunk, ChunkResult
from chonkit.document.chunking.packing import Meter, split_region
from chonkit.document.chunking.tokens import TokenCounter
from chonkit.document.parsed import Block, ParsedDocument, Section
from common.errors import AppError, InvalidInput

_NON_SPACE = re.compile(r"\S")

HEADING_SEPARATOR = " > "
"""Joins a heading path in the embedded text of ``structure``: ``Guide > Install > Linux``."""
HEADING_LINE_SEPARATOR = "\n\n"
"""Ends each heading ``fixed`` repeats: the headings read as the document shows them above a section's text."""


@dataclass(frozen=True, slots=True)
class _Span:
    start: int
    end: int
    heading_path: tuple[str, ...] | None = None
    """None: the path of the block the span starts in."""
    prefix: str = ""
    parent_index: int | None = None


def chunk(doc: ParsedDocument, config: ChunkConfig, tokenizer: TokenCounter, *, max_tokens: int | None) -> ChunkResult:
    """Cut ``doc`` into chunks as ``config`` says.

    Args:
        doc: The parser's output; block offsets must index into ``doc.text``.
        config: The collection's chunk config (checked again here: a bad size could loop forever).
        tokenizer: Counts tokens as the embedding model does; reported in every ``token_count`` and
            used for sizes when ``config.unit`` is ``tokens``.
        max_tokens: The embedding model's input limit; longer chunks are listed in ``oversized``.

    Raises:
        InvalidInput: An invalid ``config`` or ``max_tokens``.
        AppError: ``invalid_block_offsets`` when the parser's offsets disagree with its text.
    """
    config = validate_chunk_config(config)
    if max_tokens is not None and max_tokens <= 0:
        raise InvalidInput(f"max_tokens must be positive, got {max_tokens}", code="invalid_max_tokens")
    text = doc.text
    layout = _Layout(doc, text)
    meter = Meter(config.unit, tokenizer)
    parents: list[_Span] = []
    match config:
        case FixedChunking():
            spans = _fixed(text, doc.sections, config, meter, layout)
        case StructureChunking():
            spans = _structure(text, doc.sections, config, meter)
        case ParentChildChunking():
            parents, spans = _parent_child(text, doc.sections, config, meter)
    spans = [span for span in (_trimmed(text, span) for span in spans) if span.start < span.end]
    chunks = layout.chunks(spans, tokenizer)
    oversized = [] if max_tokens is None else [c.index for c in chunks if c.token_count > max_tokens]
    return ChunkResult(chunks=chunks, parents=layout.chunks(parents, tokenizer), oversized=oversized)


def _fixed(
    text: str, sections: tuple[Section, ...], config: FixedChunking, meter: Meter, layout: _Layout
) -> list[_Span]:
    spans: list[_Span] = []
    headers = _Headers(layout, config.size, meter) if config.repeat_headings else None
    for start, end in _section_regions(sections):
        starts, ends = split_region(
            text,
            start,
            end,
            budget=config.size,
            overlap=config.overlap,
            snap=config.snap_to_sentences,
            meter=meter,
            reserve=None if headers is None else headers.cost,
            breaks=layout.heading_starts if config.snap_to_headings else (),
        )
        prefixes = [""] * len(starts) if headers is None else map(headers.header, starts)
        spans += (_Span(first, last, prefix=prefix) for first, last, prefix in zip(starts, ends, prefixes, strict=True))
    return spans


class _Headers:
    """The headings a ``fixed`` chunk repeats, by the offset it starts at: the path of the block it starts in,
    less that block itself when it is a heading (its text opens the chunk already), outer headings dropped
    while they would take more than half of ``size``; then, for a chunk that starts inside a table below its first
    row, that row (the columns' names), when the whole header still takes at most half of ``size``. Every path's
    candidates and every table's first row are measured in one call each."""

    def __init__(self, layout: _Layout, size: int, meter: Meter) -> None:
        self._layout = layout
        self._half = size // 2
        paths = list(dict.fromkeys(layout.paths_above()))
        candidates = [(path, _header_lines(path[first:])) for path in paths for first in range(len(path))]
        costs = meter.measure([header for _, header in candidates])
        self._by_path: dict[tuple[str, ...], tuple[str, int]] = dict.fromkeys(paths, ("", 0))
        for (path, header), cost in reversed(list(zip(candidates, costs, strict=True))):
            if cost <= self._half:  # reversed: the longest header that fits is written last
                self._by_path[path] = header, cost
        tables = layout.multi_row_tables()
        rows = [table.text.split("\n", 1)[0] + "\n" for table in tables]
        self._rows = {t.char_start: (row, cost) for t, row, cost in zip(tables, rows, meter.measure(rows), strict=True)}

    def _parts(self, offset: int) -> tuple[str, int]:
        header, cost = self._by_path[self._layout.path_above(offset)]
        block, at = self._layout.block_at(offset)
        row = self._rows.get(block.char_start)
        if row is not None and at >= block.char_start + len(row[0]) and cost + row[1] <= self._half:
            return header + row[0], cost + row[1]
        return header, cost

    def header(self, offset: int) -> str:
        return self._parts(offset)[0]

    def cost(self, offset: int) -> int:
        return self._parts(offset)[1]


def _header_lines(path: tuple[str, ...]) -> str:
    return "".join(heading + HEADING_LINE_SEPARATOR for heading in path)


def _structure(text: str, sections: tuple[Section, ...], config: StructureChunking, meter: Meter) -> list[_Span]:
    spans: list[_Span] = []
    for section in sections:
        for path, start, end in _heading_groups(section):
            prefix, cost = _heading_prefix(path, config.size, meter)
            budget = config.size - cost
            starts, ends = split_region(
                text, start, end, budget=budget, overlap=min(config.overlap, budget - 1), snap=True, meter=meter
            )
            spans += (_Span(first, last, path, prefix) for first, last in zip(starts, ends, strict=True))
    return spans


def _heading_prefix(path: tuple[str, ...], size: int, meter: Meter) -> tuple[str, int]:
    """The heading path to repeat, and its size: outer headings are dropped if it would fill half a chunk."""
    candidates = [HEADING_SEPARATOR.join(path[first:]) + "\n\n" for first in range(len(path))]
    for prefix, cost in zip(candidates, meter.measure(candidates), strict=True):
        if cost <= size // 2:
            return prefix, cost
    return "", 0


def _parent_child(
    text: str, sections: tuple[Section, ...], config: ParentChildChunking, meter: Meter
) -> tuple[list[_Span], list[_Span]]:
    parents: list[_Span] = []
    children: list[_Span] = []
    for start, end in _section_regions(sections):
        starts, ends = split_region(text, start, end, budget=config.parent_size, overlap=0, snap=True, meter=meter)
        for first, last in zip(starts, ends, strict=True):
            parent = _trimmed(text, _Span(first, last))
            if parent.start == parent.end:
                continue
            child_starts, child_ends = split_region(
                text,
                parent.start,
                parent.end,
                budget=config.child_size,
                overlap=config.child_overlap,
                snap=True,
                meter=meter,
            )
            index = len(parents)
            parents.append(parent)
            children += (_Span(a, b, parent_index=index) for a, b in zip(child_starts, child_ends, strict=True))
    return parents, children


def _section_regions(sections: tuple[Section, ...]) -> Iterator[tuple[int, int]]:
    for section in sections:
        if section.blocks:
            yield section.blocks[0].char_start, section.blocks[-1].char_end


def _heading_groups(section: Section) -> Iterator[tuple[tuple[str, ...], int, int]]:
    """Runs of body blocks under the same heading path; heading blocks only open new runs."""
    path: tuple[str, ...] | None = None
    start = end = 0
    for block in section.blocks:
        if block.kind == "heading" or block.heading_path != path:
            if path is not None:
                yield path, start, end
            path = None
            if block.kind == "heading":
                continue
            path, start = block.heading_path, block.char_start
        end = block.char_end
    if path is not None:
        yield path, start, end


def _trimmed(text: str, span: _Span) -> _Span:
    start, end = span.start, span.end
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if (start, end) == (span.start, span.end):
        return span
    return _Span(start, end, span.heading_path, span.prefix, span.parent_index)


class _Layout:
    """Looks up the blocks under a span, for its pages and heading path."""

    def __init__(self, doc: ParsedDocument, text: str) -> None:
        self._text = text
        self._blocks = doc.blocks
        self._starts = [block.char_start for block in self._blocks]
        for block in self._blocks:
            if block.char_end - block.char_start != len(block.text) or not text.startswith(
                block.text, block.char_start
            ):
                raise AppError(
                    f"Block at {block.char_start}..{block.char_end} does not match the document text",
                    code="invalid_block_offsets",
                )

    @functools.cached_property
    def heading_starts(self) -> list[int]:
        """Where each heading block starts, in order."""
        return [block.char_start for block in self._blocks if block.kind == "heading"]

    def paths_above(self) -> list[tuple[str, ...]]:
        """:meth:`path_above` of each block's text."""
        return [_above(block) for block in self._blocks]

    def path_above(self, offset: int) -> tuple[str, ...]:
        """The headings above the first text at or after ``offset`` (where a chunk starting there starts once
        trimmed), not counting the heading that text may itself be."""
        return _above(self.block_at(offset)[0])

    def block_at(self, offset: int) -> tuple[Block, int]:
        """The block of the first text at or after ``offset``, and where that text starts."""
        found = _NON_SPACE.search(self._text, offset)
        at = offset if found is None else found.start()
        return self._blocks[max(0, bisect_right(self._starts, at) - 1)], at

    def multi_row_tables(self) -> list[Block]:
        """The table blocks of more than one row: a chunk may start below their first."""
        return [block for block in self._blocks if block.kind == "table" and "\n" in block.text]

    def chunks(self, spans: list[_Span], tokenizer: TokenCounter) -> list[Chunk]:
        """Chunks for ``spans`` in order, their tokens counted in one call."""
        contents = [self._text[span.start : span.end] for span in spans]
        counts = tokenizer.count([span.prefix + content for span, content in zip(spans, contents, strict=True)])
        found: list[Chunk] = []
        for index, (span, content, count) in enumerate(zip(spans, contents, counts, strict=True)):
            first = max(0, bisect_right(self._starts, span.start) - 1)
            last = max(first, bisect_left(self._starts, span.end) - 1)
            under = self._blocks[first : last + 1]
            pages = [block.page for block in under if block.page is not None]
            found.append(
                Chunk(
                    index=index,
                    text=span.prefix + content if span.prefix else content,
                    content=content,
                    char_start=span.start,
                    char_end=span.end,
                    page_start=min(pages, default=None),
                    page_end=max(pages, default=None),
                    heading_path=self._blocks[first].heading_path if span.heading_path is None else span.heading_path,
                    token_count=count,
                    parent_index=span.parent_index,
                    ocr=any(block.ocr for block in under),
                )
            )
        return found


def _above(block: Block) -> tuple[str, ...]:
    return block.heading_path[:-1] if block.kind == "heading" else block.heading_path
