"""Collections: a row in chonkit's database and a collection in a vector store whose identity record
describes it to every Ragu application. The identity in the store is the source of truth for readers
(kappi); chonkit's row is how chonkit finds and repairs it.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from uuid import UUID

import msgspec

import schemas
from chonkit.collection.guards import drop_building_version, refuse_if_migrating
from chonkit.collection.models import (
    VERSION_PREFIX,
    Collection,
    CollectionCreate,
    CollectionDetail,
    EmbeddingModel,
    HitLegs,
    IdentityCheck,
    MatchedChunk,
    Providers,
    SearchRequest,
    SearchResponse,
)
from chonkit.collection.repository import CollectionRepository
from common.db import Database
from common.embedders.base import EmbedderRegistry
from common.errors import Conflict, InvalidInput, NotFound
from common.groups import check_groups
from common.vectors.base import RetrievalMode, Search, SearchFilter, SearchHit, read_chunk
from common.vectors.records import checked_name
from common.vectors.registry import VectorRegistry
from schemas.models import Identity

SEARCH_PROPERTIES = (
    "content",
    "document_id",
    "document_name",
    "chunk_index",
    "page_start",
    "page_end",
    "heading_path",
    "char_start",
    "char_end",
    "parent_content",
    "tags",
    "label",
    "ocr",
)


def identity_of(collection: Collection) -> Identity:
    """The identity record a collection's row prescribes (``groups`` omitted when empty, as the schema requires)."""
    return Identity(
        collection_id=str(collection.id),
        name=collection.name,
        model=collection.model,
        vectorProvider=collection.vector_provider,
        embeddingProvider=collection.embedding_provider,
        groups=list(collection.groups) if collection.groups else msgspec.UNSET,
    )


def provider_catalog(vectors: VectorRegistry, embedders: EmbedderRegistry) -> Providers:
    models = [
        EmbeddingModel(provider=s.provider, model=s.model, dimension=s.dimension, max_tokens=s.max_tokens)
        for provider in embedders.providers()
        for s in embedders.models(provider)
    ]
    return Providers(vector_providers=vectors.providers(), embedding_models=models)


async def _collection(repo: CollectionRepository, collection_id: UUID) -> Collection:
    collection = await repo.get(collection_id)
    if collection is None:
        raise NotFound(f"No collection {collection_id}.", code="collection_not_found")
    return collection


class CollectionService:
    """Each method runs in short transactions of its own. A change of both the row and the vector store (create,
    groups, delete) calls the store inside the row's transaction, under the collection's lock where it has one: a
    store that refuses rolls the row back, and no embedding write of the collection comes in between. Reads of the
    store and the search's embedding run after the row's transaction has ended, holding no connection."""

    def __init__(self, db: Database, vectors: VectorRegistry, embedders: EmbedderRegistry) -> None:
        self.db = db
        self.vectors = vectors
        self.embedders = embedders

    @asynccontextmanager
    async def _repo(self) -> AsyncIterator[CollectionRepository]:
        async with self.db.transaction() as conn:
            yield CollectionRepository(conn)

    def providers(self) -> Providers:
        return provider_catalog(self.vectors, self.embedders)

    async def create(self, request: CollectionCreate) -> Collection:
        """The row first, so a duplicate name is refused before the store is touched; the store's collection is
        created before the row commits, so a store that refuses leaves no row."""
        store = self.vectors.get(request.vector_provider)
        model = request.model or self.embedders.models(request.embedding_provider)[0].model
        spec = self.embedders.spec(request.embedding_provider, model)
        groups = check_groups(request.groups)
        if request.name.lower().startswith(VERSION_PREFIX.lower()):
            raise InvalidInput(
                f"Collection names starting with {VERSION_PREFIX!r} are reserved for new versions being built.",
                code="collection_name_reserved",
            )
        collection_id = uuid.uuid4()
        identity = Identity(
            collection_id=str(collection_id),
            name=checked_name(request.name),
            model=spec.model,
            vectorProvider=request.vector_provider,
            embeddingProvider=spec.provider,
            groups=groups or msgspec.UNSET,
        )
        if await store.collection_exists(request.name):
            raise Conflict(
                f"A collection named {request.name!r} already exists in {request.vector_provider}.",
                code="collection_exists",
            )
        async with self._repo() as repo:
            collection = await repo.insert(
                id=collection_id,
                name=request.name,
                vector_provider=request.vector_provider,
                embedding_provider=spec.provider,
                model=spec.model,
                dimension=spec.dimension,
                groups=groups,
            )
            await store.create_collection(identity, spec.dimension)
        return collection

    async def all(self) -> list[Collection]:
        async with self._repo() as repo:
            return await repo.all()

    async def get(self, collection_id: UUID) -> Collection:
        async with self._repo() as repo:
            return await _collection(repo, collection_id)

    async def detail(self, collection_id: UUID) -> CollectionDetail:
        """The row and its documents in one transaction; the store's identity and count read after it."""
        async with self._repo() as repo:
            collection = await _collection(repo, collection_id)
            documents = await repo.documents(collection_id)
        store = self.vectors.get(collection.vector_provider)
        stored = await store.read_identity(collection.name)
        violations = (
            [] if stored is None else [f"{v.path or '/'}: {v.message}" for v in schemas.errors("identity", stored)]
        )
        if stored is None:
            violations = ["the collection has no identity record in the vector store"]
        check = IdentityCheck(
            identity=stored,
            valid=not violations,
            violations=violations,
            matches_database=stored == identity_of(collection).to_dict(),
        )
        count = await store.count(collection.name) if stored is not None else 0
        return CollectionDetail(collection=collection, identity=check, vector_count=count, documents=documents)

    async def set_groups(self, collection_id: UUID, groups: list[str]) -> Collection:
        """Replace the groups: the row, the identity record, then every chunk's copy — in one transaction under the
        collection's lock, so an embedding job cannot write chunks with the old groups in between, and a store that
        fails leaves the row's groups as they were."""
        async with self._repo() as repo:
            collection = await _collection(repo, collection_id)
            groups = check_groups(groups)
            await refuse_if_migrating(repo.conn, collection_id)
            await repo.lock(collection_id)
            await repo.set_groups(collection_id, groups)
            await self.vectors.get(collection.vector_provider).set_groups(collection.name, groups)
            return await _collection(repo, collection_id)

    async def delete(self, collection_id: UUID) -> None:
        """Under the collection's lock, in one transaction: the version being built, the row, then the store's
        collection; a store that fails to drop it keeps the row, so the deletion can be asked again."""
        async with self._repo() as repo:
            collection = await _collection(repo, collection_id)
            await repo.lock(collection_id)
            await drop_building_version(repo.conn, self.vectors, collection)
            await repo.delete(collection_id)
            await self.vectors.get(collection.vector_provider).drop_collection(collection.name)

    async def search(self, collection_id: UUID, request: SearchRequest) -> SearchResponse:
        """The admin's retrieval test bench: no access filter, the collection's own embedding model. The query
        is embedded in every mode: ``distance`` (and ``max_distance``) is the cosine distance in all of them. The row
        is read in a transaction of its own; the embedding and the search hold no connection."""
        collection = await self.get(collection_id)
        embedder = self.embedders.get(collection.embedding_provider, collection.model)
        started = time.perf_counter()
        vector = await embedder.embed_query(request.query)
        embedded = time.perf_counter()
        hits = await self.vectors.get(collection.vector_provider).search(
            Search(
                name=collection.name,
                vector=vector.tolist(),
                limit=request.limit,
                properties=SEARCH_PROPERTIES,
                max_distance=request.max_distance,
                where=search_filter(request),
                text=request.query,
                mode=request.mode,
                dense_weight=request.dense_weight,
            )
        )
        searched = time.perf_counter()
        matched = [matched_chunk(hit, legs_of(hit, rank, request.mode)) for rank, hit in enumerate(hits, start=1)]
        return SearchResponse(
            hits=by_document(matched) if request.group_by == "document" else matched,
            mode=request.mode,
            embed_ms=round((embedded - started) * 1000, 3),
            search_ms=round((searched - embedded) * 1000, 3),
        )


def search_filter(request: SearchRequest) -> SearchFilter | None:
    """The request's filters as the port's conditions (AND-ed; each list means "any of")."""
    if not (request.document_ids or request.tags or request.labels):
        return None
    return SearchFilter(
        document_ids=frozenset(str(d) for d in request.document_ids) if request.document_ids else None,
        tags=frozenset(request.tags) if request.tags else None,
        labels=frozenset(request.labels) if request.labels else None,
    )


def legs_of(hit: SearchHit, rank: int, mode: RetrievalMode) -> HitLegs:
    """The legs the store reported. A dense search's hits come in the dense leg's order, so their dense rank is
    their position (the port builds no legs on that hot path)."""
    legs = hit.legs
    if legs is None:
        return HitLegs(
            dense_rank=rank if mode == "dense" else None, lexical_rank=None, lexical_score=None, fused_score=None
        )
    return HitLegs(
        dense_rank=legs.dense_rank,
        lexical_rank=legs.lexical_rank,
        lexical_score=legs.lexical_score,
        fused_score=legs.fused_score,
    )


def matched_chunk(hit: SearchHit, legs: HitLegs) -> MatchedChunk:
    """A hit as the bench shows it."""
    found = read_chunk(hit.payload)
    return MatchedChunk(
        score=hit.score,
        distance=hit.distance,
        legs=legs,
        document_id=found.document_id,
        document_name=found.document_name,
        tags=found.tags,
        label=found.label,
        chunk_index=found.chunk_index,
        content=found.content,
        page_start=found.page_start,
        page_end=found.page_end,
        heading_path=found.heading_path,
        char_start=found.char_start,
        char_end=found.char_end,
        parent_content=found.parent_content,
        ocr=found.ocr,
    )


def by_document(hits: Sequence[MatchedChunk]) -> list[MatchedChunk]:
    """One hit per document: its best chunk (hits arrive best first), with how many of its chunks were found,
    in the order of those best chunks."""
    best: dict[str, MatchedChunk] = {}
    counts: Counter[str] = Counter()
    for hit in hits:
        counts[hit.document_id] += 1
        best.setdefault(hit.document_id, hit)
    return [msgspec.structs.replace(hit, chunk_count=counts[document_id]) for document_id, hit in best.items()]
