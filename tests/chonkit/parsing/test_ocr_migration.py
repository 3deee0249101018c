"""Migration 0018 on a database that already holds documents: each gets ``ocr_pages = {}`` (true of it: before OCR a
document without text was refused), new ones store what the upload found, and downgrade leaves the rows readable."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import asyncpg

from common.db import migrate as migrations
from common.db.embedded import ensure_database, with_database

DATABASE = "ragu_ocr_migration"
BEFORE, AFTER = uuid.UUID(int=1), uuid.UUID(int=2)
_INSERT = (
    "INSERT INTO chonkit.documents (id, name, doc_type, media_type, sha256, size_bytes, page_count) "
    "VALUES ($1, $2, 'pdf', 'application/pdf', $3, 10, 2)"
)


def test_migration_0018_adds_ocr_pages_and_downgrades_to_readable_rows(postgres_admin_url: str) -> None:
    url = with_database(postgres_admin_url, DATABASE)
    asyncio.run(_recreate(postgres_admin_url))
    migrations.upgrade(url, "0017")
    asyncio.run(_run(url, _INSERT, BEFORE, "old.pdf", "a" * 64))

    migrations.upgrade(url, "0018")
    asyncio.run(
        _run(
            url,
            _INSERT.replace("page_count)", "page_count, ocr_pages)").replace("2)", "2, $4)"),
            AFTER,
            "scan.pdf",
            "b" * 64,
            [1, 2],
        )
    )
    assert asyncio.run(_fetch(url, "SELECT id, ocr_pages FROM chonkit.documents ORDER BY id")) == [
        (BEFORE, []),
        (AFTER, [1, 2]),
    ]

    migrations.downgrade(url, "0017")
    assert asyncio.run(_fetch(url, "SELECT id, name FROM chonkit.documents ORDER BY id")) == [
        (BEFORE, "old.pdf"),
        (AFTER, "scan.pdf"),
    ]
    columns = asyncio.run(
        _fetch(url, "SELECT column_name FROM information_schema.columns WHERE table_name = 'documents'")
    )
    assert ("ocr_pages",) not in columns

    migrations.upgrade(url)
    assert asyncio.run(_fetch(url, "SELECT ocr_pages FROM chonkit.documents ORDER BY id")) == [([],), ([],)]


async def _recreate(admin_url: str) -> None:
    conn = await asyncpg.connect(admin_url)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
    finally:
        await conn.close()
    await ensure_database(admin_url, DATABASE)


async def _run(url: str, sql: str, *args: Any) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(sql, *args)
    finally:
        await conn.close()


async def _fetch(url: str, sql: str) -> list[tuple[Any, ...]]:
    conn = await asyncpg.connect(url)
    try:
        return [tuple(record) for record in await conn.fetch(sql)]
    finally:
        await conn.close()
