"""The ``fixed`` strategy: exact windows in characters and tokens, sentence snapping, positions."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import msgspec

from chonkit.document.chunking import CharacterCounter, ChunkResult, FixedChunking, chunk
from chonkit.document.chunking.tokens import TokenOffsets

CHARACTERS = CharacterCounter()
SENTENCES = "The cat sat. The dog ran far. It is hot. We go home now."


def spans(result: ChunkResult) -> list[tuple[int, int, str]]:
    return [(c.char_start, c.char_end, c.content) for c in result.chunks]


def characters(size: int, overlap: int, *, snap: bool = True) -> FixedChunking:
    return FixedChunking(size=size, overlap=overlap, unit="characters", snap_to_sentences=snap)


def tokens(size: int, overlap: int, *, snap: bool = True) -> FixedChunking:
    return FixedChunking(size=size, overlap=overlap, unit="tokens", snap_to_sentences=snap)


def test_character_windows_are_exact_and_overlap_exactly(make_doc: Any, make_block: Any) -> None:
    doc = make_doc([make_block("abcdefghij klmnopqrst uvwxyz")])
    result = chunk(doc, characters(10, 3, snap=False), CHARACTERS, max_tokens=None)
    # Windows start every 7 characters; the last one loses its leading space to trimming.
    assert spans(result) == [(0, 10, "abcdefghij"), (7, 17, "hij klmnop"), (14, 24, "nopqrst uv"), (22, 28, "uvwxyz")]
    assert [c.index for c in result.chunks] == [0, 1, 2, 3]
    assert [c.token_count for c in result.chunks] == [10, 10, 10, 6]
    assert all(c.text == c.content and c.parent_index is None for c in result.chunks)


def test_character_windows_without_overlap_tile_the_text(make_doc: Any, make_block: Any) -> None:
    doc = make_doc([make_block("0123456789" * 3)])
    result = chunk(doc, characters(10, 0, snap=False), CHARACTERS, max_tokens=None)
    assert spans(result) == [(0, 10, "0123456789"), (10, 20, "0123456789"), (20, 30, "0123456789")]


def test_snapped_character_windows_hold_whole_sentences(make_doc: Any, make_block: Any) -> None:
    doc = make_doc([make_block(SENTENCES)])
    result = chunk(doc, characters(30, 0), CHARACTERS, max_tokens=None)
    assert spans(result) == [(0, 29, "The cat sat. The dog ran far."), (30, 56, "It is hot. We go home now.")]


def test_snapped_overlap_is_whole_sentences_within_the_overlap(make_doc: Any, make_block: Any) -> None:
    doc = make_doc([make_block(SENTENCES)])
    # "The dog ran far." is 16 characters: it fits an overlap of 17 but not one of 15.
    assert spans(chunk(doc, characters(30, 17), CHARACTERS, max_tokens=None)) == [
        (0, 29, "The cat sat. The dog ran far."),
        (13, 40, "The dog ran far. It is hot."),
        (30, 56, "It is hot. We go home now."),
    ]
    assert spans(chunk(doc, characters(30, 15), CHARACTERS, max_tokens=None)) == [
        (0, 29, "The cat sat. The dog ran far."),
        (30, 56, "It is hot. We go home now."),
    ]


def test_snapping_never_cuts_abbreviations_decimals_or_urls(make_doc: Any, make_block: Any) -> None:
    text = "Dr. Smith saw it. See e.g. this one. Pi is 3.14 here. Go to https://x.y/z.html now."
    result = chunk(make_doc([make_block(text)]), characters(30, 0), CHARACTERS, max_tokens=None)
    assert [c.content for c in result.chunks] == [
        "Dr. Smith saw it.",
        "See e.g. this one.",
        "Pi is 3.14 here.",
        "Go to https://x.y/z.html now.",
    ]


def test_a_sentence_larger_than_a_chunk_falls_back_to_words(make_doc: Any, make_block: Any) -> None:
    doc = make_doc([make_block("Hi. One two three four five six seven eight nine ten. Ok.")])
    assert spans(chunk(doc, characters(15, 0), CHARACTERS, max_tokens=None)) == [
        (0, 11, "Hi. One two"),
        (12, 27, "three four five"),
        (28, 43, "six seven eight"),
        (44, 57, "nine ten. Ok."),
    ]
    assert spans(chunk(doc, characters(15, 5), CHARACTERS, max_tokens=None)) == [
        (0, 11, "Hi. One two"),
        (8, 22, "two three four"),
        (18, 31, "four five six"),
        (28, 43, "six seven eight"),
        (38, 53, "eight nine ten."),
        (49, 57, "ten. Ok."),
    ]


def test_a_word_larger_than_a_chunk_falls_back_to_characters(make_doc: Any, make_block: Any) -> None:
    doc = make_doc([make_block("Go Supercalifragilisticexpialidocious now.")])
    assert spans(chunk(doc, characters(10, 0), CHARACTERS, max_tokens=None)) == [
        (0, 2, "Go"),
        (3, 13, "Supercalif"),
        (13, 23, "ragilistic"),
        (23, 33, "expialidoc"),
        (33, 42, "ious now."),
    ]


def test_one_giant_sentence_is_cut_between_words_into_full_windows(make_doc: Any, make_block: Any) -> None:
    words = " ".join(f"w{i:03d}" for i in range(200))  # 999 characters, no sentence end at all
    doc = make_doc([make_block(words)])
    result = chunk(doc, characters(100, 20), CHARACTERS, max_tokens=None)
    assert [c.content for c in result.chunks][:2] == [words[0:99], words[80:179]]
    assert all(len(c.content) <= 100 for c in result.chunks)
    assert all(c.content == doc.text[c.char_start : c.char_end] for c in result.chunks)
    assert all(not c.content.startswith(" ") and len(c.content.split()[0]) == 4 for c in result.chunks)
    assert result.chunks[-1].char_end == len(words)
    for previous, current in pairwise(result.chunks):
        assert previous.char_end - current.char_start == 19  # four whole words of overlap


def test_token_windows_snap_to_sentences(make_doc: Any, make_block: Any, wordpiece: Any) -> None:
    doc = make_doc([make_block(SENTENCES)])
    assert wordpiece.count(["The cat sat.", "The dog ran far.", "It is hot.", "We go home now."]) == [4, 5, 4, 5]
    result = chunk(doc, tokens(10, 5), wordpiece, max_tokens=None)
    assert spans(result) == [
        (0, 29, "The cat sat. The dog ran far."),
        (13, 40, "The dog ran far. It is hot."),
        (30, 56, "It is hot. We go home now."),
    ]
    assert [c.token_count for c in result.chunks] == [9, 9, 9]


def test_unsnapped_token_windows_cut_at_exact_token_boundaries(make_doc: Any, make_block: Any, wordpiece: Any) -> None:
    assert isinstance(wordpiece, TokenOffsets)  # the optional extra that makes exact token cuts possible
    doc = make_doc([make_block("The cat sat. The dog ran far.")])
    result = chunk(doc, tokens(4, 1, snap=False), wordpiece, max_tokens=None)
    # the cat sat . | . the dog ran | ran far .  (each window shares exactly one token with the last)
    assert spans(result) == [(0, 12, "The cat sat."), (11, 24, ". The dog ran"), (21, 29, "ran far.")]
    assert [c.token_count for c in result.chunks] == [4, 4, 3]


def test_without_token_offsets_unsnapped_windows_cut_between_words(
    make_doc: Any, make_block: Any, count_only: Any
) -> None:
    assert not isinstance(count_only, TokenOffsets)
    doc = make_doc([make_block("The cat sat. The dog ran far.")])
    result = chunk(doc, tokens(4, 1, snap=False), count_only, max_tokens=None)
    # "sat." is two tokens, more than the overlap, so the second window starts fresh.
    assert spans(result) == [(0, 12, "The cat sat."), (13, 24, "The dog ran"), (21, 29, "ran far.")]


def test_a_word_of_more_tokens_than_a_chunk_is_cut_at_its_tokens(
    make_doc: Any, make_block: Any, wordpiece: Any, count_only: Any
) -> None:
    doc = make_doc([make_block("We see tokenization now.")])
    assert [c.content for c in chunk(doc, tokens(1, 0), wordpiece, max_tokens=None).chunks] == [
        "We",
        "see",
        "token",
        "ization",
        "now",
        ".",
    ]
    # Counting alone cannot see token edges: the word is halved until each piece fits.
    assert [c.content for c in chunk(doc, tokens(1, 0), count_only, max_tokens=None).chunks] == [
        "We",
        "see",
        "tokeni",
        "zation",
        "no",
        "w",
        ".",
    ]
    assert [c.content for c in chunk(doc, tokens(2, 1), wordpiece, max_tokens=None).chunks] == [
        "We see",
        "tokenization",
        "now.",
    ]


def test_chunks_never_cross_a_section(make_doc: Any, make_block: Any) -> None:
    doc = make_doc([make_block("The cat sat."), make_block("The dog ran.")], [make_block("It is hot.")])
    result = chunk(doc, characters(1000, 100), CHARACTERS, max_tokens=None)
    assert spans(result) == [(0, 26, "The cat sat.\n\nThe dog ran."), (28, 38, "It is hot.")]
    unsnapped = chunk(doc, characters(20, 0, snap=False), CHARACTERS, max_tokens=None)
    assert spans(unsnapped) == [(0, 20, "The cat sat.\n\nThe do"), (20, 26, "g ran."), (28, 38, "It is hot.")]


def test_pages_come_from_the_pdf_page_blocks_under_each_chunk(make_doc: Any, make_block: Any) -> None:
    doc = make_doc(
        [
            make_block("The cat sat on the mat. It ran far.", "page", page=1),
            make_block("Then the sun is hot. The sky is blue.", "page", page=2),
            make_block("We go home now.", "page", page=3),
        ],
        media_type="application/pdf",
    )
    result = chunk(doc, characters(60, 25), CHARACTERS, max_tokens=None)
    assert [(c.content, c.page_start, c.page_end) for c in result.chunks] == [
        ("The cat sat on the mat. It ran far.\n\nThen the sun is hot.", 1, 2),
        ("Then the sun is hot. The sky is blue.\n\nWe go home now.", 2, 3),
    ]
    inside_one_page = chunk(doc, characters(20, 0), CHARACTERS, max_tokens=None)
    assert [(c.content, c.page_start, c.page_end) for c in inside_one_page.chunks] == [
        ("The cat sat on the", 1, 1),
        ("mat. It ran far.", 1, 1),
        ("Then the sun is hot.", 2, 2),
        ("The sky is blue.", 2, 2),
        ("We go home now.", 3, 3),
    ]


def test_pages_are_none_for_documents_without_pages(make_doc: Any, make_block: Any) -> None:
    result = chunk(make_doc([make_block(SENTENCES)]), characters(20, 0), CHARACTERS, max_tokens=None)
    assert {(c.page_start, c.page_end) for c in result.chunks} == {(None, None)}


def test_heading_path_is_that_of_the_block_a_chunk_starts_in(make_doc: Any, make_block: Any) -> None:
    doc = make_doc(
        [
            make_block("Guide", "heading", level=1, heading_path=("Guide",)),
            make_block("The cat sat.", heading_path=("Guide",)),
            make_block("Usage", "heading", level=2, heading_path=("Guide", "Usage")),
            make_block("We go home now.", heading_path=("Guide", "Usage")),
        ]
    )
    config = msgspec.structs.replace(characters(20, 0), repeat_headings=False)
    result = chunk(doc, config, CHARACTERS, max_tokens=None)
    assert [(c.content, c.heading_path) for c in result.chunks] == [
        ("Guide\n\nThe cat sat.", ("Guide",)),
        ("Usage", ("Guide", "Usage")),
        ("We go home now.", ("Guide", "Usage")),
    ]


def test_whitespace_only_text_gives_no_chunks(make_doc: Any, make_block: Any) -> None:
    doc = make_doc([make_block("   "), make_block("\n\t")], [])
    for config in (characters(10, 2), characters(10, 2, snap=False)):
        assert chunk(doc, config, CHARACTERS, max_tokens=None) == ChunkResult(chunks=[], parents=[], oversized=[])


def test_oversized_chunks_are_reported_and_kept_whole(make_doc: Any, make_block: Any, wordpiece: Any) -> None:
    doc = make_doc([make_block("The cat sat on the mat. It ran far and then the dog sat. We go home now.")])
    result = chunk(doc, characters(60, 0), wordpiece, max_tokens=6)
    assert [(c.content, c.token_count) for c in result.chunks] == [
        ("The cat sat on the mat. It ran far and then the dog sat.", 16),
        ("We go home now.", 5),
    ]
    assert result.oversized == [0]
    assert chunk(doc, characters(60, 0), wordpiece, max_tokens=4).oversized == [0, 1]
    assert chunk(doc, characters(60, 0), wordpiece, max_tokens=16).oversized == []
    assert chunk(doc, characters(60, 0), wordpiece, max_tokens=None).oversized == []


def test_token_count_is_the_tokenizers_even_when_sizing_in_characters(
    make_doc: Any, make_block: Any, wordpiece: Any
) -> None:
    result = chunk(make_doc([make_block(SENTENCES)]), characters(30, 0), wordpiece, max_tokens=None)
    assert [c.token_count for c in result.chunks] == wordpiece.count([c.text for c in result.chunks]) == [9, 9]
