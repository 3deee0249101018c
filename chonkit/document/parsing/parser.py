"""Parse an upload of a known type into a :class:`ParsedDocument`; the one entry point for every format."""

from __future__ import annotations

from collections.abc import Callable

from chonkit.document.parsed import ParsedDocument
from chonkit.document.parsing.blocks import BlockBuilder
from chonkit.document.parsing.config import ParseConfig
from chonkit.document.parsing.doctype import DocumentType
from chonkit.document.parsing.docx_parser import parse_docx
from chonkit.document.parsing.html_parser import parse_html
from chonkit.document.parsing.image_parser import parse_image
from chonkit.document.parsing.markdown_parser import parse_markdown
from chonkit.document.parsing.ocr import StopCheck
from chonkit.document.parsing.pdf_parser import parse_pdf
from chonkit.document.parsing.text_parser import parse_csv, parse_json, parse_text
from common.errors import InvalidInput


def parse(
    data: bytes,
    doc_type: DocumentType,
    config: ParseConfig,
    *,
    recognise: bool = True,
    stop: StopCheck | None = None,
) -> ParsedDocument:
    """Extract the text of ``data`` in reading order, with the config's page range and line filters applied.

    ``doc_type`` should come from :func:`sniff`. Page range and sections apply to PDFs and images and are ignored
    for formats without pages. Parsing is CPU-bound and synchronous: call it in a parse process
    (:mod:`chonkit.document.isolated`), where OCR loads its models once.

    Args:
        recognise: ``False`` checks a file quickly: pages that need OCR are found and checked
            (:attr:`ParsedDocument.ocr_pages`) but not recognised, so they add no text, and a document whose only
            text would come from OCR is not ``no_text``.
        stop: asked before each page of a PDF or image (the formats whose pages may take seconds each, by OCR);
            when it says so the parse ends with :class:`~chonkit.document.parsing.ocr.ParseStopped`.

    Raises:
        InvalidInput: ``empty_file``, ``no_text``, any config error of :meth:`ParseConfig.validate`, and
            the format's own errors (``document_corrupt``, ``document_encrypted``, ``document_zip_bomb``,
            ``page_range_out_of_bounds``, ``image_too_large``, ``ocr_too_many_pages``).
        ParseStopped: ``stop`` said so.
    """
    if not data:
        raise InvalidInput("The file is empty.", code="empty_file")
    builder = BlockBuilder(config.validate().compile_line_filters())
    page_count = None
    ocr_pages: tuple[int, ...] = ()
    if doc_type is DocumentType.PDF:
        page_count, ocr_pages = parse_pdf(data, config, builder, recognise=recognise, stop=stop)
    elif doc_type.is_image:
        page_count, ocr_pages = parse_image(data, doc_type, config, builder, recognise=recognise, stop=stop)
    else:
        _PAGELESS_PARSERS[doc_type](data, builder)
    if not builder.has_blocks and (recognise or not ocr_pages):
        raise _no_text(doc_type, config, filtered=builder.saw_text, recognised=bool(ocr_pages))
    return builder.build(media_type=doc_type.media_type, page_count=page_count, ocr_pages=ocr_pages)


_PAGELESS_PARSERS: dict[DocumentType, Callable[[bytes, BlockBuilder], None]] = {
    DocumentType.DOCX: parse_docx,
    DocumentType.MARKDOWN: parse_markdown,
    DocumentType.HTML: parse_html,
    DocumentType.TEXT: parse_text,
    DocumentType.CSV: parse_csv,
    DocumentType.JSON: parse_json,
}
"""The formats without pages: page ranges, sections and OCR do not apply to them."""


def _no_text(doc_type: DocumentType, config: ParseConfig, *, filtered: bool, recognised: bool) -> InvalidInput:
    if filtered:
        detail = "The line filters removed all of the document's text."
    elif config.ocr == "off" and (doc_type is DocumentType.PDF or doc_type.is_image):
        detail = (
            "The document has no text layer and OCR is off for it (parse option 'ocr': 'off'); "
            "set it to 'auto' to recognise its pages."
        )
    elif doc_type is DocumentType.PDF:
        detail = "The PDF has no extractable text" + (" and OCR found none on its pages." if recognised else ".")
    elif doc_type.is_image:
        detail = "OCR found no text in the image."
    else:
        detail = "The document contains no text."
    return InvalidInput(detail, code="no_text")
