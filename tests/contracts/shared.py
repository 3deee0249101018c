"""The contract every vector adapter passes (run once per provider through the ``store`` fixture).

Vectors are 8-d and hand-made so that every distance is known exactly: ``e(i)`` is the i-th unit vector,
and the identity record sits at ``e(0)``. Chunk ids are small-integer UUIDs, so id order is plain to see.

Shared by the capability modules: ``test_collection_admin_contract``, ``test_chunks_contract``,
``test_search_contract`` and ``test_hybrid_contract``.
"""

from __future__ import annotations

import math
import uuid
from typing import Any

import jsonschema_rs
import msgspec

from common.vectors import (
    CHUNK_EXTRAS,
    IDENTITY_PROPERTIES,
    TEXT_PROPERTIES,
    Search,
    SearchHit,
    VectorRecord,
    VectorStore,
)
from schemas import load
from schemas.models import Identity
from tests.contracts.conftest import Harness

DIM = 8


ALL_PROPERTIES = (*IDENTITY_PROPERTIES, *TEXT_PROPERTIES, *CHUNK_EXTRAS)


DOC_A = "5a1ad9f0-0000-4000-8000-00000000000a"


DOC_B = "5a1ad9f0-0000-4000-8000-00000000000b"


IDENTITY_RS = jsonschema_rs.Draft202012Validator(load("identity"))


TEXT_PAYLOAD_RS = jsonschema_rs.Draft202012Validator(load("text-payload"))


class UncheckedIdentity(Identity, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """An Identity that skips its own checks, standing in for one built by code that bypasses them."""

    def __post_init__(self) -> None:
        pass


def e(i: int, scale: float = 1.0) -> list[float]:
    vector = [0.0] * DIM
    vector[i] = scale
    return vector


def add(*vectors: list[float]) -> list[float]:
    return [sum(components) for components in zip(*vectors, strict=True)]


def same_hits(found: object, expected: list[SearchHit]) -> bool:
    """The same chunks in the same order with the same payloads; distances equal to float32 precision (an
    in-memory copy and PostgreSQL sum the same products in different orders)."""
    return (
        isinstance(found, list)
        and [(h.id, h.payload) for h in found] == [(h.id, h.payload) for h in expected]
        and all(math.isclose(a.distance, b.distance, abs_tol=1e-6) for a, b in zip(found, expected, strict=True))
    )


def cid(n: int) -> str:
    return str(uuid.UUID(int=n))


def make_identity(store: VectorStore, name: str, groups: list[str] | None = None) -> Identity:
    return Identity(
        collection_id=str(uuid.uuid5(uuid.NAMESPACE_URL, name)),
        name=name,
        model="all-MiniLM-L6-v2",
        vectorProvider=store.provider,
        embeddingProvider="local",
        groups=groups if groups is not None else msgspec.UNSET,
    )


def chunk(
    identity: Identity,
    n: int,
    vector: list[float],
    *,
    document_id: str = DOC_A,
    groups: list[str] | None = None,
    content: str | None = None,
) -> VectorRecord:
    """A chunk as chonkit writes it: identity properties, text payload, our extras."""
    payload: dict[str, Any] = {
        **{key: value for key, value in identity.to_dict().items() if key != "groups"},
        "content": content if content is not None else f"chunk {n}",
        "document_id": document_id,
        "chunk_index": n,
        "char_start": 10 * n,
        "char_end": 10 * n + 9,
        "page_start": None,
        "page_end": None,
        "heading_path": ["Intro", f"Part {n}"],
        "token_count": 3,
        "content_hash": f"{n:064x}",
        "document_sha256": "ab" * 32,
        "parent_index": None,
        "parent_content": None,
    }
    if groups is not None:
        payload["groups"] = groups
    return VectorRecord(id=cid(n), vector=vector, payload=payload)


async def new_collection(provider: Harness, groups: list[str] | None = None) -> Identity:
    identity = make_identity(provider.store, provider.new_name(), groups)
    await provider.store.create_collection(identity, DIM)
    return identity


async def ids_found(store: VectorStore, name: str, query: list[float], **kwargs: Any) -> list[str]:
    hits = await store.search(
        Search(name=name, vector=query, limit=kwargs.pop("limit", 50), properties=["document_id"], **kwargs)
    )
    return [hit.id for hit in hits]


async def grouped_collection(provider: Harness) -> Identity:
    """Chunks 1-2 public, 3 for hr, 4 for legal, 5 for hr+legal, 6 for ops; 1, 3, 5 in DOC_A."""
    identity = await new_collection(provider)
    groups: dict[int, list[str] | None] = {1: None, 2: None, 3: ["hr"], 4: ["legal"], 5: ["hr", "legal"], 6: ["ops"]}
    records = [
        chunk(identity, n, add(e(1), e(2, 0.1 * n)), groups=g, document_id=DOC_A if n % 2 else DOC_B)
        for n, g in groups.items()
    ]
    await provider.store.upsert(identity.name, records)
    return identity


ODD_GROUPS: dict[int, object] = {2: ["hr"], 3: [], 4: None, 5: "hr", 6: ["eng"]}
"""Chunk 1 has no ``groups``; the others carry these copies, as another application might write them."""
