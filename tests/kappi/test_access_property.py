"""Property: no retrieved chunk ever comes from a collection outside the user's groups.

Hypothesis draws collection groups, agent assignments, a tag filter and user groups. Each property runs three
times: with both checks, with the first check (identity groups) switched off — so the vector
store's payload filter alone must hold — and with the payload filter switched off — so the first
check alone must hold; and each of those in every retrieval mode: ``dense``, ``lexical`` (a retrieval path of
its own, BM25 over the words) and ``hybrid``. Every chunk holds the question's words, and each collection's
first chunk *is* the question, word for word, so the lexical leg ranks a restricted collection's chunk first
whenever it can reach it. Each runs on four stores: Qdrant in its local mode and on Qdrant Edge (the embedded
Qdrant that ships), pgvector searched in PostgreSQL, and pgvector with the collections searched in this process's
memory (``ResidentVectors``: each example waits until every collection's copy is in service, and checks afterwards
that the copies were in service). The stores live in a private event loop, so the property can be a plain
synchronous Hypothesis test.

A chat's history has a single check (stored answers have no chunk filter behind them): its property checks
that a reader holding identities cached a moment earlier still decides from the live ones.
"""

from __future__ import annotations

import asyncio
import tempfile
import threading
import time
import uuid
from collections.abc import Coroutine, Iterator
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from typing import Any, TypeVar

import msgspec
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from qdrant_client import AsyncQdrantClient

from common.db.database import Connection, Pool
from common.embedders.base import EmbedderRegistry
from common.vectors import Search
from common.vectors.base import RETRIEVAL_MODES, RetrievalMode, VectorRecord, VectorStore
from common.vectors.pgvector import PgVectorStore, open_pool
from common.vectors.qdrant import QdrantStore
from common.vectors.qdrant_edge import open_edge_client
from common.vectors.registry import VectorRegistry
from common.vectors.resident import ResidentVectors
from kappi.access.identities import IdentityReader
from kappi.agent.models import Agent, AgentVersion, Assignment
from kappi.chat.answering import Answerer, Prepared
from kappi.chat.models import Citation, Message
from kappi.chat.service import withhold
from kappi.llm.registry import default_llm_registry
from kappi.retrieval.service import QueryVectors, Retriever
from schemas.models import Identity

T = TypeVar("T")
GROUPS = ("hr", "legal", "exec", "eng")
COLLECTIONS = tuple(f"Prop_{i}" for i in range(5))
CHUNKS_PER_COLLECTION = 3
QUESTION = "what do the documents say about vacation days?"
CHUNK_TAGS = (["policy"], ["faq"], [])
"""Chunk ``i`` of every collection carries ``CHUNK_TAGS[i]``."""
TAG_FILTERS: tuple[list[str] | None, ...] = (None, ["policy"], ["policy", "faq"], [])
STORES = ["qdrant", "qdrant-edge", "pgvector-sql", "pgvector"]
_NO_COPY = object()
ODD_COPIES: tuple[object, ...] = (_NO_COPY, [], None, "hr")
"""Copies of a collection's groups that name none of them: absent, empty, null, a string (naming a group)."""


class World:
    """Five collections in one store, driven from a private loop on its own thread."""

    def __init__(self, embedders: EmbedderRegistry, store: str, database_url: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.kind = store
        self.provider = "qdrant" if store.startswith("qdrant") else "pgvector"
        self.pool: Pool | None = None
        self.store: VectorStore = self.run(self._open(database_url))
        self.vectors = VectorRegistry({self.provider: self.store})
        self.embedders = embedders
        self.ids = {name: str(uuid.uuid4()) for name in COLLECTIONS}
        self.run(self._create())

    async def _open(self, database_url: str) -> VectorStore:
        if self.kind == "qdrant":
            return QdrantStore(AsyncQdrantClient(location=":memory:"))
        if self.kind == "qdrant-edge":  # the embedded Qdrant that ships (Qdrant's own filters and is_empty)
            return QdrantStore(await open_edge_client(tempfile.mkdtemp(prefix="ragu-access-edge-")))
        self.pool = await open_pool(database_url, max_size=2)
        if self.kind == "pgvector-sql":
            sql = PgVectorStore(self.pool)
            for name in COLLECTIONS:
                await sql.drop_collection(name)
            return sql
        store = ResidentVectors(PgVectorStore(self.pool), database_url, max_chunks=1000, settle_seconds=0)
        store.start()
        await asyncio.wait_for(store.status.listening.wait(), 10)
        for name in COLLECTIONS:
            await store.drop_collection(name)
        return store

    def in_memory(self) -> set[str]:
        return set(self.store.status.in_memory()) if isinstance(self.store, ResidentVectors) else set()

    def settle(self) -> None:
        """pgvector: search until every collection's copy is in service and stays so (the change notices of
        the last writes have arrived)."""
        if isinstance(self.store, ResidentVectors):
            self.run(self._settle(self.store))

    async def _settle(self, store: ResidentVectors) -> None:
        deadline = time.monotonic() + 20
        probe = np.ones(384, dtype=np.float32)
        while True:
            assert time.monotonic() < deadline, "collections were never copied to memory"
            missing = [n for n in COLLECTIONS if n not in store.status.in_memory()]
            for name in missing:
                await store.search(Search(name=name, vector=probe, limit=1, properties=()))
            await asyncio.sleep(0.01)
            if not missing and all(n in store.status.in_memory() for n in COLLECTIONS):
                return

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=60)

    def identity(self, name: str, groups: list[str]) -> Identity:
        return Identity(
            collection_id=self.ids[name],
            name=name,
            model="all-MiniLM-L6-v2",
            vectorProvider=self.provider,
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
                content = QUESTION if i == 0 else f"{name} chunk {i} says this about vacation days"
                payload = {
                    **identity.to_dict(),
                    "content": content,
                    "document_id": str(uuid.uuid4()),
                    "tags": CHUNK_TAGS[i],
                }
                records.append(
                    VectorRecord(id=str(uuid.uuid4()), vector=vector / np.linalg.norm(vector), payload=payload)
                )
            await self.store.upsert(name, records)

    def add_odd_copies(self, name: str) -> list[str]:
        """Chunks of ``name`` as another application might write them, each the question word for word: one
        without a ``groups`` copy and ones whose copy is ``[]``, null or a string naming a group; their ids."""
        rng = np.random.default_rng(11)
        records = []
        for copy in ODD_COPIES:
            vector = rng.normal(size=384).astype(np.float32)
            payload = {**self.identity(name, []).to_dict(), "content": QUESTION, "document_id": str(uuid.uuid4())}
            if copy is not _NO_COPY:
                payload["groups"] = copy
            records.append(VectorRecord(id=str(uuid.uuid4()), vector=vector / np.linalg.norm(vector), payload=payload))
        self.run(self.store.upsert(name, records))
        return [record.id for record in records]

    def retrieve(
        self,
        assigned: list[str],
        user_groups: frozenset[str],
        *,
        check_identity_groups: bool,
        filter_chunks: bool,
        mode: RetrievalMode = "dense",
        tags: list[str] | None = None,
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
                vector_provider=self.provider,
                name=name,
                collection_id=self.ids[name],
                top_k=CHUNKS_PER_COLLECTION,
                max_distance=None,
                instruction="",
                created_at=now,
                mode=mode,
                tags=tags,
            )
            for name in assigned
        ]
        retrieval = self.run(retriever.retrieve(assignments, user_groups, QUESTION))
        return [chunk.collection for chunk in retrieval.chunks]

    def close(self) -> None:
        if self.pool is not None:
            for name in COLLECTIONS:
                self.run(self.store.drop_collection(name))
        self.run(self.store.aclose())
        if self.pool is not None:
            self.run(self.pool.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


@pytest.fixture(scope="module", params=STORES)
def world(request: pytest.FixtureRequest, embedders: EmbedderRegistry, database_url: str) -> Iterator[World]:
    created = World(embedders, request.param, database_url)
    yield created
    created.close()


group_sets = st.lists(st.sampled_from(GROUPS), unique=True, max_size=3)
scenarios = st.fixed_dictionaries(
    {
        "collection_groups": st.fixed_dictionaries(dict.fromkeys(COLLECTIONS, group_sets)),
        "assigned": st.lists(st.sampled_from(COLLECTIONS), unique=True, min_size=1),
        "user_groups": group_sets.map(frozenset),
        "tags": st.sampled_from(TAG_FILTERS),
    }
)
CHECKS = [
    pytest.param(True, True, id="both-checks"),
    pytest.param(False, True, id="payload-filter-alone"),
    pytest.param(True, False, id="identity-check-alone"),
]


def _kept_by(tags: list[str] | None) -> int:
    """How many chunks of a collection a tag filter keeps."""
    return sum(1 for own in CHUNK_TAGS if tags is None or set(own) & set(tags))


@pytest.mark.parametrize("mode", RETRIEVAL_MODES)
@pytest.mark.parametrize(("check_identity_groups", "filter_chunks"), CHECKS)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(scenario=scenarios)
def test_no_chunk_from_a_collection_outside_the_users_groups(
    world: World, check_identity_groups: bool, filter_chunks: bool, mode: RetrievalMode, scenario: dict[str, Any]
) -> None:
    groups: dict[str, list[str]] = scenario["collection_groups"]
    for name, collection_groups in groups.items():
        world.run(world.store.set_groups(name, collection_groups))
    world.settle()
    user_groups: frozenset[str] = scenario["user_groups"]

    found = world.retrieve(
        scenario["assigned"],
        user_groups,
        check_identity_groups=check_identity_groups,
        filter_chunks=filter_chunks,
        mode=mode,
        tags=scenario["tags"],
    )

    if world.kind == "pgvector":
        assert world.in_memory() >= set(scenario["assigned"])  # the copies were in service
    allowed = {n for n in scenario["assigned"] if not groups[n] or user_groups.intersection(groups[n])}
    assert set(found) <= allowed
    # and nothing allowed is lost: every allowed collection returns all the chunks its filter keeps
    assert sorted(found) == sorted(n for n in allowed for _ in range(_kept_by(scenario["tags"])))


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
@pytest.mark.parametrize(("check_identity_groups", "filter_chunks"), CHECKS)
def test_a_restricted_chunk_that_is_the_question_word_for_word_never_comes_back(
    world: World, check_identity_groups: bool, filter_chunks: bool, mode: RetrievalMode
) -> None:
    """The lexical leg's best possible match, in a collection the user may not read, beside a public one."""
    restricted, public = COLLECTIONS[0], COLLECTIONS[1]
    for name in COLLECTIONS:
        world.run(world.store.set_groups(name, ["exec"] if name == restricted else []))
    world.settle()

    found = world.retrieve(
        [restricted, public],
        frozenset({"hr"}),
        check_identity_groups=check_identity_groups,
        filter_chunks=filter_chunks,
        mode=mode,
    )

    assert found == [public] * CHUNKS_PER_COLLECTION


@pytest.mark.parametrize("mode", RETRIEVAL_MODES)
@pytest.mark.parametrize(("check_identity_groups", "filter_chunks"), CHECKS)
def test_chunks_of_a_restricted_collection_without_a_true_copy_of_its_groups_never_come_back(
    world: World, check_identity_groups: bool, filter_chunks: bool, mode: RetrievalMode
) -> None:
    """Another application wrote chunks into a collection restricted to ``exec`` without the groups copy, or
    with one that is empty, null or the string ``"hr"``. A user in ``hr`` gets none of them with either check
    alone."""
    restricted, public = COLLECTIONS[0], COLLECTIONS[1]
    for name in COLLECTIONS:
        world.run(world.store.set_groups(name, ["exec"] if name == restricted else []))
    world.settle()
    odd = world.add_odd_copies(restricted)
    try:
        found = world.retrieve(
            [restricted, public],
            frozenset({"hr"}),
            check_identity_groups=check_identity_groups,
            filter_chunks=filter_chunks,
            mode=mode,
        )
    finally:
        world.run(world.store.delete_ids(restricted, odd))

    assert found == [public] * CHUNKS_PER_COLLECTION


def _answer_citing(names: list[str], provider: str) -> Message:
    citations = [
        Citation(
            citation=n,
            collection=name,
            vector_provider=provider,
            document_id=str(uuid.uuid4()),
            document_name=None,
            page_start=None,
            page_end=None,
            text=f"{name} chunk",
            score=1.0,
        )
        for n, name in enumerate(names, start=1)
    ]
    return Message(
        id=uuid.uuid4(),
        role="assistant",
        content="an answer",
        status="complete",
        agent_version=1,
        citations=citations,
        usage=None,
        timings=None,
        error_code=None,
        created_at=datetime.now(UTC),
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(before=scenarios, after=st.fixed_dictionaries(dict.fromkeys(COLLECTIONS, group_sets)))
def test_history_shows_an_answer_only_while_every_collection_it_cites_is_readable(
    world: World, before: dict[str, Any], after: dict[str, list[str]]
) -> None:
    """History has one check, the identity (stored answers have no chunk filter behind them), so it must read
    identities as they are now: a reader that cached them a moment ago (60 s TTL) may not decide it."""
    user_groups: frozenset[str] = before["user_groups"]
    identities = IdentityReader(world.vectors, ttl_seconds=60)
    keys = [(world.provider, name) for name in COLLECTIONS]
    for name, collection_groups in before["collection_groups"].items():
        world.run(world.store.set_groups(name, collection_groups))
    world.run(identities.read_many(keys))  # cached as they were
    for name, collection_groups in after.items():
        world.run(world.store.set_groups(name, collection_groups))
    answers = [_answer_citing([name], world.provider) for name in COLLECTIONS]
    answers.append(_answer_citing(before["assigned"], world.provider))

    shown = world.run(withhold(answers, user_groups, identities))

    def allowed(name: str) -> bool:
        return not after[name] or bool(user_groups.intersection(after[name]))

    for answer, seen in zip(answers, shown, strict=True):
        expected = all(allowed(c.collection) for c in answer.citations)
        assert seen.withheld is not expected
        assert (seen.content, seen.citations) == ((answer.content, answer.citations) if expected else ("", []))


class _NoDatabase:
    """A stateless answer stores nothing: any use of the database is a failure."""

    def transaction(self) -> AbstractAsyncContextManager[Connection]:
        raise AssertionError("a stateless answer touched the database")

    async def ping(self) -> None:
        raise AssertionError("unused")

    async def aclose(self) -> None:
        pass


def extractive_agent(assignments: list[Assignment]) -> Agent:
    """An agent answering with ``extractive`` from ``assignments``, as if stored: what every channel's property
    test asks (this module's, the OpenAI endpoint's, MCP's)."""
    now = datetime.now(UTC)
    config = AgentVersion(
        version=1,
        llm_provider="extractive",
        llm_model="extractive",
        system_prompt="",
        context_template=None,
        temperature=0.0,
        max_tokens=512,
        created_by="t",
        created_at=now,
    )
    return Agent(
        id=uuid.uuid4(),
        name="A",
        description="",
        groups=[],
        active=True,
        current_version=1,
        config=config,
        collections=assignments,
        created_at=now,
        updated_at=now,
    )


def _assignments(world: World, names: list[str], mode: RetrievalMode = "dense") -> list[Assignment]:
    now = datetime.now(UTC)
    return [
        Assignment(
            vector_provider=world.provider,
            name=name,
            collection_id=world.ids[name],
            top_k=CHUNKS_PER_COLLECTION,
            max_distance=None,
            instruction=f"{name} notes",
            created_at=now,
            mode=mode,
        )
        for name in names
    ]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    scenario=scenarios,
    question=st.sampled_from(["what do the documents say?", "chunk 1", "Prop_3 chunk 0"]),
    mode=st.sampled_from(RETRIEVAL_MODES),
)
def test_the_explained_decision_is_the_one_retrieval_makes_and_query_equals_the_stream(
    world: World, scenario: dict[str, Any], question: str, mode: RetrievalMode
) -> None:
    """The access endpoint's verdicts and a question's searched collections come from one decision; and the
    stateless answer is what the streamed answer yields, citations and text alike."""
    for name, collection_groups in scenario["collection_groups"].items():
        world.run(world.store.set_groups(name, collection_groups))
    world.settle()
    user_groups: frozenset[str] = scenario["user_groups"]
    retriever = Retriever(IdentityReader(world.vectors, ttl_seconds=0), world.vectors, QueryVectors(world.embedders))
    assignments = _assignments(world, scenario["assigned"], mode)

    verdicts = world.run(retriever.verdicts(assignments, user_groups))
    retrieval = world.run(retriever.retrieve(assignments, user_groups, question))
    explained = {v.collection for v, _ in verdicts if v.searchable}
    assert retrieval.collections_searched == len(explained)
    assert {c.collection for c in retrieval.chunks} == explained  # every collection holds chunks

    agent = extractive_agent(assignments)
    config = agent.config
    prepared = Prepared(agent=agent, config=config, text=question, history=[], groups=user_groups)
    answerer = Answerer(_NoDatabase(), retriever, default_llm_registry())
    queried = world.run(answerer.query(prepared))

    async def streamed() -> list[tuple[str, Any]]:
        return [(e.event, e.data) async for e in answerer.events(prepared)]

    events = world.run(streamed())
    assert (events[0][0], events[-1][0]) == ("sources", "done")
    # Every passage given is streamed first; the answer cites some (the done event's citations) and not the rest.
    given = sorted([*queried.citations, *queried.also_retrieved], key=lambda c: c.citation)
    assert events[0][1]["citations"] == given
    assert (events[-1][1]["citations"], events[-1][1]["also_retrieved"]) == (queried.citations, queried.also_retrieved)
    assert "".join(d["text"] for name, d in events if name == "token") == queried.answer
    assert events[-1][1]["usage"] == queried.usage
