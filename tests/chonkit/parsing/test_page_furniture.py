"""Running headers, footers and page numbers are left out of PDF text; the body and the page numbers stay."""

from __future__ import annotations

import pymupdf

from chonkit.document.parsing import DocumentType, ParseConfig
from chonkit.document.parsing.page_furniture import strip_furniture
from chonkit.document.parsing.parser import parse

BODY = [
    "Shells read commands from a file or a terminal and run",
    "them one after another.",
    "Quoting removes the special meaning of characters. A backslash",
    "quotes the character after it.",
    "Variables hold strings. A name is made of letters, digits and",
    "underscores.",
    "Redirection sends a command's output to a file or reads its",
    "input from one.",
]


def _manual() -> bytes:
    """Eight pages laid out like a GNU manual: the chapter's name and the printed page number at the top (a short
    chapter's name on two pages only), the manual's title at the bottom, one sentence running across each page
    break."""
    document = pymupdf.open()  # type: ignore[no-untyped-call]  # pymupdf is untyped
    for index, body in enumerate(BODY):
        number = index + 1
        page = document.new_page()
        chapter = "Chapter 2: Definitions" if number <= 2 else "Chapter 3: Getting Started"
        page.insert_text((72, 40), chapter, fontsize=9)
        page.insert_text((500, 40), str(number + 4), fontsize=9)
        page.insert_text((72, 120), body, fontsize=11)
        page.insert_text((72, 800), "The Example Shell Manual", fontsize=9)
    data: bytes = document.tobytes()  # type: ignore[no-untyped-call]
    return data


def test_running_headers_footers_and_page_numbers_are_left_out_and_pages_kept() -> None:
    doc = parse(_manual(), DocumentType.PDF, ParseConfig())
    for furniture in ("Chapter 2", "Chapter 3", "The Example Shell Manual"):
        assert furniture not in doc.text
    assert [block.page for block in doc.blocks] == list(range(1, 9))
    assert [block.text for block in doc.blocks] == BODY
    # A sentence across a page break no longer holds the next page's header and number.
    assert "Quoting removes the special meaning of characters. A backslash\n\nquotes the character" in doc.text


def test_a_two_page_document_is_left_alone() -> None:
    pages = {1: "Report\n1\nFirst page.", 2: "Report\n2\nSecond page."}
    assert strip_furniture(pages) == pages


def test_lines_that_open_a_few_pages_alike_are_body_text() -> None:
    """A section number opening pages is no page number (its offset from the page's number varies); a heading
    that opens two of many pages is a coincidence, not a running header."""
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]
    pages = {n: f"{n + 10}\nOn {words[n - 1]}.\nThen {words[-n]}.\nLast {words[n - 1]}." for n in range(1, 11)}
    pages[3] = "1\nIntroduction\nThe first section begins.\nIt goes on.\nIt ends."
    pages[6] = "2\nIntroduction\nThe second section begins.\nIt goes on.\nIt ends."
    cleaned = strip_furniture(pages)
    assert cleaned[3] == pages[3]
    assert cleaned[6] == pages[6]
    assert cleaned[1] == "On alpha.\nThen juliet.\nLast alpha."


def test_pages_that_would_lose_all_their_text_keep_it() -> None:
    """Look-alike pages (a slip printed ten times) are all repetition: nothing is left out."""
    pages = {n: f"Slip {n}\nSigned:" for n in range(1, 11)}
    assert strip_furniture(pages) == pages
