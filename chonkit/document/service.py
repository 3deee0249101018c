"""Documents: accept only files we can read, store each distinct file once, and preview their chunks.

Every upload is sniffed and fully parsed *before* anything is stored, so a broken, empty, encrypted
or mislabelled file is rejected at once with its own code and leaves no trace.
"""

from __future__ import annotations

import asyncio
import unicodedata
import uuid
from collections.abc import Sequence
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


class DocumentService:
    def __init__(
        self,
        repo: DocumentRepository,
        blobs: BlobStore,
        tokenizers: Tokenizers,
        *,
        max_upload_bytes: int,
        vectors: VectorRegistry,
        collections: CollectionRepository,
    ) -> None:
        self.repo = repo
        self.blobs = blobs
        self.tokenizers = tokenizers
        self.max_upload_bytes = max_upload_bytes
        self.vectors = vectors
        self.collections = collections

    async def upload(self, files: Sequence[IncomingFile]) -> list[UploadResult]:
        """Per-file results in request order: created, duplicate (same bytes as a stored document) or rejected."""
        if not files:
            raise InvalidInput("Send at least one file in the multipart field 'files'.", code="no_files")
        # A blob removal left behind by a deletion must not take the original of a document uploaded again now.
        await self.repo.lock_blobs(sha256_hex(incoming.data) for incoming in files)
        results = []
        for incoming in files:
            try:
                results.append(await self._upload_one(incoming))
            except AppError as exc:
                if exc.status >= 500:
                    raise
                problem = Problem(status=exc.status, code=exc.code, detail=exc.detail)
                results.append(UploadResult(filename=incoming.filename, status="rejected", error=problem))
        return results

    async def _upload_one(self, incoming: IncomingFile) -> UploadResult:
        name = check_filename(incoming.filename)
        if len(incoming.data) > self.max_upload_bytes:
            raise PayloadTooLarge(
                f"{name} is {len(incoming.data)} bytes; the limit is {self.max_upload_bytes}.", code="file_too_large"
            )
        doc_type = sniff(name, incoming.data)
        # Checked, not recognised: OCR's seconds a page belong to the embedding worker, not to the upload request.
        parsed = await parse_isolated(incoming.data, doc_type, ParseConfig(), recognise=False)
        digest = sha256_hex(incoming.data)
        document, created = await self.repo.insert_unless_duplicate(
            id=uuid.uuid4(),
            name=name,
            doc_type=doc_type.value,
            media_type=doc_type.media_type,
            sha256=digest,
            size_bytes=len(incoming.data),
            page_count=parsed.page_count,
            ocr_pages=list(parsed.ocr_pages),
        )
        if created:
            await asyncio.to_thread(self.blobs.put, incoming.data)
        return UploadResult(filename=incoming.filename, status="created" if created else "duplicate", document=document)

    async def page(self, *, limit: int, offset: int, sort: str, search: str | None) -> DocumentPage:
        column = sort.removeprefix("-")
        if column not in SORTABLE:
            raise InvalidInput(
                f"Cannot sort by {sort!r}; use one of {sorted(SORTABLE)}, with '-' for descending.",
                code="invalid_sort",
            )
        items, total = await self.repo.page(
            limit=limit, offset=offset, sort=column, descending=sort.startswith("-"), search=search or None
        )
        return DocumentPage(items=items, total=total, limit=limit, offset=offset)

    async def get(self, document_id: UUID) -> Document:
        document = await self.repo.get(document_id)
        if document is None:
            raise NotFound(f"No document {document_id}.", code="document_not_found")
        return document

    async def patch(self, document_id: UUID, patch: DocumentPatch) -> Document:
        """Chunks carry their document's name, tags and label, so a change of any is queued for every collection
        holding the document, in this transaction; the embedding worker writes the document's values as they are
        then to the vector stores (and keeps the update queued while a store is down)."""
        changes: dict[str, Any] = {
            field: value for field in patch.__struct_fields__ if (value := getattr(patch, field)) is not msgspec.UNSET
        }
        if "name" in changes:
            changes["name"] = check_filename(changes["name"])
        if not changes:
            return await self.get(document_id)
        document = await self.repo.update(document_id, changes)
        if document is None:
            raise NotFound(f"No document {document_id}.", code="document_not_found")
        if changes.keys() & CARRIED_BY_CHUNKS:
            await self.collections.queue_document_update(document_id)
        return document

    async def delete(self, document_id: UUID) -> Document:
        """Delete its vectors from every collection, then the row; the caller removes the blob after commit.

        ``409 collection_migrating`` while a collection holding the document (or re-embedding it) moves to another
        model, like every other change of that collection's documents: the move would fail on the missing
        document and throw away the re-embedding of all the others.

        Every collection that holds the document or is embedding it is locked to the end of the transaction, so a
        worker writing the document's chunks there either finishes first (and its chunks are deleted here) or
        finds the document gone and writes nothing. A collection the document is only being embedded into counts
        too: its write, holding the document's row, made this deletion wait and then left its chunks behind."""
        holding = {c.id: c for c in await self.collections.collections_of_document(document_id)}
        embedding = await JobRepository(self.repo.conn).collections_pending(document_id)
        await refuse_if_any_migrating(self.repo.conn, [*holding, *embedding])
        for collection_id in sorted({*holding, *embedding}):
            await self.collections.lock(collection_id)
            collection = holding.get(collection_id) or await self.collections.get(collection_id)
            if collection is not None:
                await self.vectors.get(collection.vector_provider).delete_document(collection.name, str(document_id))
        await self.repo.cancel_pending_jobs(document_id)
        document = await self.repo.delete(document_id)
        if document is None:
            raise NotFound(f"No document {document_id}.", code="document_not_found")
        return document

    async def content_path(self, document_id: UUID) -> tuple[Document, Path]:
        document = await self.get(document_id)
        path = self.blobs.path_for(document.sha256)
        if not path.exists():
            raise NotFound(f"The original of document {document_id} is missing from the store.", code="blob_missing")
        return document, path

    async def get_config(self, document_id: UUID) -> DocumentConfig:
        stored = await self.repo.get_config(document_id)
        if stored is None:
            raise NotFound(f"No document {document_id}.", code="document_not_found")
        return msgspec.convert({"parse": stored.parse or {}, "chunk": stored.chunk}, DocumentConfig)

    async def set_config(self, document_id: UUID, config: DocumentConfig) -> DocumentConfig:
        """Validate completely before saving: regexes compile, page ranges fit the document, sizes make sense."""
        document = await self.get(document_id)
        self._check_parse_config(config.parse, document)
        if config.chunk is not None:
            validate_chunk_config(config.chunk)
        await self.repo.set_config(
            document_id,
            msgspec.to_builtins(config.parse),
            None if config.chunk is None else msgspec.to_builtins(config.chunk),
        )
        return config

    async def preview_parse(self, document_id: UUID, request: ParsePreviewRequest) -> ParsePreview:
        config = request.parse or (await self.get_config(document_id)).parse
        document, parsed = await self._parsed(document_id, config)
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
        saved = await self.get_config(document_id)
        config = validate_chunk_config(request.chunk or saved.chunk or default_chunk_config())
        provider, model, counter, max_tokens = self.tokenizers.resolve(request.embedding_provider, request.model)
        _, parsed = await self._parsed(document_id, request.parse or saved.parse)
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

    async def _parsed(self, document_id: UUID, config: ParseConfig | None) -> tuple[Document, ParsedDocument]:
        document, path = await self.content_path(document_id)
        if config is None:
            config = (await self.get_config(document_id)).parse
        self._check_parse_config(config, document)
        data = await asyncio.to_thread(path.read_bytes)
        return document, await parse_isolated(data, _doc_type(document), config)

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
