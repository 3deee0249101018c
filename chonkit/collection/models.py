"""What the collections API speaks."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

import msgspec

from common.groups import GroupName
from common.vectors.base import DEFAULT_DENSE_WEIGHT, RetrievalMode

Groups = Annotated[list[GroupName], msgspec.Meta(max_length=100)]


VERSION_PREFIX = "Ragu_version_"
"""The store-side names of collections' new versions while they are built (``chonkit.reembedding``). Reserved: a
collection named so would pass for a version in the store and in ``ragu reconcile`` (issue #26's note)."""


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


SEARCH_DEPTH = 200
"""The most chunks one search of the test bench returns (or groups)."""

SearchTag = Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
SearchLabel = Annotated[str, msgspec.Meta(max_length=255)]


def _about(description: str, **constraints: Any) -> msgspec.Meta:
    """A field's description for the OpenAPI schema (field docstrings do not reach it), with its constraints."""
    return msgspec.Meta(description=" ".join(description.split()), **constraints)


class SearchRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One search of the test bench. Every filter applies to every leg of the search."""

    query: Annotated[str, msgspec.Meta(min_length=1, max_length=10_000)]
    limit: Annotated[
        int,
        _about(
            """How many chunks to return: the search depth. With group_by, these chunks are grouped, so fewer hits
            (one per document) come back.""",
            ge=1,
            le=SEARCH_DEPTH,
        ),
    ] = 5
    max_distance: (
        Annotated[
            float, _about("Keep only chunks within this cosine distance of the query, in every mode.", ge=0, le=2)
        ]
        | None
    ) = None
    mode: Annotated[
        RetrievalMode,
        _about(
            """dense: by meaning (the embedding's cosine similarity); lexical: by the query's words (BM25);
            hybrid: both legs merged by weighted reciprocal-rank fusion."""
        ),
    ] = "hybrid"
    dense_weight: Annotated[
        float,
        _about(
            "Hybrid only: the dense leg's share of the fusion (1 = the dense order, 0 = the lexical order).", ge=0, le=1
        ),
    ] = DEFAULT_DENSE_WEIGHT
    document_ids: (
        Annotated[list[UUID], _about("Keep only chunks of these documents (empty = every document).")] | None
    ) = None
    tags: (
        Annotated[
            list[SearchTag],
            _about("Keep only chunks of documents carrying at least one of these tags.", min_length=1, max_length=50),
        ]
        | None
    ) = None
    labels: (
        Annotated[
            list[SearchLabel],
            _about("Keep only chunks of documents whose label is one of these.", min_length=1, max_length=50),
        ]
        | None
    ) = None
    group_by: (
        Annotated[
            Literal["document"],
            _about(
                """document: one hit per document, its best chunk with chunk_count, in the order of those best
            chunks."""
            ),
        ]
        | None
    ) = None


class HitLegs(msgspec.Struct, frozen=True, kw_only=True):
    """Which leg of the search found a hit, and where: what hybrid changed against either leg alone."""

    dense_rank: Annotated[
        int | None,
        _about(
            """1-based rank among the dense (embedding) leg's candidates; null when that leg did not find the chunk
            or did not run (lexical mode)."""
        ),
    ]
    lexical_rank: Annotated[
        int | None,
        _about(
            """1-based rank among the lexical (keyword, BM25) leg's candidates; null when that leg did not find the
            chunk or did not run (dense mode)."""
        ),
    ]
    lexical_score: Annotated[float | None, _about("The chunk's BM25 score; null when the lexical leg did not find it.")]
    fused_score: Annotated[
        float | None, _about("Hybrid only: the weighted reciprocal-rank fusion score the hits are ordered by.")
    ]


class MatchedChunk(msgspec.Struct, frozen=True, kw_only=True):
    """One hit of the search test bench (the vector port's hits are ``common.vectors.base.SearchHit``)."""

    score: Annotated[
        float,
        _about(
            """What the hits are ordered by: cosine similarity (dense), BM25 score (lexical) or fused score
            (hybrid)."""
        ),
    ]
    distance: Annotated[float, _about("Cosine distance between the chunk and the query, in every mode.")]
    legs: HitLegs
    document_id: str
    document_name: str | None
    tags: Annotated[list[str], _about("The document's tags, as its chunks carry them.")]
    label: Annotated[str | None, _about("The document's label, as its chunks carry it.")]
    chunk_index: int | None
    content: str
    page_start: int | None
    page_end: int | None
    heading_path: list[str]
    char_start: int | None
    char_end: int | None
    parent_content: str | None
    ocr: Annotated[bool, _about("Some of its text was recognised by OCR (a scanned page).")] = False
    chunk_count: Annotated[
        int | None,
        _about(
            """With group_by document: how many of the document's chunks were among the chunks searched (this hit
            is the best of them); null otherwise."""
        ),
    ] = None


class SearchResponse(msgspec.Struct, frozen=True, kw_only=True):
    hits: list[MatchedChunk]
    mode: Annotated[RetrievalMode, _about("The mode the search ran in.")]
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
