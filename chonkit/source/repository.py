"""SQL for sources, what their items became, and their sync runs. A run is claimed with ``FOR UPDATE SKIP
LOCKED``, and a partial unique index keeps one unfinished run per source, whoever starts it."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import asyncpg
import msgspec

from chonkit.source.models import FolderSpec, ItemAction, ItemProblem, Run, RunTrigger, Source, SourceSpec, SyncReport
from common.db.database import Connection
from common.errors import Conflict

PROBLEMS_SHOWN = 1000

_SOURCE = """
    SELECT s.id, s.collection_id, s.name, s.kind, s.spec, s.schedule_minutes, s.created_at, s.updated_at,
           (SELECT count(*) FROM chonkit.source_items i WHERE i.source_id = s.id) AS item_count
    FROM chonkit.sources s
"""
_RUN = """
    SELECT r.id, r.source_id, r.trigger, r.status, r.cancel_requested, r.job_id, r.unchanged, r.error_code, r.error,
           r.created_at, r.started_at, r.finished_at
    FROM chonkit.source_runs r
"""


class StoredSource(msgspec.Struct, frozen=True, kw_only=True):
    """A source's row; the API's :class:`Source` adds its last run."""

    id: UUID
    collection_id: UUID
    name: str
    kind: str
    spec: SourceSpec
    schedule_minutes: int | None
    item_count: int
    created_at: datetime
    updated_at: datetime


class KnownItem(msgspec.Struct, frozen=True, kw_only=True):
    """What an item became the last time it was synced."""

    key: str
    document_id: UUID
    content_hash: str


class RunItem(msgspec.Struct, frozen=True, kw_only=True):
    key: str
    action: ItemAction
    document_id: UUID | None = None
    previous_document_id: UUID | None = None
    content_hash: str | None = None
    created_document: bool = False
    """This run's upload created the document (it was not a duplicate of one already stored)."""
    code: str | None = None
    reason: str | None = None


class ClaimedRun(msgspec.Struct, frozen=True, kw_only=True):
    id: UUID
    source_id: UUID
    attempts: int
    job_id: UUID | None


def source_tag(source_id: UUID) -> str:
    """The tag a source's documents carry; by id, so renaming a source leaves every chunk's tag right."""
    return f"source:{source_id}"


def _stored(record: Any) -> StoredSource:
    return msgspec.convert(dict(record), StoredSource)


class SourceRepository:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    async def insert(
        self, *, collection_id: UUID, name: str, spec: SourceSpec, schedule_minutes: int | None
    ) -> StoredSource:
        try:
            record = await self.conn.fetchrow(
                """INSERT INTO chonkit.sources (id, collection_id, name, kind, spec, schedule_minutes)
                   VALUES ($1, $2, $3, $4, $5, $6)
                   RETURNING id, collection_id, name, kind, spec, schedule_minutes, created_at, updated_at,
                             0 AS item_count""",
                uuid.uuid4(),
                collection_id,
                name,
                _kind(spec),
                msgspec.to_builtins(spec),
                schedule_minutes,
            )
        except asyncpg.UniqueViolationError as exc:
            raise _name_taken(name) from exc
        return _stored(record)

    async def get(self, collection_id: UUID, source_id: UUID) -> StoredSource | None:
        record = await self.conn.fetchrow(
            _SOURCE + " WHERE s.collection_id = $1 AND s.id = $2", collection_id, source_id
        )
        return None if record is None else _stored(record)

    async def get_by_id(self, source_id: UUID) -> StoredSource | None:
        record = await self.conn.fetchrow(_SOURCE + " WHERE s.id = $1", source_id)
        return None if record is None else _stored(record)

    async def of_collection(self, collection_id: UUID) -> list[StoredSource]:
        records = await self.conn.fetch(_SOURCE + " WHERE s.collection_id = $1 ORDER BY s.name", collection_id)
        return [_stored(r) for r in records]

    async def update(self, source_id: UUID, changes: dict[str, Any]) -> None:
        """Set only the given columns (names come from our own update struct, never from the request)."""
        if "spec" in changes:
            changes["kind"] = _kind(changes["spec"])
            changes["spec"] = msgspec.to_builtins(changes["spec"])
        assignments = ", ".join(f"{column} = ${i}" for i, column in enumerate(changes, start=2))
        try:
            await self.conn.execute(
                f"UPDATE chonkit.sources SET {assignments}, updated_at = now() WHERE id = $1",
                source_id,
                *changes.values(),
            )
        except asyncpg.UniqueViolationError as exc:
            raise _name_taken(str(changes.get("name"))) from exc

    async def delete(self, source_id: UUID) -> None:
        await self.conn.execute("DELETE FROM chonkit.sources WHERE id = $1", source_id)

    async def known_items(self, source_id: UUID) -> dict[str, KnownItem]:
        records = await self.conn.fetch(
            "SELECT key, document_id, content_hash FROM chonkit.source_items WHERE source_id = $1", source_id
        )
        return {r["key"]: msgspec.convert(dict(r), KnownItem) for r in records}

    async def documents_of(self, source_id: UUID) -> list[UUID]:
        records = await self.conn.fetch(
            "SELECT DISTINCT document_id FROM chonkit.source_items WHERE source_id = $1", source_id
        )
        return [r["document_id"] for r in records]

    async def remember(self, source_id: UUID, key: str, document_id: UUID, content_hash: str) -> None:
        await self.conn.execute(
            """INSERT INTO chonkit.source_items (source_id, key, document_id, content_hash) VALUES ($1, $2, $3, $4)
               ON CONFLICT (source_id, key) DO UPDATE SET document_id = $3, content_hash = $4, synced_at = now()""",
            source_id,
            key,
            document_id,
            content_hash,
        )

    async def forget(self, source_id: UUID, key: str) -> None:
        await self.conn.execute("DELETE FROM chonkit.source_items WHERE source_id = $1 AND key = $2", source_id, key)

    async def used_in_collection(self, collection_id: UUID, document_id: UUID) -> bool:
        """Whether an item of any source of the collection still became this document."""
        used: bool = await self.conn.fetchval(
            """SELECT EXISTS (SELECT 1 FROM chonkit.source_items i JOIN chonkit.sources s ON s.id = i.source_id
                              WHERE s.collection_id = $1 AND i.document_id = $2)""",
            collection_id,
            document_id,
        )
        return used

    async def used_by_source(self, source_id: UUID, document_id: UUID) -> bool:
        used: bool = await self.conn.fetchval(
            "SELECT EXISTS (SELECT 1 FROM chonkit.source_items WHERE source_id = $1 AND document_id = $2)",
            source_id,
            document_id,
        )
        return used

    async def document_unused(self, document_id: UUID) -> bool:
        """No collection holds the document, no source item became it and no job is about to embed it."""
        unused: bool = await self.conn.fetchval(
            """SELECT NOT EXISTS (SELECT 1 FROM chonkit.collection_documents WHERE document_id = $1)
                  AND NOT EXISTS (SELECT 1 FROM chonkit.source_items WHERE document_id = $1)
                  AND NOT EXISTS (SELECT 1 FROM chonkit.job_items WHERE document_id = $1
                                  AND stage IN ('queued', 'parsing', 'chunking', 'embedding', 'writing'))""",
            document_id,
        )
        return unused

    async def collection_holds(self, collection_id: UUID) -> set[UUID]:
        records = await self.conn.fetch(
            "SELECT document_id FROM chonkit.collection_documents WHERE collection_id = $1", collection_id
        )
        return {r["document_id"] for r in records}

    # --- runs ---

    async def start_run(self, source_id: UUID, trigger: RunTrigger) -> UUID:
        """A queued run; :class:`Conflict` ``sync_in_progress`` when the source has one unfinished already."""
        run_id = uuid.uuid4()
        try:
            await self.conn.execute(
                "INSERT INTO chonkit.source_runs (id, source_id, trigger) VALUES ($1, $2, $3)",
                run_id,
                source_id,
                trigger,
            )
        except asyncpg.UniqueViolationError as exc:
            raise Conflict(
                "A sync of this source is already queued or running; follow it, or cancel it first.",
                code="sync_in_progress",
            ) from exc
        return run_id

    async def start_due_runs(self) -> int:
        """Queue a run of every scheduled source whose interval has passed since its last run began (or that never
        ran); a source with an unfinished run is left alone. Safe from any number of workers at once."""
        status = await self.conn.execute(
            """INSERT INTO chonkit.source_runs (id, source_id, trigger)
               SELECT gen_random_uuid(), s.id, 'schedule' FROM chonkit.sources s
               WHERE s.schedule_minutes IS NOT NULL
                 AND coalesce((SELECT max(r.created_at) FROM chonkit.source_runs r WHERE r.source_id = s.id),
                              '-infinity') <= now() - s.schedule_minutes * interval '1 minute'
               ON CONFLICT DO NOTHING"""
        )
        return int(status.split()[-1])

    async def get_run(self, run_id: UUID) -> Run | None:
        record = await self.conn.fetchrow(_RUN + " WHERE r.id = $1", run_id)
        return None if record is None else await self._run(record)

    async def runs(self, source_id: UUID, limit: int) -> list[Run]:
        records = await self.conn.fetch(
            _RUN + " WHERE r.source_id = $1 ORDER BY r.created_at DESC, r.id LIMIT $2", source_id, limit
        )
        return [await self._run(r) for r in records]

    async def last_run(self, source_id: UUID) -> Run | None:
        runs = await self.runs(source_id, 1)
        return runs[0] if runs else None

    async def _run(self, record: Any) -> Run:
        counts = await self.conn.fetch(
            "SELECT action, count(*) AS n FROM chonkit.source_run_items WHERE run_id = $1 GROUP BY action",
            record["id"],
        )
        by_action = {r["action"]: r["n"] for r in counts}
        problems = await self.conn.fetch(
            """SELECT key, action, code, reason FROM chonkit.source_run_items
               WHERE run_id = $1 AND action IN ('failed', 'skipped') ORDER BY key LIMIT $2""",
            record["id"],
            PROBLEMS_SHOWN,
        )
        progress = None
        if record["job_id"] is not None:
            stages = await self.conn.fetch(
                "SELECT stage, count(*) AS n FROM chonkit.job_items WHERE job_id = $1 GROUP BY stage", record["job_id"]
            )
            progress = {r["stage"]: r["n"] for r in stages}
        report = SyncReport(
            added=by_action.get("added", 0),
            changed=by_action.get("changed", 0),
            removed=by_action.get("removed", 0),
            unchanged=record["unchanged"],
            failed=by_action.get("failed", 0),
            skipped=by_action.get("skipped", 0),
            problems=[msgspec.convert(dict(p), ItemProblem) for p in problems],
        )
        fields = {k: v for k, v in record.items() if k != "unchanged"}
        return msgspec.convert({**fields, "report": report, "job_progress": progress}, Run, from_attributes=True)

    async def cancel_run(self, run_id: UUID) -> None:
        """A queued run stops now; a listing one at its next item; an embedding one when its job stops."""
        await self.conn.execute(
            """UPDATE chonkit.source_runs SET cancel_requested = true,
                      status = CASE WHEN status = 'queued' THEN 'cancelled' ELSE status END,
                      finished_at = CASE WHEN status = 'queued' THEN now() ELSE finished_at END
               WHERE id = $1""",
            run_id,
        )

    async def claim_run(self, worker: str, stale_after: timedelta) -> ClaimedRun | None:
        """The oldest queued run, or a listing one whose worker stopped beating (it lists again from the start)."""
        record = await self.conn.fetchrow(
            """UPDATE chonkit.source_runs r
               SET status = 'listing', worker = $1, heartbeat_at = now(), attempts = r.attempts + 1,
                   started_at = coalesce(r.started_at, now())
               WHERE r.id = (SELECT c.id FROM chonkit.source_runs c
                             WHERE c.status = 'queued'
                                OR (c.status = 'listing' AND c.heartbeat_at < now() - $2::interval)
                             ORDER BY c.created_at LIMIT 1 FOR UPDATE SKIP LOCKED)
               RETURNING r.id, r.source_id, r.attempts, r.job_id""",
            worker,
            stale_after,
        )
        return None if record is None else msgspec.convert(dict(record), ClaimedRun)

    async def claim_settled_run(self) -> ClaimedRun | None:
        """A run whose embedding job has finished (or that has none), locked until this transaction ends."""
        record = await self.conn.fetchrow(
            """SELECT r.id, r.source_id, r.attempts, r.job_id FROM chonkit.source_runs r
               WHERE r.status = 'embedding'
                 AND NOT EXISTS (SELECT 1 FROM chonkit.job_items i WHERE i.job_id = r.job_id
                                 AND i.stage IN ('queued', 'parsing', 'chunking', 'embedding', 'writing'))
               ORDER BY r.created_at LIMIT 1 FOR UPDATE SKIP LOCKED"""
        )
        return None if record is None else msgspec.convert(dict(record), ClaimedRun)

    async def heartbeat(self, run_id: UUID, worker: str) -> bool:
        status = await self.conn.execute(
            """UPDATE chonkit.source_runs SET heartbeat_at = now()
               WHERE id = $1 AND worker = $2 AND status = 'listing'""",
            run_id,
            worker,
        )
        return status.endswith(" 1")

    async def listing_owned(self, run_id: UUID, worker: str) -> tuple[bool, bool]:
        """(whether we still own the listing, whether a cancel was asked for)."""
        record = await self.conn.fetchrow(
            """SELECT status = 'listing' AND worker = $2 AS owned, cancel_requested
               FROM chonkit.source_runs WHERE id = $1""",
            run_id,
            worker,
        )
        return (False, False) if record is None else (record["owned"], record["cancel_requested"])

    async def clear_items(self, run_id: UUID) -> None:
        await self.conn.execute("DELETE FROM chonkit.source_run_items WHERE run_id = $1", run_id)
        await self.conn.execute("UPDATE chonkit.source_runs SET unchanged = 0 WHERE id = $1", run_id)

    async def add_items(self, run_id: UUID, items: Sequence[RunItem], unchanged: int) -> None:
        await self.conn.executemany(
            """INSERT INTO chonkit.source_run_items
                   (run_id, key, action, document_id, previous_document_id, content_hash, created_document, code,
                    reason)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)""",
            [
                (
                    run_id,
                    i.key,
                    i.action,
                    i.document_id,
                    i.previous_document_id,
                    i.content_hash,
                    i.created_document,
                    i.code,
                    i.reason,
                )
                for i in items
            ],
        )
        await self.conn.execute(
            "UPDATE chonkit.source_runs SET unchanged = unchanged + $2 WHERE id = $1", run_id, unchanged
        )

    async def run_items(self, run_id: UUID) -> list[RunItem]:
        records = await self.conn.fetch(
            """SELECT key, action, document_id, previous_document_id, content_hash, created_document, code, reason
               FROM chonkit.source_run_items WHERE run_id = $1 ORDER BY key""",
            run_id,
        )
        return [msgspec.convert(dict(r), RunItem) for r in records]

    async def fail_item(self, run_id: UUID, key: str, code: str, reason: str) -> None:
        await self.conn.execute(
            """UPDATE chonkit.source_run_items SET action = 'failed', code = $3, reason = $4
               WHERE run_id = $1 AND key = $2""",
            run_id,
            key,
            code,
            reason,
        )

    async def job_stages(self, job_id: UUID) -> dict[UUID, tuple[str, str | None, str | None]]:
        """Each document of the job: its stage, error code and error."""
        records = await self.conn.fetch(
            "SELECT document_id, stage, error_code, error FROM chonkit.job_items WHERE job_id = $1", job_id
        )
        return {r["document_id"]: (r["stage"], r["error_code"], r["error"]) for r in records}

    async def set_run(self, run_id: UUID, status: str, **fields: Any) -> None:
        names = list(fields)
        sets = "".join(f", {name} = ${i}" for i, name in enumerate(names, start=3))
        finished = ", finished_at = now()" if status in {"done", "failed", "cancelled"} else ""
        await self.conn.execute(
            f"UPDATE chonkit.source_runs SET status = $2{finished}{sets} WHERE id = $1",
            run_id,
            status,
            *fields.values(),
        )

    async def cancel_requested(self, run_id: UUID) -> bool:
        return bool(await self.conn.fetchval("SELECT cancel_requested FROM chonkit.source_runs WHERE id = $1", run_id))


def _kind(spec: SourceSpec) -> str:
    return "folder" if isinstance(spec, FolderSpec) else "web"


def _name_taken(name: str) -> Conflict:
    return Conflict(f"The collection already has a source named {name!r}.", code="source_exists")


def to_source(stored: StoredSource, last_run: Run | None) -> Source:
    return Source(
        id=stored.id,
        collection_id=stored.collection_id,
        name=stored.name,
        kind="folder" if stored.kind == "folder" else "web",
        spec=stored.spec,
        schedule_minutes=stored.schedule_minutes,
        tag=source_tag(stored.id),
        item_count=stored.item_count,
        last_run=last_run,
        created_at=stored.created_at,
        updated_at=stored.updated_at,
    )
