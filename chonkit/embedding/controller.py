"""``/jobs``: progress of embedding jobs, as JSON or a Server-Sent Events stream; cancel and retry."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated
from uuid import UUID

from litestar import Controller, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery, QueryParameter
from litestar.response import ServerSentEvent, ServerSentEventMessage
from litestar.status_codes import HTTP_200_OK

from chonkit.embedding.models import Job, Stage
from chonkit.embedding.repository import PAGE_SIZE
from chonkit.embedding.service import FeedEvent, JobFeed, JobService
from common.http.pagination import Offset


class JobController(Controller):
    path = "/jobs"
    tags = ["jobs"]

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
        offset: FromQuery[Offset] = 0,
        stage: FromQuery[Stage | None] = None,
    ) -> Job:
        """``progress`` and ``total`` count every item; ``items`` is the page asked for, in job order, of
        the items in ``stage`` when one is given."""
        return await jobs.get(job_id, limit=limit, offset=offset, stage=stage)

    @get("/{job_id:uuid}/events", summary="Follow a job (Server-Sent Events)")
    async def events(
        self, jobs: NamedDependency[JobService], feed: NamedDependency[JobFeed], job_id: FromPath[UUID]
    ) -> ServerSentEvent:
        """``job`` events: the first carries the job's status and counts and no items; each later one the
        status, the counts and the items that changed since the event before (a change to many items comes
        as several events), ending when the job finishes — or an ``error`` event (``code``, ``detail``) when
        the database becomes unavailable; the job itself carries on once it is back. The stream reads the
        database on its own connections (a request's connection ends before streaming starts)."""
        return ServerSentEvent(_sse(feed.follow(await jobs.get(job_id, limit=None))))

    @post("/{job_id:uuid}/cancel", status_code=HTTP_200_OK, summary="Cancel a job")
    async def cancel(self, jobs: NamedDependency[JobService], job_id: FromPath[UUID]) -> Job:
        """Queued documents stop at once; running ones at their next stage. Vectors already written stay."""
        return await jobs.cancel(job_id)

    @post("/{job_id:uuid}/retry", status_code=HTTP_200_OK, summary="Retry the failed documents")
    async def retry(self, jobs: NamedDependency[JobService], job_id: FromPath[UUID]) -> Job:
        """Only failed documents are queued again; done ones are left alone."""
        return await jobs.retry_failed(job_id)


async def _sse(events: AsyncIterator[FeedEvent]) -> AsyncIterator[ServerSentEventMessage]:
    async for event in events:
        yield ServerSentEventMessage(event=event.event, data=event.data)
