"""Migration 0016 up, down and up again: the source tables come and go whole, and once up the database itself
refuses a second unfinished run of one source (whatever process tries)."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import pytest

from common.db import migrate as migrations
from common.db.embedded import ensure_database, with_database

DATABASE = "ragu_sources_migration"
TABLES = {"sources", "source_items", "source_runs", "source_run_items"}


async def recreate(admin_url: str) -> None:
    conn = await asyncpg.connect(admin_url)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
    finally:
        await conn.close()
    await ensure_database(admin_url, DATABASE)


async def source_tables(url: str) -> set[str]:
    conn = await asyncpg.connect(url)
    try:
        found = await conn.fetch(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'chonkit' AND tablename LIKE 'source%'"
        )
        return {r["tablename"] for r in found}
    finally:
        await conn.close()


async def two_unfinished_runs(url: str) -> None:
    """A collection, a source and one queued run; then a second unfinished run, which must be refused."""
    conn = await asyncpg.connect(url)
    collection, source = uuid.uuid4(), uuid.uuid4()
    try:
        await conn.execute(
            """INSERT INTO chonkit.collections (id, name, vector_provider, embedding_provider, model, dimension)
               VALUES ($1, 'Migrated', 'pgvector', 'local', 'm', 3)""",
            collection,
        )
        await conn.execute(
            """INSERT INTO chonkit.sources (id, collection_id, name, kind, spec)
               VALUES ($1, $2, 'Docs', 'folder', '{"kind": "folder", "path": "/srv"}')""",
            source,
            collection,
        )
        run = "INSERT INTO chonkit.source_runs (id, source_id, trigger, status) VALUES ($1, $2, 'manual', $3)"
        await conn.execute(run, uuid.uuid4(), source, "done")
        await conn.execute(run, uuid.uuid4(), source, "queued")
        await conn.execute(run, uuid.uuid4(), source, "listing")
    finally:
        await conn.close()


def test_migration_0016_upgrades_downgrades_and_upgrades_again(postgres_admin_url: str) -> None:
    url = with_database(postgres_admin_url, DATABASE)
    asyncio.run(recreate(postgres_admin_url))
    migrations.upgrade(url, "0016")
    assert asyncio.run(source_tables(url)) == TABLES
    with pytest.raises(asyncpg.UniqueViolationError):
        asyncio.run(two_unfinished_runs(url))

    migrations.downgrade(url, "0015")
    assert asyncio.run(source_tables(url)) == set()

    migrations.upgrade(url, "0016")
    assert asyncio.run(source_tables(url)) == TABLES
