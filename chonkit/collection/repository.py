"""SQL for ``chonkit.collections`` and ``chonkit.collection_documents``."""

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

    async def lock(self, collection_id: UUID) -> None:
        """Hold the collection's advisory lock until the transaction ends."""
        await self.conn.execute("SELECT pg_advisory_xact_lock($1)", collection_lock_key(collection_id))

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

    async def document_names(self, document_ids: list[str]) -> dict[str, str]:
        records = await self.conn.fetch(
            "SELECT id::text AS id, name FROM chonkit.documents WHERE id::text = ANY($1::text[])", document_ids
        )
        return {r["id"]: r["name"] for r in records}
