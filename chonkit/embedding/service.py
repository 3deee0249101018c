"""Embedding jobs: what admins ask for (put documents into a collection, take them out) and what they watch."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from uuid import UUID

import msgspec

from chonkit.collection.guards import refuse_if_migrating
from chonkit.collection.repository import CollectionRepository
from chonkit.document.repository import DocumentRepository
from chonkit.jobs.models import EmbeddingReport, Job, JobCreated, JobItem, JobSummary, JobUpdate, Stage
from chonkit.jobs.repository import PAGE_SIZE, JobRepository
from common.db import Database
from common.db.database import Connection
from common.errors import Conflict, NotFound, Unavailable


async def enqueue_job(conn: Connection, collection_id: UUID, kind: str, document_ids: list[UUID]) -> JobCreated:
    """One durable job, queued in the caller's transaction (a source's sync and deletion queue theirs with their own
    writes); documents already queued or running for this collection are not queued twice.

    A removal wins over an embedding of the same documents into the collection that is still queued or running:
    that embedding is cancelled (``superseded``) and the removal queued, in one transaction under the
    collection's lock. A worker writes a document's chunks under that lock too, so either its write came first
    (and the removal deletes what it wrote) or the removal did (and the write's claim is gone; see
    :meth:`JobRepository.supersede`). Before, the removal was skipped as "already queued" and the embedding
    wrote the document in afterwards: a confidential document an admin pulled out stayed readable."""
    jobs = JobRepository(conn)
    unique = list(dict.fromkeys(document_ids))
    if not await CollectionRepository(conn).exists(collection_id):
        raise NotFound(f"No collection {collection_id}.", code="collection_not_found")
    await refuse_if_migrating(conn, collection_id)
    if kind == "embed":
        known = await DocumentRepository(conn).existing(unique)
        missing = [str(d) for d in unique if d not in known]
        if missing:
            raise NotFound(
                f"No document(s) {', '.join(missing)}; nothing was queued.",
                code="document_not_found",
                extra={"missing": missing},
            )
    job_id = uuid.uuid4()
    superseded = []
    if kind == "remove":
        await CollectionRepository(conn).lock(collection_id)
        superseded = await jobs.supersede(collection_id, unique, job_id)
    skipped = await jobs.create(job_id, collection_id, kind, unique)
    job = await jobs.get(job_id) if len(skipped) < len(unique) else None
    return JobCreated(job=job, already_queued=skipped, superseded=superseded)


async def _job(
    jobs: JobRepository, job_id: UUID, *, limit: int | None = PAGE_SIZE, offset: int = 0, stage: Stage | None = None
) -> Job:
    job = await jobs.get(job_id, limit=limit, offset=offset, stage=stage)
    if job is None:
        raise NotFound(f"No job {job_id}.", code="job_not_found")
    return job


class JobService:
    """Each method is one short transaction of its own; the worker is woken once work it can claim has committed."""

    def __init__(self, db: Database, *, wake_worker: Callable[[], None] = lambda: None) -> None:
        self.db = db
        self.wake_worker = wake_worker

    @asynccontextmanager
    async def _jobs(self) -> AsyncIterator[JobRepository]:
        async with self.db.transaction() as conn:
            yield JobRepository(conn)

    async def enqueue(self, collection_id: UUID, kind: str, document_ids: list[UUID]) -> JobCreated:
        """:func:`enqueue_job` in a transaction of its own."""
        async with self.db.transaction() as conn:
            created = await enqueue_job(conn, collection_id, kind, document_ids)
        if created.job is not None:
            self.wake_worker()
        return created

    async def get(
        self, job_id: UUID, *, limit: int | None = PAGE_SIZE, offset: int = 0, stage: Stage | None = None
    ) -> Job:
        async with self._jobs() as jobs:
            return await _job(jobs, job_id, limit=limit, offset=offset, stage=stage)

    async def recent(self, collection_id: UUID | None, limit: int) -> list[Job]:
        async with self._jobs() as jobs:
            return await jobs.recent(collection_id, limit)

    async def cancel(self, job_id: UUID) -> Job:
        async with self._jobs() as jobs:
            job = await _job(jobs, job_id)
            if job.status in {"done", "failed", "cancelled"}:
                raise Conflict(f"Job {job_id} has already finished ({job.status}).", code="job_finished")
            await jobs.cancel(job_id)
            return await _job(jobs, job_id)

    async def retry_failed(self, job_id: UUID) -> Job:
        async with self._jobs() as jobs:
            job = await _job(jobs, job_id)
            if not job.progress.get("failed"):
                raise Conflict(f"Job {job_id} has no failed documents to retry.", code="nothing_to_retry")
            await jobs.retry_failed(job_id)
            job = await _job(jobs, job_id)
        self.wake_worker()
        return job

    async def reports(self, collection_id: UUID, document_id: UUID | None) -> list[EmbeddingReport]:
        async with self._jobs() as jobs:
            return await jobs.reports(collection_id, document_id)


POLL_SECONDS = 0.5
EVENT_ITEM_BYTES = 32_000
"""Changed items per event, encoded: a cancel or a burst of skips changes hundreds at once."""


class FeedEvent(msgspec.Struct, frozen=True):
    """One event of a job's feed: ``job`` (a :class:`JobUpdate`) or ``error`` (``code``, ``detail``), as JSON."""

    event: str
    data: str


class JobFeed:
    """A job's progress as it happens, each poll a short transaction of its own: the stream holds no connection
    between polls, however long it is followed."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def follow(self, job: Job) -> AsyncIterator[FeedEvent]:
        """The job's counts, then the counts and the items that changed, until it finishes (a change to many
        items comes as several events); an ``error`` event if the database goes away meanwhile."""
        encoder = msgspec.json.Encoder()
        yield _event(encoder, job, [])
        while job.status in {"queued", "running"}:
            await asyncio.sleep(POLL_SECONDS)
            try:
                async with self.db.transaction() as conn:
                    current = await JobRepository(conn).get(job.id, limit=None)
            except Unavailable as exc:  # the response has started: end with an event that has a code, not a reset
                yield FeedEvent("error", encoder.encode({"code": exc.code, "detail": exc.detail}).decode())
                return
            if current is None:
                return
            before = {item.document_id: item for item in job.items}
            changed = [item for item in current.items if before.get(item.document_id) != item]
            summary_changed = msgspec.structs.replace(job, items=[]) != msgspec.structs.replace(current, items=[])
            job = current
            if changed or summary_changed:
                for batch in _batches(encoder, changed) or [[]]:
                    yield _event(encoder, job, batch)


def _event(encoder: msgspec.json.Encoder, job: Job, items: list[JobItem]) -> FeedEvent:
    fields = {f: getattr(job, f) for f in JobSummary.__struct_fields__}
    return FeedEvent("job", encoder.encode(JobUpdate(**fields, items=items)).decode())


def _batches(encoder: msgspec.json.Encoder, items: list[JobItem]) -> list[list[JobItem]]:
    """Consecutive runs of items of at most :data:`EVENT_ITEM_BYTES` encoded (one item alone may be more)."""
    batches: list[list[JobItem]] = []
    size = EVENT_ITEM_BYTES
    for item in items:
        length = len(encoder.encode(item))
        if size + length > EVENT_ITEM_BYTES:
            batches.append([])
            size = 0
        batches[-1].append(item)
        size += length
    return batches
