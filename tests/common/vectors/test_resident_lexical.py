"""Lexical and hybrid searches answered from kappi's in-memory copies (``common.vectors.resident``) equal
PostgreSQL's: the same hits in the same order, the same ranks in ``legs``, the same BM25 and fused scores, and the
same access filter inside the lexical leg — over random collections, writes, deletes and groups, with every write
reaching the copy through the change feed.

``writer`` is a plain :class:`PgVectorStore` on a pool of its own (another process, as PostgreSQL sees it); every
comparison is against its SQL search on the real server.
"""

from __future__ import annotations

import math
import uuid
from typing import Any

import asyncpg
import msgspec
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common.db.database import Pool
from common.vectors import SearchFilter, VectorRecord
from common.vectors import lexical as lexical_module
from common.vectors import resident as resident_module
from common.vectors.base import FUSIONS, Search, SearchHit
from common.vectors.pgvector import PgVectorStore
from common.vectors.resident import ResidentVectors
from tests.common.vectors.test_resident import (
    DIM,
    new_identity,
    resident,
    until_not_resident,
    until_resident,
    writer,
    writer_pool,
)

__all__ = ["resident", "writer", "writer_pool"]  # fixtures shared with test_resident

WORDS = ("vacation", "policy", "leave", "salary", "bonus", "travel", "expense", "remote", "office", "pension")
"""A small vocabulary: many chunks share terms, so scores tie and legs overlap."""
GROUPS: tuple[list[str] | None, ...] = (None, ["a"], ["b"], ["a", "b"], [])
READERS: tuple[frozenset[str] | None, ...] = (None, frozenset(), frozenset({"a"}), frozenset({"b"}), frozenset({"c"}))
PROPERTIES = ("content", "chunk_index", "groups")

texts = st.lists(st.sampled_from(WORDS), max_size=9).map(" ".join)
chunks = st.lists(st.tuples(texts, st.sampled_from(GROUPS)), min_size=1, max_size=70)
queries = st.fixed_dictionaries(
    {
        "text": st.lists(st.sampled_from((*WORDS, "the", "nothing")), max_size=4).map(" ".join),
        "mode": st.sampled_from(("lexical", "hybrid")),
        "limit": st.integers(0, 12),
        "readers": st.sampled_from(READERS),
        "ungrouped_readable": st.booleans(),
        "dense_weight": st.sampled_from((0.0, 0.4, 0.5, 1.0)),
        "max_distance": st.sampled_from((None, 0.9, 1.2)),
        "fusion": st.sampled_from(FUSIONS),
    }
)
writes = st.lists(
    st.one_of(
        st.tuples(st.just("upsert"), chunks.map(lambda c: c[:10])),  # new chunks, or old ids with new text
        st.tuples(st.just("delete"), st.lists(st.integers(0, 80), min_size=1, max_size=10)),
    ),
    max_size=3,
)


def chunk_records(
    rows: list[tuple[str, list[str] | None]], rng: np.random.Generator, *, first: int
) -> list[VectorRecord]:
    records = []
    for n, (content, groups) in enumerate(rows, start=first):
        payload: dict[str, Any] = {"content": content, "document_id": f"doc-{n % 5}", "chunk_index": n}
        if groups is not None:
            payload["groups"] = groups
        vector = rng.standard_normal(DIM).astype(np.float32)
        records.append(VectorRecord(id=str(uuid.UUID(int=n + 1)), vector=vector, payload=payload))
    return records


def search_of(name: str, query: dict[str, Any], vector: np.ndarray) -> Search:
    readers = query["readers"]
    where = (
        None if readers is None else SearchFilter(readable_by=readers, ungrouped_readable=query["ungrouped_readable"])
    )
    return Search(
        name=name,
        vector=vector,
        limit=query["limit"],
        properties=PROPERTIES,
        where=where,
        text=query["text"],
        mode=query["mode"],
        dense_weight=query["dense_weight"],
        max_distance=query["max_distance"],
        fusion=query.get("fusion", "chunk"),
    )


def assert_alike(ours: list[SearchHit], sql: list[SearchHit], asked: Search) -> None:
    """The same hits, payloads and ranks; scores to float precision (they agree to the bit when SQL sums in the
    order the copy does); distances to float32 precision (the copy computes them in float32)."""
    assert [(h.id, h.payload) for h in ours] == [(h.id, h.payload) for h in sql], asked
    for a, b in zip(ours, sql, strict=True):
        assert a.legs is not None, asked
        assert b.legs is not None, asked
        assert (a.legs.dense_rank, a.legs.lexical_rank) == (b.legs.dense_rank, b.legs.lexical_rank), asked
        assert math.isclose(a.score, b.score, rel_tol=1e-12), asked
        assert (a.legs.lexical_score is None) == (b.legs.lexical_score is None), asked
        if a.legs.lexical_score is not None and b.legs.lexical_score is not None:
            assert math.isclose(a.legs.lexical_score, b.legs.lexical_score, rel_tol=1e-12), asked
        assert math.isclose(a.distance, b.distance, abs_tol=1e-6), asked


async def statistics(pool: Pool, name: str) -> tuple[int, dict[int, int]]:
    """PostgreSQL's term statistics of a collection: its chunk count and each term's document frequency."""
    async with pool.acquire() as conn:
        rows = await conn.fetch(f'SELECT term, chunks FROM vectors_lexical."{name}" WHERE chunks <> 0')
    df = {row["term"]: row["chunks"] for row in rows}
    return df.pop(0, 0), df


async def compare(
    resident: ResidentVectors, writer: PgVectorStore, writer_pool: Pool, name: str, asked: list[dict[str, Any]]
) -> int:
    """Every query answered alike by the copy and by SQL; how many the copy answered itself."""
    await until_resident(resident, name, np.ones(DIM, dtype=np.float32))
    copy = resident._copies[name]
    assert copy.lexical is not None
    chunks, df = await statistics(writer_pool, name)
    held = dict(zip(copy.lexical.terms.tolist(), np.diff(copy.lexical.starts).tolist(), strict=True))
    assert (copy.lexical.chunks, held) == (chunks, df)  # the copy's own counts are PostgreSQL's statistics
    rng = np.random.default_rng(len(asked))
    answered = 0
    for query in asked:
        search = search_of(name, query, rng.standard_normal(DIM).astype(np.float32))
        sql = await writer.search(search)
        own = copy.text_search(search, resident_module._unit(search.vector), lexical_module.query_terms(search.text))
        if own is not None:
            answered += 1
            assert_alike(own, sql, search)
        [many] = await resident.search_many([search])
        assert isinstance(many, list)
        assert_alike(many, sql, search)
        assert_alike(await resident.search(search), sql, search)
    return answered


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=chunks, uniform=st.booleans(), asked=st.lists(queries, min_size=1, max_size=8), changes=writes)
async def test_lexical_and_hybrid_answers_in_memory_equal_postgres(
    resident: ResidentVectors,
    writer: PgVectorStore,
    writer_pool: Pool,
    rows: list[tuple[str, list[str] | None]],
    uniform: bool,
    asked: list[dict[str, Any]],
    changes: list[tuple[str, Any]],
) -> None:
    if uniform:
        rows = [(content, rows[0][1]) for content, _ in rows]
    identity = new_identity()
    rng = np.random.default_rng(len(rows))
    await writer.create_collection(identity, DIM)
    try:
        await writer.upsert(identity.name, chunk_records(rows, rng, first=0))
        await compare(resident, writer, writer_pool, identity.name, asked)
        for kind, change in changes:  # written by another pool: the copy hears of it through the change feed
            if kind == "upsert":
                await writer.upsert(identity.name, chunk_records(change, rng, first=len(rows) // 2))
            else:
                await writer.delete_ids(identity.name, [str(uuid.UUID(int=n + 1)) for n in change])
            await until_not_resident(resident, identity.name)
            if await writer.count(identity.name) == 0:
                continue  # every chunk deleted: an empty collection is never copied, PostgreSQL answers it
            await compare(resident, writer, writer_pool, identity.name, asked)
    finally:
        await writer.drop_collection(identity.name)


async def test_lexical_and_hybrid_searches_cost_postgres_nothing(
    resident: ResidentVectors, writer: PgVectorStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the collection in memory, lexical and hybrid searches — alone, batched, filtered by groups, fused per
    chunk or per document — send PostgreSQL no statement, and answer as its SQL does (regression: the lexical leg
    was PostgreSQL's)."""
    identity = new_identity(["staff"])
    rng = np.random.default_rng(43)
    rows: list[tuple[str, list[str] | None]] = [
        (" ".join(rng.choice(WORDS, size=int(rng.integers(2, 12)))), ["staff"]) for _ in range(400)
    ]
    await writer.create_collection(identity, DIM)
    await writer.upsert(identity.name, chunk_records(rows, rng, first=0))
    await until_resident(resident, identity.name, np.ones(DIM, dtype=np.float32))
    statements: list[str] = []
    fetch = PgVectorStore._fetch

    async def counted(store: PgVectorStore, conn: Any, sql: str, *args: Any, **kwargs: Any) -> list[asyncpg.Record]:
        if store is not writer:
            statements.append(sql)
        return await fetch(store, conn, sql, *args, **kwargs)

    monkeypatch.setattr(PgVectorStore, "_fetch", counted)
    staff = SearchFilter(readable_by=frozenset({"staff", "x"}), ungrouped_readable=False)
    searches = [
        Search(name=identity.name, vector=v, limit=limit, properties=PROPERTIES, where=where, text=text, mode=mode)
        for v, text in zip(
            rng.standard_normal((6, DIM)).astype(np.float32),
            ("vacation policy", "bonus travel", "leave the office", "pension", "remote remote salary", "expense"),
            strict=True,
        )
        for mode in ("lexical", "hybrid")
        for limit in (5, 60)
        for where in (None, staff)
    ]
    searches += [msgspec.structs.replace(s, fusion=fusion) for s in searches[1::4] for fusion in FUSIONS[1:]]
    many = await resident.search_many(searches)
    for search, hits in zip(searches, many, strict=True):
        assert isinstance(hits, list)
        assert hits, search
        assert_alike(hits, await writer.search(search), search)
        assert_alike(await resident.search(search), hits, search)
    assert statements == []
    assert identity.name in resident.status.in_memory()


async def test_chunks_without_lexical_columns_are_left_out_of_the_index_as_in_postgres(
    resident: ResidentVectors, writer: PgVectorStore, writer_pool: Pool
) -> None:
    """Chunks another application wrote without ``terms`` (NULL) hold no postings and do not count in N, in the
    copy as in PostgreSQL's statistics; the copy keeps answering lexical and hybrid searches alike."""
    identity = new_identity()
    rng = np.random.default_rng(47)
    rows: list[tuple[str, list[str] | None]] = [
        (" ".join(rng.choice(WORDS, size=int(rng.integers(1, 8)))), None) for _ in range(60)
    ]
    await writer.create_collection(identity, DIM)
    await writer.upsert(identity.name, chunk_records(rows, rng, first=0))
    async with writer_pool.acquire() as conn:
        await conn.execute(
            f'INSERT INTO vectors."{identity.name}" (id, embedding, payload) '
            "SELECT gen_random_uuid(), embedding, payload FROM vectors."
            f"\"{identity.name}\" WHERE (payload->>'chunk_index')::int < 5"
        )
    asked = [
        {
            "text": text,
            "mode": mode,
            "limit": 8,
            "readers": None,
            "ungrouped_readable": True,
            "dense_weight": 0.5,
            "max_distance": None,
        }
        for text in ("vacation policy", "leave leave bonus", "pension office remote")
        for mode in ("lexical", "hybrid")
    ]
    assert await compare(resident, writer, writer_pool, identity.name, asked) == len(asked)
    copy = resident._copies[identity.name]
    assert copy.size == 65
    assert copy.lexical is not None
    assert copy.lexical.chunks == 60
