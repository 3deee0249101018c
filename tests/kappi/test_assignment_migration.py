"""Migration 0014 on a database holding agents: existing assignments keep ``dense`` (nobody's answers change on
upgrade), new ones are ``hybrid``; existing versions have no reranker; the downgrade leaves every row readable by
the previous code, and the upgrade runs again."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import pytest

from common.db import migrate as migrations
from common.db.embedded import ensure_database, with_database
from common.vectors.base import DEFAULT_DENSE_WEIGHT

DATABASE = "ragu_migration_0014"


async def _run(url: str, *statements: str) -> list[list[asyncpg.Record]]:
    conn = await asyncpg.connect(url)
    try:
        return [await conn.fetch(statement) for statement in statements]
    finally:
        await conn.close()


def _columns(url: str, table: str) -> set[str]:
    (rows,) = asyncio.run(
        _run(
            url,
            "SELECT column_name FROM information_schema.columns "
            f"WHERE table_schema = 'kappi' AND table_name = '{table}'",
        )
    )
    return {r["column_name"] for r in rows}


@pytest.fixture
def url(postgres_admin_url: str) -> str:
    url = with_database(postgres_admin_url, DATABASE)
    asyncio.run(_recreate(postgres_admin_url))
    return url


async def _recreate(admin_url: str) -> None:
    conn = await asyncpg.connect(admin_url)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
    finally:
        await conn.close()
    await ensure_database(admin_url, DATABASE)


def test_existing_assignments_stay_dense_new_ones_are_hybrid_and_the_downgrade_keeps_them(url: str) -> None:
    migrations.upgrade(url, "0013")
    agent = uuid.uuid4()
    asyncio.run(
        _run(
            url,
            f"INSERT INTO kappi.agents (id, name, current_version) VALUES ('{agent}', 'Old', 1)",
            f"""INSERT INTO kappi.agent_versions (agent_id, version, llm_provider, llm_model, system_prompt,
                    temperature, max_tokens, created_by)
                VALUES ('{agent}', 1, 'extractive', 'extractive', 'Be brief.', 0.2, 800, 'root')""",
            f"""INSERT INTO kappi.agent_collections (agent_id, vector_provider, collection_name, collection_id, top_k)
                VALUES ('{agent}', 'pgvector', 'Handbook', 'c-1', 5)""",
        )
    )

    migrations.upgrade(url, "0014")

    existing, version = asyncio.run(
        _run(
            url,
            "SELECT mode, dense_weight, tags, labels FROM kappi.agent_collections",
            "SELECT reranker, rerank_model FROM kappi.agent_versions",
        )
    )
    assert [tuple(r) for r in existing] == [("dense", DEFAULT_DENSE_WEIGHT, None, None)]
    assert [tuple(r) for r in version] == [(None, None)]
    (added,) = asyncio.run(
        _run(
            url,
            f"""INSERT INTO kappi.agent_collections (agent_id, vector_provider, collection_name, collection_id, top_k)
                VALUES ('{agent}', 'qdrant', 'Policies', 'c-2', 5) RETURNING mode""",
        )
    )
    assert [r["mode"] for r in added] == ["hybrid"]
    with pytest.raises(asyncpg.CheckViolationError):
        asyncio.run(_run(url, "UPDATE kappi.agent_collections SET mode = 'fuzzy'"))
    with pytest.raises(asyncpg.CheckViolationError):
        asyncio.run(_run(url, "UPDATE kappi.agent_collections SET dense_weight = 1.5"))
    with pytest.raises(asyncpg.CheckViolationError):
        asyncio.run(_run(url, "UPDATE kappi.agent_versions SET reranker = 'cohere'"))  # a reranker needs its model

    migrations.downgrade(url, "0013")

    assert {"mode", "dense_weight", "tags", "labels"}.isdisjoint(_columns(url, "agent_collections"))
    assert {"reranker", "rerank_model"}.isdisjoint(_columns(url, "agent_versions"))
    (kept,) = asyncio.run(_run(url, "SELECT collection_name FROM kappi.agent_collections ORDER BY 1"))
    assert [r["collection_name"] for r in kept] == ["Handbook", "Policies"]

    migrations.upgrade(url)
    assert {"mode", "dense_weight", "tags", "labels"} <= _columns(url, "agent_collections")
