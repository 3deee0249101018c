"""Sources as admins manage them: register a folder or a web site for a collection, sync it now or on a schedule,
follow, cancel and retry its runs. The runs themselves are worked by :class:`chonkit.source.sync.SourceSyncer`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any
from uuid import UUID

import msgspec

from chonkit.collection.repository import CollectionRepository
from chonkit.embedding.service import POLL_SECONDS, FeedEvent, enqueue_job
from chonkit.jobs.models import JobCreated
from chonkit.jobs.repository import JobRepository
from chonkit.source.folder import check_globs, resolve_folder
from chonkit.source.models import ACTIVE, FolderSpec, Run, Source, SourceCreate, SourceSpec, SourceUpdate
from chonkit.source.repository import SourceRepository, StoredSource, to_source
from chonkit.source.sync import SourceLimits, web_spec
from common.db import Database
from common.errors import Conflict, NotFound, Unavailable


class SourceService:
    """Each method runs in short transactions of its own. A source's spec is checked (the disk, the globs, the
    web address's DNS) between them, holding no connection; a sync is woken once its run has committed."""

    def __init__(
        self,
        db: Database,
        limits: SourceLimits,
        *,
        wake: Callable[[], None] = lambda: None,
        wake_worker: Callable[[], None] = lambda: None,
    ) -> None:
        self.db = db
        self.limits = limits
        self.wake = wake
        self.wake_worker = wake_worker

    @asynccontextmanager
    async def _sources(self) -> AsyncIterator[SourceRepository]:
        async with self.db.transaction() as conn:
            yield SourceRepository(conn)

    async def create(self, collection_id: UUID, request: SourceCreate) -> Source:
        """The spec is checked now (a folder under the allowed roots, valid globs, a valid web spec) and again at
        every sync, since the disk and the settings may change in between."""
        async with self._sources() as sources:
            await _collection(sources, collection_id)
        spec = await self.check_spec(request.spec)
        async with self._sources() as sources:
            await _collection(sources, collection_id)  # deleted while the spec was checked
            stored = await sources.insert(
                collection_id=collection_id,
                name=request.name.strip(),
                spec=spec,
                schedule_minutes=request.schedule_minutes,
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
        async with self._sources() as sources:
            await _collection(sources, collection_id)
            return [to_source(s, await sources.last_run(s.id)) for s in await sources.of_collection(collection_id)]

    async def get(self, collection_id: UUID, source_id: UUID) -> Source:
        async with self._sources() as sources:
            return await _shown(sources, collection_id, source_id)

    async def update(self, collection_id: UUID, source_id: UUID, patch: SourceUpdate) -> Source:
        """A new spec is checked between two transactions, as at creation."""
        async with self._sources() as sources:
            await _source(sources, collection_id, source_id)
        changes: dict[str, Any] = {
            field: value for field in patch.__struct_fields__ if (value := getattr(patch, field)) is not msgspec.UNSET
        }
        if "spec" in changes:
            changes["spec"] = await self.check_spec(changes["spec"])
        if "name" in changes:
            changes["name"] = changes["name"].strip()
        async with self._sources() as sources:
            await _source(sources, collection_id, source_id)  # deleted while the spec was checked
            if changes:
                await sources.update(source_id, changes)
            return await _shown(sources, collection_id, source_id)

    async def delete(self, collection_id: UUID, source_id: UUID) -> None:
        """The documents only this source brought into the collection are taken out of it by a removal job (they
        stay in the document library), queued in the transaction that deletes the source; refused while the source
        is being synced."""
        async with self.db.transaction() as conn:
            created = await _delete(SourceRepository(conn), collection_id, source_id)
        if created is not None and created.job is not None:
            self.wake_worker()

    async def sync(self, collection_id: UUID, source_id: UUID) -> Run:
        async with self._sources() as sources:
            await _source(sources, collection_id, source_id)
            run = await _run(sources, source_id, await sources.start_run(source_id, "manual"))
        self.wake()
        return run

    async def runs(self, collection_id: UUID, source_id: UUID, limit: int) -> list[Run]:
        async with self._sources() as sources:
            await _source(sources, collection_id, source_id)
            return await sources.runs(source_id, limit)

    async def run(self, collection_id: UUID, source_id: UUID, run_id: UUID) -> Run:
        async with self._sources() as sources:
            await _source(sources, collection_id, source_id)
            return await _run(sources, source_id, run_id)

    async def cancel(self, collection_id: UUID, source_id: UUID, run_id: UUID) -> Run:
        """A queued run ends at once, a listing one at its next items, an embedding one once its job has stopped
        (queued documents at once, running ones at their next stage); what was embedded by then is kept."""
        async with self._sources() as sources:
            await _source(sources, collection_id, source_id)
            run = await _run(sources, source_id, run_id)
            if run.status not in ACTIVE:
                raise Conflict(f"The sync has already finished ({run.status}).", code="run_finished")
            await sources.cancel_run(run_id)
            if run.job_id is not None:
                await JobRepository(sources.conn).cancel(run.job_id)
            return await _run(sources, source_id, run_id)

    async def retry(self, collection_id: UUID, source_id: UUID, run_id: UUID) -> Run:
        """A new run of the source: a sync compares by content hash, so it takes up exactly what failed (and any
        change since) and leaves the rest alone."""
        async with self._sources() as sources:
            await _source(sources, collection_id, source_id)
            run = await _run(sources, source_id, run_id)
            if run.status in ACTIVE:
                raise Conflict("The sync has not finished yet.", code="run_not_finished")
            if run.status == "done" and not run.report.failed:
                raise Conflict("The sync had no failures to retry.", code="nothing_to_retry")
            retried = await _run(sources, source_id, await sources.start_run(source_id, "retry"))
        self.wake()
        return retried


async def _delete(sources: SourceRepository, collection_id: UUID, source_id: UUID) -> JobCreated | None:
    """Delete the source and queue the removal of the documents it alone brought into the collection."""
    source = await _source(sources, collection_id, source_id)
    last = await sources.last_run(source_id)
    if last is not None and last.status in ACTIVE:
        raise Conflict("The source is being synced; cancel the sync first.", code="sync_in_progress")
    documents = await sources.documents_of(source_id)
    await sources.delete(source_id)
    leaving = [d for d in documents if not await sources.used_in_collection(source.collection_id, d)]
    if not leaving:
        return None
    return await enqueue_job(sources.conn, source.collection_id, "remove", leaving)


async def _run(sources: SourceRepository, source_id: UUID, run_id: UUID) -> Run:
    run = await sources.get_run(run_id)
    if run is None or run.source_id != source_id:
        raise NotFound(f"No sync run {run_id} of this source.", code="run_not_found")
    return run


async def _collection(sources: SourceRepository, collection_id: UUID) -> None:
    if not await CollectionRepository(sources.conn).exists(collection_id):
        raise NotFound(f"No collection {collection_id}.", code="collection_not_found")


async def _source(sources: SourceRepository, collection_id: UUID, source_id: UUID) -> StoredSource:
    await _collection(sources, collection_id)
    source = await sources.get(collection_id, source_id)
    if source is None:
        raise NotFound(f"No source {source_id} in collection {collection_id}.", code="source_not_found")
    return source


async def _shown(sources: SourceRepository, collection_id: UUID, source_id: UUID) -> Source:
    stored = await _source(sources, collection_id, source_id)
    return to_source(stored, await sources.last_run(stored.id))


class RunFeed:
    """A run's progress as it happens, each poll a short transaction of its own (the stream holds no connection
    between polls)."""

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
