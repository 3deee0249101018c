"""The embedding worker: claims one document of a job at a time and takes it through the ingest pipeline
(:mod:`chonkit.ingest.pipeline`: parsing → chunking → embedding → writing), durably — into its collection for an
embedding, into the collection's new version for a re-embedding (:mod:`chonkit.reembedding.step`); a removal deletes
its chunks.

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
import logging
import os
import socket
import uuid
from datetime import timedelta
from typing import Any

from chonkit.collection.models import Collection
from chonkit.collection.reconcile import upgrade_lexical_indexes
from chonkit.collection.repository import CollectionRepository
from chonkit.collection.service import identity_of
from chonkit.document.chunking import ChunkResult
from chonkit.document.models import Document
from chonkit.document.repository import DocumentRepository, StoredConfig
from chonkit.document.storage import BlobStore
from chonkit.ingest.pipeline import (
    EMBED_BATCH,
    WRITE_BATCH,
    Claim,
    Pipeline,
    Stop,
    Target,
    Watch,
    chunk_records,
    config_hash,
    configs,
)
from chonkit.jobs.repository import ClaimedItem, Embedded, JobRepository
from chonkit.jobs.runner import Runner, keep_claim
from chonkit.reembedding.service import Settler
from chonkit.reembedding.step import ReembedStep
from common import telemetry
from common.db import Database
from common.db.database import Connection
from common.embedders.base import EmbedderRegistry
from common.errors import AppError, InvalidInput, Unavailable
from common.vectors.registry import VectorRegistry
from schemas.models import Identity

__all__ = ["EMBED_BATCH", "UNCHANGED", "WRITE_BATCH", "EmbeddingWorker", "chunk_records", "config_hash"]
"""The pipeline's batches, records and hash are also asked of the worker by name (benchmarks, tests)."""

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 5
UNCHANGED = "Already embedded in this collection with the same content and settings."
CANCEL_POLL_SECONDS = 1.0
"""How often a running item's job is asked whether it was cancelled: one primary-key read, so a cancel waits about a
second rather than for the stage to end (a parse by OCR took minutes, issue #26)."""


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
        self._runner = Runner("worker", self.run_once)
        self._pipeline = Pipeline(db, blobs, vectors)
        self._reembed = ReembedStep(db, embedders, self._pipeline)
        self._migrations = Settler(db, vectors)

    def wake(self) -> None:
        """New work was queued in this process: skip the rest of the idle wait."""
        self._runner.wake()

    async def run(self, stop: asyncio.Event, *, idle_seconds: float = 1.0) -> None:
        """Work until ``stop`` is set (:class:`~chonkit.jobs.runner.Runner`). First, collections made before lexical
        retrieval get their lexical index (once; a no-op for the others)."""
        try:
            await upgrade_lexical_indexes(self.db, self.vectors)
        except Unavailable as exc:
            logger.warning("lexical indexes not checked now (a collection's next write adds its own): %s", exc.detail)
        await self._runner.run(stop, idle_seconds=idle_seconds)

    async def run_once(self) -> bool:
        """Apply one pending document update, settle one finished migration (``chonkit.reembedding``) or process one
        job item; False when there was nothing to do."""
        if await self._update_document_once() or await self._migrations.settle_once():
            return True
        async with self.db.transaction() as conn:
            item = await JobRepository(conn).claim(self.name, self.stale_after)
        if item is None:
            return False
        claim = Claim(item=item, worker=self.name, watch=Watch())
        beat = asyncio.create_task(
            keep_claim(
                lambda due: self._beat(claim, due),
                every=self.heartbeat_seconds,
                poll=CANCEL_POLL_SECONDS,
                what=str(item.document_id),
            )
        )
        try:
            with telemetry.span("chonkit.job_item", _span_attributes(item)):
                await self._process(claim)
        except Stop as stop:
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

    async def _beat(self, claim: Claim, due: bool) -> bool:
        """Refresh the claim when its heartbeat is due and ask for a cancel every :data:`CANCEL_POLL_SECONDS`; what
        it finds, it sets on the claim's watch. False once the claim is gone."""
        watch = claim.watch
        async with self.db.transaction() as conn:
            jobs = JobRepository(conn)
            if due and not await jobs.heartbeat(claim.item, self.name):
                watch.lost.set()
                watch.stop.set()
                return False
            if not watch.cancelled.is_set() and await jobs.cancel_requested(claim.item.job_id):
                watch.cancelled.set()
                watch.stop.set()
        return True

    async def _finish(self, item: ClaimedItem, stage: str, **fields: Any) -> None:
        async with self.db.transaction() as conn:
            await JobRepository(conn).set_stage(item, self.name, stage, **fields)
        telemetry.embedding_item_finished(stage)

    async def _process(self, claim: Claim) -> None:
        item = claim.item
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
            raise Stop("cancelled")
        if item.kind == "remove":
            await self._remove(item, collection)
            return
        if item.kind == "reembed":
            await self._reembed.process(claim, document=document, saved=saved)
            return
        if document is None or saved is None:
            raise InvalidInput("The document was deleted before it could be embedded.", code="document_not_found")
        await self._embed(claim, collection=collection, document=document, saved=saved, state=state)

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
        self, claim: Claim, *, collection: Collection, document: Document, saved: StoredConfig, state: Embedded | None
    ) -> None:
        """Through the pipeline into the collection, unless the collection holds the document embedded the same way
        already (``skipped``)."""
        embedder = self.embedders.get(collection.embedding_provider, collection.model)
        if embedder.dimension != collection.dimension:
            raise InvalidInput(
                f"The model {collection.model} makes {embedder.dimension}-d vectors but the collection holds "
                f"{collection.dimension}-d ones.",
                code="dimension_mismatch",
            )
        stored = configs(saved, collection.embedding_provider, collection.model)
        store = self.vectors.get(collection.vector_provider)
        unchanged = state is not None and (state.document_sha256, state.config_hash) == (document.sha256, stored.digest)
        if (
            unchanged
            and state
            and await store.count(collection.name, document_id=str(document.id)) == state.chunk_count
        ):
            await self._finish(claim.item, "skipped", chunks=state.chunk_count, timings={}, reason=UNCHANGED)
            return
        await self._pipeline.run(claim, document, stored, embedder, _into(collection))


def _into(collection: Collection) -> Target:
    """The collection itself: its chunks carry its identity as it is at the write, and chonkit records the document's
    parent chunks and what it was embedded from (so an unchanged document is skipped the next time)."""

    def identity(current: Collection | None) -> Identity:
        if current is None:
            raise Stop("cancelled")
        return identity_of(current)

    async def record(conn: Connection, document: Document, result: ChunkResult, digest: str) -> None:
        jobs = JobRepository(conn)
        parents = [
            (p.index, p.content, p.char_start, p.char_end, p.page_start, p.page_end, list(p.heading_path))
            for p in result.parents
        ]
        await jobs.replace_parents(collection.id, document.id, parents)
        await jobs.record_embedded(collection.id, document.id, document.sha256, digest, len(result.chunks))

    return Target(store=collection.name, identity=identity, record=record)


def _span_attributes(item: ClaimedItem) -> dict[str, str | int]:
    """Ids only: a collection's name is secret to non-members and a trace store is not access-checked."""
    return {
        "ragu.job_id": str(item.job_id),
        "ragu.document_id": str(item.document_id),
        "ragu.collection_id": str(item.collection_id),
        "ragu.job_kind": item.kind,
        "ragu.attempt": item.attempts,
    }
