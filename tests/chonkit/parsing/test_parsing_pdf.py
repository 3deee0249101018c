"""PDF parsing with pymupdf: pages, page ranges, sections, and the ways a PDF can be unusable."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pymupdf
import pytest

from chonkit.document.chunking import CharacterCounter, FixedChunking, chunk
from chonkit.document.parsing import DocumentType, PageRange, ParseConfig, sniff
from chonkit.document.parsing.parser import parse
from common.errors import InvalidInput

PdfFactory = Callable[..., bytes]
PAGES = [f"Chapter {n}. This is the text of page {n}.\nPage {n} of 5" for n in range(1, 6)]


def test_every_page_becomes_a_numbered_page_block(pdf_factory: PdfFactory) -> None:
    doc = parse(pdf_factory(PAGES), DocumentType.PDF, ParseConfig())

    assert doc.page_count == 5
    assert doc.media_type == "application/pdf"
    assert [b.page for b in doc.blocks] == [1, 2, 3, 4, 5]
    assert {b.kind for b in doc.blocks} == {"page"}
    assert doc.blocks[2].text == "Chapter 3. This is the text of page 3.\nPage 3 of 5"
    (section,) = doc.sections
    assert (section.page_start, section.page_end) == (1, 5)


def test_bookmarks_found_on_their_page_become_headings_of_their_level() -> None:
    document = pymupdf.open()
    for text in ["Guide\nIntro text here.\nInstall\nRun the installer.", "More install text.\nUsage\nRun it."]:
        document.new_page().insert_textbox(pymupdf.Rect(50, 50, 550, 800), text, fontsize=11)
    # "Missing" is on no line of page 2: it is left out rather than invented.
    document.set_toc([[1, "Guide", 1], [2, "Install", 1], [2, "Usage", 2], [2, "Missing", 2]])
    doc = parse(document.tobytes(), DocumentType.PDF, ParseConfig())

    assert [(b.kind, b.page, b.level, b.text, b.heading_path) for b in doc.blocks] == [
        ("heading", 1, 1, "Guide", ("Guide",)),
        ("page", 1, None, "Intro text here.", ("Guide",)),
        ("heading", 1, 2, "Install", ("Guide", "Install")),
        ("page", 1, None, "Run the installer.", ("Guide", "Install")),
        ("page", 2, None, "More install text.", ("Guide", "Install")),
        ("heading", 2, 2, "Usage", ("Guide", "Usage")),
        ("page", 2, None, "Run it.", ("Guide", "Usage")),
    ]
    # A chunk continuing a bookmarked section carries its headings, as in HTML, Markdown and DOCX.
    chunks = chunk(doc, FixedChunking(size=40, overlap=0, unit="characters"), CharacterCounter(), max_tokens=None)
    assert "Guide\n\nInstall\n\nMore install text." in [c.text for c in chunks.chunks]


def test_blank_pages_add_no_block(pdf_factory: PdfFactory) -> None:
    doc = parse(pdf_factory(["one", "", "three"]), DocumentType.PDF, ParseConfig())

    assert [(b.page, b.text) for b in doc.blocks] == [(1, "one"), (3, "three")]
    assert doc.page_count == 3


def test_page_range_selects_pages_but_page_count_stays_the_original(pdf_factory: PdfFactory) -> None:
    config = ParseConfig(page_range=PageRange(start=2, end=4))
    doc = parse(pdf_factory(PAGES), DocumentType.PDF, config)

    assert [b.page for b in doc.blocks] == [2, 3, 4]
    assert doc.page_count == 5
    assert (doc.sections[0].page_start, doc.sections[0].page_end) == (2, 4)


def test_page_range_beyond_the_last_page_names_the_page_count(pdf_factory: PdfFactory) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse(pdf_factory(PAGES), DocumentType.PDF, ParseConfig(page_range=PageRange(start=4, end=6)))

    assert caught.value.code == "page_range_out_of_bounds"
    assert "5 pages" in caught.value.detail
    assert caught.value.extra["page_count"] == 5


def test_inverted_page_range_is_rejected_before_parsing(pdf_factory: PdfFactory) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse(pdf_factory(PAGES), DocumentType.PDF, ParseConfig(page_range=PageRange(start=3, end=2)))

    assert caught.value.code == "invalid_page_range"


def test_section_mode_makes_one_section_per_range_in_page_order(pdf_factory: PdfFactory) -> None:
    config = ParseConfig(sections=[PageRange(start=4, end=5), PageRange(start=1, end=2)])
    doc = parse(pdf_factory(PAGES), DocumentType.PDF, config)

    assert [(s.page_start, s.page_end) for s in doc.sections] == [(1, 2), (4, 5)]
    assert [[b.page for b in s.blocks] for s in doc.sections] == [[1, 2], [4, 5]]
    assert "page 3" not in doc.text  # pages outside every section are skipped
    for block in doc.blocks:
        assert doc.text[block.char_start : block.char_end] == block.text


def test_a_section_beyond_the_last_page_is_rejected(pdf_factory: PdfFactory) -> None:
    config = ParseConfig(sections=[PageRange(start=1, end=2), PageRange(start=3, end=9)])
    with pytest.raises(InvalidInput) as caught:
        parse(pdf_factory(PAGES), DocumentType.PDF, config)

    assert caught.value.code == "page_range_out_of_bounds"


def test_line_filters_drop_matching_lines_on_every_page(pdf_factory: PdfFactory) -> None:
    doc = parse(pdf_factory(PAGES), DocumentType.PDF, ParseConfig(line_filters=[r"^Page \d+ of \d+$"]))

    assert [b.text for b in doc.blocks] == [f"Chapter {n}. This is the text of page {n}." for n in range(1, 6)]


def test_filters_that_remove_everything_say_so(pdf_factory: PdfFactory) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse(pdf_factory(PAGES), DocumentType.PDF, ParseConfig(line_filters=["."]))

    assert caught.value.code == "no_text"
    assert "line filters" in caught.value.detail


def test_password_protected_pdf_is_rejected(pdf_factory: PdfFactory) -> None:
    data = pdf_factory(PAGES, encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="user", owner_pw="owner")

    assert sniff("secret.pdf", data) is DocumentType.PDF
    with pytest.raises(InvalidInput) as caught:
        parse(data, DocumentType.PDF, ParseConfig())
    assert caught.value.code == "document_encrypted"


def test_pdf_with_only_an_owner_password_opens_like_any_reader_would(pdf_factory: PdfFactory) -> None:
    data = pdf_factory(PAGES, encryption=pymupdf.PDF_ENCRYPT_AES_256, owner_pw="owner")

    assert len(parse(data, DocumentType.PDF, ParseConfig()).blocks) == 5


@pytest.mark.parametrize("fraction", [0.2, 0.5, 0.9])
def test_truncated_pdf_is_corrupt(pdf_factory: PdfFactory, fraction: float) -> None:
    data = pdf_factory(PAGES)
    with pytest.raises(InvalidInput) as caught:
        parse(data[: int(len(data) * fraction)], DocumentType.PDF, ParseConfig())

    assert caught.value.code == "document_corrupt"


@pytest.mark.parametrize(
    "data", [b"%PDF-1.7\nnot really a pdf\n%%EOF", b"%PDF-1.4\n" + bytes(range(256)) * 8 + b"%%EOF"]
)
def test_garbage_behind_a_pdf_header_is_corrupt(data: bytes) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse(data, DocumentType.PDF, ParseConfig())

    assert caught.value.code == "document_corrupt"


def test_pdf_of_images_without_text_is_no_text_after_ocr(image_only_pdf: bytes) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse(image_only_pdf, DocumentType.PDF, ParseConfig())

    assert caught.value.code == "no_text"
    assert "OCR found none" in caught.value.detail


def test_concurrent_parses_from_threads_are_safe(pdf_factory: PdfFactory) -> None:
    documents = [pdf_factory([f"document {n} page {p}" for p in range(1, 6)]) for n in range(8)]

    with ThreadPoolExecutor(max_workers=4) as pool:
        parsed = list(pool.map(lambda data: parse(data, DocumentType.PDF, ParseConfig()), documents))

    assert [doc.blocks[4].text for doc in parsed] == [f"document {n} page 5" for n in range(8)]


def test_unicode_text_survives(pdf_factory: PdfFactory) -> None:
    doc = parse(pdf_factory(["Größe café naïve"]), DocumentType.PDF, ParseConfig())

    assert doc.blocks[0].text == "Größe café naïve"


# Real-world PDFs from pypdf's test corpus (downloaded at test time, never committed).


@pytest.mark.parametrize(
    ("name", "pages", "expected"),
    [
        ("crazyones.pdf", 1, "Heres to the crazy ones"),
        ("GeoBase_NHNC1_Data_Model_UML_EN.pdf", 19, "National Hydro Network"),
        ("Seige_of_Vicksburg_Sample_OCR.pdf", 6, "VICKSBURG"),
        ("pdflatex-outline.pdf", 4, "Contents"),
        ("encryption/r2-empty-password.pdf", 1, "pdf encryption test"),
        # No %%EOF at the very end (zero padding follows it) and repaired by MuPDF, yet intact.
        ("selenium-pypdf-issue-177.pdf", 1, "Hello World"),
    ],
)
def test_real_world_pdfs_parse_with_sane_pages_and_text(
    pypdf_resources: Path, name: str, pages: int, expected: str
) -> None:
    data = (pypdf_resources / name).read_bytes()

    assert sniff(Path(name).name, data) is DocumentType.PDF
    doc = parse(data, DocumentType.PDF, ParseConfig())
    assert doc.page_count == pages
    assert expected in doc.text
    assert all(1 <= b.page <= pages for b in doc.blocks if b.page is not None)
    for block in doc.blocks:
        assert doc.text[block.char_start : block.char_end] == block.text


@pytest.mark.parametrize("name", ["encryption/r6-user-password.pdf", "encryption/r4-aes-user-password.pdf"])
def test_real_world_encrypted_pdfs_are_rejected(pypdf_resources: Path, name: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse((pypdf_resources / name).read_bytes(), DocumentType.PDF, ParseConfig())

    assert caught.value.code == "document_encrypted"


def test_real_world_image_only_pdf_has_no_text(pypdf_resources: Path) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse((pypdf_resources / "imagemagick-images.pdf").read_bytes(), DocumentType.PDF, ParseConfig(ocr="off"))

    assert caught.value.code == "no_text"


def test_real_world_multi_page_pdf_honours_a_page_range(pypdf_resources: Path) -> None:
    data = (pypdf_resources / "GeoBase_NHNC1_Data_Model_UML_EN.pdf").read_bytes()
    doc = parse(data, DocumentType.PDF, ParseConfig(page_range=PageRange(start=18, end=19)))

    assert {b.page for b in doc.blocks} <= {18, 19}
    assert doc.blocks[-1].page == 19
