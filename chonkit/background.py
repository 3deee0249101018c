"""Chonkit's background work, assembled once for ``ragu serve`` (in its process) and ``ragu worker`` alike: the
embedding worker (embedding, removal and re-embedding jobs, migrations' swaps, document edits) and the source syncer
beside it, each on its own :class:`~chonkit.jobs.runner.Runner`."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from chonkit.document.storage import BlobStore
from chonkit.embedding.worker import EmbeddingWorker
from chonkit.source.sync import SourceSyncer, source_limits
from common.clients import SharedClients
from common.config import Settings
from common.db import Database


@dataclass(frozen=True, slots=True)
class Background:
    """The background work running in this process: its worker's name, and what tells it that work was queued here
    (nothing, where none runs here)."""

    name: str | None
    wake_worker: Callable[[], None]
    wake_sources: Callable[[], None]


NONE_HERE = Background(name=None, wake_worker=lambda: None, wake_sources=lambda: None)


@asynccontextmanager
async def background_work(
    settings: Settings, db: Database, clients: SharedClients, blobs: BlobStore, *, stop_seconds: float | None
) -> AsyncIterator[Background]:
    """Run the embedding worker and the source syncer until the block ends; then each finishes what it is doing,
    waited for up to ``stop_seconds`` (None: as long as it takes)."""
    heartbeat = settings.chonkit.worker_heartbeat_seconds
    worker = EmbeddingWorker(db, blobs, clients.embedders, clients.vectors, heartbeat_seconds=heartbeat)
    syncer = SourceSyncer(
        db,
        blobs,
        clients.vectors,
        source_limits(settings),
        heartbeat_seconds=heartbeat,
        wake_worker=worker.wake,
    )
    stop = asyncio.Event()
    tasks = [asyncio.create_task(worker.run(stop)), asyncio.create_task(syncer.run(stop))]
    try:
        yield Background(name=worker.name, wake_worker=worker.wake, wake_sources=syncer.wake)
    finally:
        stop.set()
        worker.wake()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(asyncio.gather(*tasks), timeout=stop_seconds)
