"""PostgreSQL access for both services: the asyncpg pool, and the embedded server used when no URL is set."""

from common.db.database import Database, PoolDatabase, SingleConnectionDatabase, translate_db_errors
from common.db.embedded import EmbeddedPostgres, resolve_database_url

__all__ = [
    "Database",
    "EmbeddedPostgres",
    "PoolDatabase",
    "SingleConnectionDatabase",
    "resolve_database_url",
    "translate_db_errors",
]
