"""``fixed`` with ``repeat_headings`` and ``snap_to_headings`` (the default): each chunk's text starts with the
headings above it, and a chunk that would run into the next section ends before its heading."""

from __future__ import annotations

from typing import Any

import msgspec

from chonkit.document.chunking import CharacterCounter, FixedChunking, chunk, default_chunk_config
from chonkit.document.parsing import DocumentType, ParseConfig
from chonkit.document.parsing.parser import parse
from chonkit.embedding.worker import config_hash

CHARACTERS = CharacterCounter()

MANUAL = """# Memory

## temp_buffers

Sets the maximum memory for temporary buffers. It is per session.

The default is eight megabytes. It can be changed within a session.

## work_mem

Sets the base memory of a query operation."""


def characters(size: int, overlap: int = 0, **fields: Any) -> FixedChunking:
    return FixedChunking(size=size, overlap=overlap, unit="characters", **fields)


def test_a_chunk_continuing_a_section_starts_with_its_headings(markdown_doc: Any) -> None:
    doc = markdown_doc(MANUAL)
    result = chunk(doc, characters(90), CHARACTERS, max_tokens=None)
    assert [c.text for c in result.chunks] == [
        # A chunk that starts at a heading does not repeat it; the headings above it come first.
        "Memory\n\ntemp_buffers\n\nSets the maximum memory for temporary buffers. It is per session.",
        "Memory\n\ntemp_buffers\n\nThe default is eight megabytes. It can be changed within a session.",
        "Memory\n\nwork_mem\n\nSets the base memory of a query operation.",
    ]
    # The content is the source span alone, and the text ends with it: readers strip the header by length.
    for c in result.chunks:
        assert doc.text[c.char_start : c.char_end] == c.content
        assert c.text.endswith(c.content)
    assert [c.content for c in result.chunks] == [
        "Memory\n\ntemp_buffers\n\nSets the maximum memory for temporary buffers. It is per session.",
        "The default is eight megabytes. It can be changed within a session.",
        "work_mem\n\nSets the base memory of a query operation.",
    ]
    # The size includes the header: every text fits, and the token count is the text's.
    assert all(len(c.text) <= 90 and c.token_count == len(c.text) for c in result.chunks)


def test_without_repeat_headings_the_text_is_the_content(markdown_doc: Any) -> None:
    result = chunk(markdown_doc(MANUAL), characters(90, repeat_headings=False), CHARACTERS, max_tokens=None)
    assert [c.text for c in result.chunks] == [c.content for c in result.chunks]
    assert "The default is eight megabytes." in result.chunks[1].text
    assert "temp_buffers" not in result.chunks[1].text


def test_outer_headings_go_when_the_header_would_fill_half_the_chunk(markdown_doc: Any) -> None:
    doc = markdown_doc("# A rather long title\n\n## Sub\n\nOne two three. Four five six. Seven eight.")
    # "A rather long title\n\nSub\n\n" is 26 characters, more than half of 50; "Sub\n\n" is 5.
    result = chunk(doc, characters(50), CHARACTERS, max_tokens=None)
    assert [c.text for c in result.chunks] == [
        "A rather long title\n\nSub\n\nOne two three.",
        "Sub\n\nFour five six. Seven eight.",
    ]
    assert all(len(c.text) <= 50 for c in result.chunks)


def test_token_sizes_include_the_header(markdown_doc: Any, wordpiece: Any) -> None:
    doc = markdown_doc("# Guide\n\n## Install\n\n" + " ".join(["The cat sat on the mat."] * 12))
    config = FixedChunking(size=20, overlap=0, unit="tokens")
    result = chunk(doc, config, wordpiece, max_tokens=20)
    assert len(result.chunks) > 2
    assert all(c.text.startswith("Guide\n\nInstall\n\n") for c in result.chunks[1:])
    assert [c.token_count for c in result.chunks] == wordpiece.count([c.text for c in result.chunks])
    assert result.oversized == []


def test_a_document_without_headings_is_chunked_as_without_the_option(make_doc: Any, make_block: Any) -> None:
    doc = make_doc([make_block("The cat sat. The dog ran far. It is hot. We go home now.")])
    assert chunk(doc, characters(30, 17), CHARACTERS, max_tokens=None) == chunk(
        doc, characters(30, 17, repeat_headings=False), CHARACTERS, max_tokens=None
    )


def test_unsnapped_character_windows_leave_room_for_the_header(markdown_doc: Any) -> None:
    doc = markdown_doc("# Title\n\nabcdefghij klmnopqrst uvwxyz")
    result = chunk(doc, characters(20, 3, snap_to_sentences=False), CHARACTERS, max_tokens=None)
    # The first window starts at the heading itself (no header); the others give 7 characters to "Title\n\n".
    assert [(c.text, c.char_start) for c in result.chunks] == [
        ("Title\n\nabcdefghij kl", 0),
        ("Title\n\nklmnopqrst uv", 18),
        ("Title\n\nuvwxyz", 29),
    ]
    assert all(len(c.text) <= 20 for c in result.chunks)


def test_a_manual_setting_continued_in_the_next_chunk_is_named_in_it() -> None:
    """Debian's PostgreSQL manual: ``temp_buffers``'s default is stated in the chunk after its term."""
    html = b"""<h2>20.4. Resource Consumption</h2><h3>20.4.1. Memory</h3><dl class="variablelist">
    <dt><code>temp_buffers</code> (<code>integer</code>)</dt>
    <dd><p>Sets the maximum amount of memory used for temporary buffers within each database session.</p>
    <p>The default is eight megabytes (8MB).</p></dd></dl>"""
    doc = parse(html, DocumentType.HTML, ParseConfig())
    result = chunk(doc, characters(160), CHARACTERS, max_tokens=None)
    assert len(result.chunks) == 2
    continued = next(c for c in result.chunks if "eight megabytes" in c.content)
    assert "temp_buffers" not in continued.content
    header = "20.4. Resource Consumption\n\n20.4.1. Memory\n\ntemp_buffers (integer)\n\n"
    assert continued.text == header + "The default is eight megabytes (8MB)."


TWO_SETTINGS = """# Memory

## temp_buffers

The default is eight megabytes.

## work_mem

Sets the base memory. The default is four megabytes."""


def test_a_chunk_that_would_run_into_the_next_section_ends_before_its_heading(markdown_doc: Any) -> None:
    doc = markdown_doc(TWO_SETTINGS)
    snapped = chunk(doc, characters(80), CHARACTERS, max_tokens=None)
    assert [c.text for c in snapped.chunks] == [
        "Memory\n\ntemp_buffers\n\nThe default is eight megabytes.",
        "Memory\n\nwork_mem\n\nSets the base memory. The default is four megabytes.",
    ]
    assert snapped.chunks[1].content.startswith("work_mem")
    # Without it the first chunk ends with the next section's heading, and the next one starts below it.
    plain = chunk(doc, characters(80, snap_to_headings=False), CHARACTERS, max_tokens=None)
    assert plain.chunks[0].content.endswith("eight megabytes.\n\nwork_mem")
    assert plain.chunks[1].content.startswith("Sets the base memory.")


def test_a_heading_early_in_a_window_does_not_cut_it(markdown_doc: Any) -> None:
    doc = markdown_doc("# A\n\nShort.\n\n## B\n\nThe cat sat on the mat today. The dog ran far away from home.")
    # Only "A\n\nShort." (9 of 60 characters) comes before B: the window runs on past it.
    assert [c.text for c in chunk(doc, characters(60), CHARACTERS, max_tokens=None).chunks] == [
        "A\n\nShort.\n\nB\n\nThe cat sat on the mat today.",
        "A\n\nB\n\nThe dog ran far away from home.",
    ]


def test_unsnapped_character_windows_end_before_a_heading_too(markdown_doc: Any) -> None:
    doc = markdown_doc("# T\n\nabcdefghij\n\n## U\n\nklmnopqrstuvwxyz")
    result = chunk(doc, characters(20, 3, snap_to_sentences=False), CHARACTERS, max_tokens=None)
    # The first window stops at U (15 of its 20 characters before it); the next starts there with no overlap.
    assert [(c.text, c.char_start) for c in result.chunks] == [
        ("T\n\nabcdefghij", 0),
        ("T\n\nU\n\nklmnopqrstuvwx", 15),
        ("T\n\nU\n\nvwxyz", 29),
    ]


def test_markdown_through_its_parser_gets_the_same_headers() -> None:
    source = b"# Guide\n\n## Install\n\nRun the installer first. Then restart the machine.\n\nCheck the log after it."
    doc = parse(source, DocumentType.MARKDOWN, ParseConfig())
    result = chunk(doc, characters(60), CHARACTERS, max_tokens=None)
    assert [c.text for c in result.chunks] == [
        "Guide\n\nInstall\n\nRun the installer first.",
        "Guide\n\nInstall\n\nThen restart the machine.",
        "Guide\n\nInstall\n\nCheck the log after it.",
    ]


def test_the_default_config_repeats_headings_and_old_stored_configs_read_as_the_default() -> None:
    assert default_chunk_config() == FixedChunking(repeat_headings=True, snap_to_headings=True)
    stored = {"strategy": "fixed", "unit": "tokens", "size": 250, "overlap": 25, "snap_to_sentences": True}
    assert msgspec.convert(stored, FixedChunking).repeat_headings is True
    assert msgspec.convert({**stored, "repeat_headings": False}, FixedChunking).repeat_headings is False
    # A document chunked before has another config hash, so adding it to its collection again re-chunks it.
    model = "all-MiniLM-L6-v2"
    assert config_hash(None, msgspec.to_builtins(default_chunk_config()), model) != config_hash(None, stored, model)


def test_an_unsnapped_window_under_a_longer_header_does_not_end_inside_the_last(markdown_doc: Any) -> None:
    """Regression (#27, found by the property test): the window after a heading gets the heading's own room back
    only at the heading; one starting below it under a longer header ended before the window before it did."""
    doc = markdown_doc("# A rather long title here\n\n## Sub\n\nabcdefghij klmnopqrst uvwxyz abcdefghij")
    result = chunk(doc, characters(20, 18, snap_to_sentences=False), CHARACTERS, max_tokens=None)
    ends = [c.char_end for c in result.chunks]
    assert ends == sorted(ends)


def test_a_chunk_starting_inside_a_table_repeats_its_first_row() -> None:
    """Regression (#27): a CSV's later chunks were bare rows, their columns named only in the first chunk."""
    rows = "\n".join(f"{n},item-{n},{n * 3} kg" for n in range(1, 40))
    doc = parse(f"id,name,weight\n{rows}\n".encode(), DocumentType.CSV, ParseConfig())
    result = chunk(doc, characters(200), CHARACTERS, max_tokens=None)
    assert len(result.chunks) > 3
    assert result.chunks[0].text == result.chunks[0].content  # it starts with the row already
    for c in result.chunks[1:]:
        assert c.text == "id | name | weight\n" + c.content
        assert doc.text[c.char_start : c.char_end] == c.content
        assert len(c.text) <= 200
