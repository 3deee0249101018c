"""Migration 0012 gives collections that already hold chunks their lexical index, and its downgrade takes it away
leaving the chunks as they were."""

from __future__ import annotations

import asyncio
import math
import uuid
from collections import Counter
from typing import Any

import asyncpg
import pytest

from common.db import migrate as migrations
from common.db.database import init_connection
from common.db.embedded import ensure_database, with_database
from common.vectors import Search, lexical
from common.vectors.base import VectorRecord
from common.vectors.pgvector import PgVectorStore

NAME = "Before_lexical"
TABLE = f'vectors."{NAME}"'
CONTENTS = {1: "protein folding in yeast cells", 2: "yeast genetics", 3: "aardvark habitats and diets"}


async def recreate(admin_url: str, database: str) -> None:
    conn = await asyncpg.connect(admin_url)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
    finally:
        await conn.close()
    await ensure_database(admin_url, database)


async def old_collection(url: str) -> None:
    """A collection as PgVectorStore made them before 0012: table, indexes, change trigger, identity, chunks."""
    conn = await asyncpg.connect(url)
    await init_connection(conn)
    try:
        await conn.execute(
            f"CREATE TABLE {TABLE} (id uuid PRIMARY KEY, embedding vector(3) NOT NULL, payload jsonb NOT NULL)"
        )
        await conn.execute(f"CREATE INDEX ON {TABLE} USING hnsw (embedding vector_cosine_ops)")
        await conn.execute(f"CREATE INDEX ON {TABLE} ((payload->>'document_id'))")
        await conn.execute(f"CREATE INDEX ON {TABLE} USING gin ((payload->'groups'))")
        await conn.execute(
            f"CREATE TRIGGER ragu_collection_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {TABLE} "
            "FOR EACH STATEMENT EXECUTE FUNCTION vectors.ragu_collection_changed()"
        )
        identity = {"collection_id": str(uuid.uuid4()), "name": NAME, "model": "m", "vectorProvider": "pgvector",
                    "embeddingProvider": "local"}  # fmt: skip
        await conn.execute(f"INSERT INTO {TABLE} VALUES ($1, $2, $3)", uuid.UUID(int=0), [1.0, 0.0, 0.0], identity)
        for n, text in CONTENTS.items():
            payload = {"content": text, "document_id": f"doc-{n}", "groups": ["hr"] if n == 3 else []}
            await conn.execute(
                f"INSERT INTO {TABLE} VALUES ($1, $2, $3)", uuid.UUID(int=n), [0.0, 1.0, float(n)], payload
            )
    finally:
        await conn.close()


async def shape(url: str) -> dict[str, Any]:
    conn = await asyncpg.connect(url)
    try:
        columns = await conn.fetch(
            "SELECT attname FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped "
            "ORDER BY attnum",
            TABLE,
        )
        indexes = await conn.fetch(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = 'vectors' AND tablename = $1", NAME
        )
        triggers = await conn.fetch("SELECT tgname FROM pg_trigger WHERE tgrelid = $1::regclass ORDER BY 1", TABLE)
        stats = await conn.fetchval(
            "SELECT (to_regclass('vectors_lexical.\"Before_lexical\"') IS NOT NULL)::int "
            "+ (to_regclass('vectors_postings.\"Before_lexical\"') IS NOT NULL)::int"
        )
        chunks = await conn.fetch(f"SELECT id, payload FROM {TABLE} ORDER BY id")
    finally:
        await conn.close()
    return {
        "columns": [row["attname"] for row in columns],
        "indexes": sorted(row["indexdef"].split(" USING ")[1] for row in indexes),
        "triggers": [row["tgname"] for row in triggers],
        "stats": stats,
        "chunks": [(row["id"], row["payload"]) for row in chunks],
    }


async def search_and_write(url: str) -> tuple[list[tuple[int, float]], list[int], dict[int, int]]:
    pool = await asyncpg.create_pool(url, min_size=1, max_size=1, init=init_connection)
    try:
        store = PgVectorStore(pool)
        hits = await store.search(
            Search(name=NAME, vector=[0.0, 1.0, 1.0], limit=5, properties=[], text="yeast protein", mode="lexical")
        )
        await store.upsert(
            NAME, [VectorRecord(id=str(uuid.UUID(int=4)), vector=[0.0, 0.0, 1.0], payload={"content": "yeast"})]
        )
        after = await store.search(
            Search(name=NAME, vector=[0.0, 1.0, 1.0], limit=5, properties=[], text="yeast", mode="lexical")
        )
        async with pool.acquire() as conn:
            stats = {
                row["term"]: row["chunks"]
                for row in await conn.fetch(f'SELECT term, chunks FROM vectors_lexical."{NAME}"')
            }
    finally:
        await pool.close()
    return [(uuid.UUID(h.id).int, h.score) for h in hits], [uuid.UUID(h.id).int for h in after], stats


def bm25(contents: dict[int, str], query: str) -> dict[int, float]:
    terms = {n: lexical.analyse(text) for n, text in contents.items()}
    avgdl = sum(map(len, terms.values())) / len(terms)
    df = Counter(t for found in terms.values() for t in set(found))
    scores: dict[int, float] = {}
    for n, found in terms.items():
        tf = Counter(found)
        score = sum(
            math.log(1 + (len(terms) - df[t] + 0.5) / (df[t] + 0.5))
            * tf[t] / (tf[t] + lexical.K1 * (1 - lexical.B + lexical.B * len(found) / avgdl))
            for t in set(lexical.analyse(query)) if tf[t]
        )  # fmt: skip
        if score:
            scores[n] = score
    return scores


def test_upgrade_indexes_existing_chunks_and_downgrade_removes_the_index(postgres_admin_url: str) -> None:
    url = with_database(postgres_admin_url, "ragu_lexical_migration")
    asyncio.run(recreate(postgres_admin_url, "ragu_lexical_migration"))
    migrations.upgrade(url, "0011")
    asyncio.run(old_collection(url))
    before = asyncio.run(shape(url))

    migrations.upgrade(url, "0012")
    upgraded = asyncio.run(shape(url))
    found, after, stats = asyncio.run(search_and_write(url))

    assert upgraded["columns"] == ["id", "embedding", "payload", "terms", "term_weights", "lexical_length"]
    assert set(upgraded["indexes"]) - set(before["indexes"]) == {
        "gin (((payload -> 'tags'::text)))",
        "btree (((payload ->> 'label'::text)))",
    }
    assert upgraded["stats"] == 2  # the statistics and the postings
    assert upgraded["chunks"] == before["chunks"]  # payloads untouched
    expected = bm25(CONTENTS, "yeast protein")
    assert [n for n, _ in found] == sorted(expected, key=lambda n: -expected[n]) == [1, 2]
    assert [score for _, score in found] == pytest.approx([expected[1], expected[2]], rel=1e-4)
    assert after == [4, 2, 1]  # the chunk written after the migration is indexed too (the shortest ranks first)
    yeast = lexical.term_id("yeast")
    assert (stats[0], stats[yeast]) == (4, 3)  # chunks and the document frequency, identity not counted

    migrations.downgrade(url, "0011")
    downgraded = asyncio.run(shape(url))

    assert downgraded["columns"] == ["id", "embedding", "payload"]
    assert downgraded["indexes"] == before["indexes"]
    assert downgraded["triggers"] == before["triggers"] == ["ragu_collection_changed"]
    assert downgraded["stats"] == 0
    assert [id_ for id_, _ in downgraded["chunks"]] == [uuid.UUID(int=n) for n in range(5)]

    migrations.upgrade(url, "0012")  # and back: the chunk written in between is indexed too
    assert asyncio.run(search_and_write(url))[2][0] == 4
