"""DOCX parsing with python-docx, and the zip-level defences that run before it."""

from __future__ import annotations

import io
import random
import zipfile

import docx
import pytest
from docx.enum.style import WD_STYLE_TYPE

from chonkit.document.parsing import DocumentType, ParseConfig
from chonkit.document.parsing.docx_archive import check_zip_bomb, read_zip_directory
from chonkit.document.parsing.parser import parse
from common.errors import InvalidInput


def _save(document: docx.document.Document) -> bytes:
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def _zip(entries: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", method) as archive:
        for name, content in entries.items():
            archive.writestr(name, content)
    return buffer.getvalue()


def test_blocks_follow_reading_order_with_heading_paths(docx_sample: bytes) -> None:
    doc = parse(docx_sample, DocumentType.DOCX, ParseConfig())

    assert [(b.kind, b.text, b.heading_path, b.level) for b in doc.blocks] == [
        ("heading", "Handbook", ("Handbook",), 1),
        ("paragraph", "Welcome to the handbook.", ("Handbook",), None),
        ("heading", "Travel", ("Handbook", "Travel"), 2),
        ("paragraph", "Book trains early.", ("Handbook", "Travel"), None),
        ("list", "Passport\nTickets", ("Handbook", "Travel"), None),
        ("table", "City | Budget\nParis | 120 EUR", ("Handbook", "Travel"), None),
        ("heading", "Expenses", ("Expenses",), 1),
        ("paragraph", "Keep every receipt.", ("Expenses",), None),
    ]
    assert doc.media_type == DocumentType.DOCX.media_type
    assert doc.page_count is None
    for block in doc.blocks:
        assert doc.text[block.char_start : block.char_end] == block.text


def test_a_custom_style_based_on_a_heading_is_a_heading() -> None:
    document = docx.Document()
    custom = document.styles.add_style("Chapter Title", WD_STYLE_TYPE.PARAGRAPH)
    custom.base_style = document.styles["Heading 2"]
    document.add_paragraph("Chapter one", style="Chapter Title")
    document.add_paragraph("Body.")

    doc = parse(_save(document), DocumentType.DOCX, ParseConfig())

    assert [(b.kind, b.level) for b in doc.blocks] == [("heading", 2), ("paragraph", None)]
    assert doc.blocks[1].heading_path == ("Chapter one",)


def test_horizontally_merged_cells_are_listed_once() -> None:
    document = docx.Document()
    table = document.add_table(rows=2, cols=3)
    merged = table.cell(0, 0).merge(table.cell(0, 1))
    merged.text = "Wide"
    table.cell(0, 2).text = "Narrow"
    for column, text in enumerate(["a", "b", "c"]):
        table.cell(1, column).text = text

    doc = parse(_save(document), DocumentType.DOCX, ParseConfig())

    assert doc.blocks[0].text == "Wide | Narrow\na | b | c"


def test_line_filters_apply_to_docx_paragraphs(docx_sample: bytes) -> None:
    doc = parse(docx_sample, DocumentType.DOCX, ParseConfig(line_filters=["receipt", "^Tickets$"]))

    assert "receipt" not in doc.text
    assert [b.text for b in doc.blocks if b.kind == "list"] == ["Passport"]


def test_a_document_without_text_has_no_text() -> None:
    document = docx.Document()
    document.add_paragraph("   ")

    with pytest.raises(InvalidInput) as caught:
        parse(_save(document), DocumentType.DOCX, ParseConfig())
    assert caught.value.code == "no_text"


def test_a_zip_bomb_is_refused_before_it_is_inflated() -> None:
    # 20 MB of zeros deflate to ~20 KB: a ratio near 1000:1, the shape of every zip bomb.
    data = _zip({"[Content_Types].xml": b"<Types/>", "word/document.xml": bytes(20 * 1024 * 1024)})

    with pytest.raises(InvalidInput) as caught:
        parse(data, DocumentType.DOCX, ParseConfig())
    assert caught.value.code == "document_zip_bomb"
    assert "word/document.xml" in caught.value.detail


def test_total_size_and_entry_count_are_bounded() -> None:
    incompressible = random.Random(1).randbytes(64 * 1024)
    entries = read_zip_directory(_zip({f"part{i}.bin": incompressible for i in range(4)}))

    check_zip_bomb(entries)  # well inside the real limits
    with pytest.raises(InvalidInput, match="unpacks to") as too_big:
        check_zip_bomb(entries, max_uncompressed_bytes=200 * 1024)
    with pytest.raises(InvalidInput, match="entries") as too_many:
        check_zip_bomb(entries, max_entries=3)
    assert too_big.value.code == too_many.value.code == "document_zip_bomb"


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"this is not a zip at all", id="not-a-zip"),
        pytest.param(_zip({"[Content_Types].xml": b"<Types/>", "xl/workbook.xml": b"<x/>"}), id="no-document-xml"),
        pytest.param(b"PK\x03\x04" + bytes(200), id="zip-header-only"),
    ],
)
def test_unreadable_docx_is_corrupt(data: bytes) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse(data, DocumentType.DOCX, ParseConfig())

    assert caught.value.code == "document_corrupt"


def test_broken_xml_inside_a_real_docx_is_corrupt(docx_sample: bytes) -> None:
    with zipfile.ZipFile(io.BytesIO(docx_sample)) as original:
        parts = {info.filename: original.read(info) for info in original.infolist()}
    parts["word/document.xml"] = parts["word/document.xml"][:200]

    with pytest.raises(InvalidInput) as caught:
        parse(_zip(parts), DocumentType.DOCX, ParseConfig())
    assert caught.value.code == "document_corrupt"


def _with_document_xml(document: docx.document.Document, doctype: bytes, **texts: bytes) -> bytes:
    """The saved document with ``doctype`` before its root and each placeholder text replaced by raw XML."""
    with zipfile.ZipFile(io.BytesIO(_save(document))) as original:
        parts = {info.filename: original.read(info) for info in original.infolist()}
    xml = parts["word/document.xml"].replace(b"<w:document", doctype + b"<w:document", 1)
    for placeholder, raw in texts.items():
        xml = xml.replace(placeholder.encode(), raw)
    parts["word/document.xml"] = xml
    return _zip(parts)


def test_text_after_an_entity_reference_is_kept() -> None:
    """python-docx leaves declared entities unresolved, which cut a w:t's text at the first one."""
    document = docx.Document()
    document.add_paragraph("FIRST")
    document.add_table(rows=1, cols=1).cell(0, 0).text = "CELL"
    document.add_paragraph("Plain paragraph.")
    doctype = b'<!DOCTYPE w:document [<!ENTITY company "ACME &amp; Sons">]>'
    data = _with_document_xml(
        document,
        doctype,
        FIRST=b"Made by &company; since &#169; 1999 &#x2014; fish &amp; chips.",
        CELL=b"&company; pays",
    )

    doc = parse(data, DocumentType.DOCX, ParseConfig())

    assert [b.text for b in doc.blocks] == [
        "Made by ACME & Sons since \u00a9 1999 \u2014 fish & chips.",
        "ACME & Sons pays",
        "Plain paragraph.",
    ]


@pytest.mark.parametrize(
    "doctype",
    [
        pytest.param(b'<!DOCTYPE w:document [<!ENTITY company SYSTEM "file:///etc/hostname">]>', id="external-file"),
        pytest.param(b'<!DOCTYPE w:document [<!ENTITY company SYSTEM "http://127.0.0.1:9/x">]>', id="external-url"),
        pytest.param(
            b'<!DOCTYPE w:document [<!ENTITY a "aaaaaaaaaa">'
            + b"".join(b'<!ENTITY %c "%s">' % (98 + i, b"&%c;" % (97 + i) * 10) for i in range(9))
            + b'<!ENTITY company "&j;">]>',
            id="billion-laughs",
        ),
    ],
)
def test_external_and_exponential_entities_are_refused(doctype: bytes) -> None:
    document = docx.Document()
    document.add_paragraph("FIRST")

    with pytest.raises(InvalidInput) as caught:
        parse(_with_document_xml(document, doctype, FIRST=b"Made by &company;."), DocumentType.DOCX, ParseConfig())
    assert caught.value.code == "document_corrupt"
