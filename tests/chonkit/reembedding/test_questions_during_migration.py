"""Kappi asking throughout a model change: every question is answered, each from one version of the collection
whole (its query embedded with the model of the chunks it finds), and the first question after the swap already
answers from the new version — through pgvector, through kappi's in-memory copies of it, and through Qdrant.

The two models have the same dimension (hashed words, seeded apart), so a question embedded with the old model would
search the new version without any error: only the check on the hits' ``model`` keeps the versions apart."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import httpx
import pytest

from chonkit.embedding.worker import EmbeddingWorker
from common.db.database import Pool
from common.embedders.base import EmbedderRegistry, Vectors
from common.vectors.base import Search, SearchResult, VectorStore
from common.vectors.pgvector import PgVectorStore, open_pool
from common.vectors.registry import VectorRegistry
from common.vectors.resident import ResidentVectors
from kappi.access.identities import IdentityReader
from kappi.agent.models import Assignment
from kappi.retrieval.service import QueryVectors, Retriever
from schemas.models import parse_identity
from tests.chonkit.conftest import drain
from tests.chonkit.reembedding.conftest import SAME_DIMENSION, embedded_collection, valid_identity
from tests.kappi.conftest import assignment

QUESTION = "How many days of vacation leave do employees get?"


class Recorded:
    """The store kappi searches, noting the model of every hit of every search."""

    def __init__(self, store: VectorStore) -> None:
        self._store = store
        self.hit_models: list[set[str]] = []

    async def read_identity(self, name: str) -> dict[str, Any] | None:
        return await self._store.read_identity(name)

    async def search_many(self, searches: Sequence[Search]) -> list[SearchResult]:
        results = await self._store.search_many(searches)
        for result in results:
            assert not isinstance(result, Exception), result
            self.hit_models.append({hit.payload["model"] for hit in result})
        return results


class RecordedQueries(QueryVectors):
    """Kappi's query vectors, noting which model each question was embedded with."""

    def __init__(self, embedders: EmbedderRegistry) -> None:
        super().__init__(embedders, size=0)
        self.models: list[str] = []

    async def get(self, provider: str, model: str, text: str) -> Vectors:
        self.models.append(model)
        return await super().get(provider, model, text)


@pytest.fixture
async def resident(database_url: str) -> AsyncIterator[ResidentVectors]:
    pool: Pool = await open_pool(database_url, max_size=3)
    store = ResidentVectors(PgVectorStore(pool), database_url, max_chunks=50_000, settle_seconds=0)
    store.start()
    await asyncio.wait_for(store.status.listening.wait(), 10)
    yield store
    await store.aclose()
    await pool.close()


def kappi_store(vectors: VectorRegistry, resident: ResidentVectors, kind: str) -> VectorStore:
    return resident if kind == "resident" else vectors.get(kind)


async def ask(
    retriever: Retriever, store: Recorded, queries: RecordedQueries, target: Assignment
) -> tuple[int, str, set[str]]:
    """One question: how many passages it got, the model of its (final) query and of its (final) hits."""
    store.hit_models.clear()
    queries.models.clear()
    retrieval = await retriever.retrieve([target], frozenset(), QUESTION)
    return len(retrieval.chunks), queries.models[-1], store.hit_models[-1]


@pytest.mark.parametrize("kind", ["pgvector", "resident", "qdrant"])
async def test_questions_throughout_a_migration_are_all_answered_from_one_version(
    chonkit2: httpx.AsyncClient,
    worker2: EmbeddingWorker,
    vectors: VectorRegistry,
    two_providers: EmbedderRegistry,
    resident: ResidentVectors,
    kind: str,
) -> None:
    provider = "qdrant" if kind == "qdrant" else "pgvector"
    name = f"Asked_{uuid.uuid4().hex[:8]}"
    collection = await embedded_collection(chonkit2, worker2, provider, name, documents=8)
    identity = parse_identity(valid_identity(await vectors.get(provider).read_identity(name)))
    store = Recorded(kappi_store(vectors, resident, kind))
    queries = RecordedQueries(two_providers)
    registry = VectorRegistry({provider: store})  # type: ignore[dict-item]
    retriever = Retriever(IdentityReader(registry, ttl_seconds=0.5), registry, queries)
    target = assignment(identity)

    started = await chonkit2.put(f"/collections/{collection['id']}/embedding", json=SAME_DIMENSION)
    assert started.status_code == 202, started.text
    finished = asyncio.Event()
    answers: list[tuple[int, str, set[str]]] = []

    async def migrate() -> None:
        try:
            await drain(worker2)
        finally:
            finished.set()

    async def keep_asking() -> None:
        while not finished.is_set():
            answers.append(await ask(retriever, store, queries, target))
            await asyncio.sleep(0)

    await asyncio.gather(migrate(), keep_asking())
    after = await ask(retriever, store, queries, target)

    status = (await chonkit2.get(f"/collections/{collection['id']}/embedding")).json()
    assert status["migration"]["state"] == "done"
    assert len(answers) >= 5, "too few questions overlapped the migration"
    assert all(count > 0 for count, _, _ in answers), "a question got no answer"
    assert all(hits == {model} for _, model, hits in answers), "a question mixed versions"
    assert {model for _, model, _ in answers} <= {"hashed-words-64a", "hashed-words-64b"}
    assert answers[0][1] == "hashed-words-64a"
    assert after[0] > 0
    assert after[1:] == ("hashed-words-64b", {"hashed-words-64b"})
    assert valid_identity(await vectors.get(provider).read_identity(name))["model"] == "hashed-words-64b"


@pytest.mark.parametrize("kind", ["pgvector", "resident", "qdrant"])
async def test_the_swap_takes_effect_on_the_next_question_even_with_the_identity_cached(
    chonkit2: httpx.AsyncClient,
    worker2: EmbeddingWorker,
    vectors: VectorRegistry,
    two_providers: EmbedderRegistry,
    resident: ResidentVectors,
    kind: str,
) -> None:
    """The identity is cached for a minute here: the question after the swap reads it old, finds chunks of the new
    model, reads it again and answers from the new version — never with the old query against the new chunks."""
    provider = "qdrant" if kind == "qdrant" else "pgvector"
    name = f"Next_{uuid.uuid4().hex[:8]}"
    collection = await embedded_collection(chonkit2, worker2, provider, name, documents=2)
    identity = parse_identity(valid_identity(await vectors.get(provider).read_identity(name)))
    store = Recorded(kappi_store(vectors, resident, kind))
    queries = RecordedQueries(two_providers)
    registry = VectorRegistry({provider: store})  # type: ignore[dict-item]
    retriever = Retriever(IdentityReader(registry, ttl_seconds=60), registry, queries)
    target = assignment(identity)
    assert (await ask(retriever, store, queries, target))[1:] == ("hashed-words-64a", {"hashed-words-64a"})
    if kind == "resident":
        await until(lambda: name in resident.status.in_memory())

    assert (await chonkit2.put(f"/collections/{collection['id']}/embedding", json=SAME_DIMENSION)).status_code == 202
    await drain(worker2)
    if kind == "resident":  # the copy of the old version goes when the swap's notice arrives
        await until(lambda: name not in resident.status.in_memory())

    count, model, hits = await ask(retriever, store, queries, target)
    assert count > 0
    assert (model, hits) == ("hashed-words-64b", {"hashed-words-64b"})


async def until(condition: Callable[[], bool]) -> None:
    """Poll: the copies say what they hold, not when it changes."""
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0.01)
    pytest.fail("the in-memory copies never got there")
