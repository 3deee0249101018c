"""The ``parent_child`` strategy: children embedded, each pointing at the larger parent it lies in."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from chonkit.document.chunking import CharacterCounter, ChunkResult, ParentChildChunking, chunk

CHARACTERS = CharacterCounter()
PARAGRAPHS = (
    "The cat sat on the mat. It ran far. The dog sat.",
    "Then the sun is hot. The sky is blue. We go home now.",
)


def layout(result: ChunkResult) -> tuple[list[tuple[int, int, str, int | None]], list[tuple[int, int, str]]]:
    children = [(c.char_start, c.char_end, c.content, c.parent_index) for c in result.chunks]
    parents = [(p.char_start, p.char_end, p.content) for p in result.parents]
    return children, parents


def test_children_and_parents_have_exact_positions(make_doc: Any, make_block: Any) -> None:
    doc = make_doc([make_block(PARAGRAPHS[0]), make_block(PARAGRAPHS[1])], [make_block("See x. See y. See z.")])
    config = ParentChildChunking(parent_size=60, child_size=25, child_overlap=12, unit="characters")
    result = chunk(doc, config, CHARACTERS, max_tokens=None)
    assert layout(result) == (
        [
            (0, 23, "The cat sat on the mat.", 0),
            (24, 48, "It ran far. The dog sat.", 0),
            (50, 70, "Then the sun is hot.", 1),
            (71, 87, "The sky is blue.", 1),
            (88, 103, "We go home now.", 1),
            (105, 125, "See x. See y. See z.", 2),
        ],
        [
            (0, 48, "The cat sat on the mat. It ran far. The dog sat."),
            (50, 103, "Then the sun is hot. The sky is blue. We go home now."),
            (105, 125, "See x. See y. See z."),
        ],
    )
    assert [c.index for c in result.chunks] == list(range(6))
    assert [p.index for p in result.parents] == [0, 1, 2]
    assert all(p.parent_index is None and p.text == p.content for p in result.parents)
    assert [p.token_count for p in result.parents] == [48, 53, 20]


def test_children_overlap_inside_their_parent_but_never_across_parents(make_doc: Any, make_block: Any) -> None:
    doc = make_doc([make_block("See x. See y. See z. Go now. Go on.")])
    config = ParentChildChunking(parent_size=20, child_size=13, child_overlap=6, unit="characters")
    assert layout(chunk(doc, config, CHARACTERS, max_tokens=None)) == (
        [
            (0, 13, "See x. See y.", 0),
            (7, 20, "See y. See z.", 0),
            (21, 28, "Go now.", 1),
            (29, 35, "Go on.", 1),
        ],
        [(0, 20, "See x. See y. See z."), (21, 35, "Go now. Go on.")],
    )


def test_sizes_in_tokens_and_only_children_are_reported_oversized(
    make_doc: Any, make_block: Any, wordpiece: Any
) -> None:
    doc = make_doc([make_block(PARAGRAPHS[0]), make_block(PARAGRAPHS[1])], [make_block("See x. See y. See z.")])
    result = chunk(doc, ParentChildChunking(parent_size=16, child_size=8, child_overlap=0), wordpiece, max_tokens=7)
    assert [(c.content, c.token_count, c.parent_index) for c in result.chunks] == [
        ("The cat sat on the mat.", 7, 0),
        ("It ran far. The dog sat.", 8, 0),
        ("Then the sun is hot.", 6, 1),
        ("The sky is blue.", 5, 1),
        ("We go home now.", 5, 1),
        ("See x. See y.", 6, 2),
        ("See z.", 3, 2),
    ]
    assert [(p.content, p.token_count) for p in result.parents] == [
        (PARAGRAPHS[0], 15),
        (PARAGRAPHS[1], 16),
        ("See x. See y. See z.", 9),
    ]
    assert result.oversized == [1]  # parents (up to 16 tokens) are stored, not embedded


def test_every_child_lies_within_its_parent(make_doc: Any, make_block: Any) -> None:
    sentences = [f"Sentence number {i} says {'very ' * (i % 5)}little." for i in range(60)]
    doc = make_doc(
        [make_block(" ".join(sentences[:30]), "page", page=1), make_block(" ".join(sentences[30:]), "page", page=2)],
        media_type="application/pdf",
    )
    config = ParentChildChunking(parent_size=400, child_size=90, child_overlap=30, unit="characters")
    result = chunk(doc, config, CHARACTERS, max_tokens=None)
    assert len(result.parents) > 3
    assert len(result.chunks) > 2 * len(result.parents)
    by_parent: dict[int, list[int]] = {}
    for child in result.chunks:
        assert child.parent_index is not None
        parent = result.parents[child.parent_index]
        assert parent.char_start <= child.char_start < child.char_end <= parent.char_end
        pages = [parent.page_start, child.page_start, child.page_end, parent.page_end]
        assert None not in pages
        assert pages == sorted(pages)  # type: ignore[type-var]
        by_parent.setdefault(child.parent_index, []).append(child.index)
    assert sorted(by_parent) == list(range(len(result.parents)))
    flattened = [index for indexes in by_parent.values() for index in indexes]
    assert flattened == list(range(len(result.chunks)))  # children come grouped, in parent order
    for first, second in pairwise(result.parents):
        assert first.char_end <= second.char_start  # parents do not overlap
    assert (result.parents[0].page_start, result.parents[-1].page_end) == (1, 2)
    assert all(len(p.content) <= 400 for p in result.parents)
    assert all(len(c.content) <= 90 for c in result.chunks)
