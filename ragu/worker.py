"""``ragu worker`` and ``ragu reconcile``: chonkit's background work outside the web process."""

from __future__ import annotations

import asyncio
import logging
import signal

import msgspec

from chonkit.background import background_work
from chonkit.collection.reconcile import ReconcileReport, reconcile
from chonkit.document.storage import BlobStore
from common import telemetry
from common.clients import SharedClients
from common.config import Settings
from common.db import PoolDatabase
from common.logs import configure_logging
from ragu.bootstrap import ensure_local_storage_free, prepare_database

logger = logging.getLogger(__name__)


def run_worker(settings: Settings) -> None:
    """Claim and process embedding work until SIGTERM/SIGINT; the current document finishes or is
    taken over by another worker after its heartbeat stops."""
    configure_logging(settings.server.log_level, settings.server.log_format)
    telemetry.configure_tracing(settings.server.otel_exporter)  # job items' traces; metrics need a web process
    ensure_local_storage_free(settings)
    settings, embedded = prepare_database(settings)
    try:
        asyncio.run(_work(settings))
    finally:
        if embedded is not None:
            embedded.stop()


async def _work(settings: Settings) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    db = await PoolDatabase.connect(_url(settings), min_size=1, max_size=4)
    clients = SharedClients(settings)
    try:
        async with clients.opened():
            blobs = BlobStore(settings.server.data_path / "documents")
            async with background_work(settings, db, clients, blobs, stop_seconds=None) as background:
                logger.info("worker %s started", background.name)  # with the source syncer beside it
                await stop.wait()
    finally:
        await db.aclose()


def run_reconcile(settings: Settings, *, repair: bool) -> ReconcileReport:
    ensure_local_storage_free(settings)
    settings, embedded = prepare_database(settings)
    try:
        return asyncio.run(_reconcile(settings, repair=repair))
    finally:
        if embedded is not None:
            embedded.stop()


async def _reconcile(settings: Settings, *, repair: bool) -> ReconcileReport:
    db = await PoolDatabase.connect(_url(settings), min_size=1, max_size=2)
    try:
        async with SharedClients(settings).opened() as clients:
            return await reconcile(db, clients.vectors, repair=repair)
    finally:
        await db.aclose()


def _url(settings: Settings) -> str:
    if not settings.database.url:
        raise RuntimeError("prepare_database resolves the URL first")
    return settings.database.url


def print_report(report: ReconcileReport) -> None:
    print(msgspec.json.format(msgspec.json.encode(report)).decode())
