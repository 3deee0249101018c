"""One document of a migration, in the worker: the embedding worker's own stages, into the new version.

The document is parsed and chunked per its stored configs (chunking counts tokens with the new model, whose limit
applies), embedded with the new model, and written into the migration's version under the collection's advisory
lock, in one transaction with what chonkit will record for it at the swap (:class:`MigrationRepository`) and the
item's ``done``. Point ids are the worker's (collection, document, chunk index, content hash), so a document redone
after a crash overwrites its own points.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import Any, Protocol

import msgspec

from chonkit.collection.models import Collection
from chonkit.collection.repository import CollectionRepository
from chonkit.document.chunking import ChunkResult, default_chunk_config, validate_chunk_config
from chonkit.document.isolated import chunk_isolated, parse_isolated
from chonkit.document.models import Document
from chonkit.document.parsing import DocumentType, ParseConfig
from chonkit.document.repository import DocumentRepository, StoredConfig
from chonkit.document.storage import BlobStore
from chonkit.embedding import worker as embedding
from chonkit.embedding.repository import ClaimedItem, JobRepository
from chonkit.reembedding.models import Migration
from chonkit.reembedding.repository import MigrationRepository
from chonkit.reembedding.service import version_identity
from common.db import Database
from common.embedders.base import EmbedderRegistry
from common.errors import Conflict, InvalidInput
from common.vectors.registry import VectorRegistry


class Enter(Protocol):
    """The worker's stage step: enter ``stage`` unless the job was cancelled or the claim lost (then it raises)."""

    def __call__(self, item: ClaimedItem, lost: asyncio.Event, stage: str, **fields: Any) -> Awaitable[None]: ...


class ClaimLost(Exception):
    """The item was taken over while it was written: the transaction is rolled back, the new owner redoes it."""


class ReembedStep:
    def __init__(self, db: Database, blobs: BlobStore, embedders: EmbedderRegistry, vectors: VectorRegistry) -> None:
        self.db = db
        self.blobs = blobs
        self.embedders = embedders
        self.vectors = vectors

    async def process(
        self,
        item: ClaimedItem,
        lost: asyncio.Event,
        *,
        collection: Collection,
        document: Document | None,
        saved: StoredConfig | None,
        enter: Enter,
        worker: str,
        stop: asyncio.Event | None = None,
    ) -> None:
        """Parse, chunk, embed and write one document into the migration's new version.

        Raises:
            ParseStopped: ``stop`` was set while the document was parsed (a cancel, or a lost claim).
        """
        async with self.db.transaction() as conn:
            migration = await MigrationRepository(conn).of_job(item.job_id)
        if migration is None or migration.state != "building":
            raise Conflict("The migration this document belonged to has ended.", code="migration_finished")
        if document is None or saved is None:
            raise InvalidInput("The document was deleted before it could be embedded.", code="document_not_found")
        embedder = self.embedders.get(migration.embedding_provider, migration.model)
        parse_config = msgspec.convert(saved.parse or {}, ParseConfig)
        chunk_config = validate_chunk_config(saved.chunk) if saved.chunk else default_chunk_config()
        digest = embedding.config_hash(saved.parse, msgspec.to_builtins(chunk_config), migration.model)
        timings: dict[str, float] = {}

        started = time.perf_counter()
        data = await asyncio.to_thread(self.blobs.get, document.sha256)
        parsed = await parse_isolated(data, DocumentType(document.doc_type), parse_config, stop=stop)
        timings["parse_ms"] = _ms(started)
        await enter(item, lost, "chunking", timings=timings)
        started = time.perf_counter()
        result = await chunk_isolated(
            parsed,
            chunk_config,
            migration.embedding_provider,
            migration.model,
            embedder,
            max_tokens=embedder.max_tokens,
        )
        timings["chunk_ms"] = _ms(started)
        embedding._refuse_oversized(result, embedder)  # the worker's own rule, applied alike

        await enter(item, lost, "embedding", timings=timings, chunks=len(result.chunks))
        started = time.perf_counter()
        vectors: list[list[float]] = []
        for batch_start in range(0, len(result.chunks), embedding.EMBED_BATCH):
            batch = result.chunks[batch_start : batch_start + embedding.EMBED_BATCH]
            vectors.extend((await embedder.embed_documents([c.text for c in batch])).tolist())
        timings["embed_ms"] = _ms(started)
        tokens = sum(c.token_count for c in result.chunks)

        await enter(item, lost, "writing", timings=timings, tokens=tokens)
        started = time.perf_counter()
        await self._write(item, migration, document, result=result, vectors=vectors, digest=digest, worker=worker)
        timings["write_ms"] = _ms(started)
        async with self.db.transaction() as conn:
            await JobRepository(conn).add_report(
                item, model=migration.model, tokens=tokens, vectors=len(vectors), duration_ms=sum(timings.values())
            )

    async def _write(
        self,
        item: ClaimedItem,
        migration: Migration,
        document: Document,
        *,
        result: ChunkResult,
        vectors: list[list[float]],
        digest: str,
        worker: str,
    ) -> None:
        async with self.db.transaction() as conn:
            collections = CollectionRepository(conn)
            await collections.lock(migration.collection_id)
            current = await collections.get(migration.collection_id)
            metadata = await DocumentRepository(conn).get(document.id)
            if current is None:
                raise Conflict("The collection was deleted during its migration.", code="collection_not_found")
            if metadata is None:
                raise InvalidInput("The document was deleted while it was being embedded.", code="document_deleted")
            records = embedding.chunk_records(
                collection_id=current.id,
                identity=version_identity(current, migration),
                document_id=document.id,
                document_name=metadata.name,
                tags=metadata.tags,
                label=metadata.label,
                document_sha256=document.sha256,
                result=result,
                vectors=vectors,
            )
            store = self.vectors.get(current.vector_provider)
            await store.delete_document(migration.version, str(document.id))
            for batch_start in range(0, len(records), embedding.WRITE_BATCH):
                await store.upsert(migration.version, records[batch_start : batch_start + embedding.WRITE_BATCH])
            await MigrationRepository(conn).record_document(
                migration.job_id,
                document.id,
                document_sha256=document.sha256,
                config_hash=digest,
                chunk_count=len(records),
                parents=[_parent(p) for p in result.parents],
            )
            if not await JobRepository(conn).set_stage(item, worker, "done", chunks=len(records)):
                raise ClaimLost


def _parent(parent: Any) -> dict[str, Any]:
    return {
        "index": parent.index,
        "content": parent.content,
        "char_start": parent.char_start,
        "char_end": parent.char_end,
        "page_start": parent.page_start,
        "page_end": parent.page_end,
        "heading_path": list(parent.heading_path),
    }


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)
