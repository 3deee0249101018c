"""``/jobs``: progress of embedding jobs, as JSON or a Server-Sent Events stream; cancel and retry."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Annotated
from uuid import UUID

import msgspec
from litestar import Controller, get, post
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide
from litestar.params import FromPath, FromQuery, QueryParameter
from litestar.response import ServerSentEvent, ServerSentEventMessage
from litestar.status_codes import HTTP_200_OK

from chonkit.collection.controller import provide_job_service
from chonkit.embedding.models import Job, JobItem, JobSummary, JobUpdate, Stage
from chonkit.embedding.repository import PAGE_SIZE, JobRepository
from chonkit.embedding.service import JobService
from common.db import Database
from common.errors import Unavailable

POLL_SECONDS = 0.5
EVENT_ITEM_BYTES = 32_000
"""Changed items per event, encoded: a cancel or a burst of skips changes hundreds at once."""


class JobController(Controller):
    path = "/jobs"
    tags = ["jobs"]
    dependencies = {"jobs": Provide(provide_job_service)}

    @get("/", summary="Recent jobs")
    async def list_jobs(
        self,
        jobs: NamedDependency[JobService],
        collection_id: FromQuery[UUID | None] = None,
        limit: FromQuery[Annotated[int, QueryParameter(ge=1, le=200)]] = 50,
    ) -> list[Job]:
        return await jobs.recent(collection_id, limit)

    @get("/{job_id:uuid}", summary="A job with its counts and a page of its documents' stages, timings and errors")
    async def get_job(
        self,
        jobs: NamedDependency[JobService],
        job_id: FromPath[UUID],
        limit: FromQuery[Annotated[int, QueryParameter(ge=1, le=1000)]] = PAGE_SIZE,
        offset: FromQuery[Annotated[int, QueryParameter(ge=0)]] = 0,
        stage: FromQuery[Stage | None] = None,
    ) -> Job:
        """``progress`` and ``total`` count every item; ``items`` is the page asked for, in job order, of
        the items in ``stage`` when one is given."""
        return await jobs.get(job_id, limit=limit, offset=offset, stage=stage)

    @get("/{job_id:uuid}/events", summary="Follow a job (Server-Sent Events)")
    async def events(self, state: State, jobs: NamedDependency[JobService], job_id: FromPath[UUID]) -> ServerSentEvent:
        """``job`` events: the first carries the job's status and counts and no items; each later one the
        status, the counts and the items that changed since the event before (a change to many items comes
        as several events), ending when the job finishes — or an ``error`` event (``code``, ``detail``) when
        the database becomes unavailable; the job itself carries on once it is back. The stream reads the
        database on its own connections (a request's connection ends before streaming starts)."""
        first = await jobs.get(job_id, limit=None)
        return ServerSentEvent(_follow(state.db, first))

    @post("/{job_id:uuid}/cancel", status_code=HTTP_200_OK, summary="Cancel a job")
    async def cancel(self, jobs: NamedDependency[JobService], job_id: FromPath[UUID]) -> Job:
        """Queued documents stop at once; running ones at their next stage. Vectors already written stay."""
        return await jobs.cancel(job_id)

    @post("/{job_id:uuid}/retry", status_code=HTTP_200_OK, summary="Retry the failed documents")
    async def retry(self, jobs: NamedDependency[JobService], job_id: FromPath[UUID]) -> Job:
        """Only failed documents are queued again; done ones are left alone."""
        return await jobs.retry_failed(job_id)


async def _follow(db: Database, job: Job) -> AsyncIterator[ServerSentEventMessage]:
    encoder = msgspec.json.Encoder()
    yield _event(encoder, job, [])
    while job.status in {"queued", "running"}:
        await asyncio.sleep(POLL_SECONDS)
        try:
            async with db.transaction() as conn:
                current = await JobRepository(conn).get(job.id, limit=None)
        except Unavailable as exc:  # the response has started: end with an event that has a code, not a reset
            problem = {"code": exc.code, "detail": exc.detail}
            yield ServerSentEventMessage(data=encoder.encode(problem).decode(), event="error")
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


def _event(encoder: msgspec.json.Encoder, job: Job, items: list[JobItem]) -> ServerSentEventMessage:
    fields = {f: getattr(job, f) for f in JobSummary.__struct_fields__}
    return ServerSentEventMessage(data=encoder.encode(JobUpdate(**fields, items=items)).decode(), event="job")


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
