"""Moving a collection to another embedding model while it keeps answering.

A move builds a **new version** of the collection beside it, in the same vector store (``create_version``): a job of
kind ``reembed`` takes every document of the collection through the worker's own stages (parse and chunk per the
document's stored configs, embed with the new model) into that version, while readers — kappi first — keep
reading the collection as it was. When the last document is in, one swap (``swap_version``: pgvector renames the
tables in one transaction, Qdrant moves an alias) makes the new version the collection, identity record and all:
its ``model`` and ``embeddingProvider`` are the new ones, the rest unchanged. The old version goes with the swap.

Durability: the migration row, its job and its items are chonkit's rows, so a worker killed mid-way leaves items
that another worker takes over (the worker's heartbeat rule) and a migration that :meth:`Settler.settle_once` finishes
later. The swap is idempotent by the identity: a worker killed between the store's swap and chonkit's commit finds the
store already swapped and only records it. Until the swap nothing the readers see has changed; a failed or cancelled
migration drops its version and leaves the collection as it was.

Writes during a move are refused with ``409 collection_migrating`` (embedding or removing documents, groups, another
move): the version being built would miss them. Edits of a document's name, tags and label are not refused (the
document is shared with other collections): the swap queues them to be written again onto the new version.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from uuid import UUID

import msgspec

from chonkit.collection.guards import collection_migrating
from chonkit.collection.models import VERSION_PREFIX, Collection
from chonkit.collection.repository import CollectionRepository
from chonkit.collection.service import identity_of
from chonkit.jobs.repository import JobRepository
from chonkit.reembedding.models import CollectionModel, EmbeddingChange, Migration, MigrationState, MigrationStatus
from chonkit.reembedding.repository import MigrationRepository
from common.db import Database
from common.db.database import Connection
from common.embedders.base import EmbedderRegistry
from common.errors import AppError, Conflict, NotFound
from common.vectors.records import valid_identity
from common.vectors.registry import VectorRegistry
from schemas.models import Identity

_log = logging.getLogger(__name__)


def version_name(job_id: UUID) -> str:
    """The store-side name of a migration's new version: a valid collection name no admin would choose."""
    return f"{VERSION_PREFIX}{job_id.hex[:20]}"


def version_identity(collection: Collection, migration: Migration) -> Identity:
    """The identity record the new version carries: the collection's, with the new model."""
    return msgspec.structs.replace(
        identity_of(collection), model=migration.model, embeddingProvider=migration.embedding_provider
    )


class ReembeddingService:
    """What an admin asks for: start a move, see it. Each method is one transaction of its own."""

    def __init__(
        self,
        db: Database,
        vectors: VectorRegistry,
        embedders: EmbedderRegistry,
        *,
        wake_worker: Callable[[], None] = lambda: None,
    ) -> None:
        self.db = db
        self.vectors = vectors
        self.embedders = embedders
        self.wake_worker = wake_worker

    async def start(self, collection_id: UUID, change: EmbeddingChange) -> MigrationStatus:
        """Validate the model as collection creation does, then create the version (empty but for its identity)
        and the job that fills it. The same model again is ``409 same_embedding_model``.

        The store's version is created inside the transaction that records the migration, under the collection's
        exclusive hold: a store that refuses leaves no migration behind, and no worker can claim the job before
        its version exists (it commits with the job)."""
        async with self.db.transaction() as conn:
            migration = await self._begin(conn, collection_id, change)
            status = await _status(JobRepository(conn), migration)
        self.wake_worker()
        return status

    async def _begin(self, conn: Connection, collection_id: UUID, change: EmbeddingChange) -> Migration:
        collections, migrations = CollectionRepository(conn), MigrationRepository(conn)
        if not await collections.hold(collection_id, exclusive=True):
            raise NotFound(f"No collection {collection_id}.", code="collection_not_found")
        collection = await _collection(collections, collection_id)
        model = change.model or self.embedders.models(change.embedding_provider)[0].model
        spec = self.embedders.spec(change.embedding_provider, model)
        if (spec.provider, spec.model) == (collection.embedding_provider, collection.model):
            raise Conflict(
                f"Collection {collection.name!r} is already embedded with {spec.provider}/{spec.model}.",
                code="same_embedding_model",
            )
        if await collections.version_building(collection_id) is not None:
            raise collection_migrating(collection.name)
        if await migrations.has_pending_items(collection_id):
            raise Conflict(
                f"Collection {collection.name!r} has documents being embedded or removed; wait for those jobs (or "
                "cancel them) before changing its model.",
                code="collection_busy",
            )
        job_id = uuid.uuid4()
        documents = await collections.documents(collection_id)
        migration = await migrations.create(
            job_id=job_id,
            collection_id=collection_id,
            name=collection.name,
            version=version_name(job_id),
            from_provider=collection.embedding_provider,
            from_model=collection.model,
            embedding_provider=spec.provider,
            model=spec.model,
            dimension=spec.dimension,
            document_ids=[d.document_id for d in documents],
        )
        store = self.vectors.get(collection.vector_provider)
        await store.create_version(version_identity(collection, migration), spec.dimension, migration.version)
        return migration

    async def current(self, collection_id: UUID) -> CollectionModel:
        """The collection's model and its latest change, with that change's job."""
        async with self.db.transaction() as conn:
            collection = await _collection(CollectionRepository(conn), collection_id)
            migration = await MigrationRepository(conn).latest(collection_id)
            job = None if migration is None else await JobRepository(conn).get(migration.job_id)
        return CollectionModel(
            embedding_provider=collection.embedding_provider,
            model=collection.model,
            dimension=collection.dimension,
            migration=migration,
            job=job,
        )


async def _status(jobs: JobRepository, migration: Migration) -> MigrationStatus:
    job = await jobs.get(migration.job_id)
    if job is None:  # the job row goes only with the migration's (cascade)
        raise NotFound(f"No job {migration.job_id}.", code="job_not_found")
    return MigrationStatus(migration=migration, job=job)


async def _collection(collections: CollectionRepository, collection_id: UUID) -> Collection:
    collection = await collections.get(collection_id)
    if collection is None:
        raise NotFound(f"No collection {collection_id}.", code="collection_not_found")
    return collection


class Settler:
    """The worker's side: finish a migration none of whose documents is left to run — swap it in when every
    document is in its new version, drop the version otherwise."""

    def __init__(self, db: Database, vectors: VectorRegistry) -> None:
        self.db = db
        self.vectors = vectors
        self._installed = False
        """Whether migration 0017 is in the database (a worker may run on one migrated before it)."""

    async def settle_once(self) -> bool:
        """Settle one migration; False when none was ready. Runs under the migration's row lock and the collection's
        advisory lock (so no write of the collection is in flight), in one transaction with chonkit's records."""
        async with self.db.transaction() as conn:
            migrations = MigrationRepository(conn)
            self._installed = self._installed or await migrations.installed()
            if not self._installed:
                return False
            migration = await migrations.claim_settled()
            if migration is None:
                return False
            collections = CollectionRepository(conn)
            await collections.lock(migration.collection_id)
            collection = await collections.get(migration.collection_id)
            if collection is None:  # deleted meanwhile: its rows are gone with it
                return True
            outcome = await migrations.outcome(migration.job_id)
            store = self.vectors.get(collection.vector_provider)
            if outcome.unfinished or outcome.cancel_requested:
                state: MigrationState = "cancelled" if outcome.cancel_requested else "failed"
                await store.drop_collection(migration.version)
                await migrations.finish(migration.job_id, state, error_code=outcome.error_code, error=outcome.error)
                _log.info("migration of %s %s; the collection is as it was", collection.id, state)
                return True
            try:
                await self._swap(collection, migration)
            except AppError as exc:
                if exc.status >= 500:
                    raise  # the store is down: settled again once it is back
                await store.drop_collection(migration.version)
                await migrations.finish(migration.job_id, "failed", error_code=exc.code, error=exc.detail)
                return True
            await migrations.adopt(migration)
            await migrations.finish(migration.job_id, "done")
        return True

    async def _swap(self, collection: Collection, migration: Migration) -> None:
        """The store's swap, unless it already happened (a worker killed before chonkit recorded it)."""
        store = self.vectors.get(collection.vector_provider)
        current = valid_identity(collection.name, await store.read_identity(collection.name))
        if current is not None and (current.embeddingProvider, current.model) == (
            migration.embedding_provider,
            migration.model,
        ):
            return
        await store.swap_version(collection.name, migration.version)
