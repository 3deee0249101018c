"""Only kappi listens for vector changes: chonkit and ``ragu worker`` open no LISTEN connection; kappi opens one
for its in-memory copies, also when it shares ``ragu serve``'s stores with chonkit.

Each check reads ``pg_stat_activity`` on the real server while the service runs: a connection that listens
shows ``LISTEN ...`` as its last statement.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import asyncpg
import httpx
import pytest
from litestar import Litestar

from chonkit.app import create_app as create_chonkit
from common.clients import SharedClients
from common.config import Settings
from common.db import SingleConnectionDatabase
from common.embedders.base import EmbedderRegistry
from kappi.app import create_app as create_kappi

AppClient = Callable[[Litestar], AbstractAsyncContextManager[httpx.AsyncClient]]

QUIET_SECONDS = 2.0
"""How long a service must go without listening; kappi's own listener shows up well within it."""


async def activity(database_url: str) -> tuple[int, int]:
    """Other sessions on the test database, and how many of them listen."""
    conn = await asyncpg.connect(database_url)
    try:
        row = await conn.fetchrow(
            "SELECT count(*) AS sessions, count(*) FILTER (WHERE query LIKE 'LISTEN%') AS listening "
            "FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    finally:
        await conn.close()
    assert row is not None
    return row["sessions"], row["listening"]


async def listeners_seen(database_url: str, *, seconds: float) -> int:
    """The most listening sessions seen over ``seconds``."""
    most, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        most = max(most, (await activity(database_url))[1])
        await asyncio.sleep(0.05)
    return most


async def until_listeners(database_url: str, count: int) -> None:
    deadline = time.monotonic() + 15
    while (await activity(database_url))[1] != count:
        assert time.monotonic() < deadline, f"never {count} listening sessions"
        await asyncio.sleep(0.05)


@pytest.fixture
def own_clients(settings: Settings, embedders: EmbedderRegistry) -> SharedClients:
    """Clients that open their vector stores from the settings, as a service's process does."""
    return SharedClients(settings, embedders=embedders)


async def test_chonkit_opens_no_listening_connection(
    settings: Settings, db: SingleConnectionDatabase, own_clients: SharedClients, app_client: AppClient
) -> None:
    assert (await activity(settings.database.url or ""))[1] == 0
    async with app_client(create_chonkit(settings, database=db, clients=own_clients, worker=True)) as client:
        assert (await client.get("/health")).status_code == 200
        assert own_clients.vectors.get("pgvector").provider == "pgvector"  # the stores are open
        assert await listeners_seen(settings.database.url or "", seconds=QUIET_SECONDS) == 0


async def test_kappi_listens_once_also_beside_chonkit(
    settings: Settings, db: SingleConnectionDatabase, own_clients: SharedClients, app_client: AppClient
) -> None:
    """As ``ragu serve`` hosts them: one set of stores; kappi's copies listen, chonkit adds nothing."""
    url = settings.database.url or ""
    async with (
        app_client(create_chonkit(settings, database=db, clients=own_clients, worker=True)),
        app_client(create_kappi(settings, database=db, clients=own_clients)),
    ):
        await until_listeners(url, 1)
        assert await listeners_seen(url, seconds=QUIET_SECONDS) == 1
    assert (await activity(url))[1] == 0  # closed with the app


async def test_ragu_worker_opens_no_listening_connection(database_url: str, tmp_path: Path) -> None:
    sessions_before, _ = await activity(database_url)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGU_") and k != "DATABASE_URL"}
    env |= {"DATABASE_URL": database_url, "RAGU_DATA_DIR": str(tmp_path / "data"), "RAGU_LOCAL_EMBEDDER_THREADS": "1"}
    worker = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "from ragu.cli import main; main(['worker'])", env=env, stderr=asyncio.subprocess.PIPE
    )
    try:
        assert worker.stderr is not None
        log: list[bytes] = []
        while not (log and b"worker " in log[-1] and log[-1].rstrip().endswith(b" started")):
            log.append(await asyncio.wait_for(worker.stderr.readline(), 60))
            assert log[-1], f"ragu worker exited before starting: {b''.join(log).decode()}"
        sessions, _ = await activity(database_url)
        assert sessions > sessions_before  # the worker's pools are connected
        assert await listeners_seen(database_url, seconds=QUIET_SECONDS) == 0
    finally:
        if worker.returncode is None:
            worker.send_signal(signal.SIGTERM)
        await asyncio.wait_for(worker.wait(), 30)
