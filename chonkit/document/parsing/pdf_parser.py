"""PDF text, one block per page, via pymupdf: MuPDF's C extractor, an order of magnitude faster than pypdf.

Pages are read as plain ``page.get_text()`` reads them, which keeps us level with a bare pymupdf loop (see
``bench/parse_bench.py``), except where :mod:`~chonkit.document.parsing.pdf_text` must look at a page's geometry
(drawn underscores, lines split at wide word spaces). A page without a text layer that shows an image (a scan) is
rendered and recognised instead (:mod:`chonkit.document.parsing.ocr`), as the parse config's ``ocr`` says. The
pages are read in two passes: the first reads every text layer and so finds the pages that need OCR, which are
counted against :data:`~chonkit.document.parsing.ocr.MAX_OCR_PAGES` (and checked for size) before the second pass
recognises the first of them; a stop is asked for before each page.

Headings come from the PDF's outline (its bookmarks), the one place a PDF states them: a bookmark's title found
as a line of its page's text becomes a heading of the bookmark's level there, splitting the page; a title not
found on its page (or on a page read by OCR) is left out. Fonts are not guessed at.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pymupdf

from chonkit.document.parsing import ocr, pdf_text
from chonkit.document.parsing.blocks import BlockBuilder
from chonkit.document.parsing.config import PageRange, ParseConfig
from chonkit.document.parsing.page_furniture import strip_furniture
from common.errors import InvalidInput

EOF_MARKER = b"%%EOF"
_MUPDF_ERRORS = (RuntimeError, pymupdf.mupdf.FzErrorBase)
"""pymupdf.FileDataError is a RuntimeError; MuPDF's own errors (``FzErrorFormat``: a malformed page tree) are not."""
_MUPDF = threading.Lock()
"""PyMuPDF shares one MuPDF context and is not thread-safe, even across documents: one parse at a time."""


def parse_pdf(
    data: bytes,
    config: ParseConfig,
    builder: BlockBuilder,
    *,
    recognise: bool = True,
    stop: ocr.StopCheck | None = None,
) -> tuple[int, tuple[int, ...]]:
    """Add a ``page`` block per page (split at its bookmarks' headings), in one section per configured range (or
    one for the page range).

    Args:
        recognise: whether the pages that need OCR are recognised; without, they add no block (a quick check of
            an upload, which leaves the seconds per page to the embedding worker) and their number is not limited
            (the parse config, set after the upload, may still select fewer).
        stop: asked before each page; when it says so, the parse ends with :class:`~ocr.ParseStopped`.

    Returns:
        The document's page count, before any page range is applied, and the pages OCR read (or would read; blank
        ones included, though they add no text).

    Raises:
        InvalidInput: ``document_corrupt``, ``document_encrypted``, ``page_range_out_of_bounds``,
            ``image_too_large`` or ``ocr_too_many_pages``.
        ParseStopped: ``stop`` said so before a page.
    """
    # MuPDF silently repairs a truncated file into fewer pages; a cut-off upload has lost its final
    # end-of-file marker (an incremental update that was cut keeps an earlier one and stays readable).
    if data.rfind(EOF_MARKER) < 0:
        raise _corrupt("it has no end-of-file marker, so it was probably truncated")
    with _MUPDF:
        return _parse_pages(data, config, builder, recognise=recognise, stop=stop)


def _parse_pages(
    data: bytes, config: ParseConfig, builder: BlockBuilder, *, recognise: bool, stop: ocr.StopCheck | None
) -> tuple[int, tuple[int, ...]]:
    try:
        document = pymupdf.open(stream=data, filetype="pdf")  # type: ignore[no-untyped-call]  # pymupdf is untyped
    except _MUPDF_ERRORS as exc:
        raise _corrupt(str(exc)) from exc
    with document:
        # MuPDF may first notice a broken page tree or xref when asked for the page count or a page.
        try:
            if document.needs_pass:
                raise InvalidInput("The PDF is password-protected.", code="document_encrypted")
            page_count = int(document.page_count)
            if page_count == 0:
                raise _corrupt("it has no pages")
            groups = page_groups(config, page_count)
            texts, recognised = _text_layers(document, groups, config, stop)
            texts = strip_furniture(texts)
            if recognise:
                ocr.check_ocr_pages(len(recognised))
            _add_pages(document, groups, texts, builder, recognise=recognise, stop=stop)
        except _MUPDF_ERRORS as exc:
            raise _corrupt(str(exc)) from exc
    return page_count, recognised


def _add_pages(
    document: pymupdf.Document,
    groups: list[PageRange],
    texts: dict[int, str],
    builder: BlockBuilder,
    *,
    recognise: bool,
    stop: ocr.StopCheck | None,
) -> None:
    """The second pass: each page's text layer, or its OCR text when it has none (and ``recognise``), in order,
    one section per configured page range."""
    outline = _outline(document)
    for pages in groups:
        for number in range(pages.start, pages.end + 1):
            if number in texts:
                _add_page(builder, texts.pop(number), number, outline.get(number, ()))
            elif recognise:
                ocr.stop_if_asked(stop, page=number)
                image = ocr.page_image(document.load_page(number - 1))  # type: ignore[no-untyped-call]
                if not ocr.is_blank(image):
                    builder.add(ocr.recognise(image), "page", page=number, ocr=True)
        builder.end_section(page_start=pages.start, page_end=pages.end)


def _text_layers(
    document: pymupdf.Document, groups: list[PageRange], config: ParseConfig, stop: ocr.StopCheck | None
) -> tuple[dict[int, str], tuple[int, ...]]:
    """The first pass: the text of each page read from its text layer, and the pages that need OCR instead (each
    checked for size), so that they are counted before any is recognised."""
    texts: dict[int, str] = {}
    recognised: list[int] = []
    for pages in groups:
        for number in range(pages.start, pages.end + 1):
            ocr.stop_if_asked(stop, page=number)
            page = document.load_page(number - 1)  # type: ignore[no-untyped-call]
            text = pdf_text.page_text(page)
            if ocr.needs_ocr(text, has_images=bool(page.get_images()), mode=config.ocr):
                ocr.check_page_size(page)
                recognised.append(number)
            else:
                texts[number] = text
    return texts, tuple(recognised)


def _outline(document: pymupdf.Document) -> dict[int, list[tuple[int, str]]]:
    """The bookmarks of each page, in order: ``(level, title)``; none when the outline cannot be read (the pages
    may still be fine)."""
    try:
        toc = document.get_toc(simple=True)
    except (*_MUPDF_ERRORS, ValueError):
        return {}
    found: dict[int, list[tuple[int, str]]] = {}
    for level, title, page in toc:
        if isinstance(title, str) and " ".join(title.split()) and isinstance(page, int) and page > 0:
            found.setdefault(page, []).append((int(level), " ".join(title.split())))
    return found


def _add_page(builder: BlockBuilder, text: str, number: int, headings: Sequence[tuple[int, str]]) -> None:
    """The page's text, split at the lines that are its bookmarks' titles (in the outline's order)."""
    lines = text.split("\n")
    start = 0
    for level, title in headings:
        wanted = title.casefold()
        at = next((n for n in range(start, len(lines)) if " ".join(lines[n].split()).casefold() == wanted), None)
        if at is None:
            continue
        builder.add("\n".join(lines[start:at]), "page", page=number)
        builder.add_heading(lines[at], level, page=number)
        start = at + 1
    builder.add("\n".join(lines[start:]), "page", page=number)


def page_groups(config: ParseConfig, page_count: int) -> list[PageRange]:
    """The page ranges to read, in order; each becomes one section."""
    if config.page_range is not None:
        config.page_range.check_within(page_count)
    if config.sections is not None:
        sections = sorted(config.sections, key=lambda section: section.start)
        for section in sections:
            section.check_within(page_count)
        return sections
    return [config.page_range or PageRange(start=1, end=page_count)]


def _corrupt(reason: str) -> InvalidInput:
    return InvalidInput(f"The PDF could not be read: {reason}.", code="document_corrupt")
