"""Every vector adapter behind one fixture, so the contract suite runs unchanged against each of them.

``store`` (and ``provider``, the harness around it) is parametrised over :data:`PROVIDERS`: one async
factory per provider that yields a :class:`Harness`. To add a provider, write its factory below and add
one entry; nothing else changes. Weaviate needs a server, so its tests are skipped, saying so, unless
``WEAVIATE_URL`` is set.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import pytest

from common.db.database import Pool, init_connection
from common.vectors.base import VectorStore


@dataclass
class Harness:
    """A provider's store plus what the suite cannot do through the port."""

    store: VectorStore
    make_foreign_collection: Callable[[str], Awaitable[None]]
    """Create collection ``name`` the way another application would: it holds data but no identity record."""
    created: list[str] = field(default_factory=list)

    def new_name(self, prefix: str = "Contract") -> str:
        """A collection name no other test uses; the fixture drops it afterwards."""
        name = f"{prefix}_{uuid.uuid4().hex[:8]}"
        self.created.append(name)
        return name


ProviderFactory = Callable[[pytest.FixtureRequest], AbstractAsyncContextManager[Harness]]


@pytest.fixture(scope="session")
async def pgvector_pool(database_url: str) -> AsyncIterator[Pool]:
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=4, init=init_connection)
    try:
        yield pool
    finally:
        await pool.close()


@asynccontextmanager
async def pgvector_harness(request: pytest.FixtureRequest) -> AsyncIterator[Harness]:
    from common.vectors.pgvector import PgVectorStore

    pool: Pool = request.getfixturevalue("pgvector_pool")

    async def make_foreign_collection(name: str) -> None:
        async with pool.acquire() as conn:
            await conn.execute(
                f'CREATE TABLE vectors."{name}" (id uuid PRIMARY KEY, embedding vector(4), payload jsonb)'
            )
            await conn.execute(
                f'INSERT INTO vectors."{name}" VALUES ($1, $2, $3)',
                uuid.UUID(int=0),
                [1.0, 0.0, 0.0, 0.0],
                {"title": "someone else's table"},
            )

    store = PgVectorStore(pool)
    try:
        yield Harness(store=store, make_foreign_collection=make_foreign_collection)
    finally:
        await store.aclose()


@asynccontextmanager
async def resident_pgvector_harness(request: pytest.FixtureRequest) -> AsyncIterator[Harness]:
    """pgvector with searches answered from in-memory copies wherever they are current (the first search of a
    collection starts its copy; no settling delay, so later searches in a test meet the copy)."""
    from common.vectors.pgvector import PgVectorStore
    from common.vectors.resident import ResidentVectors

    url: str = request.getfixturevalue("database_url")
    async with pgvector_harness(request) as plain:
        pool: Pool = request.getfixturevalue("pgvector_pool")
        store = ResidentVectors(PgVectorStore(pool), url, max_chunks=20_000, settle_seconds=0)
        store.start()
        try:
            await asyncio.wait_for(store.status.listening.wait(), 10)
            yield Harness(store=store, make_foreign_collection=plain.make_foreign_collection)
        finally:
            await store.aclose()


@asynccontextmanager
async def qdrant_harness(request: pytest.FixtureRequest) -> AsyncIterator[Harness]:
    """Qdrant's local mode: the same client code as against a server, in memory."""
    from qdrant_client import AsyncQdrantClient

    client = AsyncQdrantClient(location=":memory:")
    async with _qdrant_harness(client) as harness:
        yield harness


@asynccontextmanager
async def _qdrant_harness(client: Any) -> AsyncIterator[Harness]:
    """The Qdrant adapter over ``client`` (local mode or Edge), a foreign collection made through the same client."""
    from qdrant_client import models

    from common.vectors.qdrant import QdrantStore

    async def make_foreign_collection(name: str) -> None:
        await client.create_collection(name, vectors_config=models.VectorParams(size=4, distance=models.Distance.DOT))
        point = models.PointStruct(id=str(uuid.uuid4()), vector=[0.0, 1.0, 0.0, 0.0], payload={"title": "not ours"})
        await client.upsert(name, points=[point], wait=True)

    store = QdrantStore(client)
    try:
        yield Harness(store=store, make_foreign_collection=make_foreign_collection)
    finally:
        await store.aclose()


@asynccontextmanager
async def qdrant_edge_harness(request: pytest.FixtureRequest) -> AsyncIterator[Harness]:
    """The embedded Qdrant: Qdrant Edge's engine in this process, on disk in the test's folder."""
    from common.vectors.qdrant_edge import open_edge_client

    client = await open_edge_client(request.getfixturevalue("tmp_path"))
    async with _qdrant_harness(client) as harness:
        yield harness


@asynccontextmanager
async def weaviate_harness(request: pytest.FixtureRequest) -> AsyncIterator[Harness]:
    url = os.environ.get("WEAVIATE_URL")
    if not url:
        pytest.skip("WEAVIATE_URL not set: weaviate contract not run")
    import weaviate
    from weaviate.classes.config import Configure, DataType, Property

    from common.vectors.weaviate import WeaviateStore  # type: ignore[import-not-found,unused-ignore]

    parts = urlsplit(url)
    client = weaviate.use_async_with_local(
        host=parts.hostname or "localhost",
        port=parts.port or 8080,
        grpc_port=int(os.environ.get("WEAVIATE_GRPC_PORT", "50051")),
    )
    await client.connect()

    async def make_foreign_collection(name: str) -> None:
        collection = await client.collections.create(
            name,
            properties=[Property(name="title", data_type=DataType.TEXT)],
            vector_config=Configure.Vectors.self_provided(),
        )
        await collection.data.insert({"title": "not ours"}, vector=[0.0, 1.0, 0.0, 0.0])

    store = WeaviateStore(client)
    try:
        yield Harness(store=store, make_foreign_collection=make_foreign_collection)
    finally:
        await store.aclose()


PROVIDERS: dict[str, ProviderFactory] = {
    "pgvector": pgvector_harness,
    "pgvector-resident": resident_pgvector_harness,
    "qdrant": qdrant_harness,
    "qdrant-edge": qdrant_edge_harness,
    "weaviate": weaviate_harness,
}


@asynccontextmanager
async def open_harness(name: str, request: pytest.FixtureRequest) -> AsyncIterator[Harness]:
    """A provider's harness; collections made through :meth:`Harness.new_name` are dropped on the way out."""
    async with PROVIDERS[name](request) as harness:
        try:
            yield harness
        finally:
            for collection in harness.created:
                await harness.store.drop_collection(collection)


@pytest.fixture(params=list(PROVIDERS))
async def provider(request: pytest.FixtureRequest, provider_resources: None) -> AsyncIterator[Harness]:
    async with open_harness(request.param, request) as harness:
        yield harness


@pytest.fixture
def provider_resources(pgvector_pool: Pool) -> None:
    """Set up the session resources factories fetch with ``request.getfixturevalue`` (which cannot start an
    async or loop-running fixture from inside the running loop). A new provider's resources go here."""


@pytest.fixture
def store(provider: Harness) -> VectorStore:
    return provider.store
