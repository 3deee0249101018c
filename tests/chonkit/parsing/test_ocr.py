"""OCR while parsing (real RapidOCR models, real pymupdf and Pillow): scans made here from text PDFs, so the truth is
known; the ``ocr`` parse option (off / auto / force); image uploads; bad images refused with their codes."""

from __future__ import annotations

import dataclasses
import io
import struct
import zlib

import numpy as np
import pymupdf
import pytest
from PIL import Image

from chonkit.document.isolated import parse_isolated
from chonkit.document.parsing import DocumentType, PageRange, ParseConfig, ocr, sniff, validate_parse_config
from chonkit.document.parsing.ocr import MAX_IMAGE_PIXELS, needs_ocr
from chonkit.document.parsing.parser import parse
from common.errors import InvalidInput, Unavailable, UnsupportedMediaType
from common.packaged import PackagedFile
from tests.chonkit.parsing.conftest import make_pdf, make_scanned_pdf, make_text_image

PAGES = [
    "Quarterly travel policy\nEvery trip abroad needs approval from a director.",
    "Reimbursement rules\nSubmit receipts within thirty days of returning.",
]


def _words(text: str) -> set[str]:
    return {word.strip(".,").lower() for word in text.split()}


def test_a_scanned_pdf_is_read_by_ocr_and_marked() -> None:
    doc = parse(make_scanned_pdf(PAGES), DocumentType.PDF, ParseConfig())

    assert [(b.page, b.ocr) for b in doc.blocks] == [(1, True), (2, True)]
    assert doc.ocr_pages == (1, 2)
    for block, truth in zip(doc.blocks, PAGES, strict=True):
        assert _words(truth) <= _words(block.text), block.text


def test_a_text_pdf_is_read_from_its_text_layer_in_auto_mode() -> None:
    doc = parse(make_pdf(PAGES), DocumentType.PDF, ParseConfig())

    assert [b.ocr for b in doc.blocks] == [False, False]
    assert doc.ocr_pages == ()


def test_force_recognises_a_text_pdf_from_its_images() -> None:
    doc = parse(make_pdf(PAGES[:1]), DocumentType.PDF, ParseConfig(ocr="force"))

    (block,) = doc.blocks
    assert block.ocr
    assert doc.ocr_pages == (1,)
    assert _words(PAGES[0]) <= _words(block.text)


def test_ocr_off_leaves_a_scan_without_text_and_says_why() -> None:
    with pytest.raises(InvalidInput) as caught:
        parse(make_scanned_pdf(PAGES[:1]), DocumentType.PDF, ParseConfig(ocr="off"))

    assert caught.value.code == "no_text"
    assert "OCR is off" in caught.value.detail


def test_a_page_with_only_a_scanner_stamp_in_its_text_layer_counts_as_scanned() -> None:
    scan = pymupdf.open(stream=make_scanned_pdf(PAGES[:1]), filetype="pdf")
    scan.load_page(0).insert_text((20, 20), "p. 1", fontsize=8)
    doc = parse(scan.tobytes(), DocumentType.PDF, ParseConfig())

    assert doc.ocr_pages == (1,)
    assert _words(PAGES[0]) <= _words(doc.blocks[0].text)
    assert needs_ocr("p. 1", has_images=True, mode="auto")
    assert not needs_ocr("p. 1", has_images=False, mode="auto")  # a blank page is not a scan


def test_checking_an_upload_finds_the_scanned_pages_without_recognising_them() -> None:
    data = make_scanned_pdf(PAGES)

    doc = parse(data, DocumentType.PDF, ParseConfig(), recognise=False)

    assert doc.ocr_pages == (1, 2)
    assert doc.blocks == ()
    assert doc.page_count == 2


def test_a_table_row_stays_on_one_line() -> None:
    table = make_text_image(["City        Budget\nParis       120 EUR\nBerlin      95 EUR"], "PNG")

    doc = parse(table, DocumentType.PNG, ParseConfig())

    lines = [" ".join(line.split()) for line in doc.blocks[0].text.splitlines()]
    assert "Paris 120 EUR" in lines, lines
    assert "Berlin 95 EUR" in lines, lines


@pytest.mark.parametrize(("doc_type", "image_format"), [(DocumentType.PNG, "PNG"), (DocumentType.JPEG, "JPEG")])
def test_an_image_upload_is_ocrd(doc_type: DocumentType, image_format: str) -> None:
    data = make_text_image(["Invoice number 4711 is overdue"], image_format)

    assert sniff(f"scan.{image_format.lower()}", data) is doc_type
    doc = parse(data, doc_type, ParseConfig())

    (block,) = doc.blocks
    assert (block.page, block.ocr, doc.page_count, doc.media_type) == (1, True, 1, doc_type.media_type)
    assert {"invoice", "number", "4711", "overdue"} <= _words(block.text)


def test_a_multi_page_tiff_gives_a_page_per_frame_and_honours_the_page_range() -> None:
    data = make_text_image(["Faxed cover sheet", "Second page with the order", "Third page signed"], "TIFF")

    whole = parse(data, DocumentType.TIFF, ParseConfig())
    second = parse(data, DocumentType.TIFF, ParseConfig(page_range=PageRange(start=2, end=2)))

    assert [b.page for b in whole.blocks] == [1, 2, 3]
    assert whole.page_count == 3
    assert "order" in _words(whole.blocks[1].text)
    assert [b.page for b in second.blocks] == [2]


def test_an_image_with_ocr_off_has_no_text() -> None:
    with pytest.raises(InvalidInput) as caught:
        parse(make_text_image(["Some words"]), DocumentType.PNG, ParseConfig(ocr="off"))

    assert caught.value.code == "no_text"
    assert "OCR is off" in caught.value.detail


def test_a_truncated_image_is_corrupt() -> None:
    data = make_text_image(["Cut off while uploading"])

    with pytest.raises(InvalidInput) as caught:
        parse(data[: len(data) // 2], DocumentType.PNG, ParseConfig(), recognise=False)

    assert caught.value.code == "document_corrupt"


def _png_declaring(width: int, height: int) -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    pixels = zlib.compress(b"\x00" * 1024)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


@pytest.mark.parametrize("side", [7000, 30000], ids=["past-our-limit", "past-pillows-bomb-limit"])
def test_an_image_declaring_too_many_pixels_is_refused_before_decoding(side: int) -> None:
    assert side * side > MAX_IMAGE_PIXELS

    with pytest.raises(InvalidInput) as caught:
        parse(_png_declaring(side, side), DocumentType.PNG, ParseConfig(), recognise=False)

    assert caught.value.code == "image_too_large"


def test_an_image_whose_content_is_not_what_its_extension_says_is_a_mismatch() -> None:
    buffer = io.BytesIO()
    Image.new("RGB", (20, 20), "white").save(buffer, "PNG")

    with pytest.raises(UnsupportedMediaType) as caught:
        sniff("photo.jpg", buffer.getvalue())

    assert caught.value.code == "type_mismatch"


def test_an_unknown_ocr_mode_is_refused() -> None:
    with pytest.raises(InvalidInput) as caught:
        validate_parse_config({"ocr": "always"})

    assert caught.value.code == "invalid_parse_config"


async def test_ocr_runs_in_the_parse_process() -> None:
    doc = await parse_isolated(make_scanned_pdf(PAGES[1:]), DocumentType.PDF, ParseConfig())

    assert doc.ocr_pages == (1,)
    assert doc.blocks[0].ocr
    assert _words(PAGES[1]) <= _words(doc.blocks[0].text)


def test_plain_long_lines_are_not_turned_upside_down() -> None:
    """RapidOCR's line-direction classifier read this line (from docs/architecture.md) as upside down and returned
    garbage; it is off."""
    line = "Ragu is one repository with two services, a published contract and the kernel both"
    scan = make_scanned_pdf([f"# Architecture\n{line}\nservices share."])

    doc = parse(scan, DocumentType.PDF, ParseConfig())

    assert _words(line) <= _words(doc.blocks[0].text), doc.blocks[0].text


@pytest.mark.parametrize("model", ["DETECTION_MODEL", "RECOGNITION_MODEL"])
def test_an_ocr_model_unlike_its_pinned_digest_is_refused_before_it_loads(
    model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pinned: PackagedFile = getattr(ocr, model)
    monkeypatch.setattr(ocr, model, dataclasses.replace(pinned, sha256="0" * 64))
    ocr._engine.cache_clear()  # the engine this process may have loaded already
    try:
        with pytest.raises(Unavailable) as caught:
            ocr.recognise(np.zeros((8, 8, 3), dtype=np.uint8))
    finally:
        ocr._engine.cache_clear()

    assert caught.value.code == "ocr_model_mismatch"
    assert caught.value.extra["actual_sha256"] == pinned.sha256
