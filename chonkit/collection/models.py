"""What the collections API speaks."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

import msgspec

from common.groups import GroupName

Groups = Annotated[list[GroupName], msgspec.Meta(max_length=100)]


class CollectionCreate(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: str
    """A capital ASCII letter, then ASCII letters, digits and underscores; at most 63 characters, so that the
    name is valid in every vector store."""
    vector_provider: str = "pgvector"
    embedding_provider: str = "local"
    model: str | None = None
    """Default: the embedding provider's first model."""
    groups: Groups = msgspec.field(default_factory=list)
    """Who may read it (any one group suffices); empty = everyone."""


class Collection(msgspec.Struct, frozen=True, kw_only=True):
    id: UUID
    name: str
    vector_provider: str
    embedding_provider: str
    model: str
    dimension: int
    groups: list[str]
    document_count: int
    created_at: datetime
    updated_at: datetime


class CollectionDocument(msgspec.Struct, frozen=True, kw_only=True):
    document_id: UUID
    name: str
    document_sha256: str
    current: bool
    """False when the document changed (or its config did) since it was embedded."""
    chunk_count: int
    embedded_at: datetime


class IdentityCheck(msgspec.Struct, frozen=True, kw_only=True):
    identity: dict[str, Any] | None
    """As read back from the vector store."""
    valid: bool
    violations: list[str]
    matches_database: bool


class CollectionDetail(msgspec.Struct, frozen=True, kw_only=True):
    collection: Collection
    identity: IdentityCheck
    vector_count: int
    documents: list[CollectionDocument]


class GroupsUpdate(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    groups: Groups


class SearchRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    query: Annotated[str, msgspec.Meta(min_length=1, max_length=10_000)]
    limit: Annotated[int, msgspec.Meta(ge=1, le=100)] = 5
    max_distance: Annotated[float, msgspec.Meta(ge=0, le=2)] | None = None
    document_ids: list[UUID] | None = None


class MatchedChunk(msgspec.Struct, frozen=True, kw_only=True):
    """One hit of the search test bench (the vector port's hits are ``common.vectors.base.SearchHit``)."""

    score: float
    distance: float
    document_id: str
    document_name: str | None
    chunk_index: int | None
    content: str
    page_start: int | None
    page_end: int | None
    heading_path: list[str]
    char_start: int | None
    char_end: int | None
    parent_content: str | None


class SearchResponse(msgspec.Struct, frozen=True, kw_only=True):
    hits: list[MatchedChunk]
    embed_ms: float
    search_ms: float


class EmbeddingModel(msgspec.Struct, frozen=True, kw_only=True):
    provider: str
    model: str
    dimension: int
    max_tokens: int


class Providers(msgspec.Struct, frozen=True, kw_only=True):
    """What a collection can be created with (for pickers)."""

    vector_providers: list[str]
    embedding_models: list[EmbeddingModel]
