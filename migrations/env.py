"""Alembic environment: raw-SQL revisions run through SQLAlchemy's asyncpg dialect.

The database URL comes from ``config.attributes["database_url"]`` (set by ``ragu migrate``) or, for
the plain ``alembic`` command, from ``DATABASE_URL``.
"""

from __future__ import annotations

import asyncio
import os

from alembic import context
from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from common.db.migrate import sqlalchemy_url

config = context.config


# Services may start (and auto-migrate) at the same moment; one session-level lock serialises them.
MIGRATION_LOCK = 7_261_000_001


def _run(connection: Connection) -> None:
    connection.exec_driver_sql(f"SELECT pg_advisory_lock({MIGRATION_LOCK})")
    try:
        context.configure(connection=connection, target_metadata=None, transaction_per_migration=True)
        with context.begin_transaction():
            context.run_migrations()
    finally:
        connection.exec_driver_sql(f"SELECT pg_advisory_unlock({MIGRATION_LOCK})")


async def _run_async(url: str) -> None:
    engine = create_async_engine(sqlalchemy_url(url))
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run)
            await connection.commit()
    finally:
        await engine.dispose()


url = config.attributes.get("database_url") or os.environ["DATABASE_URL"]
asyncio.run(_run_async(url))
