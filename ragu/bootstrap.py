"""Getting a process ready to work: the database resolved (embedded by default) and migrated."""

from __future__ import annotations

import asyncio
import fcntl
from pathlib import Path

import msgspec

from common.config import Settings
from common.db import EmbeddedPostgres, resolve_database_url
from common.db import migrate as migrations
from common.errors import Conflict


def prepare_database(settings: Settings) -> tuple[Settings, EmbeddedPostgres | None]:
    """Start the embedded server when no URL is set, apply migrations, and pin the resolved URL."""
    url, embedded = asyncio.run(resolve_database_url(settings))
    if settings.auto_migrate:
        migrations.upgrade(url)
    return msgspec.structs.replace(settings, database_url=url), embedded


def ensure_local_storage_free(settings: Settings) -> None:
    """Refuse to start beside another process that holds Qdrant's local storage (one process at a time), before
    anything starts, instead of failing inside the services' start-up.

    It tries the lock qdrant-client takes (an exclusive ``flock`` on ``<storage>/.lock``, through portalocker)
    and lets it go at once; the services take it for good when they open their vector stores.

    Raises:
        Conflict: ``data_dir_in_use``.
    """
    if settings.qdrant_url:
        return
    storage = Path(settings.qdrant_path or settings.data_path / "qdrant")
    try:
        lock = (storage / ".lock").open("rb")
    except FileNotFoundError:
        return  # never opened: nobody holds it
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            where = (
                f"the Qdrant storage {storage.resolve()}"
                if settings.qdrant_path
                else f"the data directory {settings.data_path.resolve()}"
            )
            raise Conflict(
                f"{where} is in use by another ragu process (Qdrant's local mode allows one at a time); "
                "stop that process, or give this one another RAGU_DATA_DIR",
                code="data_dir_in_use",
            ) from None
