"""The pgvector adapter: one table per collection in the ``vectors`` schema of the Ragu database.

``vectors."<Name>"`` holds ``id uuid``, ``embedding vector(<dim>)`` and ``payload jsonb``, with an HNSW
cosine index on the embedding, a btree on ``payload->>'document_id'``, a GIN index on ``payload->'groups'``
and a trigger that announces every committed write (:mod:`common.vectors.changes`). It is plain PostgreSQL, so
chonkit and kappi share collections from separate processes with nothing to coordinate. The identity record
is the row at the nil UUID; every chunk query excludes it.

The pool's connections must send ``vector`` in pgvector's binary format:
:func:`common.db.database.init_connection` registers that codec once migration 0003 has installed the
extension. Collection names are checked against the rule every store shares (``records.NAME_RULE``) before
they reach SQL, and quoted; every value travels as a bind parameter of a statement asyncpg prepares once per
connection.

HNSW is approximate. The pool (:func:`open_pool`) turns on pgvector's iterative scan (0.8+) for every
session, so a filter that rejects most neighbours, or dead rows left by ``set_groups``, still yields
``limit`` hits; the outer query then sorts the candidates exactly by (distance, id). Session settings made
once at connect time, not per search, save PostgreSQL a statement per search and the pool a ``RESET ALL``
per release: a third of the database's CPU per kappi question in the retrieval benchmark.

Errors: unknown collection → ``NotFound("collection_not_found")``; connection lost or server refusing →
``Unavailable("vector_store_unavailable")``; input PostgreSQL refuses (wrong dimension) →
``InvalidInput("vector_store_rejected")``.
"""

# ruff: noqa: S608 -- SQL names only tables that passed table_of(); every value is a $n bind parameter.

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeAlias

import asyncpg
import msgspec
import numpy as np
import numpy.typing as npt
from pgvector import Vector as PgVector

from common.db.database import Connection, Pool, init_connection
from common.errors import AppError, InvalidInput, NotFound, Unavailable
from common.vectors.base import (
    IDENTITY_ID,
    Search,
    SearchFilter,
    SearchHit,
    SearchResult,
    Vector,
    VectorRecord,
    identity_vector,
)
from common.vectors.changes import add_trigger, announce, announces_writes
from common.vectors.records import (
    as_floats,
    checked_identity_payload,
    checked_name,
    chunk_uuid,
    collection_already_exists,
    collection_not_found,
    identity_not_found,
    is_collection_name,
    search_each,
    valid_identity,
)
from schemas.models import Identity

PROVIDER = "pgvector"
SCHEMA = "vectors"
MAX_DIMENSION = 2000
"""The most dimensions pgvector's HNSW index accepts on a ``vector`` column."""

_NIL = uuid.UUID(IDENTITY_ID)
CHUNKS_ONLY = f"id <> '{IDENTITY_ID}'"
DEFAULT_EF_SEARCH = 40
_MAX_EF_SEARCH = 1000
SESSION_SETTINGS = {
    "hnsw.iterative_scan": "relaxed_order",
    "hnsw.ef_search": str(DEFAULT_EF_SEARCH),
    "enable_seqscan": "off",
}
"""Set when a pool connection opens (pgvector reads its own when it loads). Every statement of the store has
an index to use (HNSW, the ``document_id`` btree, the primary key); on a small collection the planner would
rather scan it whole, and then its ``groups`` filter decompresses every chunk's payload: 14 ms of PostgreSQL
CPU per question over three collections of 900 chunks, against about 2 ms through HNSW. Statements with no
index to use (counts, group rewrites) still scan: the setting only makes the scan the last resort."""
SNAPSHOT_BATCH = 2000
"""Rows per fetch of :meth:`PgVectorStore.snapshot`: the event loop serves requests between batches."""
Chunk: TypeAlias = tuple[str, npt.NDArray[np.float32], dict[str, Any]]
"""A chunk as :meth:`PgVectorStore.snapshot` reads it: id, vector, payload."""
_CONNECTION_ERRORS = (
    OSError,
    asyncpg.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,  # shutdown, cancelled, cannot connect now
    asyncpg.exceptions.InsufficientResourcesError,  # too many connections, out of memory or disk
)

_log = logging.getLogger(__name__)


async def open_pool(url: str, *, min_size: int = 1, max_size: int = 8) -> Pool:
    """The pool :class:`PgVectorStore` needs: the vector codec, :data:`SESSION_SETTINGS`, and no reset query
    on release — the store never changes session state outside a transaction (``SET LOCAL`` only), and
    asyncpg still rolls back a transaction left open."""
    pool: Pool = await asyncpg.create_pool(
        url,
        min_size=min_size,
        max_size=max_size,
        init=init_connection,
        server_settings=SESSION_SETTINGS,
        reset=_keep_session,
    )
    return pool


async def _keep_session(_: Connection) -> None:
    """The pool's reset hook: nothing to undo (see :func:`open_pool`)."""


class PgVectorStore:
    """:class:`~common.vectors.base.VectorStore` over PostgreSQL + pgvector.

    Args:
        pool: Ideally from :func:`open_pool`; any pool with the vector codec works, its searches then set
            :data:`SESSION_SETTINGS` in a transaction of their own. The pool belongs to the caller.
    """

    def __init__(self, pool: Pool) -> None:
        self._pool = pool
        self._session_settings: bool | None = None
        """Whether the pool's sessions carry :data:`SESSION_SETTINGS` (checked once: a pool's are alike)."""

    @property
    def provider(self) -> str:
        return PROVIDER

    @property
    def pool(self) -> Pool:
        """The pool every statement of the store goes through (the caller's)."""
        return self._pool

    async def create_collection(self, identity: Identity, dimension: int) -> None:
        """Table, indexes and identity in one transaction: a failure leaves no half-made collection."""
        payload = checked_identity_payload(identity)
        table = table_of(identity.name)
        if not 1 <= dimension <= MAX_DIMENSION:
            raise InvalidInput(
                f"pgvector collections take 1 to {MAX_DIMENSION} dimensions, got {dimension}",
                code="invalid_dimension",
            )
        try:
            async with self._connection(identity.name) as conn, conn.transaction():
                await conn.execute(
                    f"CREATE TABLE {table} "
                    f"(id uuid PRIMARY KEY, embedding vector({dimension}) NOT NULL, payload jsonb NOT NULL)"
                )
                # Keep vectors in the row: a long payload is what TOAST should move out, not the embedding
                # every distance (and any exact scan the planner picks) reads.
                await conn.execute(f"ALTER TABLE {table} ALTER COLUMN embedding SET STORAGE PLAIN")
                await conn.execute(f"CREATE INDEX ON {table} USING hnsw (embedding vector_cosine_ops)")
                await conn.execute(f"CREATE INDEX ON {table} ((payload->>'document_id'))")
                await conn.execute(f"CREATE INDEX ON {table} USING gin ((payload->'groups'))")
                await conn.execute(add_trigger(table))
                await _put_identity(conn, table, payload, dimension)
        except (asyncpg.DuplicateTableError, asyncpg.UniqueViolationError) as exc:
            # A concurrent create of the same name surfaces as a unique violation in the catalog.
            raise collection_already_exists(identity.name) from exc

    async def collection_exists(self, name: str) -> bool:
        if not is_collection_name(name):
            return False
        async with self._connection(name) as conn:
            found: bool = await conn.fetchval(
                "SELECT EXISTS (SELECT 1 FROM pg_tables WHERE schemaname = $1 AND tablename = $2)", SCHEMA, name
            )
        return found

    async def read_identity(self, name: str) -> dict[str, Any] | None:
        if not is_collection_name(name):
            return None
        try:
            async with self._connection(name) as conn:
                stored: dict[str, Any] | None = await conn.fetchval(
                    f"SELECT payload FROM {table_of(name)} WHERE id = $1", _NIL
                )
        except (NotFound, InvalidInput):  # no such table, or a table that is not a collection
            return None
        return stored

    async def write_identity(self, identity: Identity) -> None:
        payload = checked_identity_payload(identity)
        table = table_of(identity.name)
        async with self._connection(identity.name) as conn, conn.transaction():
            dimension = await _dimension(conn, identity.name)
            await _put_identity(conn, table, payload, dimension)

    async def set_groups(self, name: str, groups: Sequence[str]) -> None:
        """Identity then chunks in one transaction; chunks that already carry these groups are not rewritten."""
        table = table_of(name)
        groups = list(groups)
        async with self._connection(name) as conn, conn.transaction():
            stored = await conn.fetchval(f"SELECT payload FROM {table} WHERE id = $1 FOR UPDATE", _NIL)
            current = valid_identity(name, stored)
            if current is None:
                raise identity_not_found(name)
            changed = msgspec.structs.replace(current, groups=groups or msgspec.UNSET)
            await conn.execute(
                f"UPDATE {table} SET payload = $2 WHERE id = $1", _NIL, checked_identity_payload(changed)
            )
            if groups:
                await conn.execute(
                    f"UPDATE {table} SET payload = jsonb_set(payload, '{{groups}}', $1) "
                    f"WHERE {CHUNKS_ONLY} AND payload->'groups' IS DISTINCT FROM $1",
                    groups,
                )
            else:
                await conn.execute(
                    f"UPDATE {table} SET payload = payload - 'groups' WHERE {CHUNKS_ONLY} AND payload ? 'groups'"
                )

    async def upsert(self, name: str, records: Sequence[VectorRecord]) -> None:
        """One multi-row ``INSERT ... SELECT FROM unnest(...)``: one round trip, atomic, and measured 15-60 %
        faster than a pipelined ``executemany``. A repeated id keeps its last record, as sequential upserts would.
        Payloads go to the JSON codec as they are: it encodes a ``ChunkPayload`` by its field names."""
        table = table_of(name)
        latest = {chunk_uuid(record.id): record for record in records}
        if not latest:
            return
        async with self._connection(name) as conn:
            await conn.execute(
                f"INSERT INTO {table} (id, embedding, payload) "
                "SELECT * FROM unnest($1::uuid[], $2::vector[], $3::jsonb[]) "
                "ON CONFLICT (id) DO UPDATE SET embedding = EXCLUDED.embedding, payload = EXCLUDED.payload",
                list(latest),
                [as_vector(record.vector) for record in latest.values()],
                [record.payload for record in latest.values()],
            )

    async def delete_document(self, name: str, document_id: str) -> None:
        table = table_of(name)
        async with self._connection(name) as conn:
            await conn.execute(f"DELETE FROM {table} WHERE payload->>'document_id' = $1 AND {CHUNKS_ONLY}", document_id)

    async def rename_document(self, name: str, document_id: str, document_name: str) -> None:
        """One statement; chunks that already carry the name are not rewritten."""
        table = table_of(name)
        async with self._connection(name) as conn:
            await conn.execute(
                f"UPDATE {table} SET payload = jsonb_set(payload, '{{document_name}}', to_jsonb($2::text)) "
                f"WHERE payload->>'document_id' = $1 AND {CHUNKS_ONLY} "
                "AND payload->>'document_name' IS DISTINCT FROM $2",
                document_id,
                document_name,
            )

    async def delete_ids(self, name: str, ids: Sequence[str]) -> None:
        table = table_of(name)
        chunk_ids = [chunk_uuid(id_) for id_ in ids]
        if not chunk_ids:
            return
        async with self._connection(name) as conn:
            await conn.execute(f"DELETE FROM {table} WHERE id = ANY($1::uuid[])", chunk_ids)

    async def count(self, name: str, *, document_id: str | None = None) -> int:
        table = table_of(name)
        async with self._connection(name) as conn:
            if document_id is None:
                total: int = await conn.fetchval(f"SELECT count(*) FROM {table} WHERE {CHUNKS_ONLY}")
            else:
                total = await conn.fetchval(
                    f"SELECT count(*) FROM {table} WHERE payload->>'document_id' = $1 AND {CHUNKS_ONLY}", document_id
                )
        return total

    async def document_ids(self, name: str) -> dict[str, int]:
        table = table_of(name)
        async with self._connection(name) as conn:
            rows = await conn.fetch(
                f"SELECT payload->>'document_id' AS document_id, count(*) AS chunks FROM {table} "
                f"WHERE {CHUNKS_ONLY} GROUP BY 1"
            )
        return {row["document_id"]: row["chunks"] for row in rows if row["document_id"] is not None}

    async def search(
        self,
        name: str,
        vector: Vector,
        *,
        limit: int,
        properties: Sequence[str],
        max_distance: float | None = None,
        where: SearchFilter | None = None,
    ) -> list[SearchHit]:
        """One query per search; asks again only when equal distances straddle ``limit``, so that ties are
        broken by id over every tied chunk, not over those HNSW met first."""
        table = table_of(name)
        if _finds_nothing(limit, where):
            return []
        query = as_vector(vector)
        sql, filter_args = _search_statement(table, where, with_max_distance=max_distance is not None)
        args = [query, 0, list(properties), *filter_args]
        if max_distance is not None:
            args.append(max_distance)
        fetch = limit + 1  # one more than asked shows whether ties continue past the cut
        async with self._connection(name) as conn:
            while True:
                args[1] = fetch
                rows = await self._fetch(conn, sql, args, ef_search=_ef_search(fetch))
                if not _ties_past(rows, limit, fetch):
                    break
                fetch *= 4
        return [_hit(row) for row in rows[:limit]]

    async def search_many(self, searches: Sequence[Search]) -> list[SearchResult]:
        """The searches that fit the session's ``ef_search`` as one ``UNION ALL`` statement: one round trip
        and one plan for an agent's whole fan-out (a quarter of PostgreSQL's CPU per question, measured);
        the rest — and any search of the batch whose ties straddle its limit — one by one."""
        results: list[SearchResult | None] = [None] * len(searches)
        batch: list[tuple[int, Search]] = []
        for n, search in enumerate(searches):
            if _finds_nothing(search.limit, search.where):
                results[n] = []
            elif _ef_search(search.limit + 1) == DEFAULT_EF_SEARCH and is_collection_name(search.name):
                batch.append((n, search))
        if len(batch) > 1:
            try:
                for (n, search), rows in zip(batch, await self._union(batch), strict=True):
                    if not _ties_past(rows, search.limit, search.limit + 1):
                        results[n] = [_hit(row) for row in rows[: search.limit]]
            except Unavailable:
                raise  # the store itself is down: one by one would only fail slower
            except AppError:
                pass  # one search's own failure (a dropped collection) sinks the statement; they go one by one
        alone = [(n, search) for n, search in enumerate(searches) if results[n] is None]
        for (n, _), result in zip(alone, await search_each(self, [s for _, s in alone]), strict=True):
            results[n] = result
        return [r if r is not None else [] for r in results]

    async def _union(self, batch: Sequence[tuple[int, Search]]) -> list[list[asyncpg.Record]]:
        parts: list[str] = []
        args: list[Any] = []
        for part, (_, search) in enumerate(batch):
            table, cut, first = table_of(search.name), search.max_distance is not None, len(args) + 1
            sql, filter_args = _search_statement(table, search.where, with_max_distance=cut, first=first)
            parts.append(f"SELECT {part} AS part, q.* FROM ({sql}) q")
            args += [as_vector(search.vector), search.limit + 1, list(search.properties), *filter_args]
            if search.max_distance is not None:
                args.append(search.max_distance)
        async with self._connection(None) as conn:
            rows = await self._fetch(conn, " UNION ALL ".join(parts), args, ef_search=DEFAULT_EF_SEARCH)
        grouped: list[list[asyncpg.Record]] = [[] for _ in batch]
        for row in rows:
            grouped[row["part"]].append(row)
        return grouped

    async def _fetch(self, conn: Connection, sql: str, args: Sequence[Any], *, ef_search: int) -> list[asyncpg.Record]:
        """A search statement under the scan settings it needs: the session's own when they fit."""
        if self._session_settings is None:
            self._session_settings = await conn.fetchval(
                "SELECT bool_and(current_setting(n, true) = v) FROM unnest($1::text[], $2::text[]) s(n, v)",
                list(SESSION_SETTINGS),
                list(SESSION_SETTINGS.values()),
            )
        if self._session_settings and ef_search == DEFAULT_EF_SEARCH:
            rows: list[asyncpg.Record] = await conn.fetch(sql, *args)
            return rows
        settings = {**SESSION_SETTINGS, "hnsw.ef_search": str(ef_search)}
        async with conn.transaction():  # SET LOCAL ends with it: the pooled session keeps its own settings
            await conn.execute("; ".join(f"SET LOCAL {name} = {value}" for name, value in settings.items()))
            found: list[asyncpg.Record] = await conn.fetch(sql, *args)
        return found

    async def drop_collection(self, name: str) -> None:
        if not is_collection_name(name):
            return
        async with self._connection(name) as conn, conn.transaction():
            await conn.execute(f"DROP TABLE IF EXISTS {table_of(name)}")
            await announce(conn, name)  # no trigger fires on DROP

    async def list_identities(self) -> list[Identity]:
        """Tables of the ``vectors`` schema shaped like a collection whose nil-id row is a valid identity."""
        async with self._connection(None) as conn:
            names = await conn.fetch(
                """
                SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = $1 AND c.relkind IN ('r', 'p')
                  AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND NOT a.attisdropped
                              AND a.attname = 'id' AND a.atttypid = 'uuid'::regtype)
                  AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND NOT a.attisdropped
                              AND a.attname = 'payload' AND a.atttypid = 'jsonb'::regtype)
                ORDER BY c.relname
                """,
                SCHEMA,
            )
            identities = []
            for name in (row["name"] for row in names):
                if not is_collection_name(name):
                    _log.info("table %s.%r is not named like a collection; skipped", SCHEMA, name)
                    continue
                try:
                    stored = await conn.fetchval(f"SELECT payload FROM {table_of(name)} WHERE id = $1", _NIL)
                except asyncpg.UndefinedTableError:  # dropped since the catalog was read
                    continue
                identity = valid_identity(name, stored)
                if identity is not None:
                    identities.append(identity)
        return identities

    async def snapshot(self, name: str, *, max_chunks: int) -> list[Chunk] | None:
        """Every chunk of a collection as one transaction sees them, for a copy kept elsewhere; ``None`` when
        there are more than ``max_chunks`` or the table does not announce its writes (not made by Ragu), so
        that no copy could outlive a write unnoticed."""
        table = table_of(name)
        async with self._connection(name) as conn, conn.transaction(readonly=True):
            if not await announces_writes(conn, table):
                return None
            chunks: list[Chunk] = []
            statement = f"SELECT id, embedding, payload FROM {table} WHERE {CHUNKS_ONLY}"
            async for row in conn.cursor(statement, prefetch=SNAPSHOT_BATCH):
                if len(chunks) >= max_chunks:
                    return None
                chunks.append((str(row["id"]), row["embedding"].to_numpy(), row["payload"]))
        return chunks

    async def aclose(self) -> None:
        """Nothing to release: the pool belongs to the caller."""

    @asynccontextmanager
    async def _connection(self, name: str | None) -> AsyncIterator[Connection]:
        """A pooled connection whose PostgreSQL errors come out as our error tree."""
        try:
            async with self._pool.acquire() as conn:
                yield conn
        except asyncpg.UndefinedTableError as exc:
            raise collection_not_found(name) from exc
        except asyncpg.UndefinedColumnError as exc:
            raise InvalidInput(
                f"table {SCHEMA}.{name!r} is not shaped like a Ragu collection", code="collection_incompatible"
            ) from exc
        except asyncpg.DataError as exc:
            raise InvalidInput(f"pgvector refused the request: {exc}", code="vector_store_rejected") from exc
        except (asyncpg.InvalidSchemaNameError, asyncpg.UndefinedObjectError) as exc:
            raise Unavailable(
                f"the pgvector store is not set up (run `ragu migrate`): {exc}",
                code="vector_store_unavailable",
                extra={"provider": PROVIDER},
            ) from exc
        except _CONNECTION_ERRORS as exc:
            raise Unavailable(
                f"PostgreSQL is unavailable: {exc}", code="vector_store_unavailable", extra={"provider": PROVIDER}
            ) from exc


def as_vector(vector: Vector) -> PgVector:
    """pgvector's value for the binary codec (an array of vectors needs the wrapper, not nested lists).

    A numpy array goes in whole: pgvector copies its bytes, ~15x faster than through Python floats.
    """
    try:
        return PgVector(vector if isinstance(vector, np.ndarray) else as_floats(vector))
    except (ValueError, TypeError) as exc:
        raise InvalidInput(f"a vector is a sequence of numbers: {exc}", code="invalid_vector") from exc


def _search_statement(
    table: str, where: SearchFilter | None, *, with_max_distance: bool, first: int = 1
) -> tuple[str, list[Any]]:
    """The search SQL for this filter shape, its parameters numbered from ``first``: the query vector, the
    row limit, the property names, then the returned filter arguments, then the maximum distance if any.

    The inner query walks the HNSW index for the closest candidates; the outer one keeps only the
    requested payload properties (the rest never leaves the server) and sorts exactly.
    """
    vector, limit, properties = f"${first}", f"${first + 1}", f"${first + 2}"
    conditions = [CHUNKS_ONLY]
    args: list[Any] = []
    if where is not None and where.readable_by is not None:
        args.append(sorted(where.readable_by))
        conditions.append(f"(payload->'groups' IS NULL OR payload->'groups' ?| ${first + 2 + len(args)}::text[])")
    if where is not None and where.document_ids is not None:
        args.append(sorted(where.document_ids))
        conditions.append(f"payload->>'document_id' = ANY(${first + 2 + len(args)}::text[])")
    cut = f"WHERE h.distance <= ${first + 3 + len(args)}::float8" if with_max_distance else ""
    sql = f"""
        SELECT h.id, h.distance,
               (SELECT jsonb_object_agg(p.key, p.value) FROM jsonb_each(h.payload) p
                WHERE p.key = ANY({properties}::text[])) AS payload
        FROM (
            SELECT id, payload, embedding <=> {vector} AS distance FROM {table}
            WHERE {" AND ".join(conditions)}
            ORDER BY embedding <=> {vector}
            LIMIT {limit}
        ) h
        {cut}
        ORDER BY h.distance, h.id
    """
    return sql, args


def _finds_nothing(limit: int, where: SearchFilter | None) -> bool:
    return limit < 1 or (where is not None and where.document_ids is not None and not where.document_ids)


def _ef_search(fetch: int) -> int:
    """HNSW's candidate list: the session's default, or twice the rows wanted when that is more."""
    return min(_MAX_EF_SEARCH, max(DEFAULT_EF_SEARCH, 2 * fetch))


def _ties_past(rows: Sequence[asyncpg.Record], limit: int, fetched: int) -> bool:
    """Whether chunks as close as the last one kept may lie past the rows fetched: then fetch more."""
    return len(rows) == fetched > limit and rows[-1]["distance"] == rows[limit - 1]["distance"]


def _hit(row: asyncpg.Record) -> SearchHit:
    distance: float = row["distance"]
    return SearchHit(id=str(row["id"]), score=1.0 - distance, distance=distance, payload=row["payload"] or {})


async def _put_identity(conn: Connection, table: str, payload: dict[str, Any], dimension: int) -> None:
    await conn.execute(
        f"INSERT INTO {table} (id, embedding, payload) VALUES ($1, $2, $3) "
        "ON CONFLICT (id) DO UPDATE SET embedding = EXCLUDED.embedding, payload = EXCLUDED.payload",
        _NIL,
        identity_vector(dimension),
        payload,
    )


async def _dimension(conn: Connection, name: str) -> int:
    """The declared dimension of a collection's ``embedding`` column (a ``vector``'s typmod)."""
    dimension: int | None = await conn.fetchval(
        "SELECT a.atttypmod FROM pg_attribute a WHERE a.attrelid = to_regclass($1) "
        "AND a.attname = 'embedding' AND a.atttypid = 'vector'::regtype AND NOT a.attisdropped",
        table_of(name),
    )
    if dimension is not None and dimension > 0:
        return dimension
    if await conn.fetchval("SELECT to_regclass($1)", table_of(name)) is None:
        raise collection_not_found(name)
    raise InvalidInput(f"table {SCHEMA}.{name!r} is not shaped like a Ragu collection", code="collection_incompatible")


def table_of(name: str) -> str:
    """The quoted table of a collection; the name is checked first, so nothing else ever reaches SQL."""
    return f'{SCHEMA}."{checked_name(name)}"'
