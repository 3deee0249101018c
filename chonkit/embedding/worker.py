"""The embedding worker: claims one document of a job at a time and takes it through
parsing → chunking → embedding → writing, durably.

Crash safety comes from three facts: a claim is a row update (``FOR UPDATE SKIP LOCKED``); a running
item's heartbeat stops when its worker dies, so another worker takes it over after
six heartbeats; and point ids are derived from (collection, document, chunk index, content hash),
so redoing a document overwrites the same points instead of adding new ones. The final write — vector
store, parent chunks, the ``collection_documents`` row and the item's ``done`` — happens under the
collection's advisory lock in one transaction, which also serialises it with group changes.

Every chunk carries its document's name, tags and label; the worker also applies changes of those to the chunks
already written (``chonkit.pending_document_updates``).

A cancel is noticed within about a second while an item runs, not only between stages: the heartbeat task also
reads the job's ``cancel_requested`` every :data:`CANCEL_POLL_SECONDS`, and a parse (which OCR can make minutes
long) is raced against it, so the item is ``cancelled`` at once and its parse process stops before its next page
(:func:`~chonkit.document.isolated.parse_isolated`); the next item need not wait (issue #26).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Sequence
from datetime import timedelta
from typing import Any
from uuid import UUID

import msgspec

from chonkit.collection.models import Collection
from chonkit.collection.reconcile import upgrade_lexical_indexes
from chonkit.collection.repository import CollectionRepository
from chonkit.collection.service import identity_of
from chonkit.document.chunking import ChunkResult, default_chunk_config, validate_chunk_config
from chonkit.document.isolated import chunk_isolated, parse_isolated
from chonkit.document.models import Document
from chonkit.document.parsing import DocumentType, ParseConfig
from chonkit.document.parsing.ocr import ParseStopped
from chonkit.document.repository import DocumentRepository, StoredConfig
from chonkit.document.storage import BlobStore
from chonkit.embedding.repository import ClaimedItem, Embedded, JobRepository
from common import telemetry
from common.db import Database
from common.embedders.base import Embedder, EmbedderRegistry
from common.errors import AppError, InvalidInput, Unavailable
from common.vectors.base import ChunkPayload, Vector, VectorRecord
from common.vectors.registry import VectorRegistry
from schemas.models import Identity

logger = logging.getLogger(__name__)

POINT_NAMESPACE = uuid.UUID("5b0c6a52-6f1d-4c1e-9a57-2f5d0b6a9c3e")
MAX_ATTEMPTS = 5
EMBED_BATCH = 64
WRITE_BATCH = 256
UNCHANGED = "Already embedded in this collection with the same content and settings."
CANCEL_POLL_SECONDS = 1.0
"""How often a running item's job is asked whether it was cancelled: one primary-key read, so a cancel waits about a
second rather than for the stage to end (a parse by OCR took minutes, issue #26)."""


def point_id(collection_id: UUID, document_id: UUID, chunk_index: int, content_hash: str) -> str:
    """The same chunk of the same document version always gets the same id, in every retry."""
    return str(uuid.uuid5(POINT_NAMESPACE, f"{collection_id}:{document_id}:{chunk_index}:{content_hash}"))


PIPELINE_VERSION = 3
"""Raised whenever parsing or chunking reads the same bytes and settings into other text (2: #27's cleaning of
HTML chrome and PDF running headers, code kept indented; 3: a chunk inside a table repeats its first row, and a
JSON array of records is a table), so the next embed re-does documents it would otherwise skip as unchanged: a
collection made before is cleaned by embedding it again."""


def config_hash(parse_config: Any, chunk_config: Any, model: str) -> str:
    """Changes when anything that shapes the vectors changes (so an unchanged document can be skipped)."""
    encoded = msgspec.json.encode([parse_config, chunk_config, model, PIPELINE_VERSION], order="sorted")
    return hashlib.sha256(encoded).hexdigest()[:32]


class _Stop(Exception):
    """Processing must stop: cancelled, or our claim was lost to another worker."""

    def __init__(self, stage: str | None) -> None:
        super().__init__(stage)
        self.stage = stage


class _Watch:
    """What the heartbeat task noticed while an item runs; ``stop`` is set with either of the others, for work that
    just ends (a parse) and leaves the reason to its caller."""

    def __init__(self) -> None:
        self.lost = asyncio.Event()
        """Our claim is gone: another worker took the item over (or it finished)."""
        self.cancelled = asyncio.Event()
        """The job's cancel was asked for."""
        self.stop = asyncio.Event()

    def stopped(self) -> _Stop:
        """What to raise once ``stop`` is set: lost claims end without a word, a cancel finishes the item."""
        return _Stop(None if self.lost.is_set() else "cancelled")


class EmbeddingWorker:
    def __init__(
        self,
        db: Database,
        blobs: BlobStore,
        embedders: EmbedderRegistry,
        vectors: VectorRegistry,
        *,
        name: str | None = None,
        heartbeat_seconds: float = 5.0,
    ) -> None:
        self.db = db
        self.blobs = blobs
        self.embedders = embedders
        self.vectors = vectors
        self.name = name or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.heartbeat_seconds = heartbeat_seconds
        self.stale_after = timedelta(seconds=heartbeat_seconds * 6)
        self._wake = asyncio.Event()
        from chonkit.reembedding.service import Settler
        from chonkit.reembedding.step import ReembedStep

        self._reembed = ReembedStep(db, blobs, embedders, vectors)
        self._migrations = Settler(db, vectors)

    def wake(self) -> None:
        """New work was queued in this process: skip the rest of the idle wait."""
        self._wake.set()

    async def run(self, stop: asyncio.Event, *, idle_seconds: float = 1.0) -> None:
        """Work until ``stop`` is set; a lost database or vector store is waited out, and an unexpected error
        is logged and retried the same way: a worker that stopped would leave every job queued unseen. First,
        collections made before lexical retrieval get their lexical index (once; a no-op for the others)."""
        try:
            await upgrade_lexical_indexes(self.db, self.vectors)
        except Unavailable as exc:
            logger.warning("lexical indexes not checked now (a collection's next write adds its own): %s", exc.detail)
        backoff = idle_seconds
        while not stop.is_set():
            try:
                worked = await self.run_once()
                backoff = idle_seconds
            except Unavailable as exc:
                logger.warning("worker waiting for a dependency: %s", exc.detail)
                worked, backoff = False, min(backoff * 2, 30.0)
            except Exception:
                logger.exception("worker loop failed; retrying")
                worked, backoff = False, min(backoff * 2, 30.0)
            if not worked:
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(_first(stop.wait(), self._wake.wait()), timeout=backoff)

    async def run_once(self) -> bool:
        """Apply one pending document update, settle one finished migration (``chonkit.reembedding``) or process one
        job item; False when there was nothing to do."""
        if await self._update_document_once() or await self._migrations.settle_once():
            return True
        async with self.db.transaction() as conn:
            item = await JobRepository(conn).claim(self.name, self.stale_after)
        if item is None:
            return False
        watch = _Watch()
        beat = asyncio.create_task(self._beat(item, watch))
        try:
            with telemetry.span("chonkit.job_item", _span_attributes(item)):
                await self._process(item, watch)
        except _Stop as stop:
            if stop.stage is not None:
                await self._finish(item, stop.stage)
        except AppError as exc:
            if exc.status >= 500:
                await self._finish(item, "queued", error_code=exc.code, error=exc.detail)
                raise
            await self._finish(item, "failed", error_code=exc.code, error=exc.detail)
        except Exception as exc:
            logger.exception("embedding failed on %s", item.document_id)
            await self._finish(item, "failed", error_code="internal_error", error=f"Unexpected error: {exc}")
        finally:
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat
        return True

    async def _update_document_once(self) -> bool:
        """Give one collection's chunks of a changed document the document's current name, tags and label. A
        store that is down or refuses keeps the update pending, tried again after a growing wait: it is never
        lost."""
        async with self.db.transaction() as conn:
            collections = CollectionRepository(conn)
            update = await collections.claim_document_update()
            if update is None:
                return False
            try:
                store = self.vectors.get(update.vector_provider)
                await store.update_document(
                    update.collection_name,
                    str(update.document_id),
                    document_name=update.document_name,
                    tags=update.tags,
                    label=update.label,
                )
            except Exception as exc:  # whatever the failure, it must not stall the job queue behind this update
                detail = exc.detail if isinstance(exc, AppError) else f"Unexpected error: {exc!r}"
                logger.warning(
                    "updating document %s in %s failed (attempt %d): %s",
                    update.document_id,
                    update.collection_name,
                    update.attempts + 1,
                    detail,
                    exc_info=not isinstance(exc, AppError),
                )
                await collections.postpone_document_update(update, detail)
            else:
                await collections.finish_document_update(update)
        return True

    async def _beat(self, item: ClaimedItem, watch: _Watch) -> None:
        """Refresh the claim every ``heartbeat_seconds`` and ask for a cancel every :data:`CANCEL_POLL_SECONDS`
        (or as often as the heartbeat, when that is more often); what it finds, it sets on ``watch``."""
        beat_due = time.monotonic() + self.heartbeat_seconds
        while True:
            await asyncio.sleep(min(self.heartbeat_seconds, CANCEL_POLL_SECONDS))
            try:
                async with self.db.transaction() as conn:
                    jobs = JobRepository(conn)
                    if time.monotonic() >= beat_due:
                        if not await jobs.heartbeat(item, self.name):
                            watch.lost.set()
                            watch.stop.set()
                            return
                        beat_due = time.monotonic() + self.heartbeat_seconds
                    if not watch.cancelled.is_set() and await jobs.cancel_requested(item.job_id):
                        watch.cancelled.set()
                        watch.stop.set()
            except Unavailable:
                logger.warning("heartbeat missed for %s", item.document_id)

    async def _finish(self, item: ClaimedItem, stage: str, **fields: Any) -> None:
        async with self.db.transaction() as conn:
            await JobRepository(conn).set_stage(item, self.name, stage, **fields)
        telemetry.embedding_item_finished(stage)

    async def _stage(self, item: ClaimedItem, lost: asyncio.Event, stage: str, **fields: Any) -> None:
        """Enter ``stage`` unless the job was cancelled or our claim lost."""
        async with self.db.transaction() as conn:
            jobs = JobRepository(conn)
            if lost.is_set():
                raise _Stop(None)
            if await jobs.cancel_requested(item.job_id):
                raise _Stop("cancelled")
            if not await jobs.set_stage(item, self.name, stage, **fields):
                raise _Stop(None)

    async def _process(self, item: ClaimedItem, watch: _Watch) -> None:
        if item.attempts > MAX_ATTEMPTS:
            raise InvalidInput(
                f"Processing stopped {MAX_ATTEMPTS} times without finishing (the worker crashed or was killed).",
                code="too_many_attempts",
            )
        async with self.db.transaction() as conn:
            collection = await CollectionRepository(conn).get(item.collection_id)
            document = await DocumentRepository(conn).get(item.document_id)
            saved = await DocumentRepository(conn).get_config(item.document_id)
            state = await JobRepository(conn).embedded_state(item.collection_id, item.document_id)
        if collection is None:
            raise _Stop("cancelled")
        if item.kind == "remove":
            await self._remove(item, collection)
            return
        if item.kind == "reembed":
            await self._reembed_document(item, watch, collection, document, saved)
            return
        if document is None or saved is None:
            raise InvalidInput("The document was deleted before it could be embedded.", code="document_not_found")
        await self._embed(item, watch, collection=collection, document=document, saved=saved, state=state)

    async def _reembed_document(
        self,
        item: ClaimedItem,
        watch: _Watch,
        collection: Collection,
        document: Document | None,
        saved: StoredConfig | None,
    ) -> None:
        """A document of a migration to another model: these stages, into the collection's new version; a cancel
        stops its parse within a second, as an embedding's."""
        from chonkit.reembedding.step import ClaimLost

        try:
            await self._reembed.process(
                item,
                watch.lost,
                collection=collection,
                document=document,
                saved=saved,
                enter=self._stage,
                worker=self.name,
                stop=watch.stop,
            )
        except ClaimLost as exc:
            raise _Stop(None) from exc
        except ParseStopped:
            raise watch.stopped() from None
        telemetry.embedding_item_finished("done")

    async def _remove(self, item: ClaimedItem, collection: Collection) -> None:
        store = self.vectors.get(collection.vector_provider)
        async with self.db.transaction() as conn:
            await CollectionRepository(conn).lock(collection.id)
            await store.delete_document(collection.name, str(item.document_id))
            jobs = JobRepository(conn)
            await jobs.forget_document(collection.id, item.document_id)
            await jobs.set_stage(item, self.name, "done", chunks=0)
        telemetry.embedding_item_finished("done")

    async def _embed(
        self,
        item: ClaimedItem,
        watch: _Watch,
        *,
        collection: Collection,
        document: Document,
        saved: StoredConfig,
        state: Embedded | None,
    ) -> None:
        timings: dict[str, float] = {}
        embedder = self.embedders.get(collection.embedding_provider, collection.model)
        if embedder.dimension != collection.dimension:
            raise InvalidInput(
                f"The model {collection.model} makes {embedder.dimension}-d vectors but the collection holds "
                f"{collection.dimension}-d ones.",
                code="dimension_mismatch",
            )
        parse_config = msgspec.convert(saved.parse or {}, ParseConfig)
        chunk_config = validate_chunk_config(saved.chunk) if saved.chunk else default_chunk_config()
        digest = config_hash(saved.parse, msgspec.to_builtins(chunk_config), collection.model)
        store = self.vectors.get(collection.vector_provider)
        unchanged = state is not None and (state.document_sha256, state.config_hash) == (document.sha256, digest)
        if (
            unchanged
            and state
            and await store.count(collection.name, document_id=str(document.id)) == state.chunk_count
        ):
            await self._finish(item, "skipped", chunks=state.chunk_count, timings=timings, reason=UNCHANGED)
            return

        started = time.perf_counter()
        data = await asyncio.to_thread(self.blobs.get, document.sha256)
        try:
            parsed = await parse_isolated(data, DocumentType(document.doc_type), parse_config, stop=watch.stop)
        except ParseStopped:
            raise watch.stopped() from None
        timings["parse_ms"] = _ms(started)
        telemetry.embedding_stage_done("parse", started)

        await self._stage(item, watch.lost, "chunking", timings=timings)
        started = time.perf_counter()
        result = await chunk_isolated(
            parsed,
            chunk_config,
            collection.embedding_provider,
            collection.model,
            embedder,
            max_tokens=embedder.max_tokens,
        )
        timings["chunk_ms"] = _ms(started)
        telemetry.embedding_stage_done("chunk", started)
        _refuse_oversized(result, embedder)

        await self._stage(item, watch.lost, "embedding", timings=timings, chunks=len(result.chunks))
        started = time.perf_counter()
        vectors: list[list[float]] = []
        for batch_start in range(0, len(result.chunks), EMBED_BATCH):
            batch = result.chunks[batch_start : batch_start + EMBED_BATCH]
            vectors.extend((await embedder.embed_documents([c.text for c in batch])).tolist())
            if watch.stop.is_set():
                raise watch.stopped()
        timings["embed_ms"] = _ms(started)
        telemetry.embedding_stage_done("embed", started)
        tokens = sum(c.token_count for c in result.chunks)

        await self._stage(item, watch.lost, "writing", timings=timings, tokens=tokens)
        started = time.perf_counter()
        await self._write(
            item,
            collection=collection,
            document=document,
            result=result,
            vectors=vectors,
            digest=digest,
            timings=timings,
            tokens=tokens,
            started=started,
        )

    async def _write(
        self,
        item: ClaimedItem,
        *,
        collection: Collection,
        document: Document,
        result: ChunkResult,
        vectors: list[list[float]],
        digest: str,
        timings: dict[str, float],
        tokens: int,
        started: float,
    ) -> None:
        store = self.vectors.get(collection.vector_provider)
        async with self.db.transaction() as conn:
            collections = CollectionRepository(conn)
            await collections.lock(collection.id)
            current = await collections.get(collection.id)  # groups as of now, not as of the job's start
            if current is None:
                raise _Stop("cancelled")
            jobs = JobRepository(conn)
            if not await jobs.still_writing(item, self.name):
                raise _Stop(None)  # a removal took it (or another worker did): the store must not see this write
            # The row is held from here to the commit, so the name, tags and label read next are the ones an
            # edit of the document either waits for or, committed before, queued an update behind this write.
            held = await jobs.document_name_for_write(document.id)
            metadata = None if held is None else await DocumentRepository(conn).get(document.id)
            if metadata is None:
                raise InvalidInput("The document was deleted while it was being embedded.", code="document_deleted")
            records = chunk_records(
                collection_id=collection.id,
                identity=identity_of(current),
                document_id=document.id,
                document_name=metadata.name,
                tags=metadata.tags,
                label=metadata.label,
                document_sha256=document.sha256,
                result=result,
                vectors=vectors,
            )
            await store.delete_document(collection.name, str(document.id))
            for batch_start in range(0, len(records), WRITE_BATCH):
                await store.upsert(collection.name, records[batch_start : batch_start + WRITE_BATCH])
            await jobs.replace_parents(
                collection.id,
                document.id,
                [
                    (p.index, p.content, p.char_start, p.char_end, p.page_start, p.page_end, list(p.heading_path))
                    for p in result.parents
                ],
            )
            await jobs.record_embedded(collection.id, document.id, document.sha256, digest, len(records))
            timings["write_ms"] = _ms(started)
            telemetry.embedding_stage_done("write", started)
            total_ms = sum(timings.values())
            await jobs.add_report(
                item, model=collection.model, tokens=tokens, vectors=len(records), duration_ms=total_ms
            )
            if not await jobs.set_stage(item, self.name, "done", timings=timings):
                raise _Stop(None)  # taken over meanwhile: roll back; the new owner writes the same points
        telemetry.embedding_item_finished("done")


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


def _refuse_oversized(result: ChunkResult, embedder: Embedder) -> None:
    if result.oversized:
        first = result.chunks[result.oversized[0]]
        raise InvalidInput(
            f"{len(result.oversized)} chunk(s) exceed the {embedder.max_tokens}-token limit of {embedder.model} "
            f"(chunk {first.index} has {first.token_count} tokens); choose a smaller chunk size — chunks are "
            "never silently truncated.",
            code="chunks_too_long",
            extra={"oversized": result.oversized},
        )


def _span_attributes(item: ClaimedItem) -> dict[str, str | int]:
    """Ids only: a collection's name is secret to non-members and a trace store is not access-checked."""
    return {
        "ragu.job_id": str(item.job_id),
        "ragu.document_id": str(item.document_id),
        "ragu.collection_id": str(item.collection_id),
        "ragu.job_kind": item.kind,
        "ragu.attempt": item.attempts,
    }


def _content_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)


async def _first(*waits: Awaitable[Any]) -> None:
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
