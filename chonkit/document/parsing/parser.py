"""Parse an upload of a known type into a :class:`ParsedDocument`; the one entry point for every format."""

from __future__ import annotations

from chonkit.document.parsed import ParsedDocument
from chonkit.document.parsing.blocks import BlockBuilder
from chonkit.document.parsing.config import ParseConfig
from chonkit.document.parsing.doctype import DocumentType
from chonkit.document.parsing.docx_parser import parse_docx
from chonkit.document.parsing.html_parser import parse_html
from chonkit.document.parsing.markdown_parser import parse_markdown
from chonkit.document.parsing.pdf_parser import parse_pdf
from chonkit.document.parsing.text_parser import parse_csv, parse_json, parse_text
from common.errors import InvalidInput


def parse(data: bytes, doc_type: DocumentType, config: ParseConfig) -> ParsedDocument:
    """Extract the text of ``data`` in reading order, with the config's page range and line filters applied.

    ``doc_type`` should come from :func:`sniff`. Page range and sections apply to PDFs and are ignored
    for formats without pages. Parsing is CPU-bound and synchronous: call it from a worker thread.

    Raises:
        InvalidInput: ``empty_file``, ``no_text``, any config error of :meth:`ParseConfig.validate`, and
            the format's own errors (``document_corrupt``, ``document_encrypted``, ``document_zip_bomb``,
            ``page_range_out_of_bounds``).
    """
    if not data:
        raise InvalidInput("The file is empty.", code="empty_file")
    builder = BlockBuilder(config.validate().compile_line_filters())
    page_count = None
    match doc_type:
        case DocumentType.PDF:
            page_count = parse_pdf(data, config, builder)
        case DocumentType.DOCX:
            parse_docx(data, builder)
        case DocumentType.MARKDOWN:
            parse_markdown(data, builder)
        case DocumentType.HTML:
            parse_html(data, builder)
        case DocumentType.TEXT:
            parse_text(data, builder)
        case DocumentType.CSV:
            parse_csv(data, builder)
        case DocumentType.JSON:
            parse_json(data, builder)
    if not builder.has_blocks:
        raise _no_text(doc_type, filtered=builder.saw_text)
    return builder.build(media_type=doc_type.media_type, page_count=page_count)


def _no_text(doc_type: DocumentType, *, filtered: bool) -> InvalidInput:
    if filtered:
        detail = "The line filters removed all of the document's text."
    elif doc_type is DocumentType.PDF:
        detail = "The PDF has no extractable text (scanned pages are images); OCR is not supported."
    else:
        detail = "The document contains no text."
    return InvalidInput(detail, code="no_text")
