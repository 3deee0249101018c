"""Builders for parsed documents (offsets computed, as a parser would) and a real WordPiece tokenizer.

Exposed as fixtures because test folders here are not packages: a fixture is the one way to share
helpers with the test modules beside this file.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import msgspec
import pytest
from tokenizers import Tokenizer, normalizers, pre_tokenizers
from tokenizers.models import WordPiece

from chonkit.document.parsed import BLOCK_SEPARATOR, Block, ParsedDocument, Section

DocBuilder = Callable[..., ParsedDocument]
MarkdownBuilder = Callable[[str], ParsedDocument]

# Whole words are one token each; "token", "##ization", "##s" show multi-piece words; anything else
# is one [UNK] per word, and every punctuation mark is its own token (BERT pre-tokenization).
VOCABULARY = [
    "[UNK]",
    *[
        "the",
        "a",
        "cat",
        "dog",
        "sat",
        "on",
        "mat",
        "it",
        "ran",
        "far",
        "and",
        "then",
        "sun",
        "is",
        "hot",
        "sky",
        "blue",
        "we",
        "go",
        "home",
        "now",
        "see",
        "x",
        "y",
        "z",
    ],
    *["guide", "install", "linux", "windows", "run", "apt", "token", "tokens", "##ization", "##s", "intro", "usage"],
    *list(".,!?;:'\"()[]/-<>"),
    *[str(digit) for digit in range(10)],
]


class WordPieceCounter:
    """A BERT-style HuggingFace tokenizer behind the chunker's counter interface (with offsets)."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer

    def count(self, texts: Sequence[str]) -> list[int]:
        return [len(encoding.ids) for encoding in self.tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    def offsets(self, texts: Sequence[str]) -> list[list[tuple[int, int]]]:
        return [list(e.offsets) for e in self.tokenizer.encode_batch(list(texts), add_special_tokens=False)]


class CountOnlyCounter:
    """The same tokenizer without offsets: the chunker must fall back to word and proportional cuts."""

    def __init__(self, counter: WordPieceCounter) -> None:
        self._counter = counter

    def count(self, texts: Sequence[str]) -> list[int]:
        return self._counter.count(texts)


def block(text: str, kind: str = "paragraph", **fields: object) -> Block:
    """A block whose offsets :func:`build_document` fills in."""
    return msgspec.convert({"text": text, "kind": kind, "char_start": 0, "char_end": 0, **fields}, Block)


def build_document(*sections: Sequence[Block], media_type: str = "text/plain") -> ParsedDocument:
    """Lay blocks out as a parser does: texts joined by the separator, offsets pointing into the join."""
    offset = 0
    placed: list[Section] = []
    for blocks in sections:
        laid: list[Block] = []
        for item in blocks:
            laid.append(msgspec.structs.replace(item, char_start=offset, char_end=offset + len(item.text)))
            offset += len(item.text) + len(BLOCK_SEPARATOR)
        placed.append(Section(blocks=tuple(laid)))
    document = ParsedDocument(media_type=media_type, sections=tuple(placed))
    assert all(document.text[b.char_start : b.char_end] == b.text for b in document.blocks)
    return document


def markdown_document(source: str) -> ParsedDocument:
    """A one-section document from tiny Markdown: paragraphs split on blank lines, ``#`` headings."""
    path: list[str] = []
    blocks: list[Block] = []
    for paragraph in source.strip().split("\n\n"):
        hashes = len(paragraph) - len(paragraph.lstrip("#"))
        if hashes:
            title = paragraph[hashes:].strip()
            path = [*path[: hashes - 1], title]
            blocks.append(block(title, "heading", level=hashes, heading_path=tuple(path)))
        else:
            blocks.append(block(paragraph.strip(), heading_path=tuple(path)))
    return build_document(blocks, media_type="text/markdown")


@pytest.fixture(scope="session")
def make_doc() -> DocBuilder:
    return build_document


@pytest.fixture(scope="session")
def make_block() -> Callable[..., Block]:
    return block


@pytest.fixture(scope="session")
def markdown_doc() -> MarkdownBuilder:
    return markdown_document


@pytest.fixture(scope="session")
def wordpiece() -> WordPieceCounter:
    tokenizer = Tokenizer(WordPiece({piece: i for i, piece in enumerate(VOCABULARY)}, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return WordPieceCounter(tokenizer)


@pytest.fixture(scope="session")
def count_only(wordpiece: WordPieceCounter) -> CountOnlyCounter:
    return CountOnlyCounter(wordpiece)
