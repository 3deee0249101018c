"""Property: no retrieved chunk ever comes from a collection outside the user's groups.

Hypothesis draws collection groups, agent assignments and user groups. Each property runs three
times: with both checks, with the first check (identity groups) switched off — so the vector
store's payload filter alone must hold — and with the payload filter switched off — so the first
check alone must hold. Qdrant runs in its local mode in a private event loop, so the property can be
a plain synchronous Hypothesis test.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Coroutine, Iterator
from datetime import UTC, datetime
from typing import Any, TypeVar

import msgspec
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from qdrant_client import AsyncQdrantClient

from common.embedders.base import EmbedderRegistry
from common.vectors.base import VectorRecord
from common.vectors.qdrant import QdrantStore
from common.vectors.registry import VectorRegistry
from kappi.access.identities import IdentityReader
from kappi.agent.models import Assignment
from kappi.retrieval.service import QueryVectors, Retriever
from schemas.models import Identity

T = TypeVar("T")
GROUPS = ("hr", "legal", "exec", "eng")
COLLECTIONS = tuple(f"Prop_{i}" for i in range(5))
CHUNKS_PER_COLLECTION = 3


class World:
    """Five collections in an in-memory Qdrant, driven from a private loop on its own thread."""

    def __init__(self, embedders: EmbedderRegistry) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.store = QdrantStore(AsyncQdrantClient(location=":memory:"))
        self.vectors = VectorRegistry({"qdrant": self.store})
        self.embedders = embedders
        self.ids = {name: str(uuid.uuid4()) for name in COLLECTIONS}
        self.run(self._create())

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=60)

    def identity(self, name: str, groups: list[str]) -> Identity:
        return Identity(
            collection_id=self.ids[name],
            name=name,
            model="all-MiniLM-L6-v2",
            vectorProvider="qdrant",
            embeddingProvider="local",
            groups=groups or msgspec.UNSET,
        )

    async def _create(self) -> None:
        rng = np.random.default_rng(7)
        for name in COLLECTIONS:
            identity = self.identity(name, [])
            await self.store.create_collection(identity, 384)
            records = []
            for i in range(CHUNKS_PER_COLLECTION):
                vector = rng.normal(size=384).astype(np.float32)
                payload = {**identity.to_dict(), "content": f"{name} chunk {i}", "document_id": str(uuid.uuid4())}
                records.append(
                    VectorRecord(id=str(uuid.uuid4()), vector=vector / np.linalg.norm(vector), payload=payload)
                )
            await self.store.upsert(name, records)

    def retrieve(
        self, assigned: list[str], user_groups: frozenset[str], *, check_identity_groups: bool, filter_chunks: bool
    ) -> list[str]:
        retriever = Retriever(
            IdentityReader(self.vectors, ttl_seconds=0),
            self.vectors,
            QueryVectors(self.embedders),
            check_identity_groups=check_identity_groups,
            filter_chunks=filter_chunks,
        )
        now = datetime.now(UTC)
        assignments = [
            Assignment(
                vector_provider="qdrant",
                name=name,
                collection_id=self.ids[name],
                top_k=CHUNKS_PER_COLLECTION,
                max_distance=None,
                instruction="",
                created_at=now,
            )
            for name in assigned
        ]
        retrieval = self.run(retriever.retrieve(assignments, user_groups, "what do the documents say?"))
        return [chunk.collection for chunk in retrieval.chunks]

    def close(self) -> None:
        self.run(self.store.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


@pytest.fixture(scope="module")
def world(embedders: EmbedderRegistry) -> Iterator[World]:
    created = World(embedders)
    yield created
    created.close()


group_sets = st.lists(st.sampled_from(GROUPS), unique=True, max_size=3)
scenarios = st.fixed_dictionaries(
    {
        "collection_groups": st.fixed_dictionaries(dict.fromkeys(COLLECTIONS, group_sets)),
        "assigned": st.lists(st.sampled_from(COLLECTIONS), unique=True, min_size=1),
        "user_groups": group_sets.map(frozenset),
    }
)
MODES = [
    pytest.param(True, True, id="both-checks"),
    pytest.param(False, True, id="payload-filter-alone"),
    pytest.param(True, False, id="identity-check-alone"),
]


@pytest.mark.parametrize(("check_identity_groups", "filter_chunks"), MODES)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(scenario=scenarios)
def test_no_chunk_from_a_collection_outside_the_users_groups(
    world: World, check_identity_groups: bool, filter_chunks: bool, scenario: dict[str, Any]
) -> None:
    groups: dict[str, list[str]] = scenario["collection_groups"]
    for name, collection_groups in groups.items():
        world.run(world.store.set_groups(name, collection_groups))
    user_groups: frozenset[str] = scenario["user_groups"]

    found = world.retrieve(
        scenario["assigned"], user_groups, check_identity_groups=check_identity_groups, filter_chunks=filter_chunks
    )

    allowed = {n for n in scenario["assigned"] if not groups[n] or user_groups.intersection(groups[n])}
    assert set(found) <= allowed
    # and nothing allowed is lost: every allowed collection returns all its chunks
    assert sorted(found) == sorted(n for n in allowed for _ in range(CHUNKS_PER_COLLECTION))
