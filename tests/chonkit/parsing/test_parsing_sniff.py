"""Type sniffing: the extension says what a file claims to be, the bytes must not contradict it."""

from __future__ import annotations

import io
import random
import zipfile
from collections.abc import Callable

import pytest

from chonkit.document.parsing import MEDIA_TYPES, DocumentType, sniff
from common.errors import InvalidInput, UnsupportedMediaType


def _zip(entries: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in entries.items():
            archive.writestr(name, content)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("filename", "doc_type"),
    [
        ("report.pdf", DocumentType.PDF),
        ("Report.PDF", DocumentType.PDF),
        ("notes.docx", DocumentType.DOCX),
        ("readme.md", DocumentType.MARKDOWN),
        ("readme.markdown", DocumentType.MARKDOWN),
        ("page.html", DocumentType.HTML),
        ("page.htm", DocumentType.HTML),
        ("notes.txt", DocumentType.TEXT),
        ("table.csv", DocumentType.CSV),
        ("data.json", DocumentType.JSON),
    ],
)
def test_matching_content_is_sniffed_as_its_extension(
    samples: dict[DocumentType, bytes], filename: str, doc_type: DocumentType
) -> None:
    assert sniff(filename, samples[doc_type]) is doc_type


@pytest.mark.parametrize("filename", ["../../etc/passwd.txt", "C:\\Users\\eve\\..\\notes.txt", "  notes.txt  "])
def test_only_the_extension_of_a_path_like_filename_matters(filename: str) -> None:
    assert sniff(filename, b"hello") is DocumentType.TEXT


@pytest.mark.parametrize("filename", ["setup.exe", "archive.zip", "noextension", ".txt", "notes.txt.exe", "scan.doc"])
def test_unsupported_extensions_are_refused(filename: str) -> None:
    with pytest.raises(UnsupportedMediaType) as caught:
        sniff(filename, b"hello")

    assert caught.value.code == "unsupported_type"
    assert ".pdf" in caught.value.detail  # the message lists what is supported


def test_empty_file_is_invalid_not_mismatched() -> None:
    with pytest.raises(InvalidInput) as caught:
        sniff("notes.txt", b"")

    assert caught.value.code == "empty_file"


def _random_bytes(size: int) -> bytes:
    return random.Random(7).randbytes(size)


@pytest.mark.parametrize(
    ("filename", "make"),
    [
        pytest.param("letter.docx", lambda s: s[DocumentType.PDF], id="pdf-named-docx"),
        pytest.param("report.pdf", lambda s: s[DocumentType.DOCX], id="docx-named-pdf"),
        pytest.param("report.pdf", lambda s: _zip({"a.txt": b"x"}), id="zip-named-pdf"),
        pytest.param("report.pdf", lambda s: b"just some text", id="text-named-pdf"),
        pytest.param("notes.txt", lambda s: s[DocumentType.PDF], id="pdf-named-txt"),
        pytest.param("notes.txt", lambda s: _random_bytes(4096), id="binary-garbage-named-txt"),
        pytest.param("notes.md", lambda s: b"# Title\n\x00\x01 text", id="nul-in-markdown"),
        pytest.param("notes.txt", lambda s: bytes(b for i in range(512) for b in (i % 256, 0)), id="16-bit-binary"),
        pytest.param("page.html", lambda s: b"\x89PNG\r\n\x1a\n" + b"IHDR" * 10, id="png-named-html"),
        pytest.param("data.json", lambda s: b"\x1b[31m" * 50 + b"x", id="control-characters"),
        pytest.param(
            "letter.docx", lambda s: _zip({"[Content_Types].xml": b"<x/>", "xl/workbook.xml": b"<x/>"}), id="xlsx"
        ),
        pytest.param("letter.docx", lambda s: b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(600), id="legacy-doc"),
    ],
)
def test_content_contradicting_the_extension_is_a_mismatch(
    samples: dict[DocumentType, bytes], filename: str, make: Callable[[dict[DocumentType, bytes]], bytes]
) -> None:
    data = make(samples)
    with pytest.raises(UnsupportedMediaType) as caught:
        sniff(filename, data)

    assert caught.value.code == "type_mismatch"


@pytest.mark.parametrize(
    "data",
    [
        "Grüße, “quoted” \u2013 5 €".encode("cp1252"),
        "Grüße aus Köln".encode("latin-1"),
        "text in UTF-16 with a BOM: ½ ü 日本".encode("utf-16"),
        "Plain ASCII notes, as Windows tools save them\r\n".encode("utf-16-le"),
        "Plain ASCII in big-endian UTF-16, Grüße".encode("utf-16-be"),
        "UTF-8 with a BOM".encode("utf-8-sig"),
        "mostly UTF-8 — naïve ".encode() * 5 + b"\xff broken",
    ],
)
def test_text_in_common_encodings_is_text(data: bytes) -> None:
    assert sniff("notes.txt", data) is DocumentType.TEXT


def test_a_broken_zip_claiming_to_be_docx_is_corrupt() -> None:
    data = _zip({"[Content_Types].xml": b"<x/>", "word/document.xml": b"<x/>"})
    central_directory = data.rindex(b"PK\x01\x02")

    with pytest.raises(InvalidInput) as caught:
        sniff("letter.docx", data[:central_directory])
    assert caught.value.code == "document_corrupt"


def test_a_password_protected_docx_is_recognised_as_encrypted() -> None:
    # Encrypted OOXML is an OLE compound file holding an "EncryptionInfo" stream.
    data = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(500) + "EncryptionInfo".encode("utf-16-le") + bytes(100)

    with pytest.raises(InvalidInput) as caught:
        sniff("secret.docx", data)
    assert caught.value.code == "document_encrypted"


def test_a_docx_zip_bomb_is_refused_at_upload() -> None:
    data = _zip({"[Content_Types].xml": b"<x/>", "word/document.xml": bytes(20 * 1024 * 1024)})

    with pytest.raises(InvalidInput) as caught:
        sniff("bomb.docx", data)
    assert caught.value.code == "document_zip_bomb"


def test_every_type_has_a_media_type_for_downloads() -> None:
    assert set(MEDIA_TYPES) == set(DocumentType)
    assert DocumentType.PDF.media_type == "application/pdf"
    assert DocumentType.DOCX.media_type == "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    assert DocumentType.MARKDOWN.media_type == "text/markdown"
    assert DocumentType.JSON.media_type == "application/json"
