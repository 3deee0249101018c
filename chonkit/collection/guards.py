"""What every write of a collection's documents asks first: is the collection moving to another embedding model? A
version being built would miss the write, so it is refused (``409 collection_migrating``). Here, below the domains
that write (documents, embedding jobs, re-embedding), so each can ask without importing the others."""

from __future__ import annotations

from collections.abc import Iterable
from uuid import UUID

from chonkit.collection.models import Collection
from chonkit.collection.repository import CollectionRepository
from common.db.database import Connection
from common.errors import Conflict
from common.vectors.registry import VectorRegistry


def collection_migrating(name: str) -> Conflict:
    return Conflict(
        f"Collection {name!r} is moving to another embedding model; its documents, groups and model cannot change "
        "until that finishes (or is cancelled).",
        code="collection_migrating",
    )


async def refuse_if_migrating(conn: Connection, collection_id: UUID) -> None:
    """``409 collection_migrating`` while a move of the collection is being built: for every write a version being
    built would miss. Holds the collection's row (shared) until the caller's transaction ends, so a move starting
    concurrently waits for the write to be queued, and then refuses to start (``collection_busy``)."""
    collections = CollectionRepository(conn)
    if not await collections.hold(collection_id, exclusive=False):
        return  # no such collection: the caller says so
    if await collections.version_building(collection_id) is not None:
        collection = await collections.get(collection_id)
        raise collection_migrating(collection.name if collection else str(collection_id))


async def refuse_if_any_migrating(conn: Connection, collection_ids: Iterable[UUID]) -> None:
    """:func:`refuse_if_migrating` for each collection, in the order of their ids (so that two callers holding some
    of the same rows cannot wait for each other in a circle)."""
    for collection_id in sorted(set(collection_ids)):
        await refuse_if_migrating(conn, collection_id)


async def drop_building_version(conn: Connection, vectors: VectorRegistry, collection: Collection) -> None:
    """A collection being deleted takes its version being built with it."""
    version = await CollectionRepository(conn).version_building(collection.id)
    if version is not None:
        await vectors.get(collection.vector_provider).drop_collection(version)
