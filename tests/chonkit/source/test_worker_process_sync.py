"""A sync requested through the API is run by a separate ``ragu worker`` process (the deployment where the web
process has no worker), from the folder listing to the embedded chunks."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from chonkit.app import create_app
from common.clients import SharedClients
from common.config import Settings, load_settings
from common.db import PoolDatabase
from tests.chonkit.conftest import AppClient, bearer
from tests.conftest import TEST_SECRET


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "allowed"
    (root / "notes").mkdir(parents=True)
    (root / "notes" / "badges.md").write_text("# Badges\n\nVisitor badges are returned at the front desk.\n")
    (root / "notes" / "parking.md").write_text("# Parking\n\nThe car park opens at seven in the morning.\n")
    return root


@pytest.fixture
async def committed(
    tmp_path: Path, database_url: str, folder: Path, clients: SharedClients, app_client: AppClient
) -> AsyncIterator[tuple[httpx.AsyncClient, Settings]]:
    """Chonkit with no worker of its own, on committed transactions (another process must see them)."""
    settings = load_settings(
        {}, data_dir=str(tmp_path / "data"), database_url=database_url, auth_hs256_secret=TEST_SECRET,
        source_roots=str(folder),
    )  # fmt: skip
    database = await PoolDatabase.connect(database_url, min_size=1, max_size=4)
    try:
        async with app_client(create_app(settings, database=database, clients=clients, worker=False)) as client:
            client.headers.update(bearer(settings))
            yield client, settings
    finally:
        async with database.transaction() as conn:
            await conn.execute("DELETE FROM chonkit.collections WHERE name = 'Worker_synced'")
            await conn.execute("DELETE FROM chonkit.documents WHERE name IN ('badges.md', 'parking.md')")
        await database.aclose()


def _start_worker(settings: Settings, database_url: str, folder: Path, log: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGU_")}
    env.update(
        DATABASE_URL=database_url, RAGU_DATA_DIR=settings.server.data_dir, RAGU_AUTH_HS256_SECRET=TEST_SECRET,
        RAGU_SOURCE_ROOTS=str(folder), RAGU_WORKER_HEARTBEAT_SECONDS="0.3", RAGU_AUTO_MIGRATE="false",
    )  # fmt: skip
    with log.open("ab") as stderr:  # the child keeps its own copy of the descriptor
        return subprocess.Popen([sys.executable, "-m", "ragu.cli", "worker"], env=env, stderr=stderr)


async def test_a_separate_worker_process_runs_a_requested_sync(
    committed: tuple[httpx.AsyncClient, Settings], folder: Path, database_url: str, tmp_path: Path
) -> None:
    admin, settings = committed
    collection = (await admin.post("/collections", json={"name": "Worker_synced"})).json()
    spec = {"kind": "folder", "path": str(folder / "notes")}
    source = (await admin.post(f"/collections/{collection['id']}/sources", json={"name": "Notes", "spec": spec})).json()
    run = (await admin.post(f"/collections/{collection['id']}/sources/{source['id']}/sync")).json()

    log = tmp_path / "worker.log"
    worker = _start_worker(settings, database_url, folder, log)
    try:
        deadline = time.monotonic() + 60
        while True:
            url = f"/collections/{collection['id']}/sources/{source['id']}/runs/{run['id']}"
            run = (await admin.get(url)).json()
            if run["status"] in ("done", "failed", "cancelled") or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.5)
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    assert run["status"] == "done", log.read_text()[-2000:]
    assert (run["report"]["added"], run["report"]["failed"]) == (2, 0)
    documents = (await admin.get(f"/collections/{collection['id']}/documents")).json()
    assert sorted(d["name"] for d in documents) == ["badges.md", "parking.md"]
