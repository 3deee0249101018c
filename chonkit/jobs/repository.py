"""SQL for jobs, job items, parent chunks and embedding reports. Claiming uses ``FOR UPDATE SKIP LOCKED``,
so any number of workers on any number of machines share the queue without handing out an item twice."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any
from uuid import UUID

import msgspec

from chonkit.jobs.models import (
    FINISHED,
    IN_FLIGHT,
    REMOVED,
    EmbeddingReport,
    Job,
    JobItem,
    JobStatus,
    Stage,
    Superseded,
)
from common.db.database import Connection

PAGE_SIZE = 100
"""Items a job shows per page unless asked for another page size."""


class ClaimedItem(msgspec.Struct, frozen=True, kw_only=True):
    job_id: UUID
    document_id: UUID
    collection_id: UUID
    kind: str
    attempts: int


def job_status(stages: Sequence[str], cancel_requested: bool) -> JobStatus:
    if any(s in IN_FLIGHT for s in stages):
        return "running"
    if any(s == "queued" for s in stages):
        return "running" if any(s in FINISHED for s in stages) else "queued"
    if any(s == "failed" for s in stages):
        return "failed"
    if cancel_requested or any(s == "cancelled" for s in stages):
        return "cancelled"
    return "done"


class Embedded(msgspec.Struct, frozen=True, kw_only=True):
    document_sha256: str
    config_hash: str
    chunk_count: int


class JobRepository:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    async def create(self, job_id: UUID, collection_id: UUID, kind: str, document_ids: Sequence[UUID]) -> list[UUID]:
        """Create the job and one item per document not already pending elsewhere; returns those skipped."""
        await self.conn.execute(
            "INSERT INTO chonkit.jobs (id, collection_id, kind) VALUES ($1, $2, $3)", job_id, collection_id, kind
        )
        inserted = await self.conn.fetch(
            """INSERT INTO chonkit.job_items (job_id, document_id, collection_id, position)
               SELECT $1, d, $2, o FROM unnest($3::uuid[]) WITH ORDINALITY AS t(d, o)
               ON CONFLICT (collection_id, document_id)
                   WHERE stage IN ('queued', 'parsing', 'chunking', 'embedding', 'writing') DO NOTHING
               RETURNING document_id""",
            job_id,
            collection_id,
            list(document_ids),
        )
        created = {r["document_id"] for r in inserted}
        if not created:
            await self.conn.execute("DELETE FROM chonkit.jobs WHERE id = $1", job_id)
        return [d for d in document_ids if d not in created]

    async def get(
        self, job_id: UUID, *, limit: int | None = PAGE_SIZE, offset: int = 0, stage: Stage | None = None
    ) -> Job | None:
        """The job with its counts and one page of its items (``limit=None``: all of them)."""
        job = await self.conn.fetchrow(
            "SELECT id, collection_id, kind, cancel_requested, created_at FROM chonkit.jobs WHERE id = $1", job_id
        )
        if job is None:
            return None
        counts = await self.conn.fetch(
            "SELECT stage, count(*) AS n FROM chonkit.job_items WHERE job_id = $1 GROUP BY stage", job_id
        )
        items = await self.conn.fetch(
            """SELECT i.document_id, d.name AS document_name, i.stage, i.error_code, i.error, i.reason, i.attempts,
                      i.chunks, i.tokens, i.timings, i.started_at, i.finished_at
               FROM chonkit.job_items i LEFT JOIN chonkit.documents d ON d.id = i.document_id
               WHERE i.job_id = $1 AND ($2::text IS NULL OR i.stage = $2)
               ORDER BY i.position LIMIT $3 OFFSET $4""",
            job_id,
            stage,
            limit,
            offset,
        )
        progress = {r["stage"]: r["n"] for r in counts}
        return Job(
            id=job["id"],
            collection_id=job["collection_id"],
            kind=job["kind"],
            status=job_status(list(progress), job["cancel_requested"]),
            cancel_requested=job["cancel_requested"],
            created_at=job["created_at"],
            progress=progress,
            total=sum(progress.values()),
            items=[msgspec.convert(dict(i), JobItem) for i in items],
        )

    async def pending_by_stage(self) -> dict[str, int]:
        """Items of every job still waiting or in flight, by stage (the claim index answers it)."""
        rows = await self.conn.fetch(
            """SELECT stage, count(*) AS n FROM chonkit.job_items
               WHERE stage IN ('queued', 'parsing', 'chunking', 'embedding', 'writing') GROUP BY stage"""
        )
        return {r["stage"]: r["n"] for r in rows}

    async def recent(self, collection_id: UUID | None, limit: int) -> list[Job]:
        rows = await self.conn.fetch(
            """SELECT id FROM chonkit.jobs WHERE $1::uuid IS NULL OR collection_id = $1
               ORDER BY created_at DESC LIMIT $2""",
            collection_id,
            limit,
        )
        jobs = [await self.get(r["id"]) for r in rows]
        return [j for j in jobs if j is not None]

    async def supersede(self, collection_id: UUID, document_ids: Sequence[UUID], removal_id: UUID) -> list[Superseded]:
        """Cancel the embedding of these documents into the collection, queued or running, for the removal
        ``removal_id``; returns what was cancelled, each with the stage it was in.

        The caller holds the collection's lock, which a worker's final write also takes, so no write is half done
        now. A queued item just ends. A running one is taken from its worker: its next stage change fails, and a
        worker about to write checks, under that lock, that the item is still its own (:meth:`still_writing`)
        before it touches the store, which is no part of its transaction."""
        records = await self.conn.fetch(
            f"""WITH pending AS (
                   SELECT i.job_id, i.document_id, i.stage FROM chonkit.job_items i
                   JOIN chonkit.jobs j ON j.id = i.job_id
                   WHERE i.collection_id = $1 AND i.document_id = ANY($2::uuid[]) AND j.kind = 'embed'
                     AND i.stage IN ('queued', 'parsing', 'chunking', 'embedding', 'writing')
                   FOR UPDATE OF i)
               UPDATE chonkit.job_items i
               SET stage = 'cancelled', finished_at = now(), error_code = '{REMOVED}',
                   error = 'Removed from the collection (job ' || $3::uuid || ') before it was embedded.'
               FROM pending WHERE (i.job_id, i.document_id) = (pending.job_id, pending.document_id)
               RETURNING i.job_id, i.document_id, pending.stage""",
            collection_id,
            list(document_ids),
            removal_id,
        )
        order = {d: n for n, d in enumerate(document_ids)}
        superseded = [msgspec.convert(dict(r), Superseded) for r in records]
        return sorted(superseded, key=lambda s: (order[s.document_id], str(s.job_id)))

    async def collections_pending(self, document_id: UUID) -> list[UUID]:
        """Collections with an item of the document queued or running (of any kind), by id."""
        records = await self.conn.fetch(
            """SELECT DISTINCT collection_id FROM chonkit.job_items
               WHERE document_id = $1 AND stage IN ('queued', 'parsing', 'chunking', 'embedding', 'writing')
               ORDER BY collection_id""",
            document_id,
        )
        return [r["collection_id"] for r in records]

    async def cancel(self, job_id: UUID) -> None:
        """Queued items stop now; running ones stop at their next stage boundary."""
        await self.conn.execute("UPDATE chonkit.jobs SET cancel_requested = true WHERE id = $1", job_id)
        await self.conn.execute(
            """UPDATE chonkit.job_items SET stage = 'cancelled', finished_at = now()
               WHERE job_id = $1 AND stage = 'queued'""",
            job_id,
        )

    async def retry_failed(self, job_id: UUID) -> int:
        await self.conn.execute("UPDATE chonkit.jobs SET cancel_requested = false WHERE id = $1", job_id)
        status = await self.conn.execute(
            """UPDATE chonkit.job_items i SET stage = 'queued', error = NULL, error_code = NULL, worker = NULL,
                      heartbeat_at = NULL, finished_at = NULL, attempts = 0
               WHERE i.job_id = $1 AND i.stage = 'failed'
                 AND NOT EXISTS (SELECT 1 FROM chonkit.job_items o
                                 WHERE o.collection_id = i.collection_id AND o.document_id = i.document_id
                                   AND o.stage IN ('queued', 'parsing', 'chunking', 'embedding', 'writing'))""",
            job_id,
        )
        return int(status.split()[-1])

    async def claim(self, worker: str, stale_after: timedelta) -> ClaimedItem | None:
        """The oldest queued item, or one whose worker stopped beating (crashed or killed)."""
        record = await self.conn.fetchrow(
            """UPDATE chonkit.job_items i
               SET stage = 'parsing', worker = $1, heartbeat_at = now(), attempts = i.attempts + 1,
                   started_at = coalesce(i.started_at, now()), error = NULL, error_code = NULL, reason = NULL
               FROM chonkit.jobs j
               WHERE j.id = i.job_id AND (i.job_id, i.document_id) = (
                   SELECT c.job_id, c.document_id FROM chonkit.job_items c
                   WHERE c.stage = 'queued'
                      OR (c.stage IN ('parsing', 'chunking', 'embedding', 'writing')
                          AND c.heartbeat_at < now() - $2::interval)
                   ORDER BY c.heartbeat_at NULLS FIRST, c.position
                   LIMIT 1 FOR UPDATE SKIP LOCKED)
               RETURNING i.job_id, i.document_id, i.collection_id, j.kind, i.attempts""",
            worker,
            stale_after,
        )
        if record is None:
            return None
        return msgspec.convert(dict(record), ClaimedItem)

    async def heartbeat(self, item: ClaimedItem, worker: str) -> bool:
        """Refresh our claim; False when the item was taken over, cancelled or finished meanwhile."""
        status = await self.conn.execute(
            """UPDATE chonkit.job_items SET heartbeat_at = now()
               WHERE job_id = $1 AND document_id = $2 AND worker = $3
                 AND stage IN ('parsing', 'chunking', 'embedding', 'writing')""",
            item.job_id,
            item.document_id,
            worker,
        )
        return status.endswith(" 1")

    async def set_stage(self, item: ClaimedItem, worker: str, stage: str, **fields: Any) -> bool:
        """Move our item to ``stage`` (and set ``chunks``, ``tokens``, ``timings``, ``error``...); False when it is
        no longer ours to move: taken over by another worker, or finished meanwhile — a removal cancels items of
        its documents while they run and leaves the worker's name on one that was writing (see :meth:`supersede`),
        so the stage decides too, and a finished item never comes back to life."""
        names = list(fields)
        sets = "".join(f", {name} = ${i}" for i, name in enumerate(names, start=5))
        finished = ", finished_at = now()" if stage in FINISHED else ""
        status = await self.conn.execute(
            f"""UPDATE chonkit.job_items SET stage = $4, heartbeat_at = now(){finished}{sets}
                WHERE job_id = $1 AND document_id = $2 AND worker = $3
                  AND stage IN ('parsing', 'chunking', 'embedding', 'writing')""",
            item.job_id,
            item.document_id,
            worker,
            stage,
            *fields.values(),
        )
        return status.endswith(" 1")

    async def cancel_requested(self, job_id: UUID) -> bool:
        return bool(await self.conn.fetchval("SELECT cancel_requested FROM chonkit.jobs WHERE id = $1", job_id))

    async def replace_parents(self, collection_id: UUID, document_id: UUID, parents: Sequence[tuple[Any, ...]]) -> None:
        await self.conn.execute(
            "DELETE FROM chonkit.parent_chunks WHERE collection_id = $1 AND document_id = $2",
            collection_id,
            document_id,
        )
        if parents:
            await self.conn.executemany(
                """INSERT INTO chonkit.parent_chunks (collection_id, document_id, parent_index, content, char_start,
                                                      char_end, page_start, page_end, heading_path)
                   VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)""",
                [(collection_id, document_id, *p) for p in parents],
            )

    async def still_writing(self, item: ClaimedItem, worker: str) -> bool:
        """Whether our item is still ours and ``writing``. Asked under the collection's lock right before the store
        is written: a removal (:meth:`supersede`) takes the same lock, so it either took the item before (we write
        nothing) or comes after our commit (and deletes what we wrote)."""
        found = await self.conn.fetchval(
            """SELECT 1 FROM chonkit.job_items
               WHERE job_id = $1 AND document_id = $2 AND worker = $3 AND stage = 'writing'""",
            item.job_id,
            item.document_id,
            worker,
        )
        return found is not None

    async def document_name_for_write(self, document_id: UUID) -> str | None:
        """The document's name, held until the write commits: a rename then either waits for the write and
        finds the chunks it wrote, or the write waits for the rename and writes the new name."""
        name: str | None = await self.conn.fetchval(
            "SELECT name FROM chonkit.documents WHERE id = $1 FOR SHARE", document_id
        )
        return name

    async def record_embedded(
        self, collection_id: UUID, document_id: UUID, sha256: str, config_hash: str, chunk_count: int
    ) -> None:
        await self.conn.execute(
            """INSERT INTO chonkit.collection_documents
                   (collection_id, document_id, document_sha256, config_hash, chunk_count)
               VALUES ($1, $2, $3, $4, $5)
               ON CONFLICT (collection_id, document_id) DO UPDATE
               SET document_sha256 = $3, config_hash = $4, chunk_count = $5, embedded_at = now()""",
            collection_id,
            document_id,
            sha256,
            config_hash,
            chunk_count,
        )

    async def embedded_state(self, collection_id: UUID, document_id: UUID) -> Embedded | None:
        """What the collection holds of the document: from which bytes and configs, and how many chunks."""
        record = await self.conn.fetchrow(
            """SELECT document_sha256, config_hash, chunk_count FROM chonkit.collection_documents
               WHERE collection_id = $1 AND document_id = $2""",
            collection_id,
            document_id,
        )
        return None if record is None else msgspec.convert(dict(record), Embedded)

    async def forget_document(self, collection_id: UUID, document_id: UUID) -> None:
        await self.conn.execute(
            "DELETE FROM chonkit.collection_documents WHERE collection_id = $1 AND document_id = $2",
            collection_id,
            document_id,
        )
        await self.conn.execute(
            "DELETE FROM chonkit.parent_chunks WHERE collection_id = $1 AND document_id = $2",
            collection_id,
            document_id,
        )

    async def add_report(self, item: ClaimedItem, *, model: str, tokens: int, vectors: int, duration_ms: float) -> None:
        await self.conn.execute(
            """INSERT INTO chonkit.embedding_reports
                   (collection_id, document_id, job_id, model, tokens, vectors, duration_ms)
               VALUES ($1, $2, $3, $4, $5, $6, $7)""",
            item.collection_id,
            item.document_id,
            item.job_id,
            model,
            tokens,
            vectors,
            duration_ms,
        )

    async def reports(self, collection_id: UUID, document_id: UUID | None = None) -> list[EmbeddingReport]:
        records = await self.conn.fetch(
            """SELECT document_id, job_id, model, tokens, vectors, duration_ms, created_at
               FROM chonkit.embedding_reports
               WHERE collection_id = $1 AND ($2::uuid IS NULL OR document_id = $2) ORDER BY created_at DESC, id DESC""",
            collection_id,
            document_id,
        )
        return [msgspec.convert(dict(r), EmbeddingReport) for r in records]
