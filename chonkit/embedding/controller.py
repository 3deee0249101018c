"""``/jobs``: progress of embedding jobs, as JSON or a Server-Sent Events stream; cancel and retry. And a collection's
own job routes: embed documents into it, remove them, its embedding reports."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated
from uuid import UUID

from litestar import Controller, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery, JSONBody, QueryParameter
from litestar.response import ServerSentEvent, ServerSentEventMessage
from litestar.status_codes import HTTP_200_OK, HTTP_202_ACCEPTED

from chonkit.embedding.service import FeedEvent, JobFeed, JobService
from chonkit.jobs.models import DocumentIds, EmbeddingReport, Job, JobCreated, Stage
from chonkit.jobs.repository import PAGE_SIZE
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
        the database becomes unavailable; the job itself carries on once it is back. The stream holds no connection:
        each poll reads the database in a short transaction of its own."""
        return ServerSentEvent(_sse(feed.follow(await jobs.get(job_id, limit=None))))

    @post("/{job_id:uuid}/cancel", status_code=HTTP_200_OK, summary="Cancel a job")
    async def cancel(self, jobs: NamedDependency[JobService], job_id: FromPath[UUID]) -> Job:
        """Queued documents stop at once; running ones at their next stage. Vectors already written stay."""
        return await jobs.cancel(job_id)

    @post("/{job_id:uuid}/retry", status_code=HTTP_200_OK, summary="Retry the failed documents")
    async def retry(self, jobs: NamedDependency[JobService], job_id: FromPath[UUID]) -> Job:
        """Only failed documents are queued again; done ones are left alone."""
        return await jobs.retry_failed(job_id)


class CollectionJobController(Controller):
    """The jobs of one collection, under its path."""

    path = "/collections"
    tags = ["collections"]

    @post("/{collection_id:uuid}/documents", status_code=HTTP_202_ACCEPTED, summary="Embed documents into it")
    async def add_documents(
        self, jobs: NamedDependency[JobService], collection_id: FromPath[UUID], data: JSONBody[DocumentIds]
    ) -> JobCreated:
        """Queues a durable job; follow it at ``/jobs/{id}`` or ``/jobs/{id}/events``. Unchanged documents
        (same bytes, same config) are skipped; changed ones have their vectors replaced."""
        return await jobs.enqueue(collection_id, "embed", data.document_ids)

    @post("/{collection_id:uuid}/documents/remove", status_code=HTTP_202_ACCEPTED, summary="Remove documents")
    async def remove_documents(
        self, jobs: NamedDependency[JobService], collection_id: FromPath[UUID], data: JSONBody[DocumentIds]
    ) -> JobCreated:
        """Queues a job that deletes the documents' vectors from this collection. A removal wins over an embedding of
        the same documents into this collection still queued or running: that embedding is cancelled
        (``superseded`` lists each with the stage it was in; its item ends ``cancelled`` with ``error_code``
        ``document_removed``) and nothing it was about to write stays. ``already_queued``: documents whose removal
        is already queued or running (``job`` is null when that is all of them)."""
        return await jobs.enqueue(collection_id, "remove", data.document_ids)

    @get("/{collection_id:uuid}/reports", summary="Embedding reports")
    async def reports(self, jobs: NamedDependency[JobService], collection_id: FromPath[UUID]) -> list[EmbeddingReport]:
        """Per document and run: model, tokens, vectors and duration."""
        return await jobs.reports(collection_id, None)


async def _sse(events: AsyncIterator[FeedEvent]) -> AsyncIterator[ServerSentEventMessage]:
    async for event in events:
        yield ServerSentEventMessage(event=event.event, data=event.data)
