"""Embedding jobs as the API shows them."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal
from uuid import UUID

import msgspec

Stage = Literal["queued", "parsing", "chunking", "embedding", "writing", "done", "skipped", "failed", "cancelled"]
IN_FLIGHT: tuple[Stage, ...] = ("parsing", "chunking", "embedding", "writing")
FINISHED: tuple[Stage, ...] = ("done", "skipped", "failed", "cancelled")
JobStatus = Literal["queued", "running", "done", "failed", "cancelled"]


class DocumentIds(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    document_ids: Annotated[list[UUID], msgspec.Meta(min_length=1, max_length=10_000)]


class JobItem(msgspec.Struct, frozen=True, kw_only=True):
    document_id: UUID
    document_name: str | None
    stage: Stage
    error_code: str | None
    error: str | None
    """Why the document failed, in plain words."""
    reason: str | None
    """Why the document was skipped, in plain words."""
    attempts: int
    chunks: int | None
    tokens: int | None
    timings: dict[str, float]
    """Milliseconds per stage: parse, chunk, embed, write."""
    started_at: datetime | None
    finished_at: datetime | None


class JobSummary(msgspec.Struct, frozen=True, kw_only=True):
    id: UUID
    collection_id: UUID
    kind: Literal["embed", "remove", "reembed"]
    status: JobStatus
    cancel_requested: bool
    created_at: datetime
    progress: dict[str, int]
    """Items per stage, over the whole job."""
    total: int
    """Items in the job."""


class Job(JobSummary, frozen=True, kw_only=True):
    items: list[JobItem]
    """One page of the items, in job order (``GET /jobs/{id}`` takes ``limit``, ``offset`` and ``stage``)."""


class JobUpdate(JobSummary, frozen=True, kw_only=True):
    """One event of a job's stream. A job of thousands of documents changes a few items at a time, so
    resending them all made every event megabytes long."""

    items: list[JobItem]
    """The items whose state changed since the previous event; none in the first (a snapshot of the counts)."""


class JobCreated(msgspec.Struct, frozen=True, kw_only=True):
    job: Job | None
    """None when every document was already queued or running in another job."""
    already_queued: list[UUID]


class EmbeddingReport(msgspec.Struct, frozen=True, kw_only=True):
    document_id: UUID
    job_id: UUID | None
    model: str
    tokens: int
    vectors: int
    duration_ms: float
    created_at: datetime
