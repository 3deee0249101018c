"""The contract every parser keeps: block offsets index the joined text exactly, for every type."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chonkit.document.parsed import BLOCK_SEPARATOR, ParsedDocument
from chonkit.document.parsing import DocumentType, ParseConfig, sniff
from chonkit.document.parsing.parser import parse
from common.errors import InvalidInput

EXTENSION = {
    DocumentType.PDF: "pdf",
    DocumentType.DOCX: "docx",
    DocumentType.MARKDOWN: "md",
    DocumentType.HTML: "html",
    DocumentType.TEXT: "txt",
    DocumentType.CSV: "csv",
    DocumentType.JSON: "json",
    DocumentType.PNG: "png",
    DocumentType.JPEG: "jpg",
    DocumentType.TIFF: "tif",
}


def assert_offsets_hold(doc: ParsedDocument) -> None:
    text = doc.text
    position = 0
    for block in doc.blocks:
        assert block.char_start == position
        assert text[block.char_start : block.char_end] == block.text
        assert block.text == block.text.strip() or block.kind == "code"
        assert block.text
        position = block.char_end + len(BLOCK_SEPARATOR)
    assert position == len(text) + len(BLOCK_SEPARATOR)


@pytest.mark.parametrize("doc_type", list(DocumentType))
def test_offsets_index_the_joined_text_for_every_type(
    samples: dict[DocumentType, bytes], doc_type: DocumentType
) -> None:
    data = samples[doc_type]
    assert sniff(f"sample.{EXTENSION[doc_type]}", data) is doc_type

    doc = parse(data, doc_type, ParseConfig())

    assert doc.blocks
    assert doc.media_type == doc_type.media_type
    assert_offsets_hold(doc)


@pytest.mark.parametrize("doc_type", list(DocumentType))
def test_offsets_still_hold_after_line_filters(samples: dict[DocumentType, bytes], doc_type: DocumentType) -> None:
    doc = parse(samples[doc_type], doc_type, ParseConfig(line_filters=["(?i)first", "Ada"]))

    assert "Ada" not in doc.text
    assert_offsets_hold(doc)


_TEXTUAL = st.sampled_from([DocumentType.TEXT, DocumentType.MARKDOWN, DocumentType.HTML, DocumentType.CSV])
_MARKUP_ALPHABET = st.sampled_from(["#", "-", "*", "`", "<", ">", "/", "|", "=", " ", "\n", "\r", "\t", "\x00", "p"])
_DOCUMENT_TEXT = st.lists(st.one_of(_MARKUP_ALPHABET, st.text(max_size=8)), max_size=80).map("".join)


def _parse_or_error_code(data: bytes, doc_type: DocumentType) -> ParsedDocument | str:
    try:
        return parse(data, doc_type, ParseConfig())
    except InvalidInput as error:
        return error.code


@settings(max_examples=200, deadline=None)
@given(doc_type=_TEXTUAL, text=_DOCUMENT_TEXT, encoding=st.sampled_from(["utf-8", "utf-16", "utf-8-sig"]))
def test_any_text_parses_to_valid_offsets_or_no_text(doc_type: DocumentType, text: str, encoding: str) -> None:
    result = _parse_or_error_code(text.encode(encoding), doc_type)

    if isinstance(result, str):
        assert result in {"no_text", "empty_file"}
    else:
        assert_offsets_hold(result)


@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=300), doc_type=_TEXTUAL)
def test_arbitrary_bytes_never_crash_a_text_parser(data: bytes, doc_type: DocumentType) -> None:
    result = _parse_or_error_code(data, doc_type)

    if isinstance(result, str):
        assert result in {"no_text", "empty_file"}
    else:
        assert_offsets_hold(result)
