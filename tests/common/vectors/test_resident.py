"""pgvector collections searched in memory (``common.vectors.resident``) answer as PostgreSQL does, and a write
from any process — this one, another pool, plain SQL — takes the copy out of service before it could mislead.

``writer`` is a plain :class:`PgVectorStore` on a pool of its own: another process (chonkit) as far as
PostgreSQL can tell. Every comparison is against the SQL search or an exact brute-force one, on the real server.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import math
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import asyncpg
import numpy as np
import pytest

from common.db import migrate as migrations
from common.db.database import Pool, init_connection
from common.db.embedded import ensure_database, with_database
from common.vectors import SearchFilter, VectorRecord, changes
from common.vectors import resident as resident_module
from common.vectors.base import Search, SearchHit
from common.vectors.pgvector import PgVectorStore, open_pool
from common.vectors.resident import FLAT_UP_TO, ResidentVectors
from schemas.models import Identity

DIM = 24
PROPERTIES = ("content", "document_id", "chunk_index", "groups")


@pytest.fixture(scope="module")
async def writer_pool(database_url: str) -> AsyncIterator[Pool]:
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=2, init=init_connection)
    yield pool
    await pool.close()


@pytest.fixture
async def writer(writer_pool: Pool) -> AsyncIterator[PgVectorStore]:
    store = PgVectorStore(writer_pool)
    yield store
    async with writer_pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'vectors' AND tablename LIKE 'Res_%'"
        )
    for row in rows:
        await store.drop_collection(row["tablename"])  # with its term statistics and postings


@pytest.fixture
async def resident(database_url: str) -> AsyncIterator[ResidentVectors]:
    pool = await open_pool(database_url, max_size=3)
    store = ResidentVectors(PgVectorStore(pool), database_url, max_chunks=50_000, settle_seconds=0)
    store.start()
    await asyncio.wait_for(store.status.listening.wait(), 10)
    yield store
    await store.aclose()
    await pool.close()


def new_identity(groups: list[str] | None = None) -> Identity:
    identity = Identity(
        collection_id=str(uuid.uuid4()),
        name=f"Res_{uuid.uuid4().hex[:8]}",
        model="m",
        vectorProvider="pgvector",
        embeddingProvider="e",
    )
    return identity if groups is None else Identity(**{**identity.to_dict(), "groups": groups})


def records(vectors: np.ndarray, *, groups: list[str] | None, first: int = 0) -> list[VectorRecord]:
    out = []
    for n, vector in enumerate(vectors, start=first):
        payload: dict[str, object] = {"content": f"chunk {n}", "document_id": f"doc-{n % 7}", "chunk_index": n}
        if groups is not None:
            payload["groups"] = groups
        out.append(VectorRecord(id=str(uuid.UUID(int=n + 1)), vector=vector, payload=payload))
    return out


async def collection(
    writer: PgVectorStore, count: int, *, seed: int, groups: list[str] | None = None
) -> tuple[Identity, np.ndarray]:
    identity = new_identity(groups)
    await writer.create_collection(identity, DIM)
    vectors = np.random.default_rng(seed).standard_normal((count, DIM)).astype(np.float32)
    for start in range(0, count, 500):
        await writer.upsert(identity.name, records(vectors[start : start + 500], groups=groups, first=start))
    return identity, vectors


async def until_resident(store: ResidentVectors, name: str, query: np.ndarray) -> None:
    """Search until the copy is in service (the first search starts the load)."""
    deadline = time.monotonic() + 20
    while name not in store.status.in_memory():
        assert time.monotonic() < deadline, f"{name} was never copied"
        await store.search(Search(name=name, vector=query, limit=1, properties=()))
        await asyncio.sleep(0.02)


async def until_not_resident(store: ResidentVectors, name: str) -> float:
    started = time.perf_counter()
    while name in store.status.in_memory():
        assert time.perf_counter() - started < 5, f"{name} stayed in memory after a write"
        await asyncio.sleep(0.001)
    return time.perf_counter() - started


def exact_ids(vectors: np.ndarray, query: np.ndarray, k: int) -> list[str]:
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    order = np.argsort(-(unit @ (query / np.linalg.norm(query))), kind="stable")[:k]
    return [str(uuid.UUID(int=int(n) + 1)) for n in order]


@pytest.mark.parametrize("count", [300, FLAT_UP_TO * 3], ids=["exhaustive", "hnsw"])
async def test_the_copy_answers_like_postgres(resident: ResidentVectors, writer: PgVectorStore, count: int) -> None:
    identity, vectors = await collection(writer, count, seed=count, groups=["staff"])
    queries = np.random.default_rng(1).standard_normal((60, DIM)).astype(np.float32)
    await until_resident(resident, identity.name, queries[0])
    where = SearchFilter(readable_by=frozenset({"staff", "other"}))
    recall_ours, recall_sql = [], []
    for query in queries:
        ours = await resident.search(
            Search(name=identity.name, vector=query, limit=8, properties=PROPERTIES, where=where)
        )
        sql = await writer.search(Search(name=identity.name, vector=query, limit=8, properties=PROPERTIES, where=where))
        truth = set(exact_ids(vectors, query, 8))
        recall_ours.append(len(truth & {h.id for h in ours}) / 8)
        recall_sql.append(len(truth & {h.id for h in sql}) / 8)
        by_id = {h.id: h for h in sql}
        assert [h.distance for h in ours] == sorted(h.distance for h in ours)
        for hit in ours:
            assert hit.payload == {"content": hit.payload["content"], **hit.payload}
            assert hit.payload["groups"] == ["staff"]
            assert hit.score == pytest.approx(1 - hit.distance)
            if hit.id in by_id:  # the same chunk: the same distance and payload as SQL
                assert hit.distance == pytest.approx(by_id[hit.id].distance, abs=1e-5)
                assert hit.payload == by_id[hit.id].payload
    assert identity.name in resident.status.in_memory()  # every answer above came from the copy
    if count <= FLAT_UP_TO:
        assert min(recall_ours) == 1.0  # searched exhaustively: exact
    assert np.mean(recall_ours) >= 0.97
    assert np.mean(recall_ours) >= np.mean(recall_sql) - 0.02


async def test_limit_max_distance_and_properties_follow_the_sql_rules(
    resident: ResidentVectors, writer: PgVectorStore
) -> None:
    identity, vectors = await collection(writer, 200, seed=3)
    query = vectors[17] + 0.01
    await until_resident(resident, identity.name, query)
    sql = await writer.search(
        Search(name=identity.name, vector=query, limit=5, properties=("content",), max_distance=0.5)
    )
    ours = await resident.search(
        Search(name=identity.name, vector=query, limit=5, properties=("content",), max_distance=0.5)
    )
    assert [h.id for h in ours] == [h.id for h in sql]
    assert all(h.distance <= 0.5 for h in ours)
    assert ours[0].id == str(uuid.UUID(int=18))
    assert all(set(h.payload) == {"content"} for h in ours)
    assert await resident.search(Search(name=identity.name, vector=query, limit=0, properties=())) == []
    many = await resident.search_many(
        [Search(name=identity.name, vector=v, limit=3, properties=("chunk_index",)) for v in vectors[:4]]
    )
    assert [hits[0].payload["chunk_index"] for hits in many if isinstance(hits, list)] == [0, 1, 2, 3]


async def test_copies_leave_the_garbage_collectors_walks(resident: ResidentVectors, writer: PgVectorStore) -> None:
    """Payloads are held so that a full collection untracks them (lists as tuples), and hits still carry
    the lists SQL returns: tens of thousands of tracked payloads made every full collection stall requests."""
    identity, vectors = await collection(writer, 300, seed=31, groups=["a", "b"])
    await until_resident(resident, identity.name, vectors[0])
    copy = resident._copies[identity.name]
    gc.collect()
    assert not any(gc.is_tracked(payload) for payload in copy.payloads)
    assert len({id(groups) for groups in copy.groups}) == 1  # one shared frozenset for the whole collection
    ours = await resident.search(Search(name=identity.name, vector=vectors[0], limit=3, properties=PROPERTIES))
    sql = await writer.search(Search(name=identity.name, vector=vectors[0], limit=3, properties=PROPERTIES))
    assert [h.payload for h in ours] == [h.payload for h in sql]
    assert ours[0].payload["groups"] == ["a", "b"]


async def test_concurrent_searches_are_batched_and_answer_as_alone(
    resident: ResidentVectors, writer: PgVectorStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Questions arriving together walk each HNSW index in one faiss call; every search's hits are exactly
    what it gets searched on its own."""
    big, _ = await collection(writer, FLAT_UP_TO * 3, seed=21, groups=["a"])
    small, _ = await collection(writer, 200, seed=22)
    queries = np.random.default_rng(23).standard_normal((40, DIM)).astype(np.float32)
    await until_resident(resident, big.name, queries[0])
    await until_resident(resident, small.name, queries[0])
    rows_per_call: list[int] = []
    neighbours = resident_module._Copy.neighbours

    def counting(copy: resident_module._Copy, rows: np.ndarray, fetch: int) -> tuple[np.ndarray, np.ndarray]:
        rows_per_call.append(len(rows))
        return neighbours(copy, rows, fetch)

    monkeypatch.setattr(resident_module._Copy, "neighbours", counting)
    monkeypatch.setattr(resident_module, "BUSY_WITHIN", math.inf)  # every question counts as arriving under load
    readable = SearchFilter(readable_by=frozenset({"a"}))

    def question(n: int) -> list[Search]:
        limit = 3 + n % 2 * 5  # two limits: two groups of rows per index
        return [
            Search(name=big.name, vector=queries[n], limit=limit, properties=PROPERTIES, where=readable),
            Search(name=small.name, vector=queries[n], limit=limit, properties=PROPERTIES, where=readable),
        ]

    together = await asyncio.gather(*(resident.search_many(question(n)) for n in range(len(queries))))
    assert max(rows_per_call) == len(queries) // 2  # one call per (index, limit), not one per question
    for n, results in enumerate(together):
        alone = [
            await resident.search(
                Search(name=s.name, vector=s.vector, limit=s.limit, properties=s.properties, where=readable)
            )
            for s in question(n)
        ]
        assert results == alone
        assert [len(hits) for hits in alone] == [question(n)[0].limit] * 2
    assert {big.name, small.name} <= set(resident.status.in_memory())

    rows_per_call.clear()
    monkeypatch.setattr(resident_module, "BUSY_WITHIN", -1.0)  # a question alone does not wait for a batch
    await resident.search_many(question(0))
    assert rows_per_call == [1, 1]  # each index searched at once, one row
    assert resident._pending is None


async def test_a_batched_search_whose_copy_is_dropped_goes_to_postgres(
    resident: ResidentVectors, writer: PgVectorStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(resident_module, "BUSY_WITHIN", math.inf)
    identity, vectors = await collection(writer, FLAT_UP_TO * 2, seed=25)
    await until_resident(resident, identity.name, vectors[0])
    search = Search(name=identity.name, vector=vectors[3], limit=5, properties=("chunk_index",))
    queued = asyncio.create_task(resident.search_many([search]))
    await asyncio.sleep(0)  # the task queued its search; its batch runs on the next turn
    assert resident._pending is not None
    resident._changed(identity.name)  # a change notice arrives in between
    assert identity.name not in resident.status.in_memory()
    sql = await writer.search(Search(name=identity.name, vector=vectors[3], limit=5, properties=("chunk_index",)))
    assert await queued == [sql]


async def test_groups_filter_holds_in_memory(resident: ResidentVectors, writer: PgVectorStore) -> None:
    identity, vectors = await collection(writer, 150, seed=5, groups=["research"])
    await until_resident(resident, identity.name, vectors[0])
    outsider = SearchFilter(readable_by=frozenset({"sales"}))
    nobody = SearchFilter(readable_by=frozenset())
    member = SearchFilter(readable_by=frozenset({"sales", "research"}))
    for vector in vectors[:20]:
        assert (
            await resident.search(
                Search(name=identity.name, vector=vector, limit=5, properties=PROPERTIES, where=outsider)
            )
            == []
        )
        assert (
            await resident.search(
                Search(name=identity.name, vector=vector, limit=5, properties=PROPERTIES, where=nobody)
            )
            == []
        )
        assert (
            len(
                await resident.search(
                    Search(name=identity.name, vector=vector, limit=5, properties=PROPERTIES, where=member)
                )
            )
            == 5
        )
    assert identity.name in resident.status.in_memory()


async def test_mixed_groups_fall_back_to_postgres_and_never_leak(
    resident: ResidentVectors, writer: PgVectorStore, writer_pool: Pool
) -> None:
    """Chunks with groups of their own (written by another application): candidates the filter rejects send
    the search to PostgreSQL, whose iterative scan finds the readable ones."""
    identity, vectors = await collection(writer, 400, seed=7, groups=["a"])
    async with writer_pool.acquire() as conn:
        await conn.execute(
            f"UPDATE vectors.\"{identity.name}\" SET payload = jsonb_set(payload, '{{groups}}', '[\"b\"]') "
            "WHERE (payload->>'chunk_index')::int % 2 = 0"
        )
    await until_resident(resident, identity.name, vectors[0])
    only_a = SearchFilter(readable_by=frozenset({"a"}))
    for vector in vectors[:30]:
        ours = await resident.search(
            Search(name=identity.name, vector=vector, limit=6, properties=PROPERTIES, where=only_a)
        )
        sql = await writer.search(
            Search(name=identity.name, vector=vector, limit=6, properties=PROPERTIES, where=only_a)
        )
        assert len(ours) == 6
        assert all(h.payload["groups"] == ["a"] for h in ours)
        assert [h.id for h in ours] == [h.id for h in sql]


async def test_a_search_the_copy_declines_reaches_postgres_once(
    resident: ResidentVectors, writer: PgVectorStore, writer_pool: Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The copy is asked once and PostgreSQL once: what the copy declines goes to the wrapped store, which
    never hands it back to the copy. Declined two ways: before faiss (a document filter) and after it (a groups
    filter that rejects some neighbours)."""
    identity, vectors = await collection(writer, 400, seed=37, groups=["a"])
    async with writer_pool.acquire() as conn:
        await conn.execute(
            f"UPDATE vectors.\"{identity.name}\" SET payload = jsonb_set(payload, '{{groups}}', '[\"b\"]') "
            "WHERE (payload->>'chunk_index')::int % 2 = 0"
        )
    await until_resident(resident, identity.name, vectors[0])
    plans: list[str] = []
    statements: list[str] = []
    plan, fetch = resident_module._Copy.plan, PgVectorStore._fetch

    def counted_plan(copy: resident_module._Copy, search: Search, query: np.ndarray | None) -> object:
        plans.append(search.name)
        return plan(copy, search, query)

    async def counted_fetch(store: PgVectorStore, *args: Any, **kwargs: Any) -> list[asyncpg.Record]:
        statements.append("search")
        return await fetch(store, *args, **kwargs)

    monkeypatch.setattr(resident_module._Copy, "plan", counted_plan)
    monkeypatch.setattr(PgVectorStore, "_fetch", counted_fetch)
    declined = [
        SearchFilter(document_ids=frozenset({"doc-1"})),
        SearchFilter(readable_by=frozenset({"a"})),
    ]
    for where in declined:
        search = Search(name=identity.name, vector=vectors[3], limit=4, properties=PROPERTIES, where=where)
        plans.clear()
        statements.clear()
        [hits] = await resident.search_many([search])
        assert (plans, statements) == ([identity.name], ["search"])
        plans.clear()
        statements.clear()
        alone = await resident.search(
            Search(name=identity.name, vector=vectors[3], limit=4, properties=PROPERTIES, where=where)
        )
        assert (plans, statements) == ([identity.name], ["search"])
        assert (
            hits
            == alone
            == await writer.search(
                Search(name=identity.name, vector=vectors[3], limit=4, properties=PROPERTIES, where=where)
            )
        )
    assert identity.name in resident.status.in_memory()  # the copy was there, and declined


def alike(ours: list[SearchHit], sql: list[SearchHit]) -> bool:
    """The same hits, payloads, scores and legs; distances equal to float32 precision (the copy's dense leg
    computes them in float32)."""
    return [(h.id, h.payload, h.score, h.legs) for h in ours] == [
        (h.id, h.payload, h.score, h.legs) for h in sql
    ] and all(math.isclose(a.distance, b.distance, abs_tol=1e-6) for a, b in zip(ours, sql, strict=True))


async def test_tag_label_lexical_and_hybrid_searches_answer_as_postgres_does(
    resident: ResidentVectors, writer: PgVectorStore, writer_pool: Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tag and label filters, which the copy does not hold, go to PostgreSQL even while the copy is in service
    (regression: a tag filter was ignored); lexical and hybrid searches without them are answered whole by the copy
    (regression: their lexical leg was PostgreSQL's), as the SQL search answers them."""
    identity, vectors = await collection(writer, 300, seed=41)
    async with writer_pool.acquire() as conn:
        await conn.execute(
            f'UPDATE vectors."{identity.name}" SET payload = payload || '
            "jsonb_build_object('tags', jsonb_build_array('even'), 'label', 'even') "
            "WHERE (payload->>'chunk_index')::int % 2 = 0"
        )
    await until_resident(resident, identity.name, vectors[0])
    legs_asked: list[str] = []
    search = PgVectorStore.search

    async def recorded(store: PgVectorStore, asked: Search) -> list[SearchHit]:
        legs_asked.append(asked.mode)
        return await search(store, asked)

    monkeypatch.setattr(PgVectorStore, "search", recorded)
    searches: list[dict[str, Any]] = [
        {"where": SearchFilter(tags=frozenset({"even"}))},
        {"where": SearchFilter(labels=frozenset({"even"}))},
        {"text": "chunk 17", "mode": "lexical"},
        {"text": "chunk 17", "mode": "hybrid", "where": SearchFilter(tags=frozenset({"even"}))},
        {"text": "chunk 17", "mode": "hybrid"},
        {"text": "chunk 17", "mode": "hybrid", "dense_weight": 0.9, "max_distance": 0.8},
    ]
    for asked in searches:
        for query in vectors[:5]:
            sql = await writer.search(Search(name=identity.name, vector=query, limit=6, properties=PROPERTIES, **asked))
            legs_asked.clear()
            ours = await resident.search(
                Search(name=identity.name, vector=query, limit=6, properties=PROPERTIES, **asked)
            )
            assert legs_asked == ([] if "where" not in asked else [asked.get("mode", "dense")]), asked
            assert alike(ours, sql), asked
            [many] = await resident.search_many(
                [Search(name=identity.name, vector=query, limit=6, properties=PROPERTIES, **asked)]
            )
            assert isinstance(many, list)
            assert alike(many, sql), asked
            if "where" in asked:
                assert all(hit.payload["chunk_index"] % 2 == 0 for hit in ours)
    assert identity.name in resident.status.in_memory()  # the copy was there throughout


async def test_writes_from_another_process_take_the_copy_out_of_service(
    resident: ResidentVectors, writer: PgVectorStore
) -> None:
    identity, vectors = await collection(writer, 300, seed=11, groups=["research"])
    member = SearchFilter(readable_by=frozenset({"research"}))
    await until_resident(resident, identity.name, vectors[0])

    await writer.set_groups(identity.name, ["board"])  # revocation, committed by another pool
    delay = await until_not_resident(resident, identity.name)
    assert delay < 1.0
    for vector in vectors[:10]:
        assert (
            await resident.search(Search(name=identity.name, vector=vector, limit=5, properties=(), where=member)) == []
        )

    await until_resident(resident, identity.name, vectors[0])  # copied again, with the new groups
    assert (
        await resident.search(Search(name=identity.name, vector=vectors[0], limit=5, properties=(), where=member)) == []
    )
    board = SearchFilter(readable_by=frozenset({"board"}))
    assert (
        len(await resident.search(Search(name=identity.name, vector=vectors[0], limit=5, properties=(), where=board)))
        == 5
    )

    new = np.random.default_rng(99).standard_normal((1, DIM)).astype(np.float32)
    await writer.upsert(identity.name, records(new, groups=["board"], first=10_000))
    await until_not_resident(resident, identity.name)
    hits = await resident.search(
        Search(name=identity.name, vector=new[0], limit=1, properties=("chunk_index",), where=board)
    )
    assert hits[0].payload["chunk_index"] == 10_000

    await until_resident(resident, identity.name, vectors[0])
    await writer.delete_document(identity.name, "doc-3")
    await until_not_resident(resident, identity.name)
    await until_resident(resident, identity.name, vectors[0])
    for vector in vectors[:20]:
        hits = await resident.search(
            Search(name=identity.name, vector=vector, limit=10, properties=("document_id",), where=board)
        )
        assert all(h.payload["document_id"] != "doc-3" for h in hits)

    await writer.drop_collection(identity.name)
    await until_not_resident(resident, identity.name)


async def test_own_writes_are_seen_by_the_next_search(resident: ResidentVectors, writer: PgVectorStore) -> None:
    identity, vectors = await collection(writer, 100, seed=13)
    await until_resident(resident, identity.name, vectors[0])
    await resident.set_groups(identity.name, ["x"])
    assert identity.name not in resident.status.in_memory()  # no waiting for the notice
    nobody = SearchFilter(readable_by=frozenset({"y"}))
    assert (
        await resident.search(Search(name=identity.name, vector=vectors[0], limit=3, properties=(), where=nobody)) == []
    )


async def test_a_document_update_by_anyone_is_seen_by_the_next_search(
    resident: ResidentVectors, writer: PgVectorStore
) -> None:
    identity, vectors = await collection(writer, 100, seed=23)
    asked = ("document_id", "document_name")  # chunk 1 belongs to doc-1
    await until_resident(resident, identity.name, vectors[1])

    await resident.update_document(identity.name, "doc-1", document_name="own.pdf", tags=[], label=None)
    assert identity.name not in resident.status.in_memory()  # no waiting for the notice
    [own] = await resident.search(Search(name=identity.name, vector=vectors[1], limit=1, properties=asked))
    await until_resident(resident, identity.name, vectors[1])
    await writer.update_document(identity.name, "doc-1", document_name="theirs.pdf", tags=[], label=None)
    await until_not_resident(resident, identity.name)
    [theirs] = await resident.search(Search(name=identity.name, vector=vectors[1], limit=1, properties=asked))

    assert own.payload == {"document_id": "doc-1", "document_name": "own.pdf"}
    assert theirs.payload == {"document_id": "doc-1", "document_name": "theirs.pdf"}


@pytest.fixture
def faiss_not_yet_imported() -> Iterator[None]:
    """As in a fresh ``ragu serve``: faiss is imported by the first copy (the modules are put back after)."""
    loaded = {name: module for name, module in sys.modules.items() if name == "faiss" or name.startswith("faiss.")}
    for name in loaded:
        del sys.modules[name]
    yield
    sys.modules.update(loaded)


@pytest.mark.usefixtures("faiss_not_yet_imported")
async def test_the_first_search_in_memory_logs_no_import_errors(
    resident: ResidentVectors, writer: PgVectorStore, caplog: pytest.LogCaptureFixture
) -> None:
    identity, vectors = await collection(writer, 50, seed=29)
    caplog.set_level(logging.INFO)

    await until_resident(resident, identity.name, vectors[0])

    assert "faiss" in sys.modules
    assert [r.getMessage() for r in caplog.records if "ModuleNotFoundError" in r.getMessage()] == []
    assert [r.getMessage() for r in caplog.records if r.name.startswith("faiss")] == []


async def test_losing_the_listener_stops_memory_search_until_it_is_back(
    resident: ResidentVectors, writer: PgVectorStore, writer_pool: Pool
) -> None:
    identity, vectors = await collection(writer, 100, seed=17, groups=["g"])
    await until_resident(resident, identity.name, vectors[0])
    async with writer_pool.acquire() as conn:
        killed = await conn.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE query LIKE 'LISTEN%'"
            " AND pid <> pg_backend_pid()"
        )
    assert killed >= 1
    await until_not_resident(resident, identity.name)
    assert not resident.status.listening.is_set() or resident.status.in_memory() == {}
    member = SearchFilter(readable_by=frozenset({"g"}))
    assert (
        len(await resident.search(Search(name=identity.name, vector=vectors[0], limit=3, properties=(), where=member)))
        == 3
    )  # SQL
    await asyncio.wait_for(resident.status.listening.wait(), 15)
    await until_resident(resident, identity.name, vectors[0])


async def test_what_is_not_copied(resident: ResidentVectors, writer: PgVectorStore, database_url: str) -> None:
    """Past the chunk budget, or a table without the change trigger: searched in PostgreSQL, correctly."""
    identity, vectors = await collection(writer, 120, seed=19)
    pool = await open_pool(database_url, max_size=2)
    small = ResidentVectors(PgVectorStore(pool), database_url, max_chunks=100, settle_seconds=0)
    small.start()
    try:
        await asyncio.wait_for(small.status.listening.wait(), 10)
        for _ in range(20):
            hits = await small.search(
                Search(name=identity.name, vector=vectors[5], limit=1, properties=("chunk_index",))
            )
            assert hits[0].payload["chunk_index"] == 5
            await asyncio.sleep(0.02)
        assert small.status.in_memory() == {}
    finally:
        await small.aclose()
        await pool.close()

    async with writer.pool.acquire() as conn:
        await conn.execute(f'DROP TRIGGER ragu_collection_changed ON vectors."{identity.name}"')
    await resident.search(Search(name=identity.name, vector=vectors[5], limit=1, properties=()))
    await asyncio.sleep(0.3)
    hits = await resident.search(Search(name=identity.name, vector=vectors[5], limit=1, properties=("chunk_index",)))
    assert hits[0].payload["chunk_index"] == 5
    assert identity.name not in resident.status.in_memory()


def test_migration_0006_announces_writes_to_collections_made_before_it(postgres_admin_url: str) -> None:
    url = with_database(postgres_admin_url, "ragu_vector_notices")

    async def scenario() -> list[str]:
        conn = await asyncpg.connect(postgres_admin_url)
        await conn.execute('DROP DATABASE IF EXISTS "ragu_vector_notices" WITH (FORCE)')
        await conn.close()
        await ensure_database(postgres_admin_url, "ragu_vector_notices")
        await asyncio.to_thread(migrations.upgrade, url, "0005")
        name = new_identity().name
        made_before = await asyncpg.connect(url)  # a collection table as Ragu made them before 0006
        await made_before.execute(
            f'CREATE TABLE vectors."{name}" (id uuid PRIMARY KEY, embedding vector({DIM}) NOT NULL, '
            "payload jsonb NOT NULL)"
        )
        await made_before.close()
        await asyncio.to_thread(migrations.upgrade, url)
        heard: list[str] = []
        listener = await asyncpg.connect(url)
        await listener.add_listener("ragu_vectors", lambda *args: heard.append(args[3]))
        writer = await asyncpg.connect(url)
        await init_connection(writer)
        await writer.execute(f'DELETE FROM vectors."{name}" WHERE false')
        await asyncio.sleep(0.3)
        await writer.close()
        await listener.close()
        return [name, *heard]

    name, *heard = asyncio.run(scenario())
    assert heard == [name]


async def test_notices_that_never_arrive_mean_nothing_is_searched_in_memory(
    writer: PgVectorStore, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection pooler in transaction mode accepts LISTEN and then swallows every notice: the listener's
    probe never comes back, so nothing is copied and every search is PostgreSQL's."""
    monkeypatch.setattr(changes, "PING_SECONDS", 0.2)

    def deaf_to_notices(_feed: object, _conn: object, _pid: int, _channel: str, payload: object) -> None:
        """Nothing arrives, not even the probes."""

    monkeypatch.setattr(changes.ChangeFeed, "_on_notice", deaf_to_notices)

    identity, vectors = await collection(writer, 60, seed=23)
    pool = await open_pool(database_url, max_size=2)
    deaf = ResidentVectors(PgVectorStore(pool), database_url, max_chunks=1000, settle_seconds=0)
    deaf.start()
    try:
        for _ in range(15):
            hits = await deaf.search(
                Search(name=identity.name, vector=vectors[3], limit=1, properties=("chunk_index",))
            )
            assert hits[0].payload["chunk_index"] == 3
            await asyncio.sleep(0.05)
        assert not deaf.status.listening.is_set()
        assert deaf.status.in_memory() == {}
    finally:
        await deaf.aclose()
        await pool.close()


async def test_a_collection_written_faster_than_it_rebuilds_stays_in_postgres(
    resident: ResidentVectors, writer: PgVectorStore
) -> None:
    """Rebuilding costs the core that answers questions: after a write, a collection whose last build took
    ``b`` seconds is copied again only after ``REBUILD_FACTOR * b`` seconds without writes."""
    identity, vectors = await collection(writer, 80, seed=29)
    await until_resident(resident, identity.name, vectors[0])
    resident._build_seconds[identity.name] = 60.0  # as if its last build had taken a minute
    await writer.upsert(identity.name, records(vectors[:1], groups=None))
    await until_not_resident(resident, identity.name)
    for _ in range(10):
        hits = await resident.search(
            Search(name=identity.name, vector=vectors[7], limit=1, properties=("chunk_index",))
        )
        assert hits[0].payload["chunk_index"] == 7  # from PostgreSQL
        await asyncio.sleep(0.03)
    assert identity.name not in resident.status.in_memory()
    resident._build_seconds[identity.name] = 0.0  # a fast build: the quiet period is settle_seconds (0) again
    await until_resident(resident, identity.name, vectors[0])
