"""What the re-embedding API speaks."""

from __future__ import annotations

from datetime import datetime
from typing import Literal
from uuid import UUID

import msgspec

from chonkit.jobs.models import Job

MigrationState = Literal["building", "done", "failed", "cancelled"]


class EmbeddingChange(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    embedding_provider: str
    model: str | None = None
    """Default: the embedding provider's first model (as when a collection is created)."""


class Migration(msgspec.Struct, frozen=True, kw_only=True):
    """One move of a collection to another embedding model: its job re-embeds every document into ``version``, a
    new version of the collection in the same vector store, swapped in under the collection's name when complete."""

    job_id: UUID
    collection_id: UUID
    version: str
    """The new version's name in the vector store while it is built."""
    from_provider: str
    from_model: str
    embedding_provider: str
    model: str
    dimension: int
    state: MigrationState
    error_code: str | None
    error: str | None
    created_at: datetime
    finished_at: datetime | None


class MigrationStatus(msgspec.Struct, frozen=True, kw_only=True):
    migration: Migration
    job: Job
    """Progress: one item per document (follow it at ``/jobs/{id}/events``)."""


class Outcome(msgspec.Struct, frozen=True, kw_only=True):
    """How a migration's items ended, once none is left to run."""

    done: int
    unfinished: int
    """Items failed, cancelled or skipped."""
    cancel_requested: bool
    error_code: str | None
    error: str | None


class CollectionModel(msgspec.Struct, frozen=True, kw_only=True):
    """A collection's embedding model now, and its latest change (if it ever had one)."""

    embedding_provider: str
    model: str
    dimension: int
    migration: Migration | None
    job: Job | None
    """The latest change's progress."""
