"""The embedded Qdrant on Qdrant Edge (:mod:`common.vectors.qdrant_edge`): what only it has.

The provider-neutral behaviour is the contract suites' (``tests/contracts``, provider ``qdrant-edge``); these cover
the folder it keeps: persistence across restarts, aliases on disk, one process at a time, and the migration of what
qdrant-client's local mode left in the same folder.
"""

from __future__ import annotations

import asyncio
import fcntl
import uuid
from pathlib import Path
from typing import Any

import pytest
from qdrant_client import AsyncQdrantClient, models

from common.vectors import Search
from common.vectors.base import VectorRecord
from common.vectors.qdrant import QdrantStore
from common.vectors.qdrant_edge import EDGE_FOLDER, LOCAL_META, LOCAL_MIGRATED, EdgeClient, open_edge_client
from schemas.models import Identity

DIM = 4


def make_identity(name: str = "Handbook", groups: list[str] | None = None) -> Identity:
    return Identity(
        collection_id=str(uuid.uuid4()),
        name=name,
        model="all-MiniLM-L6-v2",
        vectorProvider="qdrant",
        embeddingProvider="local",
        **({"groups": groups} if groups else {}),
    )


def chunk(n: int, vector: list[float], content: str, *, document_id: str = "doc-1") -> VectorRecord:
    payload: dict[str, Any] = {"content": content, "document_id": document_id, "chunk_index": n}
    return VectorRecord(id=str(uuid.UUID(int=n)), vector=vector, payload=payload)


CHUNKS = [
    chunk(1, [1.0, 0.0, 0.0, 0.0], "aardvarks dig burrows at night"),
    chunk(2, [0.0, 1.0, 0.0, 0.0], "proteins fold into shapes", document_id="doc-2"),
    chunk(3, [0.0, 0.0, 1.0, 0.0], "aardvark proteins and burrows", document_id="doc-2"),
]


def hybrid(name: str, text: str, vector: list[float]) -> Search:
    return Search(name=name, vector=vector, limit=3, properties=["document_id"], text=text, mode="hybrid")


async def answers(store: QdrantStore, name: str) -> list[list[tuple[str, float, float]]]:
    """A few searches' hits as (id, score, distance): what must read the same before and after a move."""
    found = []
    for text, vector in (("aardvark burrows", [1.0, 0.2, 0.0, 0.0]), ("proteins", [0.0, 0.0, 1.0, 0.1])):
        for mode in ("dense", "lexical", "hybrid"):
            search = Search(name=name, vector=vector, limit=3, properties=["document_id"], text=text, mode=mode)
            found.append([(hit.id, round(hit.score, 5), round(hit.distance, 5)) for hit in await store.search(search)])
    return found


async def test_collections_and_aliases_survive_a_restart(tmp_path: Path) -> None:
    identity = make_identity(groups=["hr"])
    first = QdrantStore(await open_edge_client(tmp_path))
    await first.create_collection(identity, DIM)
    await first.upsert("Handbook", CHUNKS)
    await first.create_version(identity, DIM, "Handbook_v2")
    await first.upsert("Handbook_v2", CHUNKS[:2])
    await first.swap_version("Handbook", "Handbook_v2")  # Handbook is now an alias of Handbook_v2
    before = await answers(first, "Handbook")
    await first.aclose()

    second = QdrantStore(await open_edge_client(tmp_path))
    try:
        assert await second.list_identities() == [identity]
        assert await second.document_ids("Handbook") == {"doc-1": 1, "doc-2": 1}
        assert await answers(second, "Handbook") == before
    finally:
        await second.aclose()


async def test_a_second_client_on_the_same_folder_is_refused(tmp_path: Path) -> None:
    # Edge refuses a second open of a shard, but the refused open can damage the open one: never get that far.
    first = await open_edge_client(tmp_path)
    try:
        with pytest.raises(RuntimeError, match="open in another client"):
            await open_edge_client(tmp_path)
        with (tmp_path / ".lock").open("rb") as lock, pytest.raises(BlockingIOError):
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the lock local mode and ragu's start-up check take
    finally:
        await first.close()
    second = await open_edge_client(tmp_path)  # the lock goes with the client that held it
    await second.close()


async def test_local_mode_collections_are_migrated_once_with_their_aliases(tmp_path: Path) -> None:
    identity = make_identity()
    other = make_identity("Other", groups=["finance"])
    local = QdrantStore(AsyncQdrantClient(path=str(tmp_path)))
    await local.create_collection(identity, DIM)
    await local.upsert("Handbook", CHUNKS)
    await local.create_version(identity, DIM, "Handbook_v2")
    await local.upsert("Handbook_v2", CHUNKS[1:])
    await local.swap_version("Handbook", "Handbook_v2")
    await local.create_collection(other, DIM)
    await local.upsert("Other", CHUNKS[:1])
    expected = {name: await answers(local, name) for name in ("Handbook", "Other")}
    await local.aclose()

    edge = QdrantStore(await open_edge_client(tmp_path))
    try:
        assert await edge.list_identities() == [identity, other]
        assert {name: await answers(edge, name) for name in expected} == expected
        assert await edge.count("Handbook") == 2
        assert not (tmp_path / LOCAL_META).exists()
        assert (tmp_path / LOCAL_MIGRATED).exists()
        await edge.upsert("Other", CHUNKS[1:2])  # a migrated collection takes writes (its indexes exist)
        assert await edge.document_ids("Other") == {"doc-1": 1, "doc-2": 1}
    finally:
        await edge.aclose()
    # Local mode's own files are left as they were: a backup, never read again.
    assert (tmp_path / "collection" / "Handbook_v2").is_dir()


async def test_a_migration_cut_short_copies_the_unfinished_collection_again(tmp_path: Path) -> None:
    local = QdrantStore(AsyncQdrantClient(path=str(tmp_path)))
    await local.create_collection(make_identity(), DIM)
    await local.upsert("Handbook", CHUNKS)
    expected = await answers(local, "Handbook")
    await local.aclose()
    # What an interrupted copy leaves: the collection in Edge with only some of its points, meta.json in place.
    partial = EdgeClient(tmp_path)
    await partial.create_collection(
        "Handbook",
        vectors_config=models.VectorParams(size=DIM, distance=models.Distance.COSINE),
        sparse_vectors_config={"lexical": models.SparseVectorParams(modifier=models.Modifier.IDF)},
    )
    await partial.upsert("Handbook", [models.PointStruct(id=str(uuid.UUID(int=1)), vector={"": [1.0, 0, 0, 0]})])
    await partial.close()

    edge = QdrantStore(await open_edge_client(tmp_path))
    try:
        assert await edge.count("Handbook") == len(CHUNKS)
        assert await answers(edge, "Handbook") == expected
    finally:
        await edge.aclose()
    assert (tmp_path / EDGE_FOLDER / "collections" / "Handbook").is_dir()


async def test_concurrent_first_searches_after_a_restart_open_the_collection_once(tmp_path: Path) -> None:
    # A second open of an Edge shard fails (and can damage the first): searches racing to open it must not both try.
    first = QdrantStore(await open_edge_client(tmp_path))
    await first.create_collection(make_identity(groups=["hr"]), DIM)
    await first.upsert("Handbook", CHUNKS)
    expected = await answers(first, "Handbook")
    await first.aclose()

    second = QdrantStore(await open_edge_client(tmp_path))
    try:
        found = await asyncio.gather(*(answers(second, "Handbook") for _ in range(8)))
        assert found == [expected] * 8
        await second.set_groups("Handbook", ["finance"])  # writes the groups' payload index
    finally:
        await second.aclose()
    third = QdrantStore(await open_edge_client(tmp_path))
    try:
        assert await third.count_misgrouped("Handbook", ["finance"]) == 0
    finally:
        await third.aclose()
