"""Issue #26, item 4: a removal wins over an embedding of the same document still queued or running, whatever the
timing. Before, ``POST /collections/{id}/documents/remove`` answered ``{"job": null, "already_queued": [...]}`` for a
document its collection's embedding job still held, and the job then wrote the document in: pulled out by an admin,
a confidential document stayed readable.

The property, over every point where a removal can land in an embedding's life — before the claim, after it, during
parsing, chunking and embedding, just before the write (with a second worker free to run the removal meanwhile),
while the write holds the collection's lock, and after the write — with the real worker on committed transactions
of the real PostgreSQL and a real (in-memory) Qdrant: once the jobs are done, the removed document has no vectors,
no row in the collection and no search hits, while its job-mate is embedded.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest

from chonkit.app import create_app
from chonkit.document.isolated import chunk_isolated, parse_isolated
from chonkit.document.storage import BlobStore
from chonkit.embedding.worker import EmbeddingWorker
from chonkit.jobs.repository import JobRepository
from common.clients import SharedClients
from common.config import Settings
from common.db import PoolDatabase
from common.embedders.local import LocalEmbedder
from common.vectors.registry import VectorRegistry
from tests.chonkit.conftest import AppClient, bearer

PREFIX = "Removal_"
PIPELINE = "chonkit.ingest.pipeline"
HEARTBEAT = 0.2
POINTS = [
    "before_claim",
    "claimed",
    "parsed",
    "chunking",
    "embedding",
    "before_write",
    "before_write_other_worker",
    "writing",
    "written",
]
"""Where the removal lands in the first document's embedding (see :func:`test_a_removal_wins_wherever_it_lands`)."""
EXPECTED_STAGE = {
    "before_claim": "queued",
    "claimed": "parsing",
    "parsed": "parsing",
    "chunking": "chunking",
    "embedding": "embedding",
    "before_write": "writing",
    "before_write_other_worker": "writing",
}
"""The stage the removal finds the embedding in, and cancels (none once the write committed)."""


class Stack:
    def __init__(self, client: httpx.AsyncClient, db: PoolDatabase, workers: list[EmbeddingWorker]) -> None:
        self.client = client
        self.db = db
        self.workers = workers


@pytest.fixture
async def stack(
    settings: Settings, database_url: str, clients: SharedClients, app_client: AppClient
) -> AsyncIterator[Stack]:
    """Chonkit and two workers on committed transactions of their own, so that the collection's lock, row locks and
    SKIP LOCKED act as in production (the ``db`` fixture serialises everything on one connection)."""
    database = await PoolDatabase.connect(database_url, min_size=1, max_size=6)
    blobs = BlobStore(settings.server.data_path / "documents")
    workers = [
        EmbeddingWorker(database, blobs, clients.embedders, clients.vectors, name=f"w{n}", heartbeat_seconds=HEARTBEAT)
        for n in (1, 2)
    ]
    try:
        async with app_client(create_app(settings, database=database, clients=clients, worker=False)) as client:
            client.headers.update(bearer(settings))
            yield Stack(client, database, workers)
    finally:
        async with database.transaction() as conn:
            await conn.execute(f"DELETE FROM chonkit.collections WHERE name LIKE '{PREFIX}%'")
            await conn.execute("DELETE FROM chonkit.documents WHERE name LIKE 'removal-%'")
        await database.aclose()


async def settle(stack: Stack, *, within: float = 30) -> None:
    """Run the workers until no job item is left queued or running."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        worked = False
        for worker in stack.workers:
            worked = await worker.run_once() or worked
        if not worked:
            async with stack.db.transaction() as conn:
                if not sum((await JobRepository(conn).pending_by_stage()).values()):
                    return
            await asyncio.sleep(0.05)
    raise AssertionError("the jobs did not finish")


async def upload(client: httpx.AsyncClient, name: str) -> str:
    text = f"# {name}\n\nConfidential memo {uuid.uuid4().hex}. The merger closes in March; tell no one.\n"
    response = await client.post("/documents", files=[("files", (f"{name}.md", text.encode(), "text/markdown"))])
    assert response.status_code == 201, response.text
    doc_id: str = response.json()["results"][0]["document"]["id"]
    return doc_id


async def in_collection(stack: Stack, vectors: VectorRegistry, collection: dict[str, Any], doc_id: str) -> list[str]:
    """Every way the document could still be in the collection, named; empty when it is gone."""
    found = []
    if count := await vectors.get("qdrant").count(collection["name"], document_id=doc_id):
        found.append(f"{count} vectors")
    detail = (await stack.client.get(f"/collections/{collection['id']}")).json()
    if doc_id in [d["document_id"] for d in detail["documents"]]:
        found.append("a document row")
    search = await stack.client.post(
        f"/collections/{collection['id']}/search", json={"query": "merger", "document_ids": [doc_id]}
    )
    assert search.status_code == 200, search.text
    if hits := search.json()["hits"]:
        found.append(f"{len(hits)} search hits")
    return found


@pytest.mark.parametrize("point", POINTS)
async def test_a_removal_wins_wherever_it_lands(
    stack: Stack, vectors: VectorRegistry, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    client = stack.client
    created = await client.post(
        "/collections", json={"name": f"{PREFIX}{uuid.uuid4().hex[:8]}", "vector_provider": "qdrant"}
    )
    assert created.status_code == 201, created.text
    collection = created.json()
    removed, kept = await upload(client, f"removal-{point}-pulled"), await upload(client, f"removal-{point}-kept")
    queued = await client.post(f"/collections/{collection['id']}/documents", json={"document_ids": [removed, kept]})
    assert queued.status_code == 202, queued.text
    embed_job = queued.json()["job"]["id"]

    answers: list[httpx.Response] = []
    waiting: list[asyncio.Task[None]] = []

    async def remove() -> None:
        url = f"/collections/{collection['id']}/documents/remove"
        answers.append(await client.post(url, json={"document_ids": [removed]}))

    async def land(at: str) -> None:
        """The removal, if this is the point (once: the first document reaches each point first)."""
        if point != at or answers or waiting:
            return
        if at == "writing":  # inside the write, under the collection's lock: the removal must wait for its commit
            waiting.append(asyncio.create_task(remove()))
            await asyncio.sleep(0.5)
            assert not waiting[0].done(), "the removal did not wait for the write holding the collection's lock"
            return
        await remove()
        if at == "before_write_other_worker":
            while await stack.workers[1].run_once():  # a second worker, free to run the removal now if it may
                pass

    def before(at: str, step: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def wrapped(*args: Any, **kwargs: Any) -> Any:
            await land(at)
            return await step(*args, **kwargs)

        return wrapped

    def after(at: str, step: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def wrapped(*args: Any, **kwargs: Any) -> Any:
            result = await step(*args, **kwargs)
            await land(at)
            return result

        return wrapped

    first = stack.workers[0]
    monkeypatch.setattr(f"{PIPELINE}.parse_isolated", before("claimed", after("parsed", parse_isolated)))
    monkeypatch.setattr(f"{PIPELINE}.chunk_isolated", before("chunking", chunk_isolated))
    monkeypatch.setattr(LocalEmbedder, "embed_documents", before("embedding", LocalEmbedder.embed_documents))
    write = first._pipeline._write
    monkeypatch.setattr(first._pipeline, "_write", before("before_write", before("before_write_other_worker", write)))
    monkeypatch.setattr(
        JobRepository, "document_name_for_write", before("writing", JobRepository.document_name_for_write)
    )

    await land("before_claim")
    assert await first.run_once()  # the first document, with the removal landing where the point says
    await asyncio.gather(*waiting)
    await land("written")
    assert len(answers) == 1, f"the removal never landed at {point}"
    await settle(stack)

    answer = answers[0]
    assert answer.status_code == 202, answer.text
    assert await in_collection(stack, vectors, collection, removed) == [], f"removal landing at {point} was lost"
    body = answer.json()
    assert body["job"] is not None, body  # the removal is queued, never skipped as "already queued"
    assert body["already_queued"] == []
    superseded = [(s["job_id"], s["document_id"], s["stage"]) for s in body["superseded"]]
    expected = [(embed_job, removed, EXPECTED_STAGE[point])] if point in EXPECTED_STAGE else []
    assert superseded == expected
    removal_job = (await client.get(f"/jobs/{body['job']['id']}")).json()
    assert removal_job["status"] == "done", removal_job

    assert await in_collection(stack, vectors, collection, kept) == ["1 vectors", "a document row", "1 search hits"]
    items = {i["document_id"]: i for i in (await client.get(f"/jobs/{embed_job}")).json()["items"]}
    assert items[kept]["stage"] == "done"
    if point in EXPECTED_STAGE:
        assert (items[removed]["stage"], items[removed]["error_code"]) == ("cancelled", "document_removed")


async def test_a_document_deleted_while_its_first_embedding_writes_leaves_no_vectors(
    stack: Stack, vectors: VectorRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``DELETE /documents/{id}`` while a worker writes the document into a collection for the first time: the
    deletion waits for the write (the write holds the document's row), and must then take what it wrote."""
    client = stack.client
    created = await client.post(
        "/collections", json={"name": f"{PREFIX}{uuid.uuid4().hex[:8]}", "vector_provider": "qdrant"}
    )
    collection = created.json()
    doc_id = await upload(client, "removal-deleted-while-writing")
    queued = await client.post(f"/collections/{collection['id']}/documents", json={"document_ids": [doc_id]})
    assert queued.status_code == 202, queued.text
    deletions: list[asyncio.Task[httpx.Response]] = []

    async def delete_meanwhile(self: JobRepository, document_id: uuid.UUID) -> str | None:
        name = await name_for_write(self, document_id)  # the row is now held until the write commits
        deletions.append(asyncio.create_task(client.delete(f"/documents/{doc_id}")))
        await asyncio.sleep(0.5)
        assert not deletions[0].done(), "the deletion did not wait for the write"
        return name

    name_for_write = JobRepository.document_name_for_write
    monkeypatch.setattr(JobRepository, "document_name_for_write", delete_meanwhile)
    assert await stack.workers[0].run_once()
    deleted = await deletions[0]
    await settle(stack)

    assert deleted.status_code == 204, deleted.text
    assert await in_collection(stack, vectors, collection, doc_id) == []
