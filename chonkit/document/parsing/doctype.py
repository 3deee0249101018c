"""The document types chonkit can parse, and what each is called on the wire and on disk."""

from __future__ import annotations

from enum import StrEnum


class DocumentType(StrEnum):
    """A supported upload format; the value is the stable name stored with the document."""

    PDF = "pdf"
    DOCX = "docx"
    MARKDOWN = "markdown"
    HTML = "html"
    TEXT = "text"
    CSV = "csv"
    JSON = "json"
    PNG = "png"
    JPEG = "jpeg"
    TIFF = "tiff"

    @property
    def media_type(self) -> str:
        """The default ``Content-Type`` to serve the original file with."""
        return MEDIA_TYPES[self]

    @property
    def is_image(self) -> bool:
        """A picture of text: its text comes from OCR only."""
        return self in IMAGE_TYPES


MEDIA_TYPES: dict[DocumentType, str] = {
    DocumentType.PDF: "application/pdf",
    DocumentType.DOCX: "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    DocumentType.MARKDOWN: "text/markdown",
    DocumentType.HTML: "text/html",
    DocumentType.TEXT: "text/plain",
    DocumentType.CSV: "text/csv",
    DocumentType.JSON: "application/json",
    DocumentType.PNG: "image/png",
    DocumentType.JPEG: "image/jpeg",
    DocumentType.TIFF: "image/tiff",
}

IMAGE_TYPES = frozenset({DocumentType.PNG, DocumentType.JPEG, DocumentType.TIFF})

EXTENSIONS: dict[str, DocumentType] = {
    ".pdf": DocumentType.PDF,
    ".docx": DocumentType.DOCX,
    ".md": DocumentType.MARKDOWN,
    ".markdown": DocumentType.MARKDOWN,
    ".html": DocumentType.HTML,
    ".htm": DocumentType.HTML,
    ".txt": DocumentType.TEXT,
    ".csv": DocumentType.CSV,
    ".json": DocumentType.JSON,
    ".png": DocumentType.PNG,
    ".jpg": DocumentType.JPEG,
    ".jpeg": DocumentType.JPEG,
    ".tif": DocumentType.TIFF,
    ".tiff": DocumentType.TIFF,
}
