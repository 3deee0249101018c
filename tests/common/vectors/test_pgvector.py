"""What the contract suite cannot see: pgvector's tables and indexes, sharing across processes, volume,
approximate search under selective filters, names that must never reach SQL, and migration 0003."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import numpy as np
import pytest
from pgvector import Vector

from common.db import migrate as migrations
from common.db.database import Pool, init_connection
from common.db.embedded import ensure_database, with_database
from common.errors import Conflict, InvalidInput, Unavailable
from common.vectors import Search, SearchFilter, VectorRecord
from common.vectors.pgvector import SESSION_SETTINGS, PgVectorStore, as_vector
from schemas.models import Identity
from tests.support.foreign import foreign_pgvector_collection

DIM = 32


@pytest.fixture(scope="session")
async def pool(database_url: str) -> AsyncIterator[Pool]:
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=4, init=init_connection)
    try:
        yield pool
    finally:
        await pool.close()


@pytest.fixture(scope="session")
async def other_pool(database_url: str) -> AsyncIterator[Pool]:
    """A second pool: what kappi's process holds while chonkit's holds the first."""
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=2, init=init_connection)
    try:
        yield pool
    finally:
        await pool.close()


@pytest.fixture
async def store(pool: Pool) -> AsyncIterator[PgVectorStore]:
    store = PgVectorStore(pool)
    yield store
    async with pool.acquire() as conn:
        names = await conn.fetch(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'vectors' AND tablename LIKE 'Pg_%'"
        )
    for row in names:
        await store.drop_collection(row["tablename"])  # with its term statistics and postings


def new_identity(groups: list[str] | None = None) -> Identity:
    name = f"Pg_{uuid.uuid4().hex[:8]}"
    identity = Identity(
        collection_id=str(uuid.uuid4()), name=name, model="m", vectorProvider="pgvector", embeddingProvider="e"
    )
    return identity if groups is None else Identity(**{**identity.to_dict(), "groups": groups})


def random_records(count: int, *, seed: int, groups_of: dict[int, list[str]] | None = None) -> list[VectorRecord]:
    vectors = np.random.default_rng(seed).standard_normal((count, DIM)).astype(np.float32)
    records = []
    for n, vector in enumerate(vectors):
        payload = {"content": f"chunk {n}", "document_id": f"doc-{n % 10}", "chunk_index": n}
        if groups_of and n in groups_of:
            payload["groups"] = groups_of[n]
        records.append(VectorRecord(id=str(uuid.UUID(int=n + 1)), vector=vector, payload=payload))
    return records


async def test_a_collection_is_a_table_with_hnsw_filter_and_lexical_indexes(store: PgVectorStore, pool: Pool) -> None:
    identity = new_identity()
    await store.create_collection(identity, DIM)

    async with pool.acquire() as conn:
        columns = await conn.fetch(
            "SELECT attname, format_type(atttypid, atttypmod) AS type, attnotnull, attstorage FROM pg_attribute "
            "WHERE attrelid = $1::regclass AND attnum > 0 ORDER BY attnum",
            f'vectors."{identity.name}"',
        )
        indexes = {
            row["indexdef"].split(" USING ")[1]
            for row in await conn.fetch(
                "SELECT indexdef FROM pg_indexes WHERE schemaname = 'vectors' AND tablename = $1", identity.name
            )
        }

    assert [tuple(row) for row in columns] == [
        ("id", "uuid", True, b"p"),
        ("embedding", f"vector({DIM})", True, b"p"),  # plain: TOAST moves a long payload, never the vector
        ("payload", "jsonb", True, b"x"),
        ("terms", "integer[]", False, b"x"),  # the lexical columns (the identity has none)
        ("term_weights", "real[]", False, b"x"),
        ("lexical_length", "integer", False, b"p"),
    ]
    assert indexes == {
        "btree (id)",
        "hnsw (embedding vector_cosine_ops)",
        "btree (((payload ->> 'document_id'::text)))",
        "gin (((payload -> 'groups'::text)))",
        "gin (((payload -> 'tags'::text)))",
        "btree (((payload ->> 'label'::text)))",
    }


async def test_two_pools_share_collections_like_two_processes(store: PgVectorStore, other_pool: Pool) -> None:
    chonkit, kappi = store, PgVectorStore(other_pool)
    identity = new_identity(["hr"])

    await chonkit.create_collection(identity, DIM)
    await chonkit.upsert(identity.name, random_records(20, seed=1))

    assert await kappi.collection_exists(identity.name)
    assert identity in await kappi.list_identities()
    assert await kappi.count(identity.name) == 20
    hits = await kappi.search(
        Search(name=identity.name, vector=random_records(1, seed=1)[0].vector, limit=1, properties=["content"])
    )
    assert [(hit.id, hit.payload) for hit in hits] == [(str(uuid.UUID(int=1)), {"content": "chunk 0"})]

    await kappi.set_groups(identity.name, ["ops"])
    assert (await chonkit.read_identity(identity.name) or {})["groups"] == ["ops"]


async def test_concurrent_creates_of_one_name_leave_one_collection(store: PgVectorStore, other_pool: Pool) -> None:
    identity = new_identity()

    results = await asyncio.gather(
        store.create_collection(identity, DIM),
        PgVectorStore(other_pool).create_collection(identity, DIM),
        return_exceptions=True,
    )

    assert sorted(type(result).__name__ for result in results) == ["Conflict", "NoneType"]
    assert all(result.code == "collection_exists" for result in results if isinstance(result, Conflict))
    assert await store.read_identity(identity.name) == identity.to_dict()


async def test_upsert_of_2000_records_in_batches(store: PgVectorStore) -> None:
    identity = new_identity()
    await store.create_collection(identity, DIM)
    records = random_records(2000, seed=2)

    for start in range(0, len(records), 250):
        await store.upsert(identity.name, records[start : start + 250])
    await store.upsert(identity.name, records[:250])  # a retried batch changes nothing

    assert await store.count(identity.name) == 2000
    assert await store.document_ids(identity.name) == {f"doc-{n}": 200 for n in range(10)}


async def test_an_id_repeated_in_one_upsert_keeps_its_last_record(store: PgVectorStore) -> None:
    identity = new_identity()
    await store.create_collection(identity, DIM)
    first, second = random_records(2, seed=6)
    again = VectorRecord(id=first.id, vector=second.vector, payload={**first.payload, "content": "last"})

    await store.upsert(identity.name, [first, second, again])

    assert await store.count(identity.name) == 2
    hits = await store.search(Search(name=identity.name, vector=second.vector, limit=2, properties=["content"]))
    assert [(hit.id, hit.payload["content"]) for hit in hits] == sorted([(first.id, "last"), (second.id, "chunk 1")])


@pytest.mark.parametrize("session", ["open_pool's settings", "plain pool"])
async def test_a_selective_filter_still_fills_the_limit_with_the_exact_neighbours(
    store: PgVectorStore, database_url: str, session: str
) -> None:
    """3,000 chunks, 50 readable: HNSW's first 40 candidates hold about one; the iterative scan finds 20 —
    whether the pool's sessions carry the scan settings or each search sets them in its own transaction.

    On a collection this small the planner may rightly prefer an exact sequential scan, so the search runs
    on connections where that plan is off, as it is in effect on a large collection.
    """
    identity = new_identity()
    await store.create_collection(identity, DIM)
    readable = set(range(0, 3000, 60))
    groups_of = {n: ["hr"] if n in readable else ["secret"] for n in range(3000)}
    records = random_records(3000, seed=3, groups_of=groups_of)
    for start in range(0, len(records), 500):
        await store.upsert(identity.name, records[start : start + 500])
    query = np.random.default_rng(4).standard_normal(DIM).astype(np.float32).tolist()
    settings = {"enable_seqscan": "off", **(SESSION_SETTINGS if session.startswith("open_pool") else {})}
    async with asyncpg.create_pool(
        database_url, min_size=1, max_size=1, init=init_connection, server_settings=settings
    ) as pool:
        hits = await PgVectorStore(pool).search(
            Search(
                name=identity.name,
                vector=query,
                limit=20,
                properties=[],
                where=SearchFilter(readable_by=frozenset({"hr"})),
            )
        )
        async with pool.acquire() as conn:  # the same walk without the iterative scan comes up short
            await conn.execute("SET hnsw.iterative_scan = off")
            plain = await conn.fetch(
                f'SELECT id FROM vectors."{identity.name}" '
                "WHERE payload->'groups' IS NULL OR payload->'groups' ?| $2 ORDER BY embedding <=> $1 LIMIT 20",
                Vector(query),
                ["hr"],
            )

    vectors = np.array([records[n].vector for n in sorted(readable)], dtype=np.float64)
    distances = 1 - vectors @ np.array(query) / (np.linalg.norm(vectors, axis=1) * np.linalg.norm(query))
    exact = [str(uuid.UUID(int=n + 1)) for _, n in sorted(zip(distances, sorted(readable), strict=True))[:20]]
    assert len(hits) == 20
    assert len({hit.id for hit in hits} & set(exact)) >= 18  # HNSW is approximate; recall stays high
    assert [hit.distance for hit in hits] == sorted(hit.distance for hit in hits)
    assert len(plain) < 20


async def test_search_many_sends_an_agents_lexical_and_hybrid_fan_out_as_one_statement(
    store: PgVectorStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kappi's fan-out over an assignment's collections in hybrid mode costs one round trip, as dense does; a
    search whose collection is gone is its own error, the others still answered."""
    names = []
    for seed in (1, 2):
        identity = new_identity(["hr"])
        await store.create_collection(identity, DIM)
        await store.upsert(identity.name, random_records(40, seed=seed))
        names.append(identity.name)
    query = random_records(1, seed=9)[0].vector
    where = SearchFilter(readable_by=frozenset({"hr"}))
    searches = [
        Search(name=name, vector=query, limit=5, properties=["content"], text=text, mode=mode, where=where)
        for name in names
        for mode, text in (("hybrid", "chunk 7"), ("lexical", "chunk 12"), ("hybrid", "the of"))
    ]
    alone = [
        await store.search(
            Search(
                name=s.name, vector=s.vector, limit=5, properties=s.properties, text=s.text, mode=s.mode, where=where
            )
        )
        for s in searches
    ]
    fetches: list[str] = []
    fetch = PgVectorStore._fetch

    async def counted(self: PgVectorStore, *args: Any, **kwargs: Any) -> list[asyncpg.Record]:
        fetches.append("statement")
        return await fetch(self, *args, **kwargs)

    monkeypatch.setattr(PgVectorStore, "_fetch", counted)
    together = await store.search_many(searches)

    assert fetches == ["statement"]
    assert together == alone
    assert all(isinstance(hits, list) and hits for hits in together)

    await store.drop_collection(names[1])
    fetches.clear()
    results = await store.search_many(searches)
    assert results[:3] == alone[:3]
    assert all(getattr(error, "code", None) == "collection_not_found" for error in results[3:])


async def test_concurrent_writers_keep_the_term_statistics_exact(
    store: PgVectorStore, other_pool: Pool, pool: Pool
) -> None:
    """Writers of one collection on two pools at once (overlapping terms, overwrites, deletes) neither deadlock
    on the statistics rows nor lose a count: the triggers lock them in one order."""
    identity = new_identity()
    await store.create_collection(identity, DIM)
    other = PgVectorStore(other_pool)
    words = ["alpha", "beta", "gamma", "delta", "epsilon"]

    def batch(start: int, document: str) -> list[VectorRecord]:
        return [
            VectorRecord(
                id=str(uuid.UUID(int=start + n + 1)),
                vector=random_records(1, seed=start + n)[0].vector,
                payload={"content": " ".join(words[: 1 + (start + n) % 5]) + f" w{start + n}", "document_id": document},
            )
            for n in range(20)
        ]

    await asyncio.gather(
        *(writer.upsert(identity.name, batch(20 * k, f"doc-{k % 3}")) for k, writer in enumerate([store, other] * 4)),
        store.upsert(identity.name, batch(0, "doc-0")),  # an overwrite racing the first write
        other.delete_document(identity.name, "doc-2"),
    )
    await store.delete_document(identity.name, "doc-1")

    table, stats, postings = (
        f'{schema}."{identity.name}"' for schema in ("vectors", "vectors_lexical", "vectors_postings")
    )
    async with pool.acquire() as conn:
        kept = await conn.fetchval(f"SELECT count(*) FROM {table} WHERE terms IS NOT NULL")
        wrong = await conn.fetchval(
            f"""
            SELECT count(*) FROM (
                SELECT t AS term, count(*) AS chunks FROM {table}, unnest(terms) t GROUP BY t
                UNION ALL SELECT 0, count(*) FROM {table} WHERE terms IS NOT NULL
            ) truth FULL JOIN (SELECT term, chunks FROM {stats} WHERE chunks <> 0) counted USING (term)
            WHERE truth.chunks IS DISTINCT FROM counted.chunks
            """
        )
        length = await conn.fetchval(f"SELECT sum(lexical_length) FROM {table}")
        counted_length = await conn.fetchval(f"SELECT length FROM {stats} WHERE term = 0")
        postings_wrong = await conn.fetchval(
            f"""
            SELECT count(*) FROM (SELECT t AS term, id FROM {table}, unnest(terms) t) truth
            FULL JOIN {postings} p USING (term, id) WHERE truth.id IS NULL OR p.id IS NULL
            """
        )
    assert kept == await store.count(identity.name) > 0
    assert (wrong, postings_wrong) == (0, 0)
    assert counted_length == length


async def test_set_groups_leaves_chunks_that_already_carry_them_untouched(store: PgVectorStore, pool: Pool) -> None:
    identity = new_identity(["hr"])
    await store.create_collection(identity, DIM)
    await store.upsert(identity.name, random_records(5, seed=5, groups_of={n: ["hr"] for n in range(5)}))
    table = f'vectors."{identity.name}"'
    xmin = f"SELECT id, xmin::text FROM {table} WHERE id <> '00000000-0000-0000-0000-000000000000'"
    async with pool.acquire() as conn:
        before = await conn.fetch(xmin)

        await store.set_groups(identity.name, ["hr"])

        assert await conn.fetch(xmin) == before


@pytest.mark.parametrize("name", ["bad", 'Evil"; DROP SCHEMA vectors CASCADE; --', "Name\n", "A" * 64, "Ünïcode"])
async def test_names_that_are_not_collection_names_never_reach_sql(store: PgVectorStore, name: str) -> None:
    assert not await store.collection_exists(name)
    assert await store.read_identity(name) is None
    await store.drop_collection(name)
    with pytest.raises(InvalidInput) as raised:
        await store.count(name)
    assert raised.value.code == "invalid_collection_name"


async def test_the_longest_postgres_identifier_is_a_valid_name(store: PgVectorStore) -> None:
    identity = Identity(**{**new_identity().to_dict(), "name": "Pg_" + "x" * 60})

    await store.create_collection(identity, DIM)

    assert await store.read_identity(identity.name) == identity.to_dict()


@pytest.mark.parametrize("dimension", [0, 2001])
async def test_dimensions_the_hnsw_index_cannot_take_are_refused(store: PgVectorStore, dimension: int) -> None:
    identity = new_identity()

    with pytest.raises(InvalidInput) as raised:
        await store.create_collection(identity, dimension)

    assert raised.value.code == "invalid_dimension"
    assert not await store.collection_exists(identity.name)


async def test_vectors_of_the_wrong_dimension_are_refused(store: PgVectorStore) -> None:
    identity = new_identity()
    await store.create_collection(identity, DIM)
    short = VectorRecord(id=str(uuid.uuid4()), vector=[1.0, 0.0], payload={"content": "c", "document_id": "d"})

    with pytest.raises(InvalidInput) as upsert_error:
        await store.upsert(identity.name, [short])
    with pytest.raises(InvalidInput) as search_error:
        await store.search(Search(name=identity.name, vector=[1.0, 0.0], limit=3, properties=[]))

    assert upsert_error.value.code == search_error.value.code == "vector_store_rejected"
    assert await store.count(identity.name) == 0


def test_numpy_rows_encode_like_their_lists_and_what_is_not_a_vector_is_refused() -> None:
    row = np.array([0.1, -2.5, 3.0], dtype=np.float32)
    encoded = as_vector(row).to_binary()

    assert encoded == as_vector(row.tolist()).to_binary() == as_vector(row.astype(np.float64)).to_binary()
    bad: list[Any] = [np.zeros((2, 2), dtype=np.float32), ["x"], [None], ("x",)]
    for vector in bad:
        with pytest.raises(InvalidInput) as raised:
            as_vector(vector)
        assert raised.value.code == "invalid_vector"


async def test_list_identities_skips_tables_that_are_not_collections_and_leaves_them_alone(
    store: PgVectorStore, pool: Pool
) -> None:
    ours = new_identity()
    await store.create_collection(ours, DIM)
    async with pool.acquire() as conn:
        await conn.execute('CREATE TABLE vectors."Pg_notes" (id int PRIMARY KEY, body text)')
        await conn.execute('CREATE TABLE vectors."pg_lower" (id uuid PRIMARY KEY, payload jsonb)')
        await conn.execute('CREATE TABLE vectors."Pg_renamed" (id uuid PRIMARY KEY, payload jsonb)')
        await conn.execute(
            'INSERT INTO vectors."Pg_renamed" VALUES ($1, $2)', uuid.UUID(int=0), ours.to_dict()
        )  # a valid identity, but of another collection

        listed = [identity.name for identity in await store.list_identities()]

        assert ours.name in listed
        assert not {"Pg_notes", "pg_lower", "Pg_renamed"} & set(listed)
        assert await store.read_identity("Pg_notes") is None
        assert await conn.fetchval('SELECT payload FROM vectors."Pg_renamed"') == ours.to_dict()
        await conn.execute('DROP TABLE vectors."pg_lower"')


async def test_a_collection_another_application_wrote_answers_dense_hybrid_and_after_repair_lexical(
    store: PgVectorStore, pool: Pool, caplog: pytest.LogCaptureFixture
) -> None:
    """Before: its hybrid and lexical searches failed as a missing collection, which kappi read as one that
    vanished, so the agent answered with nothing and no error."""
    identity = new_identity()
    contents = ["the vacation policy grants twenty days", "expenses are filed monthly", "parking is free"]
    vectors = await foreign_pgvector_collection(pool, identity, contents, dimension=DIM)
    name, query = identity.name, vectors[1]

    dense = await store.search(Search(name=name, vector=query, limit=3, properties=["content"]))
    with caplog.at_level("WARNING", logger="common.vectors.pgvector"):
        hybrid = await store.search(
            Search(name=name, vector=query, limit=3, properties=["content"], text="vacation", mode="hybrid")
        )
    with pytest.raises(Unavailable) as lexical:
        await store.search(
            Search(name=name, vector=query, limit=3, properties=["content"], text="vacation", mode="lexical")
        )

    assert len(dense) == 3
    assert [h.id for h in hybrid] == [h.id for h in dense]  # the dense leg's order
    assert any("no lexical index" in r.getMessage() for r in caplog.records)
    assert lexical.value.code == "lexical_index_missing"

    assert await store.upgrade_lexical(name) == 3
    assert await store.upgrade_lexical(name) == 0  # has it now
    found = await store.search(
        Search(name=name, vector=query, limit=3, properties=["content"], text="vacation", mode="lexical")
    )
    assert [h.payload["content"] for h in found] == [contents[0]]
    fused = await store.search(
        Search(name=name, vector=query, limit=3, properties=["content"], text="vacation", mode="hybrid")
    )
    assert [h.payload["content"] for h in fused if h.legs is not None and h.legs.lexical_rank is not None] == [
        contents[0]
    ]


async def test_an_unreachable_server_is_unavailable() -> None:
    pool = await asyncpg.create_pool("postgresql://ragu@/ragu?host=/nonexistent-socket-dir", min_size=0)
    try:
        with pytest.raises(Unavailable) as raised:
            await PgVectorStore(pool).count("Anything")
    finally:
        await pool.close()

    assert raised.value.code == "vector_store_unavailable"


def test_migration_0003_round_trip_and_the_codec_follows_the_extension(postgres_admin_url: str) -> None:
    """Before 0003 connections initialise without the codec; after it they have it; downgrading drops the
    collections with the schema but keeps the extension."""
    url = with_database(postgres_admin_url, "ragu_vectors_migration")

    async def recreate() -> None:
        conn = await asyncpg.connect(postgres_admin_url)
        await conn.execute('DROP DATABASE IF EXISTS "ragu_vectors_migration" WITH (FORCE)')
        await conn.close()
        await ensure_database(postgres_admin_url, "ragu_vectors_migration")

    async def state() -> tuple[bool, bool, object]:
        conn = await asyncpg.connect(url)
        try:
            await init_connection(conn)
            schema = await conn.fetchval("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'vectors')")
            extension = await conn.fetchval("SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector')")
            decoded = await conn.fetchval("SELECT '[1,2]'::vector") if extension else None
            return schema, extension, decoded
        finally:
            await conn.close()

    async def make_collection() -> None:
        pool = await asyncpg.create_pool(url, min_size=1, max_size=1, init=init_connection)
        try:
            await PgVectorStore(pool).create_collection(new_identity(), 4)
        finally:
            await pool.close()

    asyncio.run(recreate())
    migrations.upgrade(url, "0002")
    assert asyncio.run(state()) == (False, False, None)

    migrations.upgrade(url, "0003")
    assert asyncio.run(state()) == (True, True, Vector([1.0, 2.0]))
    migrations.upgrade(url)  # today's collections need 0006's change-notice trigger function
    asyncio.run(make_collection())

    migrations.downgrade(url, "0002")
    assert asyncio.run(state()) == (False, True, Vector([1.0, 2.0]))

    migrations.upgrade(url, "0003")
    assert asyncio.run(state()) == (True, True, Vector([1.0, 2.0]))
