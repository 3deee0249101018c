"""SQL for ``chonkit.collection_migrations`` and ``chonkit.migration_documents``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

import asyncpg
import msgspec

from chonkit.collection.guards import collection_migrating
from chonkit.reembedding.models import Migration, MigrationState, Outcome
from common.db.database import Connection

_COLUMNS = """job_id, collection_id, version, from_provider, from_model, embedding_provider, model, dimension, state,
              error_code, error, created_at, finished_at"""
_PENDING = "('queued', 'parsing', 'chunking', 'embedding', 'writing')"


def _migration(record: Any) -> Migration:
    return msgspec.convert(dict(record), Migration)


class MigrationRepository:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    async def create(
        self,
        *,
        job_id: UUID,
        collection_id: UUID,
        name: str,
        version: str,
        from_provider: str,
        from_model: str,
        embedding_provider: str,
        model: str,
        dimension: int,
        document_ids: Sequence[UUID],
    ) -> Migration:
        """The job (one item per document) and the migration row; another migration building for the collection
        is ``collection_migrating``."""
        await self.conn.execute(
            "INSERT INTO chonkit.jobs (id, collection_id, kind) VALUES ($1, $2, 'reembed')", job_id, collection_id
        )
        await self.conn.execute(
            """INSERT INTO chonkit.job_items (job_id, document_id, collection_id, position)
               SELECT $1, d, $2, o FROM unnest($3::uuid[]) WITH ORDINALITY AS t(d, o)""",
            job_id,
            collection_id,
            list(document_ids),
        )
        try:
            record = await self.conn.fetchrow(
                f"""INSERT INTO chonkit.collection_migrations (job_id, collection_id, version, from_provider,
                                                              from_model, embedding_provider, model, dimension)
                    VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING {_COLUMNS}""",
                job_id,
                collection_id,
                version,
                from_provider,
                from_model,
                embedding_provider,
                model,
                dimension,
            )
        except asyncpg.UniqueViolationError as exc:
            raise collection_migrating(name) from exc
        return _migration(record)

    async def installed(self) -> bool:
        """Whether this database has the migrations' tables (revision 0017)."""
        found: bool = await self.conn.fetchval("SELECT to_regclass('chonkit.collection_migrations') IS NOT NULL")
        return found

    async def latest(self, collection_id: UUID) -> Migration | None:
        record = await self.conn.fetchrow(
            f"""SELECT {_COLUMNS} FROM chonkit.collection_migrations WHERE collection_id = $1
                ORDER BY created_at DESC LIMIT 1""",
            collection_id,
        )
        return None if record is None else _migration(record)

    async def of_job(self, job_id: UUID) -> Migration | None:
        record = await self.conn.fetchrow(
            f"SELECT {_COLUMNS} FROM chonkit.collection_migrations WHERE job_id = $1", job_id
        )
        return None if record is None else _migration(record)

    async def has_pending_items(self, collection_id: UUID) -> bool:
        found = await self.conn.fetchval(
            f"SELECT 1 FROM chonkit.job_items WHERE collection_id = $1 AND stage IN {_PENDING} LIMIT 1", collection_id
        )
        return found is not None

    async def claim_settled(self) -> Migration | None:
        """A building migration none of whose items is left to run, locked until the transaction ends (other
        workers skip it)."""
        record = await self.conn.fetchrow(
            f"""SELECT {_COLUMNS} FROM chonkit.collection_migrations m
                WHERE m.state = 'building' AND NOT EXISTS (
                    SELECT 1 FROM chonkit.job_items i WHERE i.job_id = m.job_id AND i.stage IN {_PENDING})
                ORDER BY m.created_at LIMIT 1
                FOR UPDATE OF m SKIP LOCKED"""
        )
        return None if record is None else _migration(record)

    async def outcome(self, job_id: UUID) -> Outcome:
        record = await self.conn.fetchrow(
            """SELECT count(*) FILTER (WHERE i.stage = 'done') AS done,
                      count(*) FILTER (WHERE i.stage <> 'done') AS unfinished,
                      (SELECT cancel_requested FROM chonkit.jobs WHERE id = $1) AS cancel_requested,
                      (array_agg(i.error_code ORDER BY i.position) FILTER (WHERE i.error_code IS NOT NULL))[1]
                          AS error_code,
                      (array_agg(i.error ORDER BY i.position) FILTER (WHERE i.error IS NOT NULL))[1] AS error
               FROM chonkit.job_items i WHERE i.job_id = $1""",
            job_id,
        )
        return msgspec.convert(dict(record or {}), Outcome)

    async def record_document(
        self,
        job_id: UUID,
        document_id: UUID,
        *,
        document_sha256: str,
        config_hash: str,
        chunk_count: int,
        parents: Sequence[dict[str, Any]],
    ) -> None:
        await self.conn.execute(
            """INSERT INTO chonkit.migration_documents
                   (job_id, document_id, document_sha256, config_hash, chunk_count, parents)
               VALUES ($1, $2, $3, $4, $5, $6)
               ON CONFLICT (job_id, document_id) DO UPDATE
               SET document_sha256 = $3, config_hash = $4, chunk_count = $5, parents = $6""",
            job_id,
            document_id,
            document_sha256,
            config_hash,
            chunk_count,
            list(parents),
        )

    async def adopt(self, migration: Migration) -> None:
        """Chonkit's rows become the new version's: the collection's model, its documents' config hashes and chunk
        counts, their parent chunks; and every document's name, tags and label are queued to be written onto the new
        chunks again (an edit made while they were being built reached only the old version)."""
        await self.conn.execute(
            """UPDATE chonkit.collections SET embedding_provider = $2, model = $3, dimension = $4, updated_at = now()
               WHERE id = $1""",
            migration.collection_id,
            migration.embedding_provider,
            migration.model,
            migration.dimension,
        )
        await self.conn.execute(
            """UPDATE chonkit.collection_documents cd
               SET document_sha256 = md.document_sha256, config_hash = md.config_hash, chunk_count = md.chunk_count,
                   embedded_at = now()
               FROM chonkit.migration_documents md
               WHERE md.job_id = $1 AND cd.collection_id = $2 AND cd.document_id = md.document_id""",
            migration.job_id,
            migration.collection_id,
        )
        await self.conn.execute("DELETE FROM chonkit.parent_chunks WHERE collection_id = $1", migration.collection_id)
        await self.conn.execute(
            """INSERT INTO chonkit.parent_chunks (collection_id, document_id, parent_index, content, char_start,
                                                  char_end, page_start, page_end, heading_path)
               SELECT $2, md.document_id, (p->>'index')::int, p->>'content', (p->>'char_start')::int,
                      (p->>'char_end')::int, (p->>'page_start')::int, (p->>'page_end')::int,
                      ARRAY(SELECT jsonb_array_elements_text(p->'heading_path'))
               FROM chonkit.migration_documents md, jsonb_array_elements(md.parents) p
               WHERE md.job_id = $1""",
            migration.job_id,
            migration.collection_id,
        )
        await self.conn.execute(
            """INSERT INTO chonkit.pending_document_updates (collection_id, document_id)
               SELECT collection_id, document_id FROM chonkit.collection_documents WHERE collection_id = $1
               ON CONFLICT (collection_id, document_id) DO UPDATE
               SET attempts = 0, error = NULL, next_attempt_at = now()""",
            migration.collection_id,
        )

    async def finish(
        self, job_id: UUID, state: MigrationState, *, error_code: str | None = None, error: str | None = None
    ) -> None:
        await self.conn.execute(
            """UPDATE chonkit.collection_migrations SET state = $2, error_code = $3, error = $4, finished_at = now()
               WHERE job_id = $1""",
            job_id,
            state,
            error_code,
            error,
        )
        await self.conn.execute("DELETE FROM chonkit.migration_documents WHERE job_id = $1", job_id)
