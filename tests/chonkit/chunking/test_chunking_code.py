"""Code longer than a chunk is cut between its lines, so every chunk's lines keep their indentation."""

from __future__ import annotations

import pytest

from chonkit.document.chunking import CharacterCounter, FixedChunking, ParentChildChunking, StructureChunking, chunk
from chonkit.document.chunking.config import ChunkConfig
from chonkit.document.parsing import DocumentType, ParseConfig
from chonkit.document.parsing.parser import parse

BODY = "".join(f"    if value > {n}:\n        total = total.add({n})\n" for n in range(20))
SOURCE = f"# Code\n\nThe function below adds.\n\n```python\ndef add_all(value):\n{BODY}    return total\n```\n"


@pytest.mark.parametrize(
    "config",
    [
        FixedChunking(unit="characters", size=120, overlap=20),
        StructureChunking(unit="characters", size=120, overlap=20),
        ParentChildChunking(unit="characters", parent_size=300, child_size=120, child_overlap=20),
    ],
)
def test_chunks_of_code_start_at_a_line_and_keep_its_indentation(config: ChunkConfig) -> None:
    doc = parse(SOURCE.encode(), DocumentType.MARKDOWN, ParseConfig())
    chunks = chunk(doc, config, CharacterCounter(), max_tokens=None).chunks
    assert len(chunks) > 3
    for piece in chunks:
        line_start = doc.text.rfind("\n", 0, piece.char_start) + 1
        # Only the indentation of its first line is before a chunk (its content is trimmed), never part of a line.
        assert not doc.text[line_start : piece.char_start].strip(), piece.content
        for line in piece.content.split("\n")[1:]:
            assert line in SOURCE.split("\n"), line  # every later line as written, indentation and all
