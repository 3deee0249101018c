"""Chonkit: the admin API that turns uploaded documents into vector collections.

:class:`Chonkit` is the composition root: every collaborator the handlers use, built once in the lifespan. The
``provide_*`` functions below make each request's services from it and the request's transaction; handlers
take those as typed dependencies, call one method and return.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from litestar import Litestar, Router
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide

from chonkit.collection.controller import CollectionController, ProviderController
from chonkit.collection.repository import CollectionRepository
from chonkit.collection.service import CollectionService
from chonkit.document.controller import DocumentController
from chonkit.document.repository import DocumentRepository
from chonkit.document.service import DocumentService, RegistryTokenizers, UnusedOriginals
from chonkit.document.storage import BlobStore
from chonkit.embedding.controller import JobController
from chonkit.embedding.repository import JobRepository
from chonkit.embedding.service import JobFeed, JobService
from chonkit.embedding.worker import EmbeddingWorker
from chonkit.reembedding.service import ReembeddingService
from chonkit.source.controller import SourceController
from chonkit.source.service import RunFeed, SourceService
from chonkit.source.sync import SourceLimits, SourceSyncer, source_limits
from common import telemetry
from common.auth import Authenticator
from common.clients import SharedClients
from common.config import Settings
from common.db import Database
from common.db.database import Connection
from common.http.app import build_service_app
from common.http.security import admin_only


@dataclass(frozen=True, slots=True)
class Chonkit:
    """What chonkit's handlers are built from; one per app, made when its database and clients are open."""

    db: Database
    clients: SharedClients
    blobs: BlobStore
    tokenizers: RegistryTokenizers
    max_upload_bytes: int
    wake_worker: Callable[[], None]
    source_limits: SourceLimits
    wake_sources: Callable[[], None]


def chonkit_of(state: State) -> Chonkit:
    chonkit: Chonkit = state.chonkit
    return chonkit


def provide_documents(state: State, conn: NamedDependency[Connection]) -> DocumentService:
    root = chonkit_of(state)
    return DocumentService(
        DocumentRepository(conn),
        root.blobs,
        root.tokenizers,
        max_upload_bytes=root.max_upload_bytes,
        vectors=root.clients.vectors,
        collections=CollectionRepository(conn),
    )


def provide_originals(state: State) -> UnusedOriginals:
    root = chonkit_of(state)
    return UnusedOriginals(root.db, root.blobs)


def provide_collections(state: State, conn: NamedDependency[Connection]) -> CollectionService:
    root = chonkit_of(state)
    return CollectionService(CollectionRepository(conn), root.clients.vectors, root.clients.embedders)


def provide_jobs(state: State, conn: NamedDependency[Connection]) -> JobService:
    return JobService(conn, wake_worker=chonkit_of(state).wake_worker)


def provide_reembedding(state: State, conn: NamedDependency[Connection]) -> ReembeddingService:
    root = chonkit_of(state)
    return ReembeddingService(conn, root.clients.vectors, root.clients.embedders, wake_worker=root.wake_worker)


def provide_feed(state: State) -> JobFeed:
    return JobFeed(chonkit_of(state).db)


def provide_sources(state: State, conn: NamedDependency[Connection]) -> SourceService:
    root = chonkit_of(state)
    return SourceService(conn, root.source_limits, wake=root.wake_sources, wake_worker=root.wake_worker)


def provide_run_feed(state: State) -> RunFeed:
    return RunFeed(chonkit_of(state).db)


DEPENDENCIES = {
    "documents": Provide(provide_documents, sync_to_thread=False),
    "originals": Provide(provide_originals, sync_to_thread=False),
    "collections": Provide(provide_collections, sync_to_thread=False),
    "jobs": Provide(provide_jobs, sync_to_thread=False),
    "feed": Provide(provide_feed, sync_to_thread=False),
    "sources": Provide(provide_sources, sync_to_thread=False),
    "run_feed": Provide(provide_run_feed, sync_to_thread=False),
    "reembedding": Provide(provide_reembedding, sync_to_thread=False),
}


async def count_queue(db: Database) -> None:
    """``/metrics`` reads the embedding queue from the database: right whichever processes run the workers."""
    async with db.transaction() as conn:
        telemetry.set_embedding_queue(await JobRepository(conn).pending_by_stage())


def create_app(
    settings: Settings,
    *,
    database: Database | None = None,
    authenticator: Authenticator | None = None,
    clients: SharedClients | None = None,
    worker: bool | None = None,
) -> Litestar:
    """``worker`` (default ``settings.chonkit_inprocess_worker``) runs an embedding worker in this process."""
    clients = clients or SharedClients(settings)
    blobs = BlobStore(settings.data_path / "documents")
    run_worker = settings.chonkit_inprocess_worker if worker is None else worker
    limits = source_limits(settings)

    @asynccontextmanager
    async def compose(app: Litestar) -> AsyncIterator[None]:
        async with clients.opened(), _worker(app.state.db) as wake, _syncer(app.state.db, wake) as wake_sources:
            app.state.chonkit = Chonkit(
                db=app.state.db,
                clients=clients,
                blobs=blobs,
                tokenizers=RegistryTokenizers(clients.embedders),
                max_upload_bytes=settings.chonkit_max_upload_bytes,
                wake_worker=wake,
                source_limits=limits,
                wake_sources=wake_sources,
            )
            yield

    @asynccontextmanager
    async def _worker(db: Database) -> AsyncIterator[Callable[[], None]]:
        """The in-process embedding worker, if this process runs one; yields what wakes it."""
        if not run_worker:
            yield lambda: None
            return
        embedding_worker = EmbeddingWorker(
            db, blobs, clients.embedders, clients.vectors, heartbeat_seconds=settings.worker_heartbeat_seconds
        )
        stop = asyncio.Event()
        task = asyncio.create_task(embedding_worker.run(stop))
        try:
            yield embedding_worker.wake
        finally:
            stop.set()
            embedding_worker.wake()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(task, timeout=30)

    @asynccontextmanager
    async def _syncer(db: Database, wake_worker: Callable[[], None]) -> AsyncIterator[Callable[[], None]]:
        """The in-process source syncer, beside the embedding worker; yields what wakes it."""
        if not run_worker:
            yield lambda: None
            return
        tokenizers = RegistryTokenizers(clients.embedders)
        syncer = SourceSyncer(
            db,
            blobs,
            tokenizers,
            clients.vectors,
            limits,
            heartbeat_seconds=settings.worker_heartbeat_seconds,
            wake_worker=wake_worker,
        )
        stop = asyncio.Event()
        task = asyncio.create_task(syncer.run(stop))
        try:
            yield syncer.wake
        finally:
            stop.set()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(task, timeout=30)

    admin = Router(
        "/",
        route_handlers=[DocumentController, CollectionController, ProviderController, JobController, SourceController],
        guards=[admin_only],
        request_max_body_size=settings.chonkit_max_upload_bytes,
    )
    return build_service_app(
        service_name="chonkit",
        title="Chonkit",
        description="Documents, parsing, chunking and vector collections with identity vectors. Admin only.",
        settings=settings,
        route_handlers=[admin],
        database=database,
        authenticator=authenticator,
        lifespans=[compose],
        before_scrape=count_queue,
        dependencies=DEPENDENCIES,
    )
