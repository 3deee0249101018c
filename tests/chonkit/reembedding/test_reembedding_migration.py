"""Migration 0017: upgrade → downgrade → upgrade. It adds ``reembed`` to whatever job kinds the table allows (another
revision may have added its own), and its downgrade takes away only that one, with the migrations' tables."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg

from common.db import migrate as migrations
from common.db.embedded import ensure_database, with_database

DATABASE = "ragu_reembedding_migration"
COLLECTION = uuid.UUID(int=7)


async def recreate(admin_url: str) -> None:
    conn = await asyncpg.connect(admin_url)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
    finally:
        await conn.close()
    await ensure_database(admin_url, DATABASE)


async def fetchval(url: str, sql: str) -> object:
    conn = await asyncpg.connect(url)
    try:
        return await conn.fetchval(sql)
    finally:
        await conn.close()


async def execute(url: str, *statements: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


class Accepted(Exception):
    """The insert went through; raised to roll it back."""


async def accepts(url: str, kind: str) -> bool:
    conn = await asyncpg.connect(url)
    try:
        async with conn.transaction():
            await conn.execute(
                "INSERT INTO chonkit.jobs (id, collection_id, kind) VALUES ($1, $2, $3)", uuid.uuid4(), COLLECTION, kind
            )
            raise Accepted  # and rolled back
    except asyncpg.CheckViolationError:
        return False
    except Accepted:
        return True
    finally:
        await conn.close()


def tables(url: str) -> object:
    return asyncio.run(
        fetchval(
            url,
            "SELECT array_agg(tablename::text ORDER BY tablename) FROM pg_tables WHERE schemaname = 'chonkit' "
            "AND tablename IN ('collection_migrations', 'migration_documents')",
        )
    )


def test_migration_0017_upgrades_downgrades_and_upgrades_again_keeping_other_kinds(postgres_admin_url: str) -> None:
    url = with_database(postgres_admin_url, DATABASE)
    asyncio.run(recreate(postgres_admin_url))
    migrations.upgrade(url, "0016")
    # Another revision's kind, added the way 0017 adds its own: 0017 must keep it both ways.
    asyncio.run(
        execute(
            url,
            "ALTER TABLE chonkit.jobs DROP CONSTRAINT jobs_kind_check, ADD CONSTRAINT jobs_kind_check "
            "CHECK (kind IN ('embed', 'remove', 'sync'))",
            "INSERT INTO chonkit.collections (id, name, vector_provider, embedding_provider, model, dimension) "
            f"VALUES ('{COLLECTION}', 'Kinds', 'pgvector', 'local', 'm', 3)",
        )
    )
    assert not asyncio.run(accepts(url, "reembed"))

    migrations.upgrade(url, "0017")
    assert [asyncio.run(accepts(url, k)) for k in ("embed", "remove", "sync", "reembed", "other")] == [
        True,
        True,
        True,
        True,
        False,
    ]
    assert tables(url) == ["collection_migrations", "migration_documents"]

    migrations.downgrade(url, "0016")
    assert [asyncio.run(accepts(url, k)) for k in ("embed", "sync", "reembed")] == [True, True, False]
    assert tables(url) is None

    migrations.upgrade(url, "0017")
    assert asyncio.run(accepts(url, "reembed"))
    assert tables(url) == ["collection_migrations", "migration_documents"]
