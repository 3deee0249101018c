"""One document of a migration, in the worker: the ingest pipeline, into the new version.

The document is parsed and chunked per its stored configs (chunking counts tokens with the new model, whose limit
applies), embedded with the new model, and written into the migration's version under the collection's advisory
lock, in one transaction with what chonkit will record for it at the swap (:class:`MigrationRepository`) and the
item's ``done`` — the pipeline an embedding runs, its claim checks and stage timings included.
"""

from __future__ import annotations

from typing import Any

from chonkit.collection.models import Collection
from chonkit.document.chunking import ChunkResult
from chonkit.document.models import Document
from chonkit.document.repository import StoredConfig
from chonkit.ingest.pipeline import Claim, Pipeline, Target, configs
from chonkit.reembedding.models import Migration
from chonkit.reembedding.repository import MigrationRepository
from chonkit.reembedding.service import version_identity
from common.db import Database
from common.db.database import Connection
from common.embedders.base import EmbedderRegistry
from common.errors import Conflict, InvalidInput
from schemas.models import Identity


class ReembedStep:
    def __init__(self, db: Database, embedders: EmbedderRegistry, pipeline: Pipeline) -> None:
        self.db = db
        self.embedders = embedders
        self.pipeline = pipeline

    async def process(self, claim: Claim, *, document: Document | None, saved: StoredConfig | None) -> None:
        """Parse, chunk, embed and write one document into the migration's new version.

        Raises:
            Stop: cancelled, or the claim was lost.
        """
        async with self.db.transaction() as conn:
            migration = await MigrationRepository(conn).of_job(claim.item.job_id)
        if migration is None or migration.state != "building":
            raise Conflict("The migration this document belonged to has ended.", code="migration_finished")
        if document is None or saved is None:
            raise InvalidInput("The document was deleted before it could be embedded.", code="document_not_found")
        embedder = self.embedders.get(migration.embedding_provider, migration.model)
        stored = configs(saved, migration.embedding_provider, migration.model)
        await self.pipeline.run(claim, document, stored, embedder, _into(migration))


def _into(migration: Migration) -> Target:
    """The migration's version: its chunks carry the collection's identity with the new model, and chonkit records
    what the document will be once swapped (chunk count, config hash, parents)."""

    def identity(current: Collection | None) -> Identity:
        if current is None:
            raise Conflict("The collection was deleted during its migration.", code="collection_not_found")
        return version_identity(current, migration)

    async def record(conn: Connection, document: Document, result: ChunkResult, digest: str) -> None:
        await MigrationRepository(conn).record_document(
            migration.job_id,
            document.id,
            document_sha256=document.sha256,
            config_hash=digest,
            chunk_count=len(result.chunks),
            parents=[_parent(p) for p in result.parents],
        )

    return Target(store=migration.version, identity=identity, record=record)


def _parent(parent: Any) -> dict[str, Any]:
    return {
        "index": parent.index,
        "content": parent.content,
        "char_start": parent.char_start,
        "char_end": parent.char_end,
        "page_start": parent.page_start,
        "page_end": parent.page_end,
        "heading_path": list(parent.heading_path),
    }
