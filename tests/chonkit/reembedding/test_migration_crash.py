"""A worker process killed with SIGKILL in the middle of a model change: the collection is untouched (identity,
chunks, model), and another worker resumes the change to the end — no chunk duplicated, none missing. And a worker
killed between the store's swap and chonkit's record of it: the next one only records it."""

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
from typing import Any

import httpx
import pytest

from chonkit.app import create_app
from chonkit.document.storage import BlobStore
from chonkit.embedding.worker import EmbeddingWorker
from common.clients import SharedClients
from common.config import Settings, reveal
from common.db import PoolDatabase
from common.embedders.base import EmbedderRegistry
from common.vectors.registry import VectorRegistry
from tests.chonkit.conftest import AppClient, bearer, drain
from tests.chonkit.reembedding.conftest import OLD, SAME_DIMENSION, embedded_collection, valid_identity

DOCUMENTS = 12
IN_FLIGHT = ("parsing", "chunking", "embedding", "writing")


@pytest.fixture
async def committed(
    settings: Settings,
    database_url: str,
    two_providers: EmbedderRegistry,
    vectors: VectorRegistry,
    app_client: AppClient,
    versions_dropped: None,
) -> AsyncIterator[tuple[httpx.AsyncClient, EmbeddingWorker]]:
    """Chonkit and an in-process worker on committed transactions (a worker process sees them)."""
    database = await PoolDatabase.connect(database_url, min_size=1, max_size=4)
    clients = SharedClients(settings, embedders=two_providers, vectors=vectors)
    worker = EmbeddingWorker(
        database, BlobStore(settings.server.data_path / "documents"), two_providers, vectors, heartbeat_seconds=0.2
    )
    try:
        async with app_client(create_app(settings, database=database, clients=clients, worker=False)) as client:
            client.headers.update(bearer(settings))
            yield client, worker
    finally:
        async with database.transaction() as conn:
            for row in await conn.fetch("SELECT name FROM chonkit.collections WHERE name LIKE 'Crashed_%'"):
                await vectors.get("pgvector").drop_collection(row["name"])
            await conn.execute("DELETE FROM chonkit.collections WHERE name LIKE 'Crashed_%'")
            await conn.execute("DELETE FROM chonkit.documents WHERE name LIKE 'reembed-Crashed_%'")
        await database.aclose()


def start_worker(settings: Settings, database_url: str, log: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGU_")}
    env.update(
        DATABASE_URL=database_url,
        RAGU_DATA_DIR=settings.server.data_dir,
        RAGU_AUTH_HS256_SECRET=reveal(settings.auth.hs256_secret) or "",
        RAGU_WORKER_HEARTBEAT_SECONDS="0.3",
    )
    with log.open("ab") as stderr:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.support.reembed_worker"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            cwd=Path(__file__).parents[3],
        )


async def chunk_models(vectors: VectorRegistry, name: str) -> tuple[int, set[str], int]:
    """Chunks, their models, and (document, chunk index) pairs held twice, read straight from the table."""
    store = vectors.get("pgvector")
    async with store.pool.acquire() as conn:  # type: ignore[attr-defined]
        rows = await conn.fetch(
            f"SELECT payload->>'model' AS model, payload->>'document_id' AS d, payload->>'chunk_index' AS i "
            f"FROM vectors.\"{name}\" WHERE id <> '00000000-0000-0000-0000-000000000000'"
        )
    pairs = [(r["d"], r["i"]) for r in rows]
    return len(rows), {r["model"] for r in rows}, len(pairs) - len(set(pairs))


async def test_a_sigkilled_migration_leaves_the_collection_intact_and_resumes(
    committed: tuple[httpx.AsyncClient, EmbeddingWorker],
    vectors: VectorRegistry,
    settings: Settings,
    database_url: str,
    tmp_path: Path,
) -> None:
    client, worker = committed
    name = f"Crashed_{uuid.uuid4().hex[:6]}"
    collection = await embedded_collection(client, worker, "pgvector", name, documents=DOCUMENTS)
    before = valid_identity(await vectors.get("pgvector").read_identity(name))
    chunks, models, _ = await chunk_models(vectors, name)
    assert models == {OLD["model"]}
    started = (await client.put(f"/collections/{collection['id']}/embedding", json=SAME_DIMENSION)).json()
    job_id = started["job"]["id"]

    log = tmp_path / "worker.log"
    first = start_worker(settings, database_url, log)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and first.poll() is None:
            progress: dict[str, int] = (await client.get(f"/jobs/{job_id}")).json()["progress"]
            if progress.get("done", 0) >= 2 and any(progress.get(s, 0) for s in IN_FLIGHT):
                break
            await asyncio.sleep(0.05)
        else:
            pytest.fail(f"the worker never got going: {log.read_text()[-2000:]}")
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
    finally:
        if first.poll() is None:
            first.kill()

    killed = (await client.get(f"/collections/{collection['id']}/embedding")).json()
    assert killed["migration"]["state"] == "building"
    assert killed["job"]["progress"].get("done", 0) < DOCUMENTS
    # Readers see the collection exactly as before.
    assert await vectors.get("pgvector").read_identity(name) == before
    assert await chunk_models(vectors, name) == (chunks, {OLD["model"]}, 0)

    await asyncio.sleep(1.5)  # the dead worker's heartbeat goes stale (six of the resuming worker's beats)
    await drain(worker)

    status = (await client.get(f"/collections/{collection['id']}/embedding")).json()
    assert status["migration"]["state"] == "done", status
    assert [i for i in status["job"]["items"] if i["attempts"] > 1], "no document was in flight when it died"
    after = valid_identity(await vectors.get("pgvector").read_identity(name))
    assert after == {**before, "model": SAME_DIMENSION["model"]}
    assert await chunk_models(vectors, name) == (chunks, {SAME_DIMENSION["model"]}, 0)
    assert not await vectors.get("pgvector").collection_exists(started["migration"]["version"])


async def test_a_worker_killed_between_the_swap_and_its_record_is_finished_by_the_next(
    committed: tuple[httpx.AsyncClient, EmbeddingWorker], vectors: VectorRegistry
) -> None:
    client, worker = committed
    name = f"Crashed_{uuid.uuid4().hex[:6]}"
    collection = await embedded_collection(client, worker, "pgvector", name, documents=2)
    started: dict[str, Any] = (
        await client.put(f"/collections/{collection['id']}/embedding", json=SAME_DIMENSION)
    ).json()
    while (await client.get(f"/jobs/{started['job']['id']}")).json()["progress"].get("done", 0) < 2:
        assert await worker.run_once()
    # What a worker killed right after the store's swap leaves: the store swapped, chonkit's rows not.
    await vectors.get("pgvector").swap_version(name, started["migration"]["version"])
    assert (await client.get(f"/collections/{collection['id']}")).json()["collection"]["model"] == OLD["model"]

    await drain(worker)

    detail = (await client.get(f"/collections/{collection['id']}")).json()
    assert detail["collection"]["model"] == SAME_DIMENSION["model"]
    assert detail["identity"]["valid"]
    assert detail["identity"]["matches_database"]
    assert (await client.get(f"/collections/{collection['id']}/embedding")).json()["migration"]["state"] == "done"
