"""Getting a process ready to work: the database resolved (embedded by default) and migrated."""

from __future__ import annotations

import asyncio

import msgspec

from common.config import Settings
from common.db import EmbeddedPostgres, resolve_database_url
from common.db import migrate as migrations


def prepare_database(settings: Settings) -> tuple[Settings, EmbeddedPostgres | None]:
    """Start the embedded server when no URL is set, apply migrations, and pin the resolved URL."""
    url, embedded = asyncio.run(resolve_database_url(settings))
    if settings.auto_migrate:
        migrations.upgrade(url)
    return msgspec.structs.replace(settings, database_url=url), embedded
