"""A real worker process killed with SIGKILL mid-job: a second worker takes over and the collection
ends with exactly the expected vectors — none duplicated, none missing."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from chonkit.app import create_app
from common.clients import SharedClients
from common.config import Settings, reveal
from common.db import PoolDatabase
from tests.chonkit.conftest import AppClient, bearer
from tests.support.documents import pdf

DOCUMENTS = 24


@pytest.fixture
async def committed(
    settings: Settings, database_url: str, clients: SharedClients, app_client: AppClient
) -> AsyncIterator[tuple[httpx.AsyncClient, PoolDatabase]]:
    """Chonkit on real, committed transactions (worker processes cannot see a test's open transaction)."""
    database = await PoolDatabase.connect(database_url, min_size=1, max_size=4)
    try:
        async with app_client(create_app(settings, database=database, clients=clients, worker=False)) as client:
            client.headers.update(bearer(settings))
            yield client, database
    finally:
        async with database.transaction() as conn:
            await conn.execute("DELETE FROM chonkit.collections WHERE name LIKE 'Crash_%'")
            await conn.execute("DELETE FROM chonkit.documents WHERE name LIKE 'crash-%'")
        await database.aclose()


def _start_worker(settings: Settings, database_url: str, log: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGU_")}
    env.update(
        DATABASE_URL=database_url,
        RAGU_DATA_DIR=settings.server.data_dir,
        RAGU_AUTH_HS256_SECRET=reveal(settings.auth.hs256_secret) or "",
        RAGU_WORKER_HEARTBEAT_SECONDS="0.3",
        RAGU_AUTO_MIGRATE="false",
    )
    with log.open("ab") as stderr:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(
            [sys.executable, "-m", "ragu.cli", "worker"], env=env, stdout=subprocess.DEVNULL, stderr=stderr
        )


async def _job(client: httpx.AsyncClient, job_id: str) -> dict[str, object]:
    job: dict[str, object] = (await client.get(f"/jobs/{job_id}")).json()
    return job


async def test_sigkilled_worker_is_taken_over_without_duplicates(
    committed: tuple[httpx.AsyncClient, PoolDatabase], settings: Settings, database_url: str, tmp_path: Path
) -> None:
    client, database = committed
    collection = (
        await client.post("/collections", json={"name": f"Crash_{uuid.uuid4().hex[:6]}", "vector_provider": "pgvector"})
    ).json()
    ids = []
    for i in range(DOCUMENTS):
        pages = [f"Document {i}, page {p}. " + f"Sentences about topic number {i * 7 + p}. " * 40 for p in range(4)]
        upload = await client.post("/documents", files=[("files", (f"crash-{i}.pdf", pdf(pages), "application/pdf"))])
        ids.append(upload.json()["results"][0]["document"]["id"])
    job = (await client.post(f"/collections/{collection['id']}/documents", json={"document_ids": ids})).json()["job"]

    log = tmp_path / "workers.log"
    first = _start_worker(settings, database_url, log)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and first.poll() is None:
            progress = (await _job(client, job["id"]))["progress"]
            assert isinstance(progress, dict)
            if progress.get("done", 0) >= 2 and any(
                progress.get(s, 0) for s in ("parsing", "chunking", "embedding", "writing")
            ):
                break
            await asyncio.sleep(0.05)
        else:
            pytest.fail(f"the worker never got going: {log.read_text()[-2000:]}")
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
        killed_progress = (await _job(client, job["id"]))["progress"]
    finally:
        if first.poll() is None:
            first.kill()

    second = _start_worker(settings, database_url, log)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            final = await _job(client, job["id"])
            if final["status"] in {"done", "failed"}:
                break
            await asyncio.sleep(0.2)
        else:
            pytest.fail(f"the second worker did not finish the job: {log.read_text()[-2000:]}")
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=30)

    assert final["status"] == "done", final
    assert killed_progress.get("done", 0) < DOCUMENTS  # type: ignore[union-attr]
    taken_over = [i for i in final["items"] if i["attempts"] > 1]  # type: ignore[union-attr]
    assert taken_over, "no item was in flight when the worker died"
    detail = (await client.get(f"/collections/{collection['id']}")).json()
    expected = sum(d["chunk_count"] for d in detail["documents"])
    assert len(detail["documents"]) == DOCUMENTS
    assert detail["vector_count"] == expected
    async with database.transaction() as conn:
        table = f'vectors."{collection["name"]}"'
        duplicates = await conn.fetchval(
            f"SELECT count(*) FROM (SELECT payload->>'document_id', payload->>'chunk_index' FROM {table} "
            "GROUP BY 1, 2 HAVING count(*) > 1) d"
        )
    assert duplicates == 0
