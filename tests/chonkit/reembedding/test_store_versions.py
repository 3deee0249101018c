"""The port's versions in each store: a version is invisible until swapped, the swap replaces the collection whole
(chunks, identity, lexical index and its triggers, change notices), and the collection stays an ordinary one after —
written, searched in every mode, listed once, dropped with everything; Qdrant's aliases survive a restart of local
mode."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import msgspec
import pytest
from qdrant_client import AsyncQdrantClient

from common.errors import Conflict, NotFound
from common.vectors import Search
from common.vectors.base import VectorRecord, VectorStore
from common.vectors.qdrant import QdrantStore
from common.vectors.registry import VectorRegistry
from schemas.models import Identity

DIM = 4


def identity(name: str, model: str) -> Identity:
    return Identity(
        collection_id=str(uuid.UUID(int=42)), name=name, model=model, vectorProvider="x", embeddingProvider="words"
    )


def record(n: int, vector: list[float], content: str, model: str) -> VectorRecord:
    return VectorRecord(
        id=str(uuid.UUID(int=n)), vector=vector, payload={"content": content, "document_id": f"doc-{n}", "model": model}
    )


@pytest.fixture(params=["pgvector", "qdrant"])
async def store(request: pytest.FixtureRequest, vectors: VectorRegistry, versions_dropped: None) -> VectorStore:
    chosen: VectorStore = vectors.get(request.param)
    return chosen


@pytest.fixture
async def name(store: VectorStore) -> AsyncIterator[str]:
    chosen = f"Versions_{uuid.uuid4().hex[:8]}"
    yield chosen
    await store.drop_collection(chosen)


async def test_a_version_is_unseen_until_the_swap_which_replaces_the_collection_whole(
    store: VectorStore, name: str
) -> None:
    old = msgspec.structs.replace(identity(name, "old"), vectorProvider=store.provider)
    new = msgspec.structs.replace(old, model="new")
    version = f"Ragu_version_{uuid.uuid4().hex[:20]}"
    await store.create_collection(old, DIM)
    await store.upsert(name, [record(1, [1, 1, 0, 0], "salmon fishing rules", "old")])
    await store.create_version(new, DIM, version)
    await store.upsert(version, [record(2, [0, 1, 1, 0], "trout fishing rules", "new")])
    await store.upsert(version, [record(3, [0, 0, 1, 1], "river permits", "new")])

    assert [i.name for i in await store.list_identities()].count(name) == 1
    assert version not in {i.name for i in await store.list_identities()}
    assert await store.read_identity(name) == old.to_dict()
    assert await store.count(name) == 1
    with pytest.raises(Conflict):
        await store.create_version(new, DIM, version)

    await store.swap_version(name, version)

    assert await store.read_identity(name) == new.to_dict()
    assert await store.count(name) == 2
    assert [i.name for i in await store.list_identities()].count(name) == 1
    for mode in ("dense", "lexical", "hybrid"):
        hits = await store.search(
            Search(
                name=name,
                vector=[0, 1, 1, 0],
                limit=5,
                properties=["model", "content"],
                text="fishing rules",
                mode=mode,
            )
        )
        assert {h.payload["model"] for h in hits} == {"new"}, mode
        assert hits[0].payload["content"] == "trout fishing rules", mode
    # Written after the swap, the lexical index follows (pgvector: the triggers find the renamed tables).
    await store.upsert(name, [record(4, [1, 0, 0, 1], "salmon ladders", "new")])
    [hit] = await store.search(
        Search(name=name, vector=[1, 0, 0, 1], limit=1, properties=["content"], text="salmon", mode="lexical")
    )
    assert hit.payload["content"] == "salmon ladders"
    assert await store.count(name) == 3

    with pytest.raises(NotFound):
        await store.swap_version(name, version if store.provider == "pgvector" else "Ragu_version_gone")

    await store.drop_collection(name)
    assert not await store.collection_exists(name)
    assert not await store.collection_exists(version)
    assert name not in {i.name for i in await store.list_identities()}


async def test_pgvector_announces_the_swap(vectors: VectorRegistry, database_url: str, versions_dropped: None) -> None:
    """A rename fires no trigger: the swap announces the name itself, so kappi's copies of the old version go."""
    store = vectors.get("pgvector")
    name = f"Announced_{uuid.uuid4().hex[:8]}"
    version = f"Ragu_version_{uuid.uuid4().hex[:20]}"
    heard: asyncio.Queue[str] = asyncio.Queue()
    listener = await asyncpg.connect(database_url)
    try:
        await store.create_collection(identity(name, "old"), DIM)
        await store.create_version(identity(name, "new"), DIM, version)
        await listener.add_listener("ragu_vectors", lambda *args: heard.put_nowait(str(args[-1])))
        await store.swap_version(name, version)
        async with asyncio.timeout(10):
            while (await heard.get()) != name:
                pass
    finally:
        await listener.close()
        await store.drop_collection(name)


async def test_qdrant_local_mode_keeps_the_alias_across_restarts(tmp_path: Path) -> None:
    first = QdrantStore(AsyncQdrantClient(path=str(tmp_path)))
    await first.create_collection(msgspec.structs.replace(identity("Kept", "old"), vectorProvider="qdrant"), DIM)
    new = msgspec.structs.replace(identity("Kept", "new"), vectorProvider="qdrant")
    await first.create_version(new, DIM, "Ragu_version_1")
    await first.upsert("Ragu_version_1", [record(1, [1, 0, 0, 0], "kept", "new")])
    await first.swap_version("Kept", "Ragu_version_1")
    await first.aclose()

    second = QdrantStore(AsyncQdrantClient(path=str(tmp_path)))
    try:
        assert await second.list_identities() == [new]
        [hit] = await second.search(Search(name="Kept", vector=[1, 0, 0, 0], limit=1, properties=["model"]))
        assert hit.payload == {"model": "new"}
    finally:
        await second.aclose()
