"""What the documents API speaks: msgspec Structs, strict at the boundary."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal
from uuid import UUID

import msgspec

from chonkit.document.chunking import ChunkConfig
from chonkit.document.parsing import ParseConfig

Tag = Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
Label = Annotated[str, msgspec.Meta(max_length=255)]


class Document(msgspec.Struct, frozen=True, kw_only=True):
    id: UUID
    name: str
    label: str | None
    tags: list[str]
    doc_type: str
    media_type: str
    sha256: str
    size_bytes: int
    page_count: int | None
    ocr_pages: list[int] = msgspec.field(default_factory=list)
    """Pages without a text layer (every frame of an image), found at upload: the parse option ``ocr`` (``auto`` by
    default) reads them by OCR, so their text may hold misreadings."""
    created_at: datetime
    updated_at: datetime


class Problem(msgspec.Struct, frozen=True, kw_only=True):
    """Why one file of an upload was rejected (the same fields as a problem-details body)."""

    status: int
    code: str
    detail: str


class UploadResult(msgspec.Struct, frozen=True, kw_only=True):
    filename: str
    status: Literal["created", "duplicate", "rejected"]
    document: Document | None = None
    error: Problem | None = None


class UploadResponse(msgspec.Struct, frozen=True, kw_only=True):
    results: list[UploadResult]


class DocumentPage(msgspec.Struct, frozen=True, kw_only=True):
    items: list[Document]
    total: int
    limit: int
    offset: int


class DocumentPatch(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Only the fields sent change; ``label: null`` clears the label."""

    name: str | msgspec.UnsetType = msgspec.UNSET
    label: Label | msgspec.UnsetType | None = msgspec.UNSET
    tags: Annotated[list[Tag], msgspec.Meta(max_length=50)] | msgspec.UnsetType = msgspec.UNSET


class DocumentConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """How a document is parsed and chunked when it is embedded; omitted parts take the defaults."""

    parse: ParseConfig = msgspec.field(default_factory=ParseConfig)
    chunk: ChunkConfig | None = None


class ParsePreviewRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """An unsaved parse config to try; omitted = the document's saved one."""

    parse: ParseConfig | None = None


class ChunkPreviewRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Unsaved configs to try, and the embedding model whose tokenizer measures the chunks."""

    parse: ParseConfig | None = None
    chunk: ChunkConfig | None = None
    embedding_provider: str | None = None
    model: str | None = None


class PreviewBlock(msgspec.Struct, frozen=True, kw_only=True):
    kind: str
    text: str
    char_start: int
    char_end: int
    page: int | None
    heading_path: list[str]
    ocr: bool = False
    """Recognised from the page's image (OCR), not read from a text layer."""


class PreviewSection(msgspec.Struct, frozen=True, kw_only=True):
    title: str | None
    page_start: int | None
    page_end: int | None
    blocks: list[PreviewBlock]


class ParsePreview(msgspec.Struct, frozen=True, kw_only=True):
    page_count: int | None
    ocr_pages: list[int] = msgspec.field(default_factory=list)
    """Pages whose text OCR recognised (the parse option ``ocr``), in order."""
    characters: int
    block_count: int
    sections: list[PreviewSection]
    truncated: bool
    """True when only the first blocks are shown (large documents)."""


class PreviewChunk(msgspec.Struct, frozen=True, kw_only=True):
    index: int
    text: str
    token_count: int
    char_start: int
    char_end: int
    page_start: int | None
    page_end: int | None
    heading_path: list[str]
    parent_index: int | None
    oversized: bool
    ocr: bool = False
    """Some of its text was recognised by OCR."""


class ChunkPreview(msgspec.Struct, frozen=True, kw_only=True):
    embedding_provider: str
    model: str
    max_tokens: int
    chunk_count: int
    parent_count: int
    oversized: list[int]
    chunks: list[PreviewChunk]
    parents: list[PreviewChunk]
    truncated: bool
