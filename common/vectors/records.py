"""What every vector-store adapter does the same way to the records it writes and reads.

One copy, so that the adapters validate identities, parse chunk ids and convert vectors alike, and answer
with the same errors and codes; only the vendor calls differ between them.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
import numpy as np

from common.errors import AppError, Conflict, InvalidInput, NotFound, Unavailable
from common.vectors.base import (
    RETRIEVAL_MODES,
    ChunkPayload,
    Search,
    Searcher,
    SearchFilter,
    SearchResult,
    Vector,
)
from schemas import SchemaViolation, ecma, validate
from schemas.models import NAME_PATTERN, Identity, parse_identity

_log = logging.getLogger(__name__)

MAX_NAME_LENGTH = 63
"""The longest name every provider keeps as it is: PostgreSQL cuts identifiers after 63 bytes (which would
make two long names one table); Qdrant and Weaviate stop at 255."""
NAME_RULE = (
    "A collection name starts with a capital ASCII letter (A-Z) and holds only ASCII letters, digits and "
    f"underscores, at most {MAX_NAME_LENGTH} characters, so that every vector store accepts it"
)


def checked_identity_payload(identity: Identity) -> dict[str, Any]:
    """The identity's properties, validated against the published schema (``InvalidInput`` otherwise).

    msgspec does not type-check constructor arguments, so an ``Identity`` built in code can still break the
    schema; this is the last check before it is written where other processes will read it.
    """
    payload = identity.to_dict()
    try:
        validate("identity", payload)
    except SchemaViolation as exc:
        raise InvalidInput(
            f"identity does not satisfy the identity schema: {exc}",
            code="invalid_identity",
            extra={"violations": msgspec.to_builtins(exc.violations)},
        ) from exc
    return payload


def valid_identity(name: str, stored: object) -> Identity | None:
    """The stored identity when it is a valid Ragu identity of *this* collection, else ``None``.

    ``None`` rather than an error: a store may hold collections that are not ours, and listing them must
    skip them, never fail or modify them.
    """
    if stored is None:
        return None
    try:
        identity = parse_identity(stored)
    except ValueError as exc:  # SchemaViolation, or msgspec's ValidationError for a value rule of Identity
        _log.info("collection %r has an invalid identity record: %s", name, exc)
        return None
    if identity.name != name:
        _log.info("collection %r has the identity record of %r", name, identity.name)
        return None
    return identity


def chunk_uuid(record_id: str) -> uuid.UUID:
    """A chunk's id as a UUID; the identity record's nil UUID is refused, so no write can replace it."""
    try:
        parsed = uuid.UUID(record_id)
    except (ValueError, TypeError, AttributeError) as exc:
        raise InvalidInput(f"vector ids are UUIDs, got {record_id!r}", code="invalid_vector_id") from exc
    if parsed.int == 0:
        raise InvalidInput("the nil UUID is the identity record's id", code="identity_id_reserved")
    return parsed


def payload_dict(payload: ChunkPayload | dict[str, Any]) -> dict[str, Any]:
    """A record's payload as the JSON object every engine stores: a :class:`ChunkPayload` by its field names."""
    if isinstance(payload, dict):
        return payload
    as_dict: dict[str, Any] = msgspec.to_builtins(payload)
    return as_dict


def as_floats(vector: Vector) -> list[float]:
    """A plain list, which every client transport accepts: lists pass as they are, numpy rows convert in C."""
    if isinstance(vector, list):
        return vector
    if isinstance(vector, np.ndarray):
        floats: list[float] = vector.tolist()
        return floats
    return [float(x) for x in vector]


def is_collection_name(name: object) -> bool:
    """Whether ``name`` follows :data:`NAME_RULE`, so that a collection can move to any store under it."""
    return isinstance(name, str) and len(name) <= MAX_NAME_LENGTH and ecma.search(NAME_PATTERN, name)


def checked_name(name: str) -> str:
    """``name``, or ``InvalidInput("invalid_collection_name")``: a name no store may hold is never looked up,
    so it cannot pass for a missing collection."""
    if not is_collection_name(name):
        raise invalid_collection_name(name)
    return name


def invalid_collection_name(name: object) -> InvalidInput:
    shown = repr(name) if not isinstance(name, str) or len(name) <= 80 else f"{name[:80]!r}… ({len(name)} characters)"
    return InvalidInput(f"{NAME_RULE}; got {shown}.", code="invalid_collection_name", extra={"collection": name})


def collection_not_found(name: str | None) -> NotFound:
    return NotFound(f"no collection named {name!r}", code="collection_not_found", extra={"collection": name})


def collection_already_exists(name: str) -> Conflict:
    return Conflict(f"a collection named {name!r} already exists", code="collection_exists", extra={"collection": name})


def identity_not_found(name: str) -> NotFound:
    """The collection exists but :func:`valid_identity` finds no identity of its own in it."""
    return NotFound(f"collection {name!r} holds no valid Ragu identity record", code="identity_not_found")


def readable_chunk(payload: Mapping[str, Any], where: SearchFilter | None) -> bool:
    """The access rule of :attr:`SearchFilter.readable_by` on one chunk's payload, for adapters whose engine
    cannot tell every odd ``groups`` value apart in its own filter (Qdrant reads ``[]`` and null as absent)."""
    if where is None or where.readable_by is None:
        return True
    if "groups" not in payload:
        return where.ungrouped_readable
    groups = payload["groups"]
    return isinstance(groups, list) and any(isinstance(g, str) and g in where.readable_by for g in groups)


def misgrouped(payload: Mapping[str, Any], groups: Sequence[str]) -> bool:
    """The chunk's ``groups`` copy is not ``groups`` (:meth:`VectorStore.count_misgrouped`)."""
    if not groups:
        return "groups" in payload
    return payload.get("groups") != list(groups)


def matches_nothing(where: SearchFilter | None) -> bool:
    """A filter no chunk can pass, answered without a query: an empty set of documents, tags or labels, or no
    group to share where chunks without groups are not readable either. (Weaviate refuses an empty
    ``contains_any``; Qdrant would answer it.)"""
    if where is None:
        return False
    if where.readable_by == frozenset() and not where.ungrouped_readable:
        return True
    return any(values is not None and not values for values in (where.document_ids, where.tags, where.labels))


def lexical_index_missing(name: str, provider: str) -> Unavailable:
    """A keyword search of a collection without the lexical index: one made before hybrid retrieval (Qdrant,
    until its next write) or by another application (pgvector, until ``ragu reconcile --repair``). A hybrid
    search of it answers from its dense leg instead."""
    return Unavailable(
        f"{provider} collection {name!r} has no lexical index yet, so it cannot be searched by keywords; an "
        "operator adds it with `ragu reconcile --repair` (hybrid searches use the dense leg alone meanwhile)",
        code="lexical_index_missing",
        extra={"collection": name, "provider": provider},
    )


def check_retrieval(mode: object, dense_weight: object) -> None:
    """``InvalidInput`` for a retrieval mode or fusion weight no adapter knows, before any engine sees them."""
    if mode not in RETRIEVAL_MODES:
        raise InvalidInput(
            f"retrieval mode is one of {', '.join(RETRIEVAL_MODES)}, got {mode!r}",
            code="invalid_retrieval_mode",
            extra={"modes": list(RETRIEVAL_MODES)},
        )
    if isinstance(dense_weight, bool) or not isinstance(dense_weight, int | float) or not 0 <= dense_weight <= 1:
        raise InvalidInput(f"dense_weight is a number from 0 to 1, got {dense_weight!r}", code="invalid_dense_weight")


def chunk_content(payload: ChunkPayload | dict[str, Any]) -> str:
    """The text the lexical index holds of a record: its ``content``, or nothing when it has none."""
    if isinstance(payload, ChunkPayload):
        return payload.content
    content = payload.get("content")
    return content if isinstance(content, str) else ""


async def search_each(store: Searcher, searches: Sequence[Search]) -> list[SearchResult]:
    """:meth:`VectorStore.search_many` as concurrent single searches, for adapters without a batched query."""
    results = await asyncio.gather(*(store.search(s) for s in searches), return_exceptions=True)
    answered: list[SearchResult] = []
    for result in results:
        if isinstance(result, BaseException) and not isinstance(result, AppError):
            raise result  # not a search's own failure (a bug, a cancellation): the caller's
        answered.append(result)
    return answered
