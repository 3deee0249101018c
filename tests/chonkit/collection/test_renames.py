"""A renamed document is cited under its new name in every collection and store that holds it, even when a
store is down at the time of the rename."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from qdrant_client import AsyncQdrantClient

from chonkit.document.storage import BlobStore
from chonkit.embedding.worker import EmbeddingWorker
from common.clients import SharedClients
from common.config import Settings
from common.db import SingleConnectionDatabase
from common.db.database import Connection
from common.vectors.qdrant import QdrantStore
from common.vectors.registry import VectorRegistry
from tests.chonkit.collection.test_collections_api import HANDBOOK, create_collection, embed, upload
from tests.chonkit.conftest import drain
from tests.support.documents import pdf


async def cited_names(chonkit: httpx.AsyncClient, collection_id: str) -> set[str]:
    search = await chonkit.post(f"/collections/{collection_id}/search", json={"query": "vacation days", "limit": 10})
    assert search.status_code == 200, search.text
    return {hit["document_name"] for hit in search.json()["hits"]}


async def rename(chonkit: httpx.AsyncClient, doc_id: str, name: str) -> None:
    response = await chonkit.patch(f"/documents/{doc_id}", json={"name": name})
    assert response.status_code == 200, response.text


async def test_a_renamed_document_is_cited_by_its_new_name_in_every_collection(
    chonkit: httpx.AsyncClient, worker: EmbeddingWorker
) -> None:
    collections = [await create_collection(chonkit, "qdrant"), await create_collection(chonkit, "pgvector")]
    doc_id = await upload(chonkit, "handbook.pdf", pdf(HANDBOOK))
    for collection in collections:
        await embed(chonkit, worker, collection["id"], doc_id)

    await rename(chonkit, doc_id, "Employee handbook 2025.pdf")
    await drain(worker)

    for collection in collections:
        assert await cited_names(chonkit, collection["id"]) == {"Employee handbook 2025.pdf"}
        again = await embed(chonkit, worker, collection["id"], doc_id)
        assert again["items"][0]["stage"] == "skipped"  # unchanged, and still named as it is now
        assert await cited_names(chonkit, collection["id"]) == {"Employee handbook 2025.pdf"}


@pytest.fixture
async def qdrant_down(
    settings: Settings, db: SingleConnectionDatabase, clients: SharedClients
) -> AsyncIterator[EmbeddingWorker]:
    """A worker whose Qdrant is a real client of a server that does not answer (nothing listens on port 9)."""
    unreachable = QdrantStore(AsyncQdrantClient(url="http://127.0.0.1:9", timeout=2, check_compatibility=False))
    vectors = VectorRegistry({"pgvector": clients.vectors.get("pgvector"), "qdrant": unreachable})
    yield EmbeddingWorker(db, BlobStore(settings.server.data_path / "documents"), clients.embedders, vectors)
    await unreachable.aclose()


async def test_a_rename_waits_out_a_store_that_is_down(
    chonkit: httpx.AsyncClient, worker: EmbeddingWorker, qdrant_down: EmbeddingWorker, conn: Connection
) -> None:
    collection = await create_collection(chonkit, "qdrant")
    doc_id = await upload(chonkit, "handbook.pdf", pdf(HANDBOOK))
    await embed(chonkit, worker, collection["id"], doc_id)

    await rename(chonkit, doc_id, "Renamed while Qdrant was down.pdf")
    assert await drain(qdrant_down) == 1
    pending = await conn.fetchrow("SELECT attempts, error FROM chonkit.pending_document_updates")
    assert pending is not None
    assert pending["attempts"] == 1
    assert "Qdrant is unavailable" in pending["error"]
    assert await cited_names(chonkit, collection["id"]) == {"handbook.pdf"}

    await conn.execute("UPDATE chonkit.pending_document_updates SET next_attempt_at = now()")  # the wait has passed
    await drain(worker)

    assert await cited_names(chonkit, collection["id"]) == {"Renamed while Qdrant was down.pdf"}
    assert await conn.fetchval("SELECT count(*) FROM chonkit.pending_document_updates") == 0
