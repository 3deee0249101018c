"""Chonkit: the admin API that turns uploaded documents into vector collections.

:class:`Chonkit` is the composition root: every service the handlers use, built once in the lifespan. The
``provide_*`` functions below hand them to handlers as typed dependencies; a handler calls one method and returns,
and the method opens its own short transactions.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from litestar import Litestar, Router
from litestar.datastructures import State
from litestar.di import Provide

from chonkit.background import NONE_HERE, Background, background_work
from chonkit.collection.controller import CollectionController, ProviderController
from chonkit.collection.service import CollectionService
from chonkit.document.controller import DocumentController
from chonkit.document.service import DocumentService, RegistryTokenizers, UnusedOriginals
from chonkit.document.storage import BlobStore
from chonkit.embedding.controller import CollectionJobController, JobController
from chonkit.embedding.service import JobFeed, JobService
from chonkit.jobs.repository import JobRepository
from chonkit.reembedding.controller import EmbeddingModelController
from chonkit.reembedding.service import ReembeddingService
from chonkit.source.controller import SourceController
from chonkit.source.service import RunFeed, SourceService
from chonkit.source.sync import source_limits
from common import telemetry
from common.auth import Authenticator
from common.clients import SharedClients
from common.config import Settings
from common.db import Database
from common.http.app import build_service_app
from common.http.security import admin_only


@dataclass(frozen=True, slots=True)
class Chonkit:
    """What chonkit's handlers call, built once per app when its database and clients are open. Every service takes
    the database and opens its own short transactions (docs/architecture.md), so none is made per request."""

    documents: DocumentService
    originals: UnusedOriginals
    collections: CollectionService
    jobs: JobService
    feed: JobFeed
    sources: SourceService
    run_feed: RunFeed
    reembedding: ReembeddingService


def compose_chonkit(
    db: Database, clients: SharedClients, blobs: BlobStore, settings: Settings, background: Background
) -> Chonkit:
    """Chonkit's services on this database, these clients and this process's background work."""
    wake_worker = background.wake_worker
    return Chonkit(
        documents=DocumentService(
            db,
            blobs,
            RegistryTokenizers(clients.embedders),
            max_upload_bytes=settings.chonkit.max_upload_bytes,
            vectors=clients.vectors,
        ),
        originals=UnusedOriginals(db, blobs),
        collections=CollectionService(db, clients.vectors, clients.embedders),
        jobs=JobService(db, wake_worker=wake_worker),
        feed=JobFeed(db),
        sources=SourceService(db, source_limits(settings), wake=background.wake_sources, wake_worker=wake_worker),
        run_feed=RunFeed(db),
        reembedding=ReembeddingService(db, clients.vectors, clients.embedders, wake_worker=wake_worker),
    )


def chonkit_of(state: State) -> Chonkit:
    chonkit: Chonkit = state.chonkit
    return chonkit


def provide_documents(state: State) -> DocumentService:
    return chonkit_of(state).documents


def provide_originals(state: State) -> UnusedOriginals:
    return chonkit_of(state).originals


def provide_collections(state: State) -> CollectionService:
    return chonkit_of(state).collections


def provide_jobs(state: State) -> JobService:
    return chonkit_of(state).jobs


def provide_reembedding(state: State) -> ReembeddingService:
    return chonkit_of(state).reembedding


def provide_feed(state: State) -> JobFeed:
    return chonkit_of(state).feed


def provide_sources(state: State) -> SourceService:
    return chonkit_of(state).sources


def provide_run_feed(state: State) -> RunFeed:
    return chonkit_of(state).run_feed


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
    """``worker`` (default ``settings.chonkit.inprocess_worker``) runs an embedding worker in this process."""
    clients = clients or SharedClients(settings)
    blobs = BlobStore(settings.server.data_path / "documents")
    run_worker = settings.chonkit.inprocess_worker if worker is None else worker

    @asynccontextmanager
    async def compose(app: Litestar) -> AsyncIterator[None]:
        async with clients.opened(), _background(app.state.db) as background:
            app.state.chonkit = compose_chonkit(app.state.db, clients, blobs, settings, background)
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
        request_max_body_size=settings.chonkit.max_upload_bytes,
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
