"""A claimed job item's document through parsing → chunking → embedding → writing.

Each stage is entered only while the item is still ours and its job not cancelled (:meth:`Pipeline.enter`), and the
heartbeat's :class:`Watch` is asked between embedding batches too, so a lost claim or a cancel stops the work within
a batch rather than after the whole document. Parsing and chunking run in their own processes, so the event loop
never waits on them; each stage's milliseconds are recorded on the item (``timings``) and in the metrics.

The write happens under the collection's advisory lock in one transaction with what the job's kind records beside
the chunks (:class:`Target`) and the item's ``done``, which also serialises it with group changes. Point ids derive
from (collection, document, chunk index, content hash), so redoing a document overwrites its own points.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from uuid import UUID

import msgspec

from chonkit.collection.models import Collection
from chonkit.collection.repository import CollectionRepository
from chonkit.document.chunking import ChunkConfig, ChunkResult, default_chunk_config, validate_chunk_config
from chonkit.document.isolated import chunk_isolated, parse_isolated
from chonkit.document.models import Document
from chonkit.document.parsing import DocumentType, ParseConfig
from chonkit.document.parsing.ocr import ParseStopped
from chonkit.document.repository import DocumentRepository, StoredConfig
from chonkit.document.storage import BlobStore
from chonkit.jobs.repository import ClaimedItem, JobRepository
from common import telemetry
from common.db import Database
from common.db.database import Connection
from common.embedders.base import Embedder
from common.errors import InvalidInput
from common.vectors.base import ChunkPayload, Vector, VectorRecord
from common.vectors.registry import VectorRegistry
from schemas.models import Identity

POINT_NAMESPACE = uuid.UUID("5b0c6a52-6f1d-4c1e-9a57-2f5d0b6a9c3e")
EMBED_BATCH = 64
WRITE_BATCH = 256

PIPELINE_VERSION = 3
"""Raised whenever parsing or chunking reads the same bytes and settings into other text (2: #27's cleaning of
HTML chrome and PDF running headers, code kept indented; 3: a chunk inside a table repeats its first row, and a
JSON array of records is a table), so the next embed re-does documents it would otherwise skip as unchanged: a
collection made before is cleaned by embedding it again."""


def point_id(collection_id: UUID, document_id: UUID, chunk_index: int, content_hash: str) -> str:
    """The same chunk of the same document version always gets the same id, in every retry."""
    return str(uuid.uuid5(POINT_NAMESPACE, f"{collection_id}:{document_id}:{chunk_index}:{content_hash}"))


def config_hash(parse_config: Any, chunk_config: Any, model: str) -> str:
    """Changes when anything that shapes the vectors changes (so an unchanged document can be skipped)."""
    encoded = msgspec.json.encode([parse_config, chunk_config, model, PIPELINE_VERSION], order="sorted")
    return hashlib.sha256(encoded).hexdigest()[:32]


class Configs(msgspec.Struct, frozen=True, kw_only=True):
    """What shapes a document's vectors: its stored parse and chunk configs, validated, and the embedding model; and
    their hash."""

    parse: ParseConfig
    chunk: ChunkConfig
    embedding_provider: str
    model: str
    digest: str


def configs(saved: StoredConfig, embedding_provider: str, model: str) -> Configs:
    chunk = validate_chunk_config(saved.chunk) if saved.chunk else default_chunk_config()
    return Configs(
        parse=msgspec.convert(saved.parse or {}, ParseConfig),
        chunk=chunk,
        embedding_provider=embedding_provider,
        model=model,
        digest=config_hash(saved.parse, msgspec.to_builtins(chunk), model),
    )


class Stop(Exception):
    """Processing must stop: cancelled (``stage`` is ``cancelled``), or our claim was lost to another worker
    (``None``: the new owner finishes the item)."""

    def __init__(self, stage: str | None) -> None:
        super().__init__(stage)
        self.stage = stage


class Watch:
    """What the heartbeat noticed while an item runs; ``stop`` is set with either of the others, for work that just
    ends (a parse) and leaves the reason to its caller."""

    def __init__(self) -> None:
        self.lost = asyncio.Event()
        """Our claim is gone: another worker took the item over (or it finished)."""
        self.cancelled = asyncio.Event()
        """The job's cancel was asked for."""
        self.stop = asyncio.Event()

    def stopped(self) -> Stop:
        """What to raise once ``stop`` is set: lost claims end without a word, a cancel finishes the item."""
        return Stop(None if self.lost.is_set() else "cancelled")


class Claim(msgspec.Struct, frozen=True, kw_only=True):
    """The item a worker holds, the worker's name, and the watch its heartbeat keeps."""

    item: ClaimedItem
    worker: str
    watch: Watch


class Target(msgspec.Struct, frozen=True, kw_only=True):
    """Where a document's chunks go and what is recorded with them, per kind of job: the item's collection (an
    embedding) or its new version (a re-embedding)."""

    store: str
    """The vector store's name of what is written: the collection's, or its version's."""
    identity: Callable[[Collection | None], Identity]
    """The identity the chunks carry, from the collection as it is under the write's lock (None: deleted; raise)."""
    record: Callable[[Connection, Document, ChunkResult, str], Awaitable[None]]
    """What chonkit records beside the chunks, in the write's transaction: (connection, document, chunks, digest)."""


class Pipeline:
    def __init__(self, db: Database, blobs: BlobStore, vectors: VectorRegistry) -> None:
        self.db = db
        self.blobs = blobs
        self.vectors = vectors

    async def enter(self, claim: Claim, stage: str, **fields: Any) -> None:
        """Enter ``stage`` unless the job was cancelled or our claim lost."""
        async with self.db.transaction() as conn:
            jobs = JobRepository(conn)
            if claim.watch.lost.is_set():
                raise Stop(None)
            if await jobs.cancel_requested(claim.item.job_id):
                raise Stop("cancelled")
            if not await jobs.set_stage(claim.item, claim.worker, stage, **fields):
                raise Stop(None)

    async def run(self, claim: Claim, document: Document, configs: Configs, embedder: Embedder, target: Target) -> None:
        """Parse, chunk, embed and write one document (its item is in ``parsing``).

        Raises:
            Stop: cancelled, or the claim was lost (between stages, embedding batches, or during the parse).
            InvalidInput: ``chunks_too_long``, ``document_deleted``.
        """
        timings: dict[str, float] = {}
        started = time.perf_counter()
        data = await asyncio.to_thread(self.blobs.get, document.sha256)
        try:
            parsed = await parse_isolated(data, DocumentType(document.doc_type), configs.parse, stop=claim.watch.stop)
        except ParseStopped:
            raise claim.watch.stopped() from None
        _done("parse", started, timings)

        await self.enter(claim, "chunking", timings=timings)
        started = time.perf_counter()
        result = await chunk_isolated(
            parsed, configs.chunk, configs.embedding_provider, configs.model, embedder, max_tokens=embedder.max_tokens
        )
        _done("chunk", started, timings)
        refuse_oversized(result, embedder)

        await self.enter(claim, "embedding", timings=timings, chunks=len(result.chunks))
        started = time.perf_counter()
        vectors = await self._embed(claim, result, embedder)
        _done("embed", started, timings)
        tokens = sum(c.token_count for c in result.chunks)

        await self.enter(claim, "writing", timings=timings, tokens=tokens)
        await self._write(
            claim, document, result, vectors, configs=configs, target=target, timings=timings, tokens=tokens
        )
        telemetry.embedding_item_finished("done")

    async def _embed(self, claim: Claim, result: ChunkResult, embedder: Embedder) -> list[list[float]]:
        vectors: list[list[float]] = []
        for batch_start in range(0, len(result.chunks), EMBED_BATCH):
            batch = result.chunks[batch_start : batch_start + EMBED_BATCH]
            vectors.extend((await embedder.embed_documents([c.text for c in batch])).tolist())
            if claim.watch.stop.is_set():
                raise claim.watch.stopped()
        return vectors

    async def _write(
        self,
        claim: Claim,
        document: Document,
        result: ChunkResult,
        vectors: list[list[float]],
        *,
        configs: Configs,
        target: Target,
        timings: dict[str, float],
        tokens: int,
    ) -> None:
        started = time.perf_counter()
        async with self.db.transaction() as conn:
            collections = CollectionRepository(conn)
            await collections.lock(claim.item.collection_id)
            current = await collections.get(claim.item.collection_id)  # groups as of now, not as of the job's start
            identity = target.identity(current)
            jobs = JobRepository(conn)
            if current is None or not await jobs.still_writing(claim.item, claim.worker):
                raise Stop(None)  # a removal took it (or another worker did): the store must not see this write
            # The row is held from here to the commit, so the name, tags and label read next are the ones an
            # edit of the document either waits for or, committed before, queued an update behind this write.
            held = await jobs.document_name_for_write(document.id)
            metadata = None if held is None else await DocumentRepository(conn).get(document.id)
            if metadata is None:
                raise InvalidInput("The document was deleted while it was being embedded.", code="document_deleted")
            records = chunk_records(
                collection_id=current.id,
                identity=identity,
                document_id=document.id,
                document_name=metadata.name,
                tags=metadata.tags,
                label=metadata.label,
                document_sha256=document.sha256,
                result=result,
                vectors=vectors,
            )
            store = self.vectors.get(current.vector_provider)
            await store.delete_document(target.store, str(document.id))
            for batch_start in range(0, len(records), WRITE_BATCH):
                await store.upsert(target.store, records[batch_start : batch_start + WRITE_BATCH])
            await target.record(conn, document, result, configs.digest)
            _done("write", started, timings)
            await jobs.add_report(
                claim.item, model=configs.model, tokens=tokens, vectors=len(records), duration_ms=sum(timings.values())
            )
            if not await jobs.set_stage(claim.item, claim.worker, "done", timings=timings):
                raise Stop(None)  # taken over meanwhile: roll back; the new owner writes the same points


def chunk_records(
    *,
    collection_id: UUID,
    identity: Identity,
    document_id: UUID,
    document_name: str,
    document_sha256: str,
    result: ChunkResult,
    vectors: Sequence[Vector],
    tags: Sequence[str] = (),
    label: str | None = None,
) -> list[VectorRecord]:
    """What a document's chunks become in the store: deterministic ids, and the payload every reader
    relies on — the identity properties, the text payload (``content``, ``document_id``) and our extras,
    among them the document's name, tags and label."""
    parents = {p.index: p for p in result.parents}
    records = []
    for c, vector in zip(result.chunks, vectors, strict=True):
        content_hash = _content_hash(c.text)
        payload = ChunkPayload(
            collection_id=identity.collection_id,
            name=identity.name,
            model=identity.model,
            vectorProvider=identity.vectorProvider,
            embeddingProvider=identity.embeddingProvider,
            groups=identity.groups,
            content=c.text,
            document_id=str(document_id),
            document_name=document_name,
            tags=list(tags),
            label=label,
            document_sha256=document_sha256,
            chunk_index=c.index,
            char_start=c.char_start,
            char_end=c.char_end,
            page_start=c.page_start,
            page_end=c.page_end,
            heading_path=list(c.heading_path),
            token_count=c.token_count,
            content_hash=content_hash,
            parent_index=c.parent_index,
            parent_content=None if c.parent_index is None else parents[c.parent_index].content,
            ocr=c.ocr,
        )
        records.append(
            VectorRecord(id=point_id(collection_id, document_id, c.index, content_hash), vector=vector, payload=payload)
        )
    return records


def refuse_oversized(result: ChunkResult, embedder: Embedder) -> None:
    """Chunks are never silently truncated: a document with a chunk over the model's window is refused."""
    if result.oversized:
        first = result.chunks[result.oversized[0]]
        raise InvalidInput(
            f"{len(result.oversized)} chunk(s) exceed the {embedder.max_tokens}-token limit of {embedder.model} "
            f"(chunk {first.index} has {first.token_count} tokens); choose a smaller chunk size — chunks are "
            "never silently truncated.",
            code="chunks_too_long",
            extra={"oversized": result.oversized},
        )


def _done(stage: str, started: float, timings: dict[str, float]) -> None:
    timings[f"{stage}_ms"] = round((time.perf_counter() - started) * 1000, 2)
    telemetry.embedding_stage_done(stage, started)


def _content_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
