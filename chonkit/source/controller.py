"""``/collections/{id}/sources``: folders and web sites a collection is kept in sync with, and their sync runs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated
from uuid import UUID

from litestar import Controller, delete, get, patch, post
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery, JSONBody, QueryParameter
from litestar.response import ServerSentEvent, ServerSentEventMessage
from litestar.status_codes import HTTP_200_OK, HTTP_201_CREATED, HTTP_202_ACCEPTED

from chonkit.embedding.service import FeedEvent
from chonkit.source.models import Run, Source, SourceCreate, SourceUpdate
from chonkit.source.service import RunFeed, SourceService


class SourceController(Controller):
    """A source belongs to one collection: a folder on the server (under ``RAGU_SOURCE_ROOTS``) or a web site. A
    sync compares what it holds now with what the collection holds from it, by content hash: new items are
    embedded, changed ones re-embedded, gone ones removed, unchanged ones left alone."""

    path = "/collections/{collection_id:uuid}/sources"
    tags = ["sources"]

    @post("/", status_code=HTTP_201_CREATED, summary="Register a source")
    async def create(
        self, sources: NamedDependency[SourceService], collection_id: FromPath[UUID], data: JSONBody[SourceCreate]
    ) -> Source:
        """A folder outside the allowed roots (after resolving symlinks) is refused (``folder_outside_roots``), as is
        any folder when the operator allows none (``source_roots_unset``); more than 32 include or exclude globs
        (``too_many_globs``), a glob over 256 characters (``glob_too_long``) or one that cannot compile
        (``invalid_glob``); a web spec out of its limits with its ``web_*`` code."""
        return await sources.create(collection_id, data)

    @get("/", summary="The collection's sources, each with its last run")
    async def list_sources(
        self, sources: NamedDependency[SourceService], collection_id: FromPath[UUID]
    ) -> list[Source]:
        return await sources.all(collection_id)

    @get("/{source_id:uuid}", summary="A source and its last run")
    async def get_source(
        self, sources: NamedDependency[SourceService], collection_id: FromPath[UUID], source_id: FromPath[UUID]
    ) -> Source:
        return await sources.get(collection_id, source_id)

    @patch("/{source_id:uuid}", summary="Rename, change the spec or the schedule")
    async def update(
        self,
        sources: NamedDependency[SourceService],
        collection_id: FromPath[UUID],
        source_id: FromPath[UUID],
        data: JSONBody[SourceUpdate],
    ) -> Source:
        """Only the fields sent change; ``"schedule_minutes": null`` stops the schedule."""
        return await sources.update(collection_id, source_id, data)

    @delete("/{source_id:uuid}", summary="Delete a source")
    async def delete_source(
        self, sources: NamedDependency[SourceService], collection_id: FromPath[UUID], source_id: FromPath[UUID]
    ) -> None:
        """Queues the removal of the documents only this source brought into the collection (they stay in the
        document library); refused while a sync runs (``sync_in_progress``)."""
        await sources.delete(collection_id, source_id)

    @post("/{source_id:uuid}/sync", status_code=HTTP_202_ACCEPTED, summary="Sync now")
    async def sync(
        self, sources: NamedDependency[SourceService], collection_id: FromPath[UUID], source_id: FromPath[UUID]
    ) -> Run:
        """Queues a run; follow it at ``.../runs/{id}/events``. One run per source at a time: another while one is
        queued or running is refused with 409 ``sync_in_progress``."""
        return await sources.sync(collection_id, source_id)

    @get("/{source_id:uuid}/runs", summary="The source's runs, newest first, with their reports")
    async def runs(
        self,
        sources: NamedDependency[SourceService],
        collection_id: FromPath[UUID],
        source_id: FromPath[UUID],
        limit: FromQuery[Annotated[int, QueryParameter(ge=1, le=200)]] = 20,
    ) -> list[Run]:
        return await sources.runs(collection_id, source_id, limit)

    @get("/{source_id:uuid}/runs/{run_id:uuid}", summary="A run and its report")
    async def get_run(
        self,
        sources: NamedDependency[SourceService],
        collection_id: FromPath[UUID],
        source_id: FromPath[UUID],
        run_id: FromPath[UUID],
    ) -> Run:
        return await sources.run(collection_id, source_id, run_id)

    @get("/{source_id:uuid}/runs/{run_id:uuid}/events", summary="Follow a run (Server-Sent Events)")
    async def events(
        self,
        sources: NamedDependency[SourceService],
        run_feed: NamedDependency[RunFeed],
        collection_id: FromPath[UUID],
        source_id: FromPath[UUID],
        run_id: FromPath[UUID],
    ) -> ServerSentEvent:
        """``run`` events: the run now, then whenever its status, report or job progress changes, ending when it
        finishes — or an ``error`` event (``code``, ``detail``) when the database becomes unavailable. While it
        embeds, ``/jobs/{job_id}/events`` follows the same work document by document."""
        return ServerSentEvent(_sse(run_feed.follow(await sources.run(collection_id, source_id, run_id))))

    @post("/{source_id:uuid}/runs/{run_id:uuid}/cancel", status_code=HTTP_200_OK, summary="Cancel a run")
    async def cancel(
        self,
        sources: NamedDependency[SourceService],
        collection_id: FromPath[UUID],
        source_id: FromPath[UUID],
        run_id: FromPath[UUID],
    ) -> Run:
        """What was embedded by then is kept; nothing is removed."""
        return await sources.cancel(collection_id, source_id, run_id)

    @post("/{source_id:uuid}/runs/{run_id:uuid}/retry", status_code=HTTP_202_ACCEPTED, summary="Retry a run")
    async def retry(
        self,
        sources: NamedDependency[SourceService],
        collection_id: FromPath[UUID],
        source_id: FromPath[UUID],
        run_id: FromPath[UUID],
    ) -> Run:
        """Queues a new run of a failed, cancelled or partly failed one: by content hash, it redoes only what did
        not make it (409 ``nothing_to_retry`` when nothing failed)."""
        return await sources.retry(collection_id, source_id, run_id)


async def _sse(events: AsyncIterator[FeedEvent]) -> AsyncIterator[ServerSentEventMessage]:
    async for event in events:
        yield ServerSentEventMessage(event=event.event, data=event.data)
