"""Chonkit: the admin API that turns uploaded documents into vector collections."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from litestar import Litestar, Router

from chonkit.collection.controller import CollectionController, ProviderController
from chonkit.document.controller import DocumentController
from chonkit.document.service import RegistryTokenizers
from chonkit.document.storage import BlobStore
from chonkit.embedding.controller import JobController
from chonkit.embedding.repository import JobRepository
from chonkit.embedding.worker import EmbeddingWorker
from common import telemetry
from common.auth import Authenticator
from common.clients import SharedClients
from common.config import Settings
from common.db import Database
from common.http.app import build_service_app
from common.http.security import admin_only


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

    @asynccontextmanager
    async def open_clients(app: Litestar) -> AsyncIterator[None]:
        async with clients.opened():
            yield

    @asynccontextmanager
    async def in_process_worker(app: Litestar) -> AsyncIterator[None]:
        if not run_worker:
            yield
            return
        embedding_worker = EmbeddingWorker(
            app.state.db, blobs, clients.embedders, clients.vectors, heartbeat_seconds=settings.worker_heartbeat_seconds
        )
        app.state.wake_worker = embedding_worker.wake
        stop = asyncio.Event()
        task = asyncio.create_task(embedding_worker.run(stop))
        try:
            yield
        finally:
            stop.set()
            embedding_worker.wake()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(task, timeout=30)

    admin = Router(
        "/",
        route_handlers=[DocumentController, CollectionController, ProviderController, JobController],
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
        lifespans=[open_clients, in_process_worker],
        before_scrape=count_queue,
        state={
            "blobs": blobs,
            "clients": clients,
            "tokenizers": RegistryTokenizers(clients.embedders),
            "wake_worker": lambda: None,
        },
    )
