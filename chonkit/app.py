"""Chonkit: the admin API that turns uploaded documents into vector collections.

:class:`Chonkit` is the composition root: every collaborator the handlers use, built once in the lifespan. The
``provide_*`` functions below make each request's services from it and the request's transaction; handlers
take those as typed dependencies, call one method and return.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from litestar import Litestar, Router
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide

from chonkit.background import NONE_HERE, Background, background_work
from chonkit.collection.controller import CollectionController, ProviderController
from chonkit.collection.repository import CollectionRepository
from chonkit.collection.service import CollectionService
from chonkit.document.controller import DocumentController
from chonkit.document.repository import DocumentRepository
from chonkit.document.service import DocumentService, RegistryTokenizers, UnusedOriginals
from chonkit.document.storage import BlobStore
from chonkit.embedding.controller import CollectionJobController, JobController
from chonkit.embedding.service import JobFeed, JobService
from chonkit.jobs.repository import JobRepository
from chonkit.reembedding.controller import EmbeddingModelController
from chonkit.reembedding.service import ReembeddingService
from chonkit.source.controller import SourceController
from chonkit.source.service import RunFeed, SourceService
from chonkit.source.sync import SourceLimits, source_limits
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
        async with clients.opened(), _background(app.state.db) as background:
            app.state.chonkit = Chonkit(
                db=app.state.db,
                clients=clients,
                blobs=blobs,
                tokenizers=RegistryTokenizers(clients.embedders),
                max_upload_bytes=settings.chonkit_max_upload_bytes,
                wake_worker=background.wake_worker,
                source_limits=limits,
                wake_sources=background.wake_sources,
            )
            yield

    @asynccontextmanager
    async def _background(db: Database) -> AsyncIterator[Background]:
        """The embedding worker and the source syncer in this process, if it runs them."""
        if not run_worker:
            yield NONE_HERE
            return
        async with background_work(settings, db, clients, blobs, stop_seconds=30) as background:
            yield background

    admin = Router(
        "/",
        route_handlers=[
            DocumentController,
            CollectionController,
            EmbeddingModelController,
            CollectionJobController,
            ProviderController,
            JobController,
            SourceController,
        ],
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
