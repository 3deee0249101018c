"""Documents: accept only files we can read, store each distinct file once, and preview their chunks.

Every upload is sniffed and fully parsed *before* anything is stored, so a broken, empty, encrypted
or mislabelled file is rejected at once with its own code and leaves no trace.
"""

from __future__ import annotations

import asyncio
import unicodedata
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Protocol
from uuid import UUID

import msgspec

from chonkit.collection.guards import refuse_if_any_migrating
from chonkit.collection.repository import CollectionRepository
from chonkit.document.chunking import Chunk, TokenCounter, default_chunk_config, validate_chunk_config
from chonkit.document.isolated import chunk_isolated, parse_isolated
from chonkit.document.models import (
    ChunkPreview,
    ChunkPreviewRequest,
    Document,
    DocumentConfig,
    DocumentPage,
    DocumentPatch,
    ParsePreview,
    ParsePreviewRequest,
    PreviewBlock,
    PreviewChunk,
    PreviewSection,
    Problem,
    UploadResult,
)
from chonkit.document.parsed import Block, ParsedDocument, Section
from chonkit.document.parsing import DocumentType, ParseConfig, sniff, validate_parse_config
from chonkit.document.repository import SORTABLE, DocumentRepository
from chonkit.document.storage import BlobStore, sha256_hex
from chonkit.jobs.repository import JobRepository
from common.db import Database
from common.db.database import Connection
from common.embedders.base import EmbedderRegistry
from common.errors import AppError, InvalidInput, NotFound, PayloadTooLarge
from common.vectors.registry import VectorRegistry

PREVIEW_LIMIT = 500
"""Blocks or chunks a preview returns; the counts always cover the whole document."""

CARRIED_BY_CHUNKS = frozenset({"name", "tags", "label"})
"""Document fields every chunk holds a copy of (``document_name``, ``tags``, ``label``)."""


class IncomingFile(msgspec.Struct, frozen=True):
    filename: str
    data: bytes


class Tokenizers(Protocol):
    """Resolves the embedding model whose tokenizer sizes chunks (``None`` = the default model)."""

    def resolve(self, provider: str | None, model: str | None) -> tuple[str, str, TokenCounter, int]:
        """``(provider, model, counter, max_tokens)``; raises ``InvalidInput`` for unknown ones."""
        ...


class RegistryTokenizers:
    """Tokenizers of the registered embedding models; ``local``'s MiniLM when none is named."""

    def __init__(self, registry: EmbedderRegistry, *, default_provider: str = "local") -> None:
        self.registry = registry
        self.default_provider = default_provider

    def resolve(self, provider: str | None, model: str | None) -> tuple[str, str, TokenCounter, int]:
        provider = provider or self.default_provider
        model = model or self.registry.models(provider)[0].model
        embedder = self.registry.get(provider, model)
        return provider, model, embedder, embedder.max_tokens


def check_filename(name: str) -> str:
    """A display name only (never a path); anything that looks like a path or hides characters is refused."""
    normalized = unicodedata.normalize("NFC", name).strip()
    if not normalized or len(normalized.encode()) > 255:
        raise InvalidInput("The file name must be 1 to 255 bytes long.", code="invalid_filename")
    if "/" in normalized or "\\" in normalized or normalized in {".", ".."} or normalized.startswith(".."):
        raise InvalidInput(f"The file name {normalized!r} looks like a path.", code="invalid_filename")
    if any(unicodedata.category(ch) in {"Cc", "Cf", "Cs"} for ch in normalized):
        raise InvalidInput("The file name contains control characters.", code="invalid_filename")
    return normalized


class CheckedFile(msgspec.Struct, frozen=True, kw_only=True):
    """An incoming file that is known to be readable: named, sniffed and parsed, not yet stored."""

    filename: str
    name: str
    doc_type: DocumentType
    data: bytes
    digest: str
    page_count: int | None
    ocr_pages: tuple[int, ...]


async def check_file(incoming: IncomingFile, max_upload_bytes: int) -> CheckedFile | UploadResult:
    """The file checked as an upload checks it, or its rejection; parsed in a process of its own and outside any
    transaction, so a slow file holds no connection. A server-side failure (5xx) is raised, not a rejection."""
    try:
        name = check_filename(incoming.filename)
        if len(incoming.data) > max_upload_bytes:
            raise PayloadTooLarge(
                f"{name} is {len(incoming.data)} bytes; the limit is {max_upload_bytes}.", code="file_too_large"
            )
        doc_type = sniff(name, incoming.data)
        # Checked, not recognised: OCR's seconds a page belong to the embedding worker, not to the upload request.
        parsed = await parse_isolated(incoming.data, doc_type, ParseConfig(), recognise=False)
    except AppError as exc:
        if exc.status >= 500:
            raise
        problem = Problem(status=exc.status, code=exc.code, detail=exc.detail)
        return UploadResult(filename=incoming.filename, status="rejected", error=problem)
    return CheckedFile(
        filename=incoming.filename,
        name=name,
        doc_type=doc_type,
        data=incoming.data,
        digest=sha256_hex(incoming.data),
        page_count=parsed.page_count,
        ocr_pages=tuple(parsed.ocr_pages),
    )


async def store_files(conn: Connection, blobs: BlobStore, files: Sequence[CheckedFile]) -> list[UploadResult]:
    """Store checked files in the caller's transaction: a row each unless its bytes are stored already, and the
    original of each new one. The digests' locks are held to the end of the transaction, so a blob removal left
    behind by a deletion cannot take the original of a document uploaded again now."""
    repo = DocumentRepository(conn)
    await repo.lock_blobs(f.digest for f in files)
    results = []
    for checked in files:
        document, created = await repo.insert_unless_duplicate(
            id=uuid.uuid4(),
            name=checked.name,
            doc_type=checked.doc_type.value,
            media_type=checked.doc_type.media_type,
            sha256=checked.digest,
            size_bytes=len(checked.data),
            page_count=checked.page_count,
            ocr_pages=list(checked.ocr_pages),
        )
        if created:
            await asyncio.to_thread(blobs.put, checked.data)
        results.append(
            UploadResult(filename=checked.filename, status="created" if created else "duplicate", document=document)
        )
    return results


async def patch_document(conn: Connection, document_id: UUID, patch: DocumentPatch) -> Document:
    """Apply the patch in the caller's transaction. Chunks carry their document's name, tags and label, so a change
    of any is queued for every collection holding the document, in the same transaction; the embedding worker
    writes the document's values as they are then to the vector stores (and keeps the update queued while a store
    is down)."""
    repo = DocumentRepository(conn)
    changes: dict[str, Any] = {
        field: value for field in patch.__struct_fields__ if (value := getattr(patch, field)) is not msgspec.UNSET
    }
    if "name" in changes:
        changes["name"] = check_filename(changes["name"])
    if not changes:
        return await _document(repo, document_id)
    document = await repo.update(document_id, changes)
    if document is None:
        raise NotFound(f"No document {document_id}.", code="document_not_found")
    if changes.keys() & CARRIED_BY_CHUNKS:
        await CollectionRepository(conn).queue_document_update(document_id)
    return document


async def delete_document(conn: Connection, vectors: VectorRegistry, document_id: UUID) -> Document:
    """Delete its vectors from every collection, then the row, in the caller's transaction; the caller removes the
    blob after commit.

    ``409 collection_migrating`` while a collection holding the document (or re-embedding it) moves to another
    model, like every other change of that collection's documents: the move would fail on the missing
    document and throw away the re-embedding of all the others.

    Every collection that holds the document or is embedding it is locked to the end of the transaction, so a
    worker writing the document's chunks there either finishes first (and its chunks are deleted here) or
    finds the document gone and writes nothing. A collection the document is only being embedded into counts
    too: its write, holding the document's row, made this deletion wait and then left its chunks behind. So the
    vector stores are called inside the transaction, under those locks: a store that fails keeps the row (the
    deletion can be asked again) rather than leaving chunks of a document that is gone."""
    repo, collections = DocumentRepository(conn), CollectionRepository(conn)
    holding = {c.id: c for c in await collections.collections_of_document(document_id)}
    embedding = await JobRepository(conn).collections_pending(document_id)
    await refuse_if_any_migrating(conn, [*holding, *embedding])
    for collection_id in sorted({*holding, *embedding}):
        await collections.lock(collection_id)
        collection = holding.get(collection_id) or await collections.get(collection_id)
        if collection is not None:
            await vectors.get(collection.vector_provider).delete_document(collection.name, str(document_id))
    await repo.cancel_pending_jobs(document_id)
    document = await repo.delete(document_id)
    if document is None:
        raise NotFound(f"No document {document_id}.", code="document_not_found")
    return document


async def _document(repo: DocumentRepository, document_id: UUID) -> Document:
    document = await repo.get(document_id)
    if document is None:
        raise NotFound(f"No document {document_id}.", code="document_not_found")
    return document


async def _config(repo: DocumentRepository, document_id: UUID) -> DocumentConfig:
    stored = await repo.get_config(document_id)
    if stored is None:
        raise NotFound(f"No document {document_id}.", code="document_not_found")
    return msgspec.convert({"parse": stored.parse or {}, "chunk": stored.chunk}, DocumentConfig)


class DocumentService:
    """Each method runs in short transactions of its own. Parsing and chunking (uploads, previews) run in processes
    of their own between those transactions, holding no connection: a preview of a long PDF does not keep one of
    the pool's connections from everyone else."""

    def __init__(
        self,
        db: Database,
        blobs: BlobStore,
        tokenizers: Tokenizers,
        *,
        max_upload_bytes: int,
        vectors: VectorRegistry,
    ) -> None:
        self.db = db
        self.blobs = blobs
        self.tokenizers = tokenizers
        self.max_upload_bytes = max_upload_bytes
        self.vectors = vectors

    @asynccontextmanager
    async def _repo(self) -> AsyncIterator[DocumentRepository]:
        async with self.db.transaction() as conn:
            yield DocumentRepository(conn)

    async def upload(self, files: Sequence[IncomingFile]) -> list[UploadResult]:
        """Per-file results in request order: created, duplicate (same bytes as a stored document) or rejected.
        Every file is checked first; those that pass are stored together in one transaction."""
        if not files:
            raise InvalidInput("Send at least one file in the multipart field 'files'.", code="no_files")
        checked = [await check_file(incoming, self.max_upload_bytes) for incoming in files]
        readable = [c for c in checked if isinstance(c, CheckedFile)]
        stored: list[UploadResult] = []
        if readable:
            async with self.db.transaction() as conn:
                stored = await store_files(conn, self.blobs, readable)
        results = iter(stored)
        return [next(results) if isinstance(c, CheckedFile) else c for c in checked]

    async def page(self, *, limit: int, offset: int, sort: str, search: str | None) -> DocumentPage:
        column = sort.removeprefix("-")
        if column not in SORTABLE:
            raise InvalidInput(
                f"Cannot sort by {sort!r}; use one of {sorted(SORTABLE)}, with '-' for descending.",
                code="invalid_sort",
            )
        async with self._repo() as repo:
            items, total = await repo.page(
                limit=limit, offset=offset, sort=column, descending=sort.startswith("-"), search=search or None
            )
        return DocumentPage(items=items, total=total, limit=limit, offset=offset)

    async def get(self, document_id: UUID) -> Document:
        async with self._repo() as repo:
            return await _document(repo, document_id)

    async def patch(self, document_id: UUID, patch: DocumentPatch) -> Document:
        """:func:`patch_document` in a transaction of its own."""
        async with self.db.transaction() as conn:
            return await patch_document(conn, document_id, patch)

    async def delete(self, document_id: UUID) -> Document:
        """:func:`delete_document` in a transaction of its own; the caller removes the blob once this returns."""
        async with self.db.transaction() as conn:
            return await delete_document(conn, self.vectors, document_id)

    async def content_path(self, document_id: UUID) -> tuple[Document, Path]:
        document = await self.get(document_id)
        return document, self._original(document)

    def _original(self, document: Document) -> Path:
        path = self.blobs.path_for(document.sha256)
        if not path.exists():
            raise NotFound(f"The original of document {document.id} is missing from the store.", code="blob_missing")
        return path

    async def get_config(self, document_id: UUID) -> DocumentConfig:
        async with self._repo() as repo:
            return await _config(repo, document_id)

    async def set_config(self, document_id: UUID, config: DocumentConfig) -> DocumentConfig:
        """Validate completely before saving: regexes compile, page ranges fit the document, sizes make sense."""
        async with self._repo() as repo:
            document = await _document(repo, document_id)
            self._check_parse_config(config.parse, document)
            if config.chunk is not None:
                validate_chunk_config(config.chunk)
            await repo.set_config(
                document_id,
                msgspec.to_builtins(config.parse),
                None if config.chunk is None else msgspec.to_builtins(config.chunk),
            )
        return config

    async def preview_parse(self, document_id: UUID, request: ParsePreviewRequest) -> ParsePreview:
        document, saved = await self._with_config(document_id)
        config = request.parse or saved.parse
        parsed = await self._parsed(document, config)
        blocks = parsed.blocks
        shown = 0
        sections = []
        for section in parsed.sections if config.sections else _by_heading(blocks):
            room = max(PREVIEW_LIMIT - shown, 0)
            preview_blocks = [
                PreviewBlock(
                    kind=b.kind,
                    text=b.text,
                    char_start=b.char_start,
                    char_end=b.char_end,
                    page=b.page,
                    heading_path=list(b.heading_path),
                    ocr=b.ocr,
                )
                for b in section.blocks[:room]
            ]
            shown += len(preview_blocks)
            sections.append(
                PreviewSection(
                    title=section.title,
                    page_start=section.page_start,
                    page_end=section.page_end,
                    blocks=preview_blocks,
                )
            )
        return ParsePreview(
            page_count=document.page_count,
            ocr_pages=list(parsed.ocr_pages),
            characters=sum(len(b.text) for b in blocks),
            block_count=len(blocks),
            sections=sections,
            truncated=shown < len(blocks),
        )

    async def preview_chunks(self, document_id: UUID, request: ChunkPreviewRequest) -> ChunkPreview:
        document, saved = await self._with_config(document_id)
        config = validate_chunk_config(request.chunk or saved.chunk or default_chunk_config())
        provider, model, counter, max_tokens = self.tokenizers.resolve(request.embedding_provider, request.model)
        parsed = await self._parsed(document, request.parse or saved.parse)
        result = await chunk_isolated(parsed, config, provider, model, counter, max_tokens=max_tokens)
        oversized = set(result.oversized)
        return ChunkPreview(
            embedding_provider=provider,
            model=model,
            max_tokens=max_tokens,
            chunk_count=len(result.chunks),
            parent_count=len(result.parents),
            oversized=sorted(oversized),
            chunks=[_preview_chunk(c, c.index in oversized) for c in result.chunks[:PREVIEW_LIMIT]],
            parents=[_preview_chunk(p, False) for p in result.parents[:PREVIEW_LIMIT]],
            truncated=len(result.chunks) > PREVIEW_LIMIT or len(result.parents) > PREVIEW_LIMIT,
        )

    async def _with_config(self, document_id: UUID) -> tuple[Document, DocumentConfig]:
        """What a preview reads from the database, in one short transaction before it parses."""
        async with self._repo() as repo:
            return await _document(repo, document_id), await _config(repo, document_id)

    async def _parsed(self, document: Document, config: ParseConfig) -> ParsedDocument:
        path = self._original(document)
        self._check_parse_config(config, document)
        data = await asyncio.to_thread(path.read_bytes)
        return await parse_isolated(data, _doc_type(document), config)

    @staticmethod
    def _check_parse_config(config: ParseConfig, document: Document) -> None:
        validate_parse_config(config)
        if document.page_count is not None:
            for page_range in [config.page_range, *(config.sections or [])]:
                if page_range is not None:
                    page_range.check_within(document.page_count)


def _doc_type(document: Document) -> DocumentType:
    return DocumentType(document.doc_type)


def _by_heading(blocks: tuple[Block, ...]) -> list[Section]:
    """The document as its reader sees it: a section per heading, named by it, with its pages (what comes before
    the first heading is untitled). For the preview only: the parser's sections are what chunks may not cross, and
    the fixed strategy joins a short section to the next one, so a page's headings must not become them."""
    groups: list[list[Block]] = []
    for block in blocks:
        if block.kind == "heading" or not groups:
            groups.append([])
        groups[-1].append(block)
    return [_titled(group) for group in groups]


def _titled(blocks: list[Block]) -> Section:
    pages = [b.page for b in blocks if b.page is not None]
    return Section(
        blocks=tuple(blocks),
        title=blocks[0].text if blocks[0].kind == "heading" else None,
        page_start=min(pages, default=None),
        page_end=max(pages, default=None),
    )


def _preview_chunk(c: Chunk, oversized: bool) -> PreviewChunk:
    return PreviewChunk(
        index=c.index,
        text=c.text,
        token_count=c.token_count,
        char_start=c.char_start,
        char_end=c.char_end,
        page_start=c.page_start,
        page_end=c.page_end,
        heading_path=list(c.heading_path),
        parent_index=c.parent_index,
        oversized=oversized,
        ocr=c.ocr,
    )


class UnusedOriginals:
    """Removes a deleted document's stored original once the deletion has committed, in a transaction of its
    own (a background task runs after the request's has ended)."""

    def __init__(self, db: Database, blobs: BlobStore) -> None:
        self.db = db
        self.blobs = blobs

    async def remove(self, digest: str) -> bool:
        """Remove the original unless a document uses it again (uploaded meanwhile). The digest's lock orders
        this against uploads of the same bytes; returns whether it was removed."""
        async with self.db.transaction() as conn:
            repo = DocumentRepository(conn)
            await repo.lock_blobs([digest])
            if await repo.digest_in_use(digest):
                return False
            await asyncio.to_thread(self.blobs.delete, digest)
            return True
