"""``python -m tests.support.reembed_worker``: the embedding worker as ``ragu worker`` runs it, with the hashed-words
embedder beside MiniLM (so a collection can move between them), for tests that kill it with SIGKILL. Settings come
from the environment like the real command's."""

from __future__ import annotations

import asyncio
import signal

from chonkit.document.storage import BlobStore
from chonkit.embedding.worker import EmbeddingWorker
from common.clients import SharedClients
from common.config import load_settings
from common.db import PoolDatabase
from common.embedders.base import EmbedderRegistry
from common.embedders.local import LocalProvider
from tests.support.words_embedder import WordsProvider


async def main() -> None:
    settings = load_settings()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    db = await PoolDatabase.connect(settings.database.url or "", min_size=1, max_size=4)
    embedders = EmbedderRegistry([LocalProvider(), WordsProvider(delay=0.2)])
    try:
        async with SharedClients(settings, embedders=embedders).opened() as clients:
            worker = EmbeddingWorker(
                db,
                BlobStore(settings.server.data_path / "documents"),
                clients.embedders,
                clients.vectors,
                heartbeat_seconds=settings.chonkit.worker_heartbeat_seconds,
            )
            await worker.run(stop)
    finally:
        await db.aclose()


if __name__ == "__main__":
    asyncio.run(main())
