"""``/collections`` and ``/providers``: vector collections with identity records, their documents and search. Putting
documents in and taking them out are embedding jobs (``chonkit/embedding/controller.py``), a change of model is
re-embedding's (``chonkit/reembedding/controller.py``): both under ``/collections/{id}`` too."""

from __future__ import annotations

from uuid import UUID

from litestar import Controller, delete, get, post, put
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody
from litestar.status_codes import HTTP_200_OK, HTTP_201_CREATED

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

    @delete("/{collection_id:uuid}", summary="Delete a collection")
    async def delete_collection(
        self, collections: NamedDependency[CollectionService], collection_id: FromPath[UUID]
    ) -> None:
        """Drops the vector collection (chunks and identity) and chonkit's rows."""
        await collections.delete(collection_id)

    @get("/{collection_id:uuid}/documents", summary="Documents in the collection")
    async def documents(
        self, collections: NamedDependency[CollectionService], collection_id: FromPath[UUID]
    ) -> list[CollectionDocument]:
        return (await collections.detail(collection_id)).documents

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
