"""Plain text keeps what its layout says: an indented block's lines stay in line with each other."""

from __future__ import annotations

from chonkit.document.parsing import DocumentType, ParseConfig
from chonkit.document.parsing.parser import parse


def _blocks(text: str) -> list[str]:
    return [block.text for block in parse(text.encode(), DocumentType.TEXT, ParseConfig()).blocks]


def test_an_indented_block_keeps_its_relative_indentation() -> None:
    source = "Apply the series:\n\n     $ git checkout main\n     $ git am -3 mailbox\n         --signoff\n\nDone.\n"

    assert _blocks(source) == [
        "Apply the series:",
        "$ git checkout main\n$ git am -3 mailbox\n    --signoff",
        "Done.",
    ]


def test_a_uniformly_indented_paragraph_loses_its_indent_on_every_line() -> None:
    assert _blocks("One line\nand another.\n\n  Two\n  lines.\n") == ["One line\nand another.", "Two\nlines."]
