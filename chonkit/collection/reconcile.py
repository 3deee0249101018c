"""Drift between chonkit's database and the vector stores: find it, and repair what Ragu owns.

Ragu owns a vector collection when chonkit has a row for it. A store collection that carries a valid
Ragu identity but has no row here may belong to another Ragu deployment sharing the store: it is
reported, never touched. Repairs: a missing collection is recreated and its documents re-queued; a
wrong or missing identity record is rewritten (groups too, on every chunk); vectors of documents the
collection should not hold are deleted; documents whose vector counts disagree are re-queued; a collection made
before lexical retrieval gets its lexical index (:func:`upgrade_lexical_indexes`, which the worker also runs once
at its start).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Literal

import msgspec

from chonkit.collection.models import Collection
from chonkit.collection.repository import CollectionRepository
from chonkit.collection.service import identity_of
from chonkit.jobs.repository import JobRepository
from common.db import Database
from common.db.database import Connection
from common.errors import AppError
from common.vectors.base import ChunkCounter, VectorStore
from common.vectors.registry import VectorRegistry
from schemas.models import Identity

DriftKind = Literal[
    "provider_unavailable",
    "missing_collection",
    "identity_mismatch",
    "orphan_vectors",
    "count_mismatch",
    "foreign_collection",
    "lexical_index_missing",
    "chunks_misgrouped",
]

_log = logging.getLogger(__name__)


class Drift(msgspec.Struct, frozen=True, kw_only=True):
    kind: DriftKind
    provider: str
    collection: str
    detail: str
    repaired: bool


class ReconcileReport(msgspec.Struct, frozen=True, kw_only=True):
    collections_checked: int
    drift: list[Drift]

    @property
    def clean(self) -> bool:
        return all(d.repaired for d in self.drift)


async def reconcile(db: Database, vectors: VectorRegistry, *, repair: bool) -> ReconcileReport:
    async with db.transaction() as conn:
        collections = await CollectionRepository(conn).all()
    drift: list[Drift] = []
    for collection in collections:
        async with db.transaction() as conn:
            # The lock waits out a worker mid-write, whose vectors are in the store before its rows commit.
            await CollectionRepository(conn).lock(collection.id)
            drift.extend(await _check(conn, vectors, collection, repair=repair))
        if repair:
            drift.extend(await _upgrade_lexical(vectors, collection.vector_provider, collection.name))
    known = {str(c.id) for c in collections}
    for provider in vectors.providers():
        drift.extend(await _foreign(vectors, provider, known, repair=repair))
    return ReconcileReport(collections_checked=len(collections), drift=drift)


async def _foreign(vectors: VectorRegistry, provider: str, known: set[str], *, repair: bool) -> list[Drift]:
    """Collections another application (or another chonkit) wrote by the contract: reported and left as they are,
    except that a repair gives them the lexical index hybrid and keyword searches need (it adds to a collection;
    it changes none of its chunks)."""
    try:
        identities = await vectors.get(provider).list_identities()
    except AppError as exc:
        return [
            Drift(kind="provider_unavailable", provider=provider, collection="*", detail=exc.detail, repaired=False)
        ]
    drift = []
    for identity in identities:
        if identity.collection_id in known:
            continue
        detail = f"carries a Ragu identity (collection_id {identity.collection_id}) that this chonkit does not know"
        drift.append(
            Drift(kind="foreign_collection", provider=provider, collection=identity.name, detail=detail, repaired=False)
        )
        drift.extend(await _foreign_misgrouped(vectors.get(provider), provider, identity))
        if repair:
            drift.extend(await _upgrade_lexical(vectors, provider, identity.name))
    return drift


async def _foreign_misgrouped(store: ChunkCounter, provider: str, identity: Identity) -> list[Drift]:
    """Reported, not repaired: the collection is another application's to fix."""
    try:
        misgrouped = await store.count_misgrouped(identity.name, identity.groups or [])
    except AppError as exc:
        _log.warning("chunks of the foreign collection %r not checked: %s", identity.name, exc.detail)
        return []
    if not misgrouped:
        return []
    detail = _misgrouped_detail(misgrouped)
    return [Drift(kind="chunks_misgrouped", provider=provider, collection=identity.name, detail=detail, repaired=False)]


async def _check(conn: Connection, vectors: VectorRegistry, collection: Collection, *, repair: bool) -> list[Drift]:
    def found(kind: DriftKind, detail: str, repaired: bool = False) -> Drift:
        return Drift(
            kind=kind, provider=collection.vector_provider, collection=collection.name, detail=detail, repaired=repaired
        )

    try:
        store = vectors.get(collection.vector_provider)
        exists = await store.collection_exists(collection.name)
    except AppError as exc:
        return [found("provider_unavailable", exc.detail)]
    expected_identity = identity_of(collection)
    if not exists:
        if repair:
            await store.create_collection(expected_identity, collection.dimension)
            await _requeue(conn, collection, None)
        return [found("missing_collection", "the vector collection does not exist", repaired=repair)]

    drift = []
    stored = await store.read_identity(collection.name)
    if stored != expected_identity.to_dict():
        if repair:
            await store.write_identity(expected_identity)
            await store.set_groups(collection.name, collection.groups)
        drift.append(found("identity_mismatch", f"stored identity {stored!r} differs from the database", repair))
    misgrouped = await store.count_misgrouped(collection.name, collection.groups)
    if misgrouped:
        if repair:
            await store.set_groups(collection.name, collection.groups)
        drift.append(found("chunks_misgrouped", _misgrouped_detail(misgrouped), repair))

    return drift + await _check_documents(conn, store, collection, found, repair=repair)


def _misgrouped_detail(count: int) -> str:
    return f"{count} chunks carry a groups copy other than the collection's: readable by nobody, or by other groups"


async def _check_documents(
    conn: Connection, store: VectorStore, collection: Collection, found: Callable[..., Drift], *, repair: bool
) -> list[Drift]:
    """Each document's vectors against the count chonkit recorded: vectors of a document it should not hold are
    orphans (deleted by a repair), a count that differs is re-embedded by a repair."""
    drift = []
    in_store = await store.document_ids(collection.name)
    expected = await CollectionRepository(conn).chunk_counts(collection.id)
    for document_id, count in sorted(in_store.items()):
        if document_id not in expected:
            if repair:
                await store.delete_document(collection.name, document_id)
            drift.append(
                found("orphan_vectors", f"{count} vectors of document {document_id}, which it should not hold", repair)
            )
    mismatched = [d for d, n in expected.items() if in_store.get(d, 0) != n]
    for document_id in sorted(mismatched):
        drift.append(
            found(
                "count_mismatch",
                f"document {document_id}: {in_store.get(document_id, 0)} vectors, expected {expected[document_id]}",
                repair,
            )
        )
    if repair and mismatched:
        await _requeue(conn, collection, [uuid.UUID(d) for d in mismatched])
    return drift


async def _upgrade_lexical(vectors: VectorRegistry, provider: str, name: str) -> list[Drift]:
    try:
        indexed = await vectors.get(provider).upgrade_lexical(name)
    except AppError:
        return []  # the store's problem is reported by _check already
    if not indexed:
        return []
    detail = f"made without a lexical index: lexical index added to {indexed} chunks"
    return [Drift(kind="lexical_index_missing", provider=provider, collection=name, detail=detail, repaired=True)]


async def upgrade_lexical_indexes(db: Database, vectors: VectorRegistry) -> int:
    """Give every collection chonkit owns that was made before lexical retrieval its lexical index; a store that
    is down is skipped (the collection's next write upgrades it too). Returns how many chunks were indexed."""
    async with db.transaction() as conn:
        collections = await CollectionRepository(conn).all()
    indexed = 0
    for collection in collections:
        try:
            indexed += await vectors.get(collection.vector_provider).upgrade_lexical(collection.name)
        except AppError as exc:
            _log.warning("lexical index of %r not added now: %s", collection.name, exc.detail)
    return indexed


async def _requeue(conn: Connection, collection: Collection, document_ids: list[uuid.UUID] | None) -> None:
    """Forget what the collection held (so nothing is skipped as unchanged) and queue it again."""
    if document_ids is None:
        document_ids = [uuid.UUID(d) for d in await CollectionRepository(conn).chunk_counts(collection.id)]
    jobs = JobRepository(conn)
    for document_id in document_ids:
        await jobs.forget_document(collection.id, document_id)
    if document_ids:
        await jobs.create(uuid.uuid4(), collection.id, "embed", document_ids)
