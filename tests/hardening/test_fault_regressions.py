"""Fast regression tests for the defects the fault suite (``test_faults.py``) found, in-process on the session's
PostgreSQL: a connection the server ends mid-statement (``pg_terminate_backend`` sends the same FATAL 57P01 a
``pg_ctl stop`` does), and a vector store that cannot be reached."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import asyncpg
import msgspec
import numpy as np
import pytest
from qdrant_client import AsyncQdrantClient

from chonkit.app import create_app
from common.clients import SharedClients
from common.config import Settings
from common.db import PoolDatabase
from common.db.database import init_connection
from common.embedders.base import EmbedderRegistry
from common.errors import Unavailable
from common.vectors.base import VectorRecord
from common.vectors.pgvector import PgVectorStore
from common.vectors.qdrant import QdrantStore
from common.vectors.registry import VectorRegistry
from kappi.access.identities import IdentityReader
from kappi.agent.models import Assignment
from kappi.retrieval.service import QueryVectors, Retriever
from schemas.models import Identity
from tests.chonkit.conftest import AppClient, bearer

UNREACHABLE = "postgresql://postgres@/ragu?host=/nonexistent-ragu-socket-folder"


async def _terminate_when_waiting(observer: asyncpg.Connection[asyncpg.Record], query_like: str) -> None:
    """End the backend that waits on a lock running ``query_like``, as a server shutdown would."""
    for _ in range(200):
        ended = await observer.fetchval(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1",
            query_like,
        )
        if ended:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"nothing waited on the lock with {query_like!r}")


async def _ended_mid_transaction(
    db: PoolDatabase, observer: asyncpg.Connection[asyncpg.Record], *, statement_in_flight: bool
) -> None:
    """A transaction whose session the server ends while a statement runs, or between two statements (asyncpg
    then says the connection was "released back to the pool")."""
    async with db.transaction() as conn:
        pid = await conn.fetchval("SELECT pg_backend_pid()")
        if statement_in_flight:
            ending = asyncio.create_task(_terminate_soon(observer, pid))
            try:
                await conn.execute("SELECT pg_sleep(10)")
            finally:
                await ending
        else:
            await observer.execute("SELECT pg_terminate_backend($1)", pid)
            await asyncio.sleep(0.2)  # the notice of termination arrives while the connection idles
            await conn.fetchval("SELECT 1")


async def _terminate_soon(observer: asyncpg.Connection[asyncpg.Record], pid: int) -> None:
    await asyncio.sleep(0.2)
    await observer.execute("SELECT pg_terminate_backend($1)", pid)


async def test_a_connection_ended_mid_transaction_is_database_unavailable(database_url: str) -> None:
    db = await PoolDatabase.connect(database_url, min_size=1, max_size=2)
    observer = await asyncpg.connect(database_url)
    try:
        for statement_in_flight in (False, True):
            with pytest.raises(Unavailable) as raised:
                await _ended_mid_transaction(db, observer, statement_in_flight=statement_in_flight)
            assert raised.value.code == "database_unavailable"
        async with db.transaction() as conn:  # the pool replaces the lost connection
            assert await conn.fetchval("SELECT 1") == 1
    finally:
        await observer.close()
        await db.aclose()


async def test_a_request_whose_connection_ends_mid_statement_gets_503_not_500(
    settings: Settings, database_url: str, clients: SharedClients, app_client: AppClient
) -> None:
    """The request's statement waits on a lock the test holds; then its backend is terminated: the service's own
    transaction turns the lost connection into ``Unavailable``, answered as 503."""
    database = await PoolDatabase.connect(database_url, min_size=1, max_size=2)
    blocker, observer = await asyncpg.connect(database_url), await asyncpg.connect(database_url)
    try:
        await blocker.execute("BEGIN; LOCK TABLE chonkit.documents IN ACCESS EXCLUSIVE MODE")
        async with app_client(create_app(settings, database=database, clients=clients, worker=False)) as client:
            listing = asyncio.create_task(client.get("/documents", headers=bearer(settings)))
            await _terminate_when_waiting(observer, "%count(*) OVER ()%")
            response = await listing
        assert response.status_code == 503, response.text
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["code"] == "database_unavailable"
    finally:
        await blocker.close()
        await observer.close()
        await database.aclose()


@pytest.fixture
async def half_down(embedders: EmbedderRegistry) -> AsyncIterator[tuple[VectorRegistry, list[Assignment]]]:
    """Qdrant (up) holding one public collection, and pgvector on a server that cannot be reached, with an
    assignment for a collection in each."""
    unreachable = await asyncpg.create_pool(UNREACHABLE, min_size=0, max_size=1, init=init_connection)
    qdrant = QdrantStore(AsyncQdrantClient(location=":memory:"))
    vectors = VectorRegistry({"qdrant": qdrant, "pgvector": PgVectorStore(unreachable)})
    identity = Identity(
        collection_id=str(uuid.uuid4()),
        name="Up",
        model="all-MiniLM-L6-v2",
        vectorProvider="qdrant",
        embeddingProvider="local",
        groups=msgspec.UNSET,
    )
    await qdrant.create_collection(identity, 384)
    vector = np.ones(384, dtype=np.float32) / np.sqrt(384)
    payload = {**identity.to_dict(), "content": "The notice period is 30 days.", "document_id": str(uuid.uuid4())}
    await qdrant.upsert("Up", [VectorRecord(id=str(uuid.uuid4()), vector=vector, payload=payload)])
    now = datetime.now(UTC)
    assignments = [
        Assignment(
            vector_provider=provider,
            name=name,
            collection_id=collection_id,
            top_k=3,
            max_distance=None,
            instruction="",
            created_at=now,
        )
        for provider, name, collection_id in (
            ("qdrant", "Up", identity.collection_id),
            ("pgvector", "Down", str(uuid.uuid4())),
        )
    ]
    yield vectors, assignments
    await qdrant.aclose()
    await unreachable.close()


async def test_retrieval_refuses_to_answer_from_nothing_when_no_store_can_be_read(
    half_down: tuple[VectorRegistry, list[Assignment]], embedders: EmbedderRegistry
) -> None:
    vectors, (up, down) = half_down
    retriever = Retriever(IdentityReader(vectors, ttl_seconds=0), vectors, QueryVectors(embedders))
    question = "What is the notice period?"

    with pytest.raises(Unavailable) as raised:
        await retriever.retrieve([down], frozenset(), question)
    assert raised.value.code == "vector_store_unavailable"

    partial = await retriever.retrieve([up, down], frozenset(), question)  # a partial outage still answers
    assert [chunk.collection for chunk in partial.chunks] == ["Up"]
    assert (await retriever.retrieve([], frozenset(), question)).chunks == []  # no collections: nothing to refuse


async def test_a_store_that_goes_down_after_its_identities_were_cached_is_unavailable(
    vectors: VectorRegistry, embedders: EmbedderRegistry
) -> None:
    """The identities come from the 0.5 s cache, the search finds the store gone: a 503, not an empty answer."""
    up = vectors.get("pgvector")
    name = f"Cached_{uuid.uuid4().hex[:8]}"
    identity = Identity(
        collection_id=str(uuid.uuid4()),
        name=name,
        model="all-MiniLM-L6-v2",
        vectorProvider="pgvector",
        embeddingProvider="local",
    )
    await up.create_collection(identity, 384)
    identities = IdentityReader(vectors, ttl_seconds=60)
    assignment = Assignment(
        vector_provider="pgvector",
        name=name,
        collection_id=identity.collection_id,
        top_k=3,
        max_distance=None,
        instruction="",
        created_at=datetime.now(UTC),
    )
    assert (await identities.read("pgvector", name)).identity == identity
    unreachable = await asyncpg.create_pool(UNREACHABLE, min_size=0, max_size=1, init=init_connection)
    try:
        down = VectorRegistry({"pgvector": PgVectorStore(unreachable)})
        retriever = Retriever(identities, down, QueryVectors(embedders))
        with pytest.raises(Unavailable) as raised:
            await retriever.retrieve([assignment, assignment], frozenset(), "What is the notice period?")
        assert raised.value.code == "vector_store_unavailable"
    finally:
        await unreachable.close()
