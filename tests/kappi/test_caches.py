"""Kappi's short caches: concurrent misses share one read, entries expire, and admin writes empty them."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from common.vectors.pgvector import PgVectorStore
from common.vectors.registry import VectorRegistry
from kappi.access.identities import IdentityReader
from schemas.models import Identity


class CountingStore(PgVectorStore):
    """The real pgvector adapter, counting identity reads."""

    reads = 0

    async def read_identity(self, name: str) -> dict[str, Any] | None:
        self.reads += 1
        return await super().read_identity(name)


async def test_concurrent_questions_share_one_identity_read_until_it_expires(vectors: VectorRegistry) -> None:
    pgvector = vectors.get("pgvector")
    assert isinstance(pgvector, PgVectorStore)
    store = CountingStore(pgvector._pool)
    name = f"Cache_{uuid.uuid4().hex[:8]}"
    identity = Identity(
        collection_id=str(uuid.uuid4()), name=name, model="m", vectorProvider="pgvector", embeddingProvider="e"
    )
    await store.create_collection(identity, 4)
    reader = IdentityReader(VectorRegistry({"pgvector": store}), ttl_seconds=0.3)

    statuses = await asyncio.gather(*(reader.read("pgvector", name) for _ in range(16)))

    assert store.reads == 1
    assert {s.identity for s in statuses} == {identity}
    await reader.read("pgvector", name)
    assert store.reads == 1  # still fresh
    await asyncio.sleep(0.35)
    await reader.read("pgvector", name)
    assert store.reads == 2  # expired: read again
    reader.forget()
    missing = await reader.read("pgvector", "Nowhere_To_Be_Found")
    assert (missing.identity, missing.problem) == (None, "identity_missing")
    await reader.read("pgvector", name)
    assert store.reads == 4


async def test_a_question_that_gives_up_does_not_cancel_the_read_others_wait_on(vectors: VectorRegistry) -> None:
    pgvector = vectors.get("pgvector")
    assert isinstance(pgvector, PgVectorStore)
    gate = asyncio.Event()

    class SlowStore(CountingStore):
        async def read_identity(self, name: str) -> dict[str, Any] | None:
            await gate.wait()
            return await super().read_identity(name)

    store = SlowStore(pgvector._pool)
    reader = IdentityReader(VectorRegistry({"pgvector": store}), ttl_seconds=5)
    leaving = asyncio.create_task(reader.read("pgvector", "Nowhere_To_Be_Found"))
    staying = asyncio.create_task(reader.read("pgvector", "Nowhere_To_Be_Found"))
    await asyncio.sleep(0.01)
    leaving.cancel()
    gate.set()
    status = await staying
    assert status.problem == "identity_missing"
    assert store.reads == 1
    assert leaving.cancelled()
