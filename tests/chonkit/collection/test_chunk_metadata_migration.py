"""Migration 0013 on a database whose collections already hold chunks: the pending rename queue becomes the pending
document update queue, every document in a collection is queued, and the worker then backfills the tags and label
onto chunks written without them; downgrade gives the previous code its queue back, rows and all."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import asyncpg

from chonkit.document.storage import BlobStore
from chonkit.embedding.worker import EmbeddingWorker
from common.db import migrate as migrations
from common.db.database import PoolDatabase, init_connection
from common.db.embedded import ensure_database, with_database
from common.embedders.base import EmbedderRegistry
from common.vectors import Search
from common.vectors.base import SearchFilter, VectorRecord
from common.vectors.pgvector import PgVectorStore, open_pool
from common.vectors.registry import VectorRegistry
from schemas.models import Identity

DATABASE = "ragu_chunk_metadata_migration"
TAGGED = uuid.UUID(int=1)
RENAMED = uuid.UUID(int=2)
COLLECTION = uuid.UUID(int=3)
NAME = "Migrated_docs"


def test_migration_0013_queues_every_embedded_document_and_the_worker_backfills_tags_and_labels(
    postgres_admin_url: str, embedders: EmbedderRegistry, tmp_path: Path
) -> None:
    url = with_database(postgres_admin_url, DATABASE)
    asyncio.run(recreate(postgres_admin_url))
    migrations.upgrade(url)  # the collection table as today's code makes it
    asyncio.run(chunks_as_the_previous_worker_wrote_them(url))

    migrations.downgrade(url, "0012")
    assert asyncio.run(tables(url)) == {"pending_renames"}
    asyncio.run(
        execute(
            url,
            "INSERT INTO chonkit.pending_renames (collection_id, document_id, attempts) "
            f"VALUES ('{COLLECTION}', '{RENAMED}', 3)",
        )
    )

    migrations.upgrade(url, "0013")
    assert asyncio.run(tables(url)) == {"pending_document_updates"}
    queued = asyncio.run(rows(url, "pending_document_updates"))
    assert queued == {(COLLECTION, TAGGED, 0), (COLLECTION, RENAMED, 0)}  # the pending rename retried at once too

    found_before, found_after = asyncio.run(backfill(url, embedders, tmp_path))
    assert found_before == (0, 0)
    assert found_after == (3, 3)  # every chunk of the tagged document, by its tag and by its label
    assert asyncio.run(rows(url, "pending_document_updates")) == set()

    asyncio.run(
        execute(
            url,
            f"INSERT INTO chonkit.pending_document_updates (collection_id, document_id) "
            f"VALUES ('{COLLECTION}', '{TAGGED}')",
        )
    )
    migrations.downgrade(url, "0012")
    assert asyncio.run(tables(url)) == {"pending_renames"}
    assert asyncio.run(rows(url, "pending_renames")) == {(COLLECTION, TAGGED, 0)}
    migrations.upgrade(url)
    asyncio.run(drop(postgres_admin_url))


async def recreate(admin_url: str) -> None:
    await drop(admin_url)
    await ensure_database(admin_url, DATABASE)


async def drop(admin_url: str) -> None:
    conn = await asyncpg.connect(admin_url)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
    finally:
        await conn.close()


async def execute(url: str, sql: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def tables(url: str) -> set[str]:
    conn = await asyncpg.connect(url)
    try:
        found = await conn.fetch(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'chonkit' AND tablename LIKE 'pending_%'"
        )
        return {r["tablename"] for r in found}
    finally:
        await conn.close()


async def rows(url: str, table: str) -> set[tuple[uuid.UUID, uuid.UUID, int]]:
    conn = await asyncpg.connect(url)
    try:
        found = await conn.fetch(f"SELECT collection_id, document_id, attempts FROM chonkit.{table}")
        return {(r["collection_id"], r["document_id"], r["attempts"]) for r in found}
    finally:
        await conn.close()


async def chunks_as_the_previous_worker_wrote_them(url: str) -> None:
    """Two documents in a pgvector collection (one tagged and labelled in chonkit), their chunks carrying no tags
    or label, and nothing queued — as before 0013."""
    conn = await asyncpg.connect(url)
    await init_connection(conn)
    try:
        for document_id, name, tags, label in [
            (TAGGED, "handbook.md", ["policy", "hr"], "Handbook"),
            (RENAMED, "memo.md", [], None),
        ]:
            await conn.execute(
                """INSERT INTO chonkit.documents (id, name, label, tags, doc_type, media_type, sha256, size_bytes)
                   VALUES ($1, $2, $3, $4, 'markdown', 'text/markdown', $5, 10)""",
                document_id,
                name,
                label,
                tags,
                f"{document_id.int:064x}",
            )
        await conn.execute(
            """INSERT INTO chonkit.collections (id, name, vector_provider, embedding_provider, model, dimension)
               VALUES ($1, $2, 'pgvector', 'local', 'all-MiniLM-L6-v2', 4)""",
            COLLECTION,
            NAME,
        )
        await conn.executemany(
            """INSERT INTO chonkit.collection_documents
                   (collection_id, document_id, document_sha256, config_hash, chunk_count)
               VALUES ($1, $2, $3, 'h', 3)""",
            [(COLLECTION, d, f"{d.int:064x}") for d in (TAGGED, RENAMED)],
        )
        await conn.execute("DELETE FROM chonkit.pending_document_updates")
    finally:
        await conn.close()
    pool = await open_pool(url, max_size=1)
    try:
        store = PgVectorStore(pool)
        identity = Identity(
            collection_id=str(COLLECTION),
            name=NAME,
            model="all-MiniLM-L6-v2",
            vectorProvider="pgvector",
            embeddingProvider="local",
        )
        await store.create_collection(identity, 4)
        await store.upsert(NAME, [old_chunk(document_id, n) for document_id in (TAGGED, RENAMED) for n in range(3)])
    finally:
        await pool.close()


def old_chunk(document_id: uuid.UUID, n: int) -> VectorRecord:
    """A chunk's payload as the worker wrote it before chunks carried tags and labels."""
    payload = {
        "collection_id": str(COLLECTION),
        "name": NAME,
        "model": "all-MiniLM-L6-v2",
        "vectorProvider": "pgvector",
        "embeddingProvider": "local",
        "content": f"Vacation rule {n}.",
        "document_id": str(document_id),
        "document_name": "old name",
        "chunk_index": n,
    }
    vector = [0.5, 0.5, 0.5, 0.5] if n else [0.1, 0.9, 0.3, 0.2]
    return VectorRecord(id=str(uuid.uuid5(document_id, str(n))), vector=vector, payload=payload)


async def backfill(url: str, embedders: EmbedderRegistry, data: Path) -> tuple[tuple[int, int], tuple[int, int]]:
    """How many chunks a tag filter and a label filter find, before and after the worker drained its queue."""
    db = await PoolDatabase.connect(url, max_size=2)
    pool = await open_pool(url, max_size=2)
    store = PgVectorStore(pool)
    worker = EmbeddingWorker(db, BlobStore(data / "documents"), embedders, VectorRegistry({"pgvector": store}))
    try:
        before = await filtered_counts(store)
        while await worker.run_once():
            pass
        return before, await filtered_counts(store)
    finally:
        await pool.close()
        await db.aclose()


async def filtered_counts(store: PgVectorStore) -> tuple[int, int]:
    counts = []
    for where in (SearchFilter(tags=frozenset({"policy"})), SearchFilter(labels=frozenset({"Handbook"}))):
        hits = await store.search(
            Search(name=NAME, vector=[0.5, 0.5, 0.5, 0.5], limit=20, properties=["document_id"], where=where)
        )
        assert {h.payload["document_id"] for h in hits} <= {str(TAGGED)}
        counts.append(len(hits))
    return counts[0], counts[1]
