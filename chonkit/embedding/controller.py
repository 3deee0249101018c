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
from chonkit.embedding.models import Job
from chonkit.embedding.repository import JobRepository
from chonkit.embedding.service import JobService
from common.db import Database
from common.errors import Unavailable

POLL_SECONDS = 0.5


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

    @get("/{job_id:uuid}", summary="A job with per-document stages, timings and errors")
    async def get_job(self, jobs: NamedDependency[JobService], job_id: FromPath[UUID]) -> Job:
        return await jobs.get(job_id)

    @get("/{job_id:uuid}/events", summary="Follow a job (Server-Sent Events)")
    async def events(self, state: State, jobs: NamedDependency[JobService], job_id: FromPath[UUID]) -> ServerSentEvent:
        """A ``job`` event with the full job whenever it changes, ending with the finished job — or with an
        ``error`` event (``code``, ``detail``) when the database becomes unavailable; the job itself carries on
        once it is back. The stream reads the database on its own connections (a request's connection ends
        before streaming starts)."""
        first = await jobs.get(job_id)
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
    last = encoder.encode(job)
    yield ServerSentEventMessage(data=last.decode(), event="job")
    while job.status in {"queued", "running"}:
        await asyncio.sleep(POLL_SECONDS)
        try:
            async with db.transaction() as conn:
                current = await JobRepository(conn).get(job.id)
        except Unavailable as exc:  # the response has started: end with an event that has a code, not a reset
            problem = {"code": exc.code, "detail": exc.detail}
            yield ServerSentEventMessage(data=encoder.encode(problem).decode(), event="error")
            return
        if current is None:
            return
        job = current
        encoded = encoder.encode(job)
        if encoded != last:
            last = encoded
            yield ServerSentEventMessage(data=encoded.decode(), event="job")
