"""Jobs as the API shows them: embedding, removal and re-embedding jobs share these rows."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal
from uuid import UUID

import msgspec

Stage = Literal["queued", "parsing", "chunking", "embedding", "writing", "done", "skipped", "failed", "cancelled"]
IN_FLIGHT: tuple[Stage, ...] = ("parsing", "chunking", "embedding", "writing")
FINISHED: tuple[Stage, ...] = ("done", "skipped", "failed", "cancelled")
JobStatus = Literal["queued", "running", "done", "failed", "cancelled"]
REMOVED = "document_removed"
"""``error_code`` of an embedding cancelled because its document was removed from the collection meanwhile."""


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


class Superseded(msgspec.Struct, frozen=True, kw_only=True):
    """An embedding a removal cancelled: what an admin removes must not be written back by a job still under way."""

    job_id: UUID
    """The embedding job; its item of the document now has stage ``cancelled`` and ``error_code``
    ``document_removed``."""
    document_id: UUID
    stage: Stage
    """The stage the item was in when the removal took it: ``queued``, or a running one."""


class JobCreated(msgspec.Struct, frozen=True, kw_only=True):
    job: Job | None
    """None when every document was already queued or running in another job."""
    already_queued: list[UUID]
    """Documents not queued again: an item of this kind for them is already queued or running."""
    superseded: list[Superseded] = msgspec.field(default_factory=list)
    """For a removal: the embeddings of the same documents into the collection that it cancelled (queued or
    running), so that none of them writes the document back after it is gone. Empty for an embedding job."""


class EmbeddingReport(msgspec.Struct, frozen=True, kw_only=True):
    document_id: UUID
    job_id: UUID | None
    model: str
    tokens: int
    vectors: int
    duration_ms: float
    created_at: datetime
