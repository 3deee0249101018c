"""``/collections/{id}/embedding``: a collection's embedding model, and a change of it."""

from __future__ import annotations

from uuid import UUID

from litestar import Controller, get, put
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody
from litestar.status_codes import HTTP_202_ACCEPTED

from chonkit.reembedding.models import CollectionModel, EmbeddingChange, MigrationStatus
from chonkit.reembedding.service import ReembeddingService


class EmbeddingModelController(Controller):
    path = "/collections"
    tags = ["collections"]

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
