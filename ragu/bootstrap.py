"""Getting a process ready to work: the database resolved (embedded by default) and migrated."""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
from pathlib import Path

from common.config import Settings
from common.db import EmbeddedPostgres, resolve_database_url
from common.db import migrate as migrations
from common.errors import Conflict

logger = logging.getLogger(__name__)

DATA_DIR_MARK = "ragu-data-dir.txt"
"""The file that makes a folder a Ragu data directory, written at every start that lacks it."""
_EARLIER_MARKS = ("auth/dev-secret", "postgres/PG_VERSION")
"""What a data directory made before :data:`DATA_DIR_MARK` holds (the signing secret, the embedded database)."""
_MARK_TEXT = """This folder is a Ragu data directory: `ragu serve` keeps this platform's embedded database, stored
documents, signing secret and models here. Start `ragu serve` with RAGU_DATA_DIR set to this folder (or from the
folder that holds it, for the default `.ragu`) to use this platform.
"""


def is_data_dir(path: Path) -> bool:
    """Whether ``path`` holds a Ragu platform: its mark, or what a first start made before there was one."""
    return any(os.path.isfile(path / mark) for mark in (DATA_DIR_MARK, *_EARLIER_MARKS))


def claim_data_dir(settings: Settings) -> None:
    """Start on the data directory: an existing one silently; a new one (made here, or a folder without a platform
    in it) said in one line with its absolute path, since a ``ragu serve`` started from another folder than usual
    makes a second, empty platform (database, signing secret, model) there; and never a new one inside another
    platform's data directory. Marks it, so later starts know it.

    Raises:
        Conflict: ``data_dir_inside_data_dir``, before anything is created.
    """
    path = settings.server.data_path.resolve()
    if is_data_dir(path):
        _mark(path)
        return
    outer = next((parent for parent in path.parents if is_data_dir(parent)), None)
    if outer is not None:
        default = f" or start ragu serve in {outer.parent}" if outer.name == Settings().server.data_dir else ""
        raise Conflict(
            f"refusing to create a new data directory {path} inside the data directory {outer} of another platform: "
            f"to use that platform, set RAGU_DATA_DIR={outer}{default}; for a new one, choose a folder outside it",
            code="data_dir_inside_data_dir",
        )
    logger.info(
        "new data directory %s (no platform was there; a platform started elsewhere keeps its data in its own folder)",
        path,
    )
    path.mkdir(parents=True, exist_ok=True)
    _mark(path)


def _mark(path: Path) -> None:
    mark = path / DATA_DIR_MARK
    if not mark.exists():
        mark.write_text(_MARK_TEXT, encoding="utf-8")


def prepare_database(settings: Settings) -> tuple[Settings, EmbeddedPostgres | None]:
    """Start the embedded server when no URL is set, apply migrations, and pin the resolved URL."""
    url, embedded = asyncio.run(resolve_database_url(settings))
    if settings.database.auto_migrate:
        migrations.upgrade(url)
    return settings.with_(database_url=url), embedded


def ensure_local_storage_free(settings: Settings) -> None:
    """Refuse to start beside another process that holds Qdrant's local storage (one process at a time), before
    anything starts, instead of failing inside the services' start-up.

    It tries the lock qdrant-client takes (an exclusive ``flock`` on ``<storage>/.lock``, through portalocker)
    and lets it go at once; the services take it for good when they open their vector stores.

    Raises:
        Conflict: ``data_dir_in_use``.
    """
    if settings.qdrant.url:
        return
    storage = Path(settings.qdrant.path or settings.server.data_path / "qdrant")
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
                if settings.qdrant.path
                else f"the data directory {settings.server.data_path.resolve()}"
            )
            raise Conflict(
                f"{where} is in use by another ragu process (the embedded Qdrant allows one at a time); "
                "stop that process, or give this one another RAGU_DATA_DIR",
                code="data_dir_in_use",
            ) from None
