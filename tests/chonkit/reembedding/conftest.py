"""Chonkit with two local embedding providers (MiniLM and hashed words), so that a collection can change model."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

import schemas
from chonkit.app import create_app
from chonkit.document.storage import BlobStore
from chonkit.embedding.worker import EmbeddingWorker
from common.clients import SharedClients
from common.config import Settings
from common.db import SingleConnectionDatabase
from common.db.database import Pool
from common.embedders.base import Embedder, EmbedderRegistry, EmbedderSpec
from common.vectors.registry import VectorRegistry
from tests.chonkit.conftest import AppClient, bearer, drain
from tests.support.documents import pdf
from tests.support.words_embedder import WordsProvider

OLD = {"embedding_provider": "words", "model": "hashed-words-64a"}
SAME_DIMENSION = {"embedding_provider": "words", "model": "hashed-words-64b"}
WIDER = {"embedding_provider": "words", "model": "hashed-words-96"}
PAGES = [
    [
        f"Document {i}, part {p}. Vacation policy number {i}: employees get {20 + i} days of leave. "
        f"Expenses of kind {p} are reimbursed within {10 + p} days. " * 3
        for p in range(3)
    ]
    for i in range(4)
]


@dataclass(frozen=True, slots=True)
class Loaded:
    """The ``local`` provider serving an embedder already loaded (the session's MiniLM)."""

    embedder: Embedder
    name: str = "local"

    @property
    def specs(self) -> Sequence[EmbedderSpec]:
        e = self.embedder
        return [EmbedderSpec(provider=e.provider, model=e.model, dimension=e.dimension, max_tokens=e.max_tokens)]

    def create(self, spec: EmbedderSpec) -> Embedder:
        return self.embedder


@pytest.fixture(scope="session")
def two_providers(embedders: EmbedderRegistry) -> EmbedderRegistry:
    """MiniLM (the session's, loaded once) beside the hashed-words models."""
    return EmbedderRegistry([Loaded(embedders.get("local", "all-MiniLM-L6-v2")), WordsProvider()])


@pytest.fixture
async def versions_dropped(vector_pool: Pool) -> AsyncIterator[None]:
    """New versions are hidden from ``list_identities`` (which the ``vectors`` fixture cleans up by): drop any left."""
    query = "SELECT tablename FROM pg_tables WHERE schemaname = 'vectors' AND tablename LIKE 'Ragu_version_%'"
    async with vector_pool.acquire() as conn:
        before = {r["tablename"] for r in await conn.fetch(query)}
    yield
    async with vector_pool.acquire() as conn:
        for name in {r["tablename"] for r in await conn.fetch(query)} - before:
            await conn.execute(
                f'DROP TABLE IF EXISTS vectors."{name}", vectors_lexical."{name}", vectors_postings."{name}"'
            )


@pytest.fixture
def reembed_clients(settings: Settings, two_providers: EmbedderRegistry, vectors: VectorRegistry) -> SharedClients:
    return SharedClients(settings, embedders=two_providers, vectors=vectors)


@pytest.fixture
async def chonkit2(
    settings: Settings,
    db: SingleConnectionDatabase,
    reembed_clients: SharedClients,
    app_client: AppClient,
    versions_dropped: None,
) -> AsyncIterator[httpx.AsyncClient]:
    async with app_client(create_app(settings, database=db, clients=reembed_clients, worker=False)) as client:
        client.headers.update(bearer(settings))
        yield client


@pytest.fixture
def worker2(settings: Settings, db: SingleConnectionDatabase, reembed_clients: SharedClients) -> EmbeddingWorker:
    return EmbeddingWorker(
        db,
        BlobStore(settings.server.data_path / "documents"),
        reembed_clients.embedders,
        reembed_clients.vectors,
        heartbeat_seconds=0.2,
    )


async def embedded_collection(
    chonkit: httpx.AsyncClient, worker: EmbeddingWorker, provider: str, name: str, documents: int = 4
) -> dict[str, Any]:
    """A collection of ``documents`` PDFs embedded with :data:`OLD`."""
    created = await chonkit.post("/collections", json={"name": name, "vector_provider": provider, **OLD})
    assert created.status_code == 201, created.text
    ids = []
    for i in range(documents):
        upload = await chonkit.post(
            "/documents", files=[("files", (f"reembed-{name}-{i}.pdf", pdf(PAGES[i % 4]), "application/pdf"))]
        )
        ids.append(upload.json()["results"][0]["document"]["id"])
    job = await chonkit.post(f"/collections/{created.json()['id']}/documents", json={"document_ids": ids})
    assert job.status_code == 202, job.text
    await drain(worker)
    collection: dict[str, Any] = created.json()
    return collection


def valid_identity(stored: dict[str, Any] | None) -> dict[str, Any]:
    """The identity as stored, checked against the published schema."""
    assert stored is not None
    schemas.validate("identity", stored)
    return stored
