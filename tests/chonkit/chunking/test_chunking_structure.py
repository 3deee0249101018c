"""The ``structure`` strategy: one chunk per heading section, its heading path embedded first."""

from __future__ import annotations

from typing import Any

from chonkit.document.chunking import CharacterCounter, StructureChunking, chunk

CHARACTERS = CharacterCounter()

GUIDE = """Preface text here.

# Guide

Intro text.

## Install

Get it.

### Linux

Use apt. Then run it. And more.

Second linux paragraph.

### Windows

Use the installer.

## Usage

Run it.

# Appendix"""


def characters(size: int, overlap: int) -> StructureChunking:
    return StructureChunking(size=size, overlap=overlap, unit="characters")


def test_each_heading_section_is_a_chunk_with_its_path_repeated(markdown_doc: Any) -> None:
    doc = markdown_doc(GUIDE)
    result = chunk(doc, characters(200, 0), CHARACTERS, max_tokens=None)
    assert [(c.text, c.heading_path) for c in result.chunks] == [
        ("Preface text here.", ()),
        ("Guide\n\nIntro text.", ("Guide",)),
        ("Guide > Install\n\nGet it.", ("Guide", "Install")),
        (
            "Guide > Install > Linux\n\nUse apt. Then run it. And more.\n\nSecond linux paragraph.",
            ("Guide", "Install", "Linux"),
        ),
        ("Guide > Install > Windows\n\nUse the installer.", ("Guide", "Install", "Windows")),
        ("Guide > Usage\n\nRun it.", ("Guide", "Usage")),
    ]
    # The source span is the section's body only: the path is embedded, not part of the content.
    assert [(c.char_start, c.char_end, c.content) for c in result.chunks] == [
        (0, 18, "Preface text here."),
        (27, 38, "Intro text."),
        (49, 56, "Get it."),
        (65, 121, "Use apt. Then run it. And more.\n\nSecond linux paragraph."),
        (132, 150, "Use the installer."),
        (159, 166, "Run it."),
    ]
    assert all(doc.text[c.char_start : c.char_end] == c.content for c in result.chunks)
    assert [c.token_count for c in result.chunks] == [len(c.text) for c in result.chunks]
    assert [c.index for c in result.chunks] == list(range(6))
    assert result.parents == []


def test_large_sections_are_sub_split_with_the_path_on_every_piece(markdown_doc: Any) -> None:
    result = chunk(markdown_doc(GUIDE), characters(50, 12), CHARACTERS, max_tokens=50)
    # The 25-character Linux path leaves 25 characters per piece, overlapping by whole sentences.
    assert [(c.char_start, c.char_end, c.text) for c in result.chunks if c.heading_path[-1:] == ("Linux",)] == [
        (65, 86, "Guide > Install > Linux\n\nUse apt. Then run it."),
        (74, 96, "Guide > Install > Linux\n\nThen run it. And more."),
        (98, 121, "Guide > Install > Linux\n\nSecond linux paragraph."),
    ]
    # "Guide > Install > Windows" would take more than half of the chunk: its outermost heading goes.
    assert [c.text for c in result.chunks if c.heading_path[-1:] == ("Windows",)] == [
        "Install > Windows\n\nUse the installer."
    ]
    assert all(len(c.text) <= 50 for c in result.chunks)
    assert result.oversized == []


def test_sizes_in_tokens_include_the_heading_path(markdown_doc: Any, wordpiece: Any) -> None:
    result = chunk(markdown_doc(GUIDE), StructureChunking(size=12, overlap=0), wordpiece, max_tokens=12)
    assert wordpiece.count(["Guide > Install > Linux\n\n"]) == [5]
    linux = [(c.text, c.token_count) for c in result.chunks if c.heading_path == ("Guide", "Install", "Linux")]
    assert linux == [
        ("Guide > Install > Linux\n\nUse apt. Then run it.", 12),
        ("Guide > Install > Linux\n\nAnd more.\n\nSecond linux paragraph.", 12),
    ]
    assert result.oversized == []


def test_a_path_longer_than_half_a_chunk_keeps_its_innermost_headings(markdown_doc: Any) -> None:
    doc = markdown_doc("# A very long top heading\n\n## Setup\n\nRun it now. Then stop.")
    result = chunk(doc, characters(30, 0), CHARACTERS, max_tokens=None)
    assert [(c.text, c.heading_path) for c in result.chunks] == [
        ("Setup\n\nRun it now. Then stop.", ("A very long top heading", "Setup")),
    ]
    tiny = chunk(doc, characters(12, 0), CHARACTERS, max_tokens=None)
    assert [c.text for c in tiny.chunks] == ["Run it now.", "Then stop."]


def test_body_blocks_without_heading_blocks_are_grouped_by_their_path(make_doc: Any, make_block: Any) -> None:
    doc = make_doc(
        [
            make_block("One.", heading_path=("A",)),
            make_block("Two.", heading_path=("A",)),
            make_block("Three.", heading_path=("B",)),
        ]
    )
    result = chunk(doc, characters(100, 0), CHARACTERS, max_tokens=None)
    assert [(c.text, c.content) for c in result.chunks] == [
        ("A\n\nOne.\n\nTwo.", "One.\n\nTwo."),
        ("B\n\nThree.", "Three."),
    ]


def test_sections_are_never_crossed(make_doc: Any, make_block: Any) -> None:
    doc = make_doc(
        [make_block("Intro", "heading", level=1, heading_path=("Intro",)), make_block("One.", heading_path=("Intro",))],
        [make_block("Two.", heading_path=("Intro",))],
    )
    result = chunk(doc, characters(100, 0), CHARACTERS, max_tokens=None)
    assert [(c.text, c.char_start) for c in result.chunks] == [("Intro\n\nOne.", 7), ("Intro\n\nTwo.", 13)]


def test_pdf_pages_follow_the_section_body(make_doc: Any, make_block: Any) -> None:
    doc = make_doc(
        [
            make_block("Results", "heading", level=1, heading_path=("Results",), page=4),
            make_block("It ran far.", heading_path=("Results",), page=4),
            make_block("The sun is hot.", heading_path=("Results",), page=5),
        ],
        media_type="application/pdf",
    )
    [only] = chunk(doc, characters(100, 0), CHARACTERS, max_tokens=None).chunks
    assert (only.content, only.page_start, only.page_end) == ("It ran far.\n\nThe sun is hot.", 4, 5)
