"""Sources as admins manage them: register a folder or a web site for a collection, sync it now or on a schedule,
follow, cancel and retry its runs. The runs themselves are worked by :class:`chonkit.source.sync.SourceSyncer`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any
from uuid import UUID

import msgspec

from chonkit.collection.repository import CollectionRepository
from chonkit.embedding.service import POLL_SECONDS, FeedEvent, JobService
from chonkit.jobs.repository import JobRepository
from chonkit.source.folder import check_globs, resolve_folder
from chonkit.source.models import ACTIVE, FolderSpec, Run, Source, SourceCreate, SourceSpec, SourceUpdate
from chonkit.source.repository import SourceRepository, StoredSource, to_source
from chonkit.source.sync import SourceLimits, web_spec
from common.db import Database
from common.db.database import Connection
from common.errors import Conflict, NotFound, Unavailable


class SourceService:
    def __init__(
        self,
        conn: Connection,
        limits: SourceLimits,
        *,
        wake: Callable[[], None] = lambda: None,
        wake_worker: Callable[[], None] = lambda: None,
    ) -> None:
        self.conn = conn
        self.sources = SourceRepository(conn)
        self.limits = limits
        self.wake = wake
        self.wake_worker = wake_worker

    async def create(self, collection_id: UUID, request: SourceCreate) -> Source:
        """The spec is checked now (a folder under the allowed roots, valid globs, a valid web spec) and again at
        every sync, since the disk and the settings may change in between."""
        await self._collection(collection_id)
        spec = await self.check_spec(request.spec)
        stored = await self.sources.insert(
            collection_id=collection_id, name=request.name.strip(), spec=spec, schedule_minutes=request.schedule_minutes
        )
        return to_source(stored, None)

    async def check_spec(self, spec: SourceSpec) -> SourceSpec:
        if isinstance(spec, FolderSpec):
            await asyncio.to_thread(resolve_folder, spec.path, self.limits.roots)
            await asyncio.to_thread(check_globs, spec.include, spec.exclude)  # RE2 compiles: up to ~70 ms at the bounds
        else:
            from chonkit.source.web import check_start_address  # brings httpx and lxml, as web_spec does

            await check_start_address(web_spec(spec), allow_private=self.limits.allow_private)
        return spec

    async def all(self, collection_id: UUID) -> list[Source]:
        await self._collection(collection_id)
        return [
            to_source(s, await self.sources.last_run(s.id)) for s in await self.sources.of_collection(collection_id)
        ]

    async def get(self, collection_id: UUID, source_id: UUID) -> Source:
        stored = await self._source(collection_id, source_id)
        return to_source(stored, await self.sources.last_run(stored.id))

    async def update(self, collection_id: UUID, source_id: UUID, patch: SourceUpdate) -> Source:
        await self._source(collection_id, source_id)
        changes: dict[str, Any] = {
            field: value for field in patch.__struct_fields__ if (value := getattr(patch, field)) is not msgspec.UNSET
        }
        if "spec" in changes:
            changes["spec"] = await self.check_spec(changes["spec"])
        if "name" in changes:
            changes["name"] = changes["name"].strip()
        if changes:
            await self.sources.update(source_id, changes)
        return await self.get(collection_id, source_id)

    async def delete(self, collection_id: UUID, source_id: UUID) -> None:
        """The documents only this source brought into the collection are taken out of it by a removal job (they
        stay in the document library); refused while the source is being synced."""
        source = await self._source(collection_id, source_id)
        last = await self.sources.last_run(source_id)
        if last is not None and last.status in ACTIVE:
            raise Conflict("The source is being synced; cancel the sync first.", code="sync_in_progress")
        documents = await self.sources.documents_of(source_id)
        await self.sources.delete(source_id)
        leaving = [d for d in documents if not await self.sources.used_in_collection(source.collection_id, d)]
        if leaving:
            await JobService(self.conn, wake_worker=self.wake_worker).enqueue(source.collection_id, "remove", leaving)

    async def sync(self, collection_id: UUID, source_id: UUID) -> Run:
        await self._source(collection_id, source_id)
        run_id = await self.sources.start_run(source_id, "manual")
        self.wake()
        return await self._run(source_id, run_id)

    async def runs(self, collection_id: UUID, source_id: UUID, limit: int) -> list[Run]:
        await self._source(collection_id, source_id)
        return await self.sources.runs(source_id, limit)

    async def run(self, collection_id: UUID, source_id: UUID, run_id: UUID) -> Run:
        await self._source(collection_id, source_id)
        return await self._run(source_id, run_id)

    async def cancel(self, collection_id: UUID, source_id: UUID, run_id: UUID) -> Run:
        """A queued run ends at once, a listing one at its next items, an embedding one once its job has stopped
        (queued documents at once, running ones at their next stage); what was embedded by then is kept."""
        run = await self.run(collection_id, source_id, run_id)
        if run.status not in ACTIVE:
            raise Conflict(f"The sync has already finished ({run.status}).", code="run_finished")
        await self.sources.cancel_run(run_id)
        if run.job_id is not None:
            await JobRepository(self.conn).cancel(run.job_id)
        return await self._run(source_id, run_id)

    async def retry(self, collection_id: UUID, source_id: UUID, run_id: UUID) -> Run:
        """A new run of the source: a sync compares by content hash, so it takes up exactly what failed (and any
        change since) and leaves the rest alone."""
        run = await self.run(collection_id, source_id, run_id)
        if run.status in ACTIVE:
            raise Conflict("The sync has not finished yet.", code="run_not_finished")
        if run.status == "done" and not run.report.failed:
            raise Conflict("The sync had no failures to retry.", code="nothing_to_retry")
        retried = await self.sources.start_run(source_id, "retry")
        self.wake()
        return await self._run(source_id, retried)

    async def _run(self, source_id: UUID, run_id: UUID) -> Run:
        run = await self.sources.get_run(run_id)
        if run is None or run.source_id != source_id:
            raise NotFound(f"No sync run {run_id} of this source.", code="run_not_found")
        return run

    async def _collection(self, collection_id: UUID) -> None:
        if not await CollectionRepository(self.conn).exists(collection_id):
            raise NotFound(f"No collection {collection_id}.", code="collection_not_found")

    async def _source(self, collection_id: UUID, source_id: UUID) -> StoredSource:
        await self._collection(collection_id)
        source = await self.sources.get(collection_id, source_id)
        if source is None:
            raise NotFound(f"No source {source_id} in collection {collection_id}.", code="source_not_found")
        return source


class RunFeed:
    """A run's progress as it happens, read on connections of its own (a stream outlives its request)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def follow(self, run: Run) -> AsyncIterator[FeedEvent]:
        """The run now, then again whenever it changes, until it finishes; an ``error`` event if the database goes
        away meanwhile."""
        encoder = msgspec.json.Encoder()
        yield FeedEvent("run", encoder.encode(run).decode())
        while run.status in ACTIVE:
            await asyncio.sleep(POLL_SECONDS)
            try:
                async with self.db.transaction() as conn:
                    current = await SourceRepository(conn).get_run(run.id)
            except Unavailable as exc:
                yield FeedEvent("error", encoder.encode({"code": exc.code, "detail": exc.detail}).decode())
                return
            if current is None:
                return
            if current != run:
                yield FeedEvent("run", encoder.encode(current).decode())
            run = current
