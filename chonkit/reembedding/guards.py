"""What other domains ask of a collection's migration before they write to it (no import of their services, so
that they may import this)."""

from __future__ import annotations

from collections.abc import Iterable
from uuid import UUID

from chonkit.collection.models import Collection
from chonkit.collection.repository import CollectionRepository
from chonkit.reembedding.repository import MigrationRepository, collection_migrating
from common.db.database import Connection
from common.vectors.registry import VectorRegistry


async def refuse_if_migrating(conn: Connection, collection_id: UUID) -> None:
    """``409 collection_migrating`` while a move of the collection is being built: for every write a version being
    built would miss. Holds the collection's row (shared) until the caller's transaction ends, so a move starting
    concurrently waits for the write to be queued, and then refuses to start (``collection_busy``)."""
    migrations = MigrationRepository(conn)
    if not await migrations.hold_collection(collection_id, exclusive=False):
        return  # no such collection: the caller says so
    migration = await migrations.building(collection_id)
    if migration is not None:
        collection = await CollectionRepository(conn).get(collection_id)
        raise collection_migrating(collection.name if collection else str(collection_id))


async def refuse_if_any_migrating(conn: Connection, collection_ids: Iterable[UUID]) -> None:
    """:func:`refuse_if_migrating` for each collection, in the order of their ids (so that two callers holding some
    of the same rows cannot wait for each other in a circle)."""
    for collection_id in sorted(set(collection_ids)):
        await refuse_if_migrating(conn, collection_id)


async def drop_building_version(conn: Connection, vectors: VectorRegistry, collection: Collection) -> None:
    """A collection being deleted takes its version being built with it."""
    migration = await MigrationRepository(conn).building(collection.id)
    if migration is not None:
        await vectors.get(collection.vector_provider).drop_collection(migration.version)
