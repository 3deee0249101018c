"""SQL for ``chonkit.collections`` and ``chonkit.collection_documents``, and whether a collection is moving to another
model (``chonkit.collection_migrations``), which every write of its documents asks first."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import asyncpg
import msgspec

from chonkit.collection.models import Collection, CollectionDocument
from common.db.database import Connection
from common.errors import Conflict

_SELECT = """
    SELECT c.id, c.name, c.vector_provider, c.embedding_provider, c.model, c.dimension, c.groups,
           c.created_at, c.updated_at,
           (SELECT count(*) FROM chonkit.collection_documents cd WHERE cd.collection_id = c.id) AS document_count
    FROM chonkit.collections c
"""


class PendingDocumentUpdate(msgspec.Struct, frozen=True, kw_only=True):
    """One collection whose chunks of a document must be given the document's name, tags and label as they are
    now (after the document changed, or to backfill chunks written before chunks carried tags and labels)."""

    collection_id: UUID
    document_id: UUID
    attempts: int
    collection_name: str
    vector_provider: str
    document_name: str
    tags: list[str]
    label: str | None


def _collection(record: Any) -> Collection:
    return msgspec.convert(dict(record), Collection)


def collection_lock_key(collection_id: UUID) -> int:
    """Advisory-lock key serialising group changes with chunk writes of one collection."""
    return int.from_bytes(collection_id.bytes[:8], "big", signed=True)


class CollectionRepository:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    async def insert(
        self,
        *,
        id: UUID,
        name: str,
        vector_provider: str,
        embedding_provider: str,
        model: str,
        dimension: int,
        groups: list[str],
    ) -> Collection:
        try:
            record = await self._insert(id, name, vector_provider, embedding_provider, model, dimension, groups)
        except asyncpg.UniqueViolationError as exc:
            raise Conflict(
                f"A collection named {name!r} already exists in {vector_provider}.", code="collection_exists"
            ) from exc
        return _collection(record)

    async def _insert(self, *values: Any) -> Any:
        return await self.conn.fetchrow(
            """INSERT INTO chonkit.collections (id, name, vector_provider, embedding_provider, model, dimension, groups)
               VALUES ($1, $2, $3, $4, $5, $6, $7)
               RETURNING id, name, vector_provider, embedding_provider, model, dimension, groups,
                         created_at, updated_at, 0 AS document_count""",
            *values,
        )

    async def get(self, collection_id: UUID) -> Collection | None:
        record = await self.conn.fetchrow(_SELECT + " WHERE c.id = $1", collection_id)
        return None if record is None else _collection(record)

    async def exists(self, collection_id: UUID) -> bool:
        return bool(await self.conn.fetchval("SELECT 1 FROM chonkit.collections WHERE id = $1", collection_id))

    async def lock(self, collection_id: UUID) -> None:
        """Hold the collection's advisory lock until the transaction ends."""
        await self.conn.execute("SELECT pg_advisory_xact_lock($1)", collection_lock_key(collection_id))

    async def hold(self, collection_id: UUID, *, exclusive: bool) -> bool:
        """Lock the collection's row until the transaction ends: a migration starting (exclusive) and a write being
        queued (shared) wait for each other, so neither misses the other. False when there is no such row."""
        mode = "UPDATE" if exclusive else "SHARE"
        found = await self.conn.fetchval(f"SELECT 1 FROM chonkit.collections WHERE id = $1 FOR {mode}", collection_id)
        return found is not None

    async def version_building(self, collection_id: UUID) -> str | None:
        """The store-side name of the new version a move to another model is building, if one is."""
        version: str | None = await self.conn.fetchval(
            "SELECT version FROM chonkit.collection_migrations WHERE collection_id = $1 AND state = 'building'",
            collection_id,
        )
        return version

    async def all(self) -> list[Collection]:
        return [_collection(r) for r in await self.conn.fetch(_SELECT + " ORDER BY c.name, c.vector_provider")]

    async def set_groups(self, collection_id: UUID, groups: list[str]) -> None:
        await self.conn.execute(
            "UPDATE chonkit.collections SET groups = $2, updated_at = now() WHERE id = $1", collection_id, groups
        )

    async def delete(self, collection_id: UUID) -> None:
        await self.conn.execute("DELETE FROM chonkit.collections WHERE id = $1", collection_id)

    async def documents(self, collection_id: UUID) -> list[CollectionDocument]:
        records = await self.conn.fetch(
            """SELECT cd.document_id, d.name, cd.document_sha256, cd.chunk_count, cd.embedded_at,
                      cd.document_sha256 = d.sha256 AS current
               FROM chonkit.collection_documents cd JOIN chonkit.documents d ON d.id = cd.document_id
               WHERE cd.collection_id = $1 ORDER BY d.name, cd.document_id""",
            collection_id,
        )
        return [msgspec.convert(dict(r), CollectionDocument) for r in records]

    async def collections_of_document(self, document_id: UUID) -> list[Collection]:
        records = await self.conn.fetch(
            _SELECT + " WHERE c.id IN (SELECT collection_id FROM chonkit.collection_documents WHERE document_id = $1)",
            document_id,
        )
        return [_collection(r) for r in records]

    async def chunk_counts(self, collection_id: UUID) -> dict[str, int]:
        records = await self.conn.fetch(
            "SELECT document_id, chunk_count FROM chonkit.collection_documents WHERE collection_id = $1",
            collection_id,
        )
        return {str(r["document_id"]): r["chunk_count"] for r in records}

    async def queue_document_update(self, document_id: UUID) -> None:
        """Every collection holding the document is to update its chunks (again, if an update is pending)."""
        await self.conn.execute(
            """INSERT INTO chonkit.pending_document_updates (collection_id, document_id)
               SELECT collection_id, document_id FROM chonkit.collection_documents WHERE document_id = $1
               ON CONFLICT (collection_id, document_id) DO UPDATE
               SET attempts = 0, error = NULL, next_attempt_at = now()""",
            document_id,
        )

    async def claim_document_update(self) -> PendingDocumentUpdate | None:
        """The update due longest ago, locked until the transaction ends (other workers skip it), with the
        document's name, tags and label as they are now."""
        record = await self.conn.fetchrow(
            """SELECT u.collection_id, u.document_id, u.attempts, c.name AS collection_name, c.vector_provider,
                      d.name AS document_name, d.tags, d.label
               FROM chonkit.pending_document_updates u
               JOIN chonkit.collections c ON c.id = u.collection_id
               JOIN chonkit.documents d ON d.id = u.document_id
               WHERE u.next_attempt_at <= now()
               ORDER BY u.next_attempt_at LIMIT 1
               FOR UPDATE OF u SKIP LOCKED"""
        )
        return None if record is None else msgspec.convert(dict(record), PendingDocumentUpdate)

    async def finish_document_update(self, update: PendingDocumentUpdate) -> None:
        await self.conn.execute(
            "DELETE FROM chonkit.pending_document_updates WHERE collection_id = $1 AND document_id = $2",
            update.collection_id,
            update.document_id,
        )

    async def postpone_document_update(self, update: PendingDocumentUpdate, error: str) -> None:
        """Try again after a wait that doubles with every failure, up to five minutes."""
        await self.conn.execute(
            """UPDATE chonkit.pending_document_updates
               SET attempts = attempts + 1, error = $3, next_attempt_at = now()
                   + least(interval '1 second' * power(2, least(attempts, 9)), interval '5 minutes')
               WHERE collection_id = $1 AND document_id = $2""",
            update.collection_id,
            update.document_id,
            error,
        )
