"""Vector stores behind one port (:mod:`common.vectors.base`); each adapter lives in its own module and is
imported by whoever builds it, so no vendor SDK loads with this package."""

from common.vectors.base import (
    CHUNK_EXTRAS,
    FILTERABLE,
    IDENTITY_ID,
    IDENTITY_PROPERTIES,
    TEXT_PROPERTIES,
    ChunkFields,
    ChunkPayload,
    Search,
    SearchFilter,
    SearchHit,
    SearchResult,
    VectorRecord,
    VectorStore,
    identity_vector,
    read_chunk,
)

__all__ = [
    "CHUNK_EXTRAS",
    "FILTERABLE",
    "IDENTITY_ID",
    "IDENTITY_PROPERTIES",
    "TEXT_PROPERTIES",
    "ChunkFields",
    "ChunkPayload",
    "Search",
    "SearchFilter",
    "SearchHit",
    "SearchResult",
    "VectorRecord",
    "VectorStore",
    "identity_vector",
    "read_chunk",
]
