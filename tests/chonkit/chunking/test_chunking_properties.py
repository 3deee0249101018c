"""Properties every chunking must have, for random documents, configs and counters.

Each chunk is an exact, trimmed slice of ``doc.text`` inside one section; chunks come in order and
together cover every non-whitespace character; sizes hold in characters, and in tokens they are only
exceeded where a word had to be cut (tokens are counted per word, so only a cut can change them);
``oversized`` lists exactly the chunks over ``max_tokens``.
"""

from __future__ import annotations

from bisect import bisect_right
from itertools import pairwise
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chonkit.document.chunking import (
    HEADING_SEPARATOR,
    CharacterCounter,
    ChunkConfig,
    ChunkResult,
    FixedChunking,
    ParentChildChunking,
    StructureChunking,
    Unit,
    chunk,
)
from chonkit.document.parsed import Block, ParsedDocument

FRAGMENTS = [
    *["the", "cat", "sat.", "on", "a", "mat!", "dog", "ran", "far?", "it", "is", "hot", "we", "go", "home"],
    *["now", "x", "y", "z"],
    *["Dr.", "Mr.", "e.g.", "i.e.", "etc.", "U.S.", "3.14", "1,000.50", "No.", "5", "no.", "al.", "J."],
    *["https://x.y/z.html", "a.b@c.d.org", "Wait...", "\u2026", "(see", "it.)", '"Stop."', "\u201cOk.\u201d"],
    *["tokenization", "tokens", "\u00e9t\u00e9", "-", "Supercalifragilisticexpialidocious", "x" * 45],
]
SEPARATORS = [" ", " ", " ", " ", "  ", "\n", "\n\n", "\t", "\u00a0", "", ". "]
fragment_text = st.lists(st.tuples(st.sampled_from(FRAGMENTS), st.sampled_from(SEPARATORS)), max_size=40).map(
    lambda pairs: "".join(fragment + separator for fragment, separator in pairs)
)
any_text = st.text(max_size=120)
COUNTERS = ["characters", "wordpiece", "count_only"]
UNITS: list[Unit] = ["characters", "tokens"]


@st.composite
def documents(draw: st.DrawFn, builder: Any, text: st.SearchStrategy[str]) -> ParsedDocument:
    pdf = draw(st.booleans())
    specs = st.tuples(st.sampled_from(["paragraph", "paragraph", "heading", "list"]), text, st.integers(1, 3))
    sections = draw(st.lists(st.lists(specs, max_size=5), min_size=1, max_size=3))
    path: tuple[str, ...] = ()
    page = 1
    laid_out: list[list[Block]] = []
    for section in sections:
        blocks: list[Block] = []
        for kind, drawn, level in section:
            # A heading is one line, as every parser's add_heading makes it.
            body = " ".join(drawn.split()) if kind == "heading" else drawn
            if kind == "heading":
                path = (*path[: level - 1], body or "Untitled")
            page += draw(st.integers(0, 1)) if pdf else 0
            fields: dict[str, Any] = {"heading_path": path, "page": page if pdf else None}
            if kind == "heading":
                fields["level"] = level
            blocks.append(builder(body, kind, **fields))
        laid_out.append(blocks)
    return builder.document(*laid_out)  # type: ignore[no-any-return]


@st.composite
def configs(draw: st.DrawFn) -> ChunkConfig:
    unit = draw(st.sampled_from(UNITS))
    strategy = draw(st.sampled_from(["fixed", "structure", "parent_child"]))
    if strategy == "parent_child":
        child = draw(st.integers(1, 60))
        return ParentChildChunking(
            unit=unit,
            child_size=child,
            parent_size=draw(st.integers(child + 1, 200)),
            child_overlap=draw(st.integers(0, child - 1)),
        )
    size = draw(st.integers(1, 120))
    overlap = draw(st.integers(0, size - 1))
    if strategy == "structure":
        return StructureChunking(unit=unit, size=size, overlap=overlap)
    return FixedChunking(
        unit=unit,
        size=size,
        overlap=overlap,
        snap_to_sentences=draw(st.booleans()),
        repeat_headings=draw(st.booleans()),
        snap_to_headings=draw(st.booleans()),
    )


class _Builder:
    """The conftest helpers, bundled so a strategy can take them as one argument."""

    def __init__(self, make_block: Any, make_doc: Any) -> None:
        self.block = make_block
        self.document = make_doc

    def __call__(self, text: str, kind: str, **fields: Any) -> Block:
        return self.block(text, kind, **fields)  # type: ignore[no-any-return]


PROPERTY_SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY_SETTINGS
@given(data=st.data(), config=configs(), counter_name=st.sampled_from(COUNTERS))
def test_chunking_properties_on_prose(
    *,
    data: st.DataObject,
    config: ChunkConfig,
    counter_name: str,
    make_block: Any,
    make_doc: Any,
    wordpiece: Any,
    count_only: Any,
) -> None:
    counter = {"characters": CharacterCounter(), "wordpiece": wordpiece, "count_only": count_only}[counter_name]
    doc = data.draw(documents(_Builder(make_block, make_doc), fragment_text))
    _check(doc, config, counter, additive=counter_name != "characters" or config.unit == "characters")


@PROPERTY_SETTINGS
@given(data=st.data(), config=configs())
def test_chunking_properties_on_arbitrary_unicode(
    data: st.DataObject, config: ChunkConfig, make_block: Any, make_doc: Any
) -> None:
    doc = data.draw(documents(_Builder(make_block, make_doc), any_text))
    _check(doc, config, CharacterCounter(), additive=config.unit == "characters")


def _check(doc: ParsedDocument, config: ChunkConfig, counter: Any, *, additive: bool) -> None:
    limit = config.child_size if isinstance(config, ParentChildChunking) else config.size
    result = chunk(doc, config, counter, max_tokens=limit)
    text = doc.text
    regions = [(s.blocks[0].char_start, s.blocks[-1].char_end) for s in doc.sections if s.blocks]

    for pieces in (result.chunks, result.parents):
        assert [piece.index for piece in pieces] == list(range(len(pieces)))
        for piece in pieces:
            assert piece.content == text[piece.char_start : piece.char_end]
            assert piece.content.strip() == piece.content != ""
            assert any(start <= piece.char_start and piece.char_end <= end for start, end in regions)
            assert piece.token_count == counter.count([piece.text])[0]
            _check_pages(doc, piece.char_start, piece.char_end, piece.page_start, piece.page_end)
    assert result.oversized == [c.index for c in result.chunks if c.token_count > limit]

    starts = [c.char_start for c in result.chunks]
    assert starts == sorted(set(starts))
    assert [c.char_end for c in result.chunks] == sorted(c.char_end for c in result.chunks)
    _check_coverage(doc, result, config)
    _check_text_and_sizes(doc, result, config, additive=additive)


def _check_coverage(doc: ParsedDocument, result: ChunkResult, config: ChunkConfig) -> None:
    covered = bytearray(len(doc.text))
    for piece in result.chunks:
        covered[piece.char_start : piece.char_end] = b"\x01" * (piece.char_end - piece.char_start)
    skip_headings = isinstance(config, StructureChunking)
    for block in doc.blocks:
        if skip_headings and block.kind == "heading":
            continue
        for offset, character in enumerate(block.text, start=block.char_start):
            assert covered[offset] or character.isspace(), f"{character!r} at {offset} is in no chunk"
    if isinstance(config, ParentChildChunking):
        parents = result.parents
        assert [p.char_start for p in parents] == sorted({p.char_start for p in parents})
        assert all(a.char_end <= b.char_start for a, b in pairwise(parents))
        for child in result.chunks:
            assert child.parent_index is not None
            parent = parents[child.parent_index]
            assert parent.char_start <= child.char_start < child.char_end <= parent.char_end
        assert {c.parent_index for c in result.chunks} == set(range(len(parents)))
    else:
        assert result.parents == []
        assert all(c.parent_index is None for c in result.chunks)


def _check_text_and_sizes(doc: ParsedDocument, result: ChunkResult, config: ChunkConfig, *, additive: bool) -> None:
    text = doc.text
    starts = [block.char_start for block in doc.blocks]

    def cuts_a_word(start: int, end: int) -> bool:
        return (start > 0 and not text[start - 1].isspace()) or (end < len(text) and not text[end].isspace())

    def within(limit: int, size: int, start: int, end: int) -> bool:
        return (
            size <= limit if config.unit == "characters" or not additive else (size <= limit or cuts_a_word(start, end))
        )

    for piece in result.chunks:
        if isinstance(config, StructureChunking):
            prefix = piece.text[: len(piece.text) - len(piece.content)]
            assert piece.text.endswith(piece.content)
            if prefix:
                headings = prefix.removesuffix("\n\n").split(HEADING_SEPARATOR)
                assert prefix.endswith("\n\n")
                assert tuple(headings) == piece.heading_path[-len(headings) :]
        elif isinstance(config, FixedChunking) and config.repeat_headings:
            # The headings above the block it starts in (less that block when it is a heading), one a line;
            # outer ones may be left out, never inner ones.
            assert piece.text.endswith(piece.content)
            header = piece.text[: len(piece.text) - len(piece.content)]
            first = doc.blocks[bisect_right(starts, piece.char_start) - 1]
            above = first.heading_path[:-1] if first.kind == "heading" else first.heading_path
            assert header == "".join(f"{h}\n\n" for h in above[len(above) - header.count("\n\n") :])
        else:
            assert piece.text == piece.content
    sized = [(p, config.child_size if isinstance(config, ParentChildChunking) else config.size) for p in result.chunks]
    if isinstance(config, ParentChildChunking):
        sized += [(p, config.parent_size) for p in result.parents]
    for piece, limit in sized:
        size = len(piece.text) if config.unit == "characters" else piece.token_count
        if config.unit == "characters" or additive:
            assert within(limit, size, piece.char_start, piece.char_end), (piece, limit)


def _check_pages(doc: ParsedDocument, start: int, end: int, first: int | None, last: int | None) -> None:
    pages = [b.page for b in doc.blocks if b.char_start < end and max(b.char_end, b.char_start + 1) > start and b.page]
    assert (first, last) == ((min(pages), max(pages)) if pages else (None, None))
