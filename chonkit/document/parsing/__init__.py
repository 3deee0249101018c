"""Document parsers: what an upload is (:func:`sniff`) and the text inside it
(:func:`chonkit.document.parsing.parser.parse`).

A pure library: bytes in, :class:`~chonkit.document.parsed.ParsedDocument` or an
:class:`~common.errors.AppError` with a stable ``code`` out, so the upload API can reject broken,
empty, encrypted or mislabelled files before storing them.

``parse`` is not re-exported here: it imports every parser (pymupdf, python-docx, markdown-it: ~0.8 s), which only
the parse processes (:mod:`chonkit.document.isolated`) need; the services import this package for the rest.
"""

from chonkit.document.parsing.config import PageRange, ParseConfig, validate_parse_config
from chonkit.document.parsing.doctype import MEDIA_TYPES, DocumentType
from chonkit.document.parsing.sniffing import sniff

__all__ = [
    "MEDIA_TYPES",
    "DocumentType",
    "PageRange",
    "ParseConfig",
    "sniff",
    "validate_parse_config",
]
