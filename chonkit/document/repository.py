"""SQL for ``chonkit.documents``; nothing else in chonkit writes that table."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from uuid import UUID

import msgspec

from chonkit.document.models import Document
from common.db.database import Connection

_COLUMNS = (
    "id, name, label, tags, doc_type, media_type, sha256, size_bytes, page_count, ocr_pages, created_at, updated_at"
)

SORTABLE = {"created_at", "updated_at", "name", "size_bytes"}


def _document(record: Any) -> Document:
    return msgspec.convert(dict(record), Document, from_attributes=True)


class StoredConfig(msgspec.Struct, frozen=True, kw_only=True):
    """A document's saved configs as stored (JSON objects, ``None`` when never saved), validated by the caller."""

    parse: dict[str, Any] | None
    chunk: dict[str, Any] | None


class DocumentRepository:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    async def insert_unless_duplicate(
        self,
        *,
        id: UUID,
        name: str,
        doc_type: str,
        media_type: str,
        sha256: str,
        size_bytes: int,
        page_count: int | None,
        ocr_pages: list[int] | None = None,
    ) -> tuple[Document, bool]:
        """Insert, or return the document that already holds these bytes; ``True`` when inserted.

        ``ON CONFLICT DO NOTHING`` makes concurrent uploads of the same bytes race safely: the losers
        wait for the winner's commit and then read its row.
        """
        record = await self.conn.fetchrow(
            f"""INSERT INTO chonkit.documents
                       (id, name, doc_type, media_type, sha256, size_bytes, page_count, ocr_pages)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                ON CONFLICT (sha256) DO NOTHING
                RETURNING {_COLUMNS}""",
            id,
            name,
            doc_type,
            media_type,
            sha256,
            size_bytes,
            page_count,
            ocr_pages or [],
        )
        if record is not None:
            return _document(record), True
        existing = await self.conn.fetchrow(f"SELECT {_COLUMNS} FROM chonkit.documents WHERE sha256 = $1", sha256)
        return _document(existing), False

    async def get(self, document_id: UUID) -> Document | None:
        record = await self.conn.fetchrow(f"SELECT {_COLUMNS} FROM chonkit.documents WHERE id = $1", document_id)
        return None if record is None else _document(record)

    async def existing(self, document_ids: list[UUID]) -> set[UUID]:
        """Which of ``document_ids`` are stored."""
        rows = await self.conn.fetch("SELECT id FROM chonkit.documents WHERE id = ANY($1::uuid[])", document_ids)
        return {row["id"] for row in rows}

    async def page(
        self, *, limit: int, offset: int, sort: str, descending: bool, search: str | None
    ) -> tuple[list[Document], int]:
        if sort not in SORTABLE:
            raise ValueError(sort)
        where, args = "", []
        if search:
            where = "WHERE name ILIKE $1 OR label ILIKE $1"
            args.append("%" + search.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%")
        order = f"{sort} {'DESC' if descending else 'ASC'}, id"
        records = await self.conn.fetch(
            f"""SELECT {_COLUMNS}, count(*) OVER () AS total FROM chonkit.documents {where}
                ORDER BY {order} LIMIT ${len(args) + 1} OFFSET ${len(args) + 2}""",
            *args,
            limit,
            offset,
        )
        if records:
            return [_document({k: v for k, v in r.items() if k != "total"}) for r in records], records[0]["total"]
        total = await self.conn.fetchval(f"SELECT count(*) FROM chonkit.documents {where}", *args)
        return [], total

    async def update(self, document_id: UUID, changes: dict[str, Any]) -> Document | None:
        """Set only the given columns (names come from our own patch struct, never from the request)."""
        assignments = ", ".join(f"{column} = ${i}" for i, column in enumerate(changes, start=2))
        record = await self.conn.fetchrow(
            f"""UPDATE chonkit.documents SET {assignments}, updated_at = now() WHERE id = $1 RETURNING {_COLUMNS}""",
            document_id,
            *changes.values(),
        )
        return None if record is None else _document(record)

    async def delete(self, document_id: UUID) -> Document | None:
        record = await self.conn.fetchrow(
            f"DELETE FROM chonkit.documents WHERE id = $1 RETURNING {_COLUMNS}", document_id
        )
        return None if record is None else _document(record)

    async def cancel_pending_jobs(self, document_id: UUID) -> None:
        await self.conn.execute(
            """UPDATE chonkit.job_items SET stage = 'cancelled', finished_at = now(),
                      error = 'The document was deleted.', error_code = 'document_deleted'
               WHERE document_id = $1 AND stage = 'queued'""",
            document_id,
        )

    async def get_config(self, document_id: UUID) -> StoredConfig | None:
        record = await self.conn.fetchrow(
            "SELECT parse_config, chunk_config FROM chonkit.documents WHERE id = $1", document_id
        )
        return None if record is None else StoredConfig(parse=record["parse_config"], chunk=record["chunk_config"])

    async def set_config(self, document_id: UUID, parse_config: Any, chunk_config: Any) -> bool:
        status = await self.conn.execute(
            "UPDATE chonkit.documents SET parse_config = $2, chunk_config = $3, updated_at = now() WHERE id = $1",
            document_id,
            parse_config,
            chunk_config,
        )
        return status.endswith(" 1")

    async def lock_blobs(self, digests: Iterable[str]) -> None:
        """Until this transaction ends, no other upload or blob removal of these digests runs. Taken in digest
        order, so two uploads of the same files in different orders cannot deadlock."""
        for digest in sorted(set(digests)):
            await self.conn.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", "chonkit.blob:" + digest)

    async def digest_in_use(self, digest: str) -> bool:
        query = "SELECT EXISTS (SELECT 1 FROM chonkit.documents WHERE sha256 = $1)"
        used: bool = await self.conn.fetchval(query, digest)
        return used
