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

    @property
    def media_type(self) -> str:
        """The default ``Content-Type`` to serve the original file with."""
        return MEDIA_TYPES[self]


MEDIA_TYPES: dict[DocumentType, str] = {
    DocumentType.PDF: "application/pdf",
    DocumentType.DOCX: "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    DocumentType.MARKDOWN: "text/markdown",
    DocumentType.HTML: "text/html",
    DocumentType.TEXT: "text/plain",
    DocumentType.CSV: "text/csv",
    DocumentType.JSON: "application/json",
}

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
}
