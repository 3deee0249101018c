"""``/collections`` and ``/providers``: vector collections with identity records, their documents and search."""

from __future__ import annotations

from uuid import UUID

from litestar import Controller, delete, get, post, put
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody
from litestar.status_codes import HTTP_200_OK, HTTP_201_CREATED, HTTP_202_ACCEPTED

from chonkit.collection.models import (
    Collection,
    CollectionCreate,
    CollectionDetail,
    CollectionDocument,
    GroupsUpdate,
    Providers,
    SearchRequest,
    SearchResponse,
)
from chonkit.collection.service import CollectionService
from chonkit.embedding.models import DocumentIds, EmbeddingReport, JobCreated
from chonkit.embedding.service import JobService
from chonkit.reembedding.models import CollectionModel, EmbeddingChange, MigrationStatus
from chonkit.reembedding.service import ReembeddingService


class CollectionController(Controller):
    """Each collection lives in one vector store and carries an identity record that tells every Ragu
    application its id, name, embedding model, providers and groups."""

    path = "/collections"
    tags = ["collections"]

    @post("/", status_code=HTTP_201_CREATED, summary="Create a collection")
    async def create(
        self, collections: NamedDependency[CollectionService], data: JSONBody[CollectionCreate]
    ) -> Collection:
        """Creates the vector collection (cosine, the model's dimension) and writes its identity record.
        Unknown providers or models are refused with the list of valid ones."""
        return await collections.create(data)

    @get("/", summary="List collections")
    async def list_collections(self, collections: NamedDependency[CollectionService]) -> list[Collection]:
        return await collections.all()

    @get("/{collection_id:uuid}", summary="A collection, its identity as read back, and its documents")
    async def get_collection(
        self, collections: NamedDependency[CollectionService], collection_id: FromPath[UUID]
    ) -> CollectionDetail:
        """``identity`` is read from the vector store and validated against the published schema."""
        return await collections.detail(collection_id)

    @put("/{collection_id:uuid}/groups", summary="Replace the groups")
    async def set_groups(
        self,
        collections: NamedDependency[CollectionService],
        collection_id: FromPath[UUID],
        data: JSONBody[GroupsUpdate],
    ) -> Collection:
        """Replace semantics: rewrites the identity record and every chunk's copy. An empty list makes the
        collection readable by everyone (the ``groups`` property is removed, as the schema requires)."""
        return await collections.set_groups(collection_id, data.groups)

    @put("/{collection_id:uuid}/embedding", status_code=HTTP_202_ACCEPTED, summary="Change the embedding model")
    async def change_embedding(
        self,
        reembedding: NamedDependency[ReembeddingService],
        collection_id: FromPath[UUID],
        data: JSONBody[EmbeddingChange],
    ) -> MigrationStatus:
        """Re-embeds every document with the new model into a new version of the collection, in the background
        (follow ``job`` at ``/jobs/{id}/events``; cancel it there); readers keep the current version until the new one
        is complete, then one swap makes it the collection, its identity naming the new model. A failed or cancelled
        change leaves the collection as it was. Meanwhile its documents and groups cannot change
        (``409 collection_migrating``); the same model again is ``409 same_embedding_model``."""
        return await reembedding.start(collection_id, data)

    @get("/{collection_id:uuid}/embedding", summary="The embedding model and its latest change")
    async def embedding_model(
        self, reembedding: NamedDependency[ReembeddingService], collection_id: FromPath[UUID]
    ) -> CollectionModel:
        """``migration`` and its ``job`` are null when the model never changed."""
        return await reembedding.current(collection_id)

    @delete("/{collection_id:uuid}", summary="Delete a collection")
    async def delete_collection(
        self, collections: NamedDependency[CollectionService], collection_id: FromPath[UUID]
    ) -> None:
        """Drops the vector collection (chunks and identity) and chonkit's rows."""
        await collections.delete(collection_id)

    @post("/{collection_id:uuid}/documents", status_code=HTTP_202_ACCEPTED, summary="Embed documents into it")
    async def add_documents(
        self, jobs: NamedDependency[JobService], collection_id: FromPath[UUID], data: JSONBody[DocumentIds]
    ) -> JobCreated:
        """Queues a durable job; follow it at ``/jobs/{id}`` or ``/jobs/{id}/events``. Unchanged documents
        (same bytes, same config) are skipped; changed ones have their vectors replaced."""
        return await jobs.enqueue(collection_id, "embed", data.document_ids)

    @post("/{collection_id:uuid}/documents/remove", status_code=HTTP_202_ACCEPTED, summary="Remove documents")
    async def remove_documents(
        self, jobs: NamedDependency[JobService], collection_id: FromPath[UUID], data: JSONBody[DocumentIds]
    ) -> JobCreated:
        """Queues a job that deletes the documents' vectors from this collection. A removal wins over an embedding of
        the same documents into this collection still queued or running: that embedding is cancelled
        (``superseded`` lists each with the stage it was in; its item ends ``cancelled`` with ``error_code``
        ``document_removed``) and nothing it was about to write stays. ``already_queued``: documents whose removal
        is already queued or running (``job`` is null when that is all of them)."""
        return await jobs.enqueue(collection_id, "remove", data.document_ids)

    @get("/{collection_id:uuid}/documents", summary="Documents in the collection")
    async def documents(
        self, collections: NamedDependency[CollectionService], collection_id: FromPath[UUID]
    ) -> list[CollectionDocument]:
        return (await collections.detail(collection_id)).documents

    @get("/{collection_id:uuid}/reports", summary="Embedding reports")
    async def reports(self, jobs: NamedDependency[JobService], collection_id: FromPath[UUID]) -> list[EmbeddingReport]:
        """Per document and run: model, tokens, vectors and duration."""
        return await jobs.reports(collection_id, None)

    @post("/{collection_id:uuid}/search", status_code=HTTP_200_OK, summary="Search (retrieval test bench)")
    async def search(
        self,
        collections: NamedDependency[CollectionService],
        collection_id: FromPath[UUID],
        data: JSONBody[SearchRequest],
    ) -> SearchResponse:
        """Searches by meaning, by keywords or both (``mode``), filtered by documents, tags and labels, optionally
        one hit per document (``group_by``); each hit says which leg found it (``legs``). The query is embedded
        with the collection's own model. Admin only and unfiltered by groups: this is a tuning tool, not a user's
        view."""
        return await collections.search(collection_id, data)


class ProviderController(Controller):
    path = "/providers"
    tags = ["collections"]

    @get("/", summary="Vector providers and embedding models")
    async def providers(self, collections: NamedDependency[CollectionService]) -> Providers:
        return collections.providers()
