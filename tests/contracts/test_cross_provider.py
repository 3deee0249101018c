"""Identical inputs into every available provider give identical answers, and the exact ones.

Each provider is compared with a brute-force cosine ranking computed here with numpy, so the test says
something even while only one provider is available, and any two providers that pass agree with each
other. The collection is small (64 chunks), where HNSW and Qdrant's index return exact neighbours.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import numpy as np
import pytest

from common.vectors import Search, SearchFilter, VectorRecord
from schemas.models import Identity
from tests.contracts.conftest import PROVIDERS, Harness, open_harness

DIM = 16
GROUPS = (None, ["hr"], ["legal"], ["hr", "ops"])
DOCUMENTS = [str(uuid.UUID(int=0xD0C0 + i)) for i in range(4)]
WHERE = [
    None,
    SearchFilter(readable_by=frozenset({"hr"})),
    SearchFilter(readable_by=frozenset()),
    SearchFilter(document_ids=frozenset(DOCUMENTS[:2])),
    SearchFilter(readable_by=frozenset({"legal"}), document_ids=frozenset(DOCUMENTS[1:])),
]


@pytest.fixture
async def harnesses(request: pytest.FixtureRequest, provider_resources: None) -> AsyncIterator[list[Harness]]:
    """Every provider that can run here (Weaviate without a server is left out, not skipped)."""
    async with AsyncExitStack() as stack:
        opened = []
        for name in PROVIDERS:
            try:
                opened.append(await stack.enter_async_context(open_harness(name, request)))
            except pytest.skip.Exception:
                continue
        yield opened


def corpus(identity: Identity) -> tuple[np.ndarray, list[VectorRecord]]:
    rng = np.random.default_rng(20261130)
    vectors = rng.standard_normal((64, DIM)).astype(np.float32)
    records = []
    for n, vector in enumerate(vectors):
        payload = {"content": f"chunk {n}", "document_id": DOCUMENTS[n % 4], "chunk_index": n, "name": identity.name}
        if (groups := GROUPS[n % len(GROUPS)]) is not None:
            payload["groups"] = groups
        records.append(VectorRecord(id=str(uuid.UUID(int=n + 1)), vector=vector.tolist(), payload=payload))
    return vectors, records


def keeps(where: SearchFilter | None, payload: dict[str, Any]) -> bool:
    """The port's filter semantics, spelled out: public or a shared group, and one of the documents."""
    if where is None:
        return True
    groups = payload.get("groups")
    if where.readable_by is not None and groups is not None and where.readable_by.isdisjoint(groups):
        return False
    return where.document_ids is None or payload["document_id"] in where.document_ids


def exact_top(
    vectors: np.ndarray, records: list[VectorRecord], query: np.ndarray, limit: int, where: SearchFilter | None
) -> list[str]:
    """The reference: cosine distance in float64 over the chunks the filter keeps, ties by id."""
    unit = vectors.astype(np.float64) / np.linalg.norm(vectors, axis=1, keepdims=True)
    distances = 1.0 - unit @ (query / np.linalg.norm(query))
    kept = [(float(distances[i]), record.id) for i, record in enumerate(records) if keeps(where, record.payload)]
    return [record_id for _, record_id in sorted(kept)[:limit]]


async def test_every_provider_returns_the_exact_neighbours(harnesses: list[Harness]) -> None:
    assert harnesses, "pgvector at least is always available"
    queries = np.random.default_rng(7).standard_normal((6, DIM))
    answers: dict[str, list[list[tuple[str, float]]]] = {}
    for harness in harnesses:
        store, name = harness.store, harness.new_name("Cross")
        identity = Identity(
            collection_id=str(uuid.uuid4()), name=name, model="m", vectorProvider=store.provider, embeddingProvider="e"
        )
        await store.create_collection(identity, DIM)
        vectors, records = corpus(identity)
        await store.upsert(name, records)
        assert await store.count(name) == len(records)
        assert await store.document_ids(name) == dict.fromkeys(DOCUMENTS, 16)
        chunk_index = {record.id: record.payload["chunk_index"] for record in records}

        answers[store.provider] = []
        for query in queries:
            for where in WHERE:
                hits = await store.search(
                    Search(name=name, vector=query.tolist(), limit=10, properties=["chunk_index"], where=where)
                )
                assert [hit.id for hit in hits] == exact_top(vectors, records, query, 10, where), (
                    store.provider,
                    where,
                )
                assert [hit.payload for hit in hits] == [{"chunk_index": chunk_index[hit.id]} for hit in hits]
                answers[store.provider].append([(hit.id, hit.score) for hit in hits])

    reference, *others = answers.values()
    for other in others:
        for ranked, reference_ranked in zip(other, reference, strict=True):
            assert [hit_id for hit_id, _ in ranked] == [hit_id for hit_id, _ in reference_ranked]
            assert [score for _, score in ranked] == pytest.approx([score for _, score in reference_ranked], abs=1e-5)
