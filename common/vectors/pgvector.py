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

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, NamedTuple, TypeAlias

import asyncpg
import msgspec
import numpy as np
import numpy.typing as npt
from pgvector import Vector as PgVector

from common.db.database import Connection, Pool, init_connection
from common.errors import AppError, InvalidInput, NotFound, Unavailable
from common.vectors import lexical
from common.vectors.base import (
    IDENTITY_ID,
    Fusion,
    Legs,
    Search,
    SearchFilter,
    SearchHit,
    SearchResult,
    Vector,
    VectorRecord,
    identity_vector,
)
from common.vectors.changes import add_trigger, announce, announces_writes
from common.vectors.fusion import RRF_K, answered, by_document, fuse, leg_depth, leg_properties, lexical_only, rrf_score
from common.vectors.records import (
    as_floats,
    check_retrieval,
    checked_identity_payload,
    checked_name,
    chunk_content,
    chunk_uuid,
    collection_already_exists,
    collection_not_found,
    identity_not_found,
    is_collection_name,
    lexical_index_missing,
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
_HAS_LEXICAL_INDEX = """
SELECT CASE WHEN to_regclass($1) IS NULL THEN NULL
            ELSE to_regclass($2) IS NOT NULL AND EXISTS (
                SELECT 1 FROM information_schema.columns WHERE table_schema = $3 AND table_name = $4
                AND column_name = 'terms')
       END
"""
"""Whether a collection's table has the lexical index; NULL when there is no such table."""
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
ANALYSE_INLINE_CHARS = 20_000
"""Upserts with more text than this analyse it in a thread (~1 ms per 20k characters inline)."""
SNAPSHOT_BATCH = 2000
"""Rows per fetch of :meth:`PgVectorStore.snapshot`: the event loop serves requests between batches."""
Chunk: TypeAlias = tuple[str, npt.NDArray[np.float32], dict[str, Any]]
"""A chunk as :meth:`PgVectorStore.snapshot` reads it: id, vector, payload."""


class Snapshot(NamedTuple):
    """A collection as one transaction saw it (:meth:`PgVectorStore.snapshot`): its chunks, their lexical columns
    (PostgreSQL's binary array format) and the chunk count of its term statistics (``None``: no lexical index)."""

    chunks: list[Chunk]
    terms: list[bytes | None]
    weights: list[bytes | None]
    total: int | None


_HAS_LEXICAL_COLUMNS = """
SELECT to_regclass($1) IS NOT NULL AND (
    SELECT count(*) = 2 FROM information_schema.columns
    WHERE table_schema = $2 AND table_name = $3 AND column_name IN ('terms', 'term_weights'))
"""

_CONNECTION_ERRORS = (
    OSError,
    asyncpg.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,  # shutdown, cancelled, cannot connect now
    asyncpg.exceptions.InsufficientResourcesError,  # too many connections, out of memory or disk
)

_log = logging.getLogger(__name__)

LEXICAL_SCHEMA = "vectors_lexical"
"""Each collection's term statistics, in a table of the collection's name (outside ``vectors``, where every
table is a collection)."""
POSTINGS_SCHEMA = "vectors_postings"
"""Each collection's inverted index, in a table of the collection's name."""
_COUNT_TERMS = "ragu_count_terms"
_CLEAR_TERMS = "ragu_clear_terms"
_LEXICAL_ROW = "id, terms, term_weights, lexical_length"
_CHANGED = "(o.terms, o.term_weights, o.lexical_length) IS DISTINCT FROM (n.terms, n.term_weights, n.lexical_length)"
LEXICAL_FUNCTIONS = (
    f"CREATE SCHEMA IF NOT EXISTS {LEXICAL_SCHEMA}",
    f"CREATE SCHEMA IF NOT EXISTS {POSTINGS_SCHEMA}",
    f"""
CREATE OR REPLACE FUNCTION {LEXICAL_SCHEMA}.{_COUNT_TERMS}() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
    gone text := 'SELECT {_LEXICAL_ROW} FROM old_rows WHERE terms IS NOT NULL';
    came text := 'SELECT {_LEXICAL_ROW} FROM new_rows WHERE terms IS NOT NULL';
BEGIN
    IF TG_OP = 'INSERT' THEN
        gone := 'SELECT {_LEXICAL_ROW} FROM new_rows WHERE false';
    ELSIF TG_OP = 'DELETE' THEN
        came := 'SELECT {_LEXICAL_ROW} FROM old_rows WHERE false';
    ELSE  -- only rows whose lexical columns changed: a payload rewrite (groups, tags, names) costs a join
        gone := 'SELECT o.* FROM old_rows o JOIN new_rows n USING (id) '
            'WHERE o.terms IS NOT NULL AND {_CHANGED}';
        came := 'SELECT n.* FROM old_rows o JOIN new_rows n USING (id) '
            'WHERE n.terms IS NOT NULL AND {_CHANGED}';
    END IF;
    EXECUTE format($sql$
        DELETE FROM {POSTINGS_SCHEMA}.%I p USING (SELECT id, unnest(terms) AS term FROM (%s) g) g
        WHERE p.term = g.term AND p.id = g.id
    $sql$, TG_TABLE_NAME, gone);
    EXECUTE format($sql$
        INSERT INTO {POSTINGS_SCHEMA}.%I (term, id, weight)
        SELECT u.term, c.id, u.weight FROM (%s) c, unnest(c.terms, c.term_weights) u(term, weight)
    $sql$, TG_TABLE_NAME, came);
    -- Row 0 first, then terms ascending: concurrent writers of a collection lock rows in one order.
    EXECUTE format($sql$
        WITH c AS MATERIALIZED (
            SELECT terms, lexical_length, -1 AS sign FROM (%s) g UNION ALL SELECT terms, lexical_length, 1 FROM (%s) c
        )
        INSERT INTO {LEXICAL_SCHEMA}.%I AS s (term, chunks, length)
        SELECT term, sum(chunks), sum(length) FROM (
            SELECT 0 AS term, sum(sign) AS chunks, sum(sign * lexical_length::int8) AS length FROM c
            UNION ALL
            SELECT t, sum(sign), 0 FROM c, unnest(c.terms) t GROUP BY t
        ) d
        GROUP BY term HAVING sum(chunks) <> 0 OR sum(length) <> 0
        ORDER BY term
        ON CONFLICT (term) DO UPDATE SET chunks = s.chunks + EXCLUDED.chunks, length = s.length + EXCLUDED.length
    $sql$, gone, came, TG_TABLE_NAME);
    RETURN NULL;
END
$fn$
""",
    f"""
CREATE OR REPLACE FUNCTION {LEXICAL_SCHEMA}.{_CLEAR_TERMS}() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    EXECUTE format('DELETE FROM {LEXICAL_SCHEMA}.%I', TG_TABLE_NAME);
    EXECUTE format('DELETE FROM {POSTINGS_SCHEMA}.%I', TG_TABLE_NAME);
    RETURN NULL;
END
$fn$
""",
)
"""The functions every collection's lexical triggers call (migration 0012 runs these; a change needs a new
migration). Row ``term = 0`` of a collection's statistics holds its chunk count and total length; every other
row a term's document frequency (chunks holding it). The postings hold one row per (term, chunk) with the
chunk's BM25 tf weight for it."""


def lexical_index(name: str) -> list[str]:
    """The statements that give collection ``name`` (a table without them) its lexical index: the columns the
    adapter writes at upsert, the filter indexes on ``tags`` and ``label``, and the statistics and postings tables
    that statement-level triggers (transition tables) keep exact from those columns, whoever writes them.

    - ``terms int4[]``: the chunk's distinct term ids (:mod:`common.vectors.lexical`); ``NULL`` on the identity.
    - ``term_weights real[]``: BM25's saturated tf weight of each of them (IDF comes at query time).
    - ``lexical_length int4``: the chunk's length in terms.

    Why postings rather than a ``sparsevec`` per chunk scored against the query's: common query words make most
    of a collection candidates, and reading and scoring those wide rows cost several times more than an
    index-only scan of the query terms' postings and a sum per chunk (measured on SciFact; docs/benchmarks.md).
    """
    table, stats, postings = table_of(name), stats_of(name), postings_of(name)
    statements = [
        f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS terms int4[], ADD COLUMN IF NOT EXISTS term_weights real[], "
        "ADD COLUMN IF NOT EXISTS lexical_length int4",
        # Unnamed: PostgreSQL picks names unique in the schema (ours would be cut at 63 bytes and could clash).
        f"CREATE INDEX ON {table} USING gin ((payload->'tags'))",
        f"CREATE INDEX ON {table} ((payload->>'label'))",
        f"CREATE TABLE IF NOT EXISTS {stats} (term int4 PRIMARY KEY, chunks int8 NOT NULL, length int8 NOT NULL)",
        f"CREATE TABLE IF NOT EXISTS {postings} "
        "(term int4 NOT NULL, id uuid NOT NULL, weight real NOT NULL, PRIMARY KEY (term, id) INCLUDE (weight))",
    ]
    for event, referencing in (
        ("INSERT", "NEW TABLE AS new_rows"),
        ("UPDATE", "OLD TABLE AS old_rows NEW TABLE AS new_rows"),
        ("DELETE", "OLD TABLE AS old_rows"),
    ):
        statements.append(
            f"CREATE OR REPLACE TRIGGER ragu_terms_{event.lower()} AFTER {event} ON {table} "
            f"REFERENCING {referencing} FOR EACH STATEMENT EXECUTE FUNCTION {LEXICAL_SCHEMA}.{_COUNT_TERMS}()"
        )
    statements.append(
        f"CREATE OR REPLACE TRIGGER ragu_terms_truncate AFTER TRUNCATE ON {table} "
        f"FOR EACH STATEMENT EXECUTE FUNCTION {LEXICAL_SCHEMA}.{_CLEAR_TERMS}()"
    )
    return statements


class LexicalColumns(NamedTuple):
    """A batch's values for the lexical columns, in record order (term ids and weights as ``1,2,3`` text: rows
    of different lengths cannot travel as one SQL array)."""

    terms: list[str]
    weights: list[str]
    lengths: list[int]


def lexical_columns(contents: Sequence[str], *, chunks: int, length: int) -> LexicalColumns:
    """What :meth:`PgVectorStore.upsert` (and migration 0012) writes for these contents, in a collection of
    ``chunks`` chunks of ``length`` terms in all before them: BM25 tf weights against the mean length with the
    batch counted in."""
    analysed = [lexical.document_terms(content) for content in contents]
    total_chunks = chunks + len(analysed)
    avgdl = (length + sum(a.length for a in analysed)) / total_chunks if total_chunks else 0.0
    return LexicalColumns(
        [",".join(map(str, a.ids)) for a in analysed],
        [",".join(f"{w:.9g}" for w in lexical.bm25_weights(a.tfs, a.length, avgdl)) for a in analysed],
        [a.length for a in analysed],
    )


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
        self._warned_unindexed: set[str] = set()
        """Tables without the lexical index whose hybrid searches were said to answer from the dense leg."""

    @property
    def provider(self) -> str:
        return PROVIDER

    @property
    def pool(self) -> Pool:
        """The pool every statement of the store goes through (the caller's)."""
        return self._pool

    async def create_collection(self, identity: Identity, dimension: int) -> None:
        """Table, indexes and identity in one transaction: a failure leaves no half-made collection."""
        await self._create(identity.name, identity, dimension)

    async def create_version(self, identity: Identity, dimension: int, version: str) -> None:
        """A table of its own (``vectors."<version>"`` and its lexical tables), made as a collection is."""
        await self._create(version, identity, dimension)

    async def swap_version(self, name: str, version: str) -> None:
        """One transaction drops the collection's three tables and renames the version's to its name (the lexical
        triggers find their tables by the table's name, so they follow); readers wait for it on the tables' locks and
        then see the new tables. The rename fires no trigger: the name is announced, so in-memory copies go."""
        table, stats, postings = table_of(name), stats_of(name), postings_of(name)
        async with self._connection(version) as conn, conn.transaction():
            if await conn.fetchval("SELECT to_regclass($1)", table_of(version)) is None:
                raise collection_not_found(version)
            await conn.execute(f"DROP TABLE IF EXISTS {table}, {stats}, {postings}")
            for renamed in (table_of(version), stats_of(version), postings_of(version)):
                await conn.execute(f'ALTER TABLE {renamed} RENAME TO "{name}"')
            await announce(conn, name)

    async def _create(self, name: str, identity: Identity, dimension: int) -> None:
        payload = checked_identity_payload(identity)
        table = table_of(name)
        if not 1 <= dimension <= MAX_DIMENSION:
            raise InvalidInput(
                f"pgvector collections take 1 to {MAX_DIMENSION} dimensions, got {dimension}",
                code="invalid_dimension",
            )
        try:
            async with self._connection(name) as conn, conn.transaction():
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
                for statement in lexical_index(name):
                    await conn.execute(statement)
                await _put_identity(conn, table, payload, dimension)
        except (asyncpg.DuplicateTableError, asyncpg.UniqueViolationError) as exc:
            # A concurrent create of the same name surfaces as a unique violation in the catalog.
            raise collection_already_exists(name) from exc

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
        contents = [chunk_content(record.payload) for record in latest.values()]
        async with self._connection(name) as conn:
            totals = await conn.fetchrow(f"SELECT chunks, length FROM {stats_of(name)} WHERE term = 0")
            chunks, length = (totals["chunks"], totals["length"]) if totals is not None else (0, 0)
            if sum(map(len, contents)) > ANALYSE_INLINE_CHARS:  # a worker's batch: keep its loop responsive
                columns = await asyncio.to_thread(lexical_columns, contents, chunks=chunks, length=length)
            else:
                columns = lexical_columns(contents, chunks=chunks, length=length)
            await conn.execute(
                f"INSERT INTO {table} (id, embedding, payload, terms, term_weights, lexical_length) "
                "SELECT id, embedding, payload, string_to_array(terms, ',')::int4[], "
                "string_to_array(term_weights, ',')::real[], lexical_length "
                "FROM unnest($1::uuid[], $2::vector[], $3::jsonb[], $4::text[], $5::text[], $6::int4[]) "
                "AS u(id, embedding, payload, terms, term_weights, lexical_length) "
                "ON CONFLICT (id) DO UPDATE SET embedding = EXCLUDED.embedding, payload = EXCLUDED.payload, "
                "terms = EXCLUDED.terms, term_weights = EXCLUDED.term_weights, "
                "lexical_length = EXCLUDED.lexical_length",
                list(latest),
                [as_vector(record.vector) for record in latest.values()],
                [record.payload for record in latest.values()],
                columns.terms,
                columns.weights,
                columns.lengths,
            )

    async def delete_document(self, name: str, document_id: str) -> None:
        table = table_of(name)
        async with self._connection(name) as conn:
            await conn.execute(f"DELETE FROM {table} WHERE payload->>'document_id' = $1 AND {CHUNKS_ONLY}", document_id)

    async def update_document(
        self, name: str, document_id: str, *, document_name: str, tags: Sequence[str], label: str | None
    ) -> None:
        """One statement; chunks that already carry these values are not rewritten."""
        table = table_of(name)
        fields = {"document_name": document_name, "tags": list(tags), "label": label}
        async with self._connection(name) as conn:
            await conn.execute(
                f"UPDATE {table} SET payload = payload || $2::jsonb "
                f"WHERE payload->>'document_id' = $1 AND {CHUNKS_ONLY} "
                "AND (payload->'document_name', payload->'tags', payload->'label') "
                "IS DISTINCT FROM ($2::jsonb->'document_name', $2::jsonb->'tags', $2::jsonb->'label')",
                document_id,
                fields,
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

    async def count_misgrouped(self, name: str, groups: Sequence[str]) -> int:
        table = table_of(name)
        differs = "payload->'groups' IS DISTINCT FROM $1" if groups else "payload ? 'groups'"
        async with self._connection(name) as conn:
            count: int = await conn.fetchval(
                f"SELECT count(*) FROM {table} WHERE {CHUNKS_ONLY} AND {differs}", *([list(groups)] if groups else [])
            )
        return count

    async def search(self, search: Search) -> list[SearchHit]:
        """Dense: one query per search; asks again only when equal distances straddle ``limit``, so that ties
        are broken by id over every tied chunk, not over those HNSW met first. Lexical and hybrid: one query
        (:meth:`_search_lexical`)."""
        table = table_of(search.name)
        if search.mode != "dense":
            check_retrieval(search.mode, search.dense_weight)
            return await self._search_lexical(search)
        if _finds_nothing(search.limit, search.where):
            return []
        query = as_vector(search.vector)
        with_max_distance = search.max_distance is not None
        sql, filter_args = _search_statement(table, search.where, with_max_distance=with_max_distance)
        args = [query, 0, list(search.properties), *filter_args]
        if search.max_distance is not None:
            args.append(search.max_distance)
        fetch = search.limit + 1  # one more than asked shows whether ties continue past the cut
        async with self._connection(search.name) as conn:
            while True:
                args[1] = fetch
                rows = await self._fetch(conn, sql, args, ef_search=_ef_search(fetch))
                if not _ties_past(rows, search.limit, fetch):
                    break
                fetch *= 4
        return [_hit(row) for row in rows[: search.limit]]

    async def _search_lexical(self, search: Search) -> list[SearchHit]:
        """A lexical or hybrid search: both legs and their fusion in one statement (:func:`_lexical_statement`).

        The dense leg takes HNSW's candidates under the session's ``ef_search`` (the iterative scan fills the
        leg's depth), so a hybrid search costs one round trip.
        """
        planned = _lexical_plan(search)
        if isinstance(planned, list):
            return planned
        sql, args = planned
        try:
            async with self._connection(search.name) as conn:
                rows = await self._fetch(conn, sql, args, ef_search=DEFAULT_EF_SEARCH)
        except (NotFound, InvalidInput):
            if not await self._lacks_lexical_index(search.name):
                raise
            return await self._without_lexical_index(search)
        return _lexical_answer(search, rows)

    async def _lacks_lexical_index(self, name: str) -> bool:
        """Whether ``name`` is a table without the lexical index: made by another application following the
        contract (every table Ragu makes has it)."""
        async with self._connection(name) as conn:
            found = await conn.fetchval(_HAS_LEXICAL_INDEX, table_of(name), postings_of(name), SCHEMA, name)
        return found is False

    async def _without_lexical_index(self, search: Search) -> list[SearchHit]:
        """A lexical search of a table without the lexical index fails with ``lexical_index_missing``; a hybrid
        one answers from its dense leg alone, as Qdrant does, and says so in the log once per collection."""
        if search.mode == "lexical":
            raise lexical_index_missing(search.name, PROVIDER)
        if search.name not in self._warned_unindexed:
            self._warned_unindexed.add(search.name)
            _log.warning(
                "pgvector collection %r has no lexical index (not made by Ragu): hybrid searches answer with the "
                "dense leg alone until `ragu reconcile --repair` (or upgrade_lexical) adds it",
                search.name,
            )
        leg = Search(
            name=search.name,
            vector=search.vector,
            limit=leg_depth(search.limit),
            properties=leg_properties(search.properties, search.fusion),
            where=search.where,
        )
        dense = await self.search(leg)
        fused = fuse(
            dense,
            [],
            dense_weight=search.dense_weight,
            limit=search.limit,
            max_distance=search.max_distance,
            fusion=search.fusion,
        )
        return answered(fused, search.properties)

    async def search_many(self, searches: Sequence[Search]) -> list[SearchResult]:
        """The searches that fit the session's ``ef_search`` as one ``UNION ALL`` statement: one round trip
        and one plan for an agent's whole fan-out (a quarter of PostgreSQL's CPU per question, measured);
        the rest — and any search of the batch whose ties straddle its limit — one by one."""
        results: list[SearchResult | None] = [None] * len(searches)
        batch: list[tuple[int, Search]] = []
        for n, search in enumerate(searches):
            if _finds_nothing(search.limit, search.where):
                results[n] = []
            elif (
                search.mode == "dense"
                and _ef_search(search.limit + 1) == DEFAULT_EF_SEARCH
                and is_collection_name(search.name)
            ):
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
        await self._lexical_union(searches, results)
        alone = [(n, search) for n, search in enumerate(searches) if results[n] is None]
        for (n, _), result in zip(alone, await search_each(self, [s for _, s in alone]), strict=True):
            results[n] = result
        return [r if r is not None else [] for r in results]

    async def _lexical_union(self, searches: Sequence[Search], results: list[SearchResult | None]) -> None:
        """Lexical and hybrid searches of a fan-out as one ``UNION ALL`` statement, as dense ones are: one round
        trip for an agent's collections. Answers ``results`` in place; what fails is left to one by one."""
        parts: list[str] = []
        args: list[Any] = []
        batch: list[tuple[int, Search]] = []
        for n, search in enumerate(searches):
            if search.mode == "dense" or results[n] is not None or not is_collection_name(search.name):
                continue
            try:
                check_retrieval(search.mode, search.dense_weight)
                planned = _lexical_plan(search, first=len(args) + 1)
            except AppError:
                continue  # answered one by one, with its own error
            if isinstance(planned, list):
                results[n] = planned
                continue
            parts.append(f"SELECT {len(batch)} AS part, q.* FROM ({planned[0]}) q")
            args += planned[1]
            batch.append((n, search))
        if len(batch) < 2:
            return
        try:
            async with self._connection(None) as conn:
                rows = await self._fetch(conn, " UNION ALL ".join(parts), args, ef_search=DEFAULT_EF_SEARCH)
        except Unavailable:
            raise
        except AppError:
            return
        grouped: list[list[asyncpg.Record]] = [[] for _ in batch]
        for row in rows:
            grouped[row["part"]].append(row)
        for (n, search), found in zip(batch, grouped, strict=True):
            results[n] = _lexical_answer(search, found)

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

    async def upgrade_lexical(self, name: str) -> int:
        """Give a table made without the lexical index (by another application following the contract) its
        index, and analyse the chunks it holds, as migration 0012 did for Ragu's own; how many chunks were
        indexed (0 for a table that has it: every one Ragu made)."""
        table = table_of(name)
        async with self._connection(name) as conn, conn.transaction():
            if await conn.fetchval(_HAS_LEXICAL_INDEX, table, postings_of(name), SCHEMA, name) is not False:
                return 0
            for statement in lexical_index(name):
                await conn.execute(statement)
            rows = await conn.fetch(
                f"SELECT id, coalesce(payload->>'content', '') AS content FROM {table} WHERE {CHUNKS_ONLY}"
            )
            columns = await asyncio.to_thread(lexical_columns, [row["content"] for row in rows], chunks=0, length=0)
            await conn.execute(
                f"UPDATE {table} t SET terms = string_to_array(u.terms, ',')::int4[], "
                "term_weights = string_to_array(u.weights, ',')::real[], lexical_length = u.length "
                "FROM unnest($1::uuid[], $2::text[], $3::text[], $4::int4[]) AS u(id, terms, weights, length) "
                "WHERE t.id = u.id",
                [row["id"] for row in rows],
                columns.terms,
                columns.weights,
                columns.lengths,
            )
        return len(rows)

    async def drop_collection(self, name: str) -> None:
        if not is_collection_name(name):
            return
        async with self._connection(name) as conn, conn.transaction():
            await conn.execute(f"DROP TABLE IF EXISTS {table_of(name)}, {stats_of(name)}, {postings_of(name)}")
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

    async def snapshot(self, name: str, *, max_chunks: int) -> Snapshot | None:
        """Every chunk of a collection with its lexical columns, and its statistics' chunk count, in one repeatable
        read, for a copy kept elsewhere (kappi's in-memory copies); ``None`` when there are more than ``max_chunks``
        or the table does not announce its writes (not made by Ragu), so that no copy could outlive a write
        unnoticed.

        The lexical arrays travel as ``bytea`` (``array_send``): the event loop only receives bytes, and the copy's
        build thread decodes them (decoding ~100 numbers per chunk into Python lists would block the loop)."""
        table = table_of(name)
        async with self._connection(name) as conn, conn.transaction(isolation="repeatable_read", readonly=True):
            if not await announces_writes(conn, table):
                return None
            # The chunks' table before its statistics: the order a drop or a version swap locks them in, so that a
            # snapshot and a drop wait on each other instead of deadlocking (a drop lost to the deadlock detector).
            await conn.execute(f"LOCK TABLE {table} IN ACCESS SHARE MODE")
            total: int | None = None
            columns = "NULL::bytea, NULL::bytea"
            if await conn.fetchval(_HAS_LEXICAL_COLUMNS, stats_of(name), SCHEMA, name):
                total = await conn.fetchval(f"SELECT chunks FROM {stats_of(name)} WHERE term = 0") or 0
                columns = "array_send(terms), array_send(term_weights)"
            snapshot = Snapshot([], [], [], total)
            statement = f"SELECT id, embedding, payload, {columns} FROM {table} WHERE {CHUNKS_ONLY}"
            async for row in conn.cursor(statement, prefetch=SNAPSHOT_BATCH):
                if len(snapshot.chunks) >= max_chunks:
                    return None
                snapshot.chunks.append((str(row[0]), row[1].to_numpy(), row[2]))
                snapshot.terms.append(row[3])
                snapshot.weights.append(row[4])
        return snapshot

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
    conditions, args = _conditions(where, first + 3)
    cut = f"WHERE h.distance <= ${first + 3 + len(args)}::float8" if with_max_distance else ""
    sql = f"""
        SELECT h.id, h.distance, {_projected("h.payload", properties)} AS payload
        FROM (
            SELECT id, payload, embedding <=> {vector} AS distance FROM {table}
            WHERE {conditions}
            ORDER BY embedding <=> {vector}
            LIMIT {limit}
        ) h
        {cut}
        ORDER BY h.distance, h.id
    """
    return sql, args


_UNINDEXED_GROUPS = "coalesce(payload->'groups', 'null'::jsonb)"
"""The chunk's groups copy as the access filter reads it: the same value, but not the GIN index's expression, so
the planner keeps the HNSW index. Every chunk of a collection carries the same copy, so the filter never narrows a
collection enough for an exact scan of its chunks through that index to pay; given the chance (once the filter had
no ``OR``), the planner took it for restricted collections and each hybrid question cost PostgreSQL about four times
as much (``bench/kappi_bench.py``, docs/benchmarks.md)."""


def _conditions(where: SearchFilter | None, first: int) -> tuple[str, list[Any]]:
    """The ``WHERE`` of every leg for this filter, its parameters numbered from ``first``, and their values."""
    conditions = [CHUNKS_ONLY]
    args: list[Any] = []
    if where is not None and where.readable_by is not None:
        args.append(sorted(where.readable_by))
        copy = f"{_UNINDEXED_GROUPS} ?| ${first + len(args) - 1}::text[]"
        grouped = f"jsonb_typeof(payload->'groups') = 'array' AND {copy}"
        conditions.append(f"(payload->'groups' IS NULL OR ({grouped}))" if where.ungrouped_readable else f"({grouped})")
    if where is not None and where.document_ids is not None:
        args.append(sorted(where.document_ids))
        conditions.append(f"payload->>'document_id' = ANY(${first + len(args) - 1}::text[])")
    if where is not None and where.tags is not None:
        args.append(sorted(where.tags))
        conditions.append(
            f"jsonb_typeof(payload->'tags') = 'array' AND payload->'tags' ?| ${first + len(args) - 1}::text[]"
        )
    if where is not None and where.labels is not None:
        args.append(sorted(where.labels))
        conditions.append(f"payload->>'label' = ANY(${first + len(args) - 1}::text[])")
    return " AND ".join(conditions), args


def _projected(payload: str, properties: str) -> str:
    """SQL for the requested properties of ``payload`` only: the rest never leaves the server."""
    wanted = f"p.key = ANY({properties}::text[])"
    return f"(SELECT jsonb_object_agg(p.key, p.value) FROM jsonb_each({payload}) p WHERE {wanted})"


def _lexical_plan(search: Search, *, first: int = 1) -> tuple[str, list[Any]] | list[SearchHit]:
    """A lexical or hybrid search's statement and arguments (numbered from ``first``), or its answer when no
    statement is needed (``[]``: nothing can match)."""
    if _finds_nothing(search.limit, search.where):
        return []
    terms = lexical.query_terms(search.text)
    hybrid = search.mode == "hybrid"
    if not terms.ids and not hybrid:
        return []  # nothing to look for: only stop words or punctuation
    depth = leg_depth(search.limit) if hybrid else search.limit
    fusion = search.fusion if hybrid and by_document(search.fusion) else "chunk"
    sql, filter_args = _lexical_statement(search.name, search.where, hybrid=hybrid, fusion=fusion, first=first)
    args = [as_vector(search.vector), depth, list(search.properties), terms.ids, terms.tfs]
    if hybrid:
        args += [float(search.dense_weight), search.limit]
    return sql, [*args, *filter_args]


def _lexical_answer(search: Search, rows: Sequence[asyncpg.Record]) -> list[SearchHit]:
    """The hits of a lexical or hybrid search from its statement's rows (in no particular order)."""
    if search.mode != "hybrid":
        found = sorted(rows, key=lambda r: (-r["lexical_score"], r["id"]))
        hits = [_hit(row, score=row["lexical_score"]) for row in found]
        return lexical_only(hits, limit=search.limit, max_distance=search.max_distance)
    hits = []
    for row in sorted(rows, key=_fused_order(search)):
        if search.max_distance is not None and row["distance"] > search.max_distance:
            continue
        legs = Legs(
            dense_rank=row["dense_rank"],
            lexical_rank=row["lexical_rank"],
            lexical_score=row["lexical_score"],
            fused_score=row["fused"],
        )
        hits.append(
            SearchHit(
                id=str(row["id"]), score=row["fused"], distance=row["distance"], payload=row["payload"] or {}, legs=legs
            )
        )
    return hits


def _fused_order(search: Search) -> Callable[[asyncpg.Record], tuple[float, float, uuid.UUID]]:
    """How a hybrid statement's rows are ordered, as :func:`common.vectors.fusion.fuse` orders hits: fused score
    descending, then the chunk's own fused score (the same as the first unless fused per document), then id."""
    weight = float(search.dense_weight)

    def key(row: asyncpg.Record) -> tuple[float, float, uuid.UUID]:
        return -row["fused"], -rrf_score(weight, row["dense_rank"], row["lexical_rank"]), row["id"]

    return key


def _lexical_statement(
    name: str, where: SearchFilter | None, *, hybrid: bool, fusion: Fusion = "chunk", first: int = 1
) -> tuple[str, list[Any]]:
    """A lexical or hybrid search as one statement, its parameters numbered from ``first``: the query vector, the
    depth of each leg, the property names, the query's term ids and their repeats, (hybrid) the dense weight and
    the limit, then the returned filter arguments.

    Each query term's IDF comes from the collection's exact statistics; an index-only scan of its postings gives
    every chunk holding it with its tf weight; a chunk's BM25 score is the sum, added in term order (as kappi's
    in-memory copies add it, so both agree to the bit and rank ties alike: in the plan's order, two chunks with the
    same postings could sum differently in the last bits). Without a filter the best are
    ranked before the collection table is read; with one, every scored chunk is checked (a filter may reject the
    best ones). A hybrid search runs the HNSW leg beside it and fuses both in the statement — weighted RRF exactly
    as :func:`common.vectors.fusion.fuse` computes it, the same float operations in the same order, per chunk or
    per document (:func:`_fused`) — so only the ``limit`` fused hits are read in full and
    travel. Rows of both modes have the same columns (``search_many`` unites them): ``id``, the cosine
    ``distance``, ``dense_rank``, ``lexical_rank``, ``lexical_score`` (BM25), ``fused`` and ``payload``; a lexical
    search's ranks and ``fused`` are NULL (its order is its scores').
    """
    table, stats, postings = table_of(name), stats_of(name), postings_of(name)
    vector, depth, properties, terms, repeats, weight, limit = (f"${first + n}" for n in range(7))
    conditions, args = _conditions(where, first + (7 if hybrid else 5))
    if conditions == CHUNKS_ONLY:  # the identity has no postings
        ranked = f"SELECT id, score FROM scored ORDER BY score DESC, id LIMIT {depth}"
    else:
        ranked = f"""
            SELECT id, scored.score FROM scored JOIN {table} c USING (id)
            WHERE {conditions}
            ORDER BY scored.score DESC, id
            LIMIT {depth}
        """
    scoring = f"""
        WITH totals AS (SELECT chunks FROM {stats} WHERE term = 0),
        query AS MATERIALIZED (
            SELECT s.term, q.tf * ln(1 + (totals.chunks - s.chunks + 0.5)::float8 / (s.chunks + 0.5)) AS idf
            FROM unnest({terms}::int4[], {repeats}::int4[]) q(term, tf)
            JOIN {stats} s ON s.term = q.term AND s.chunks > 0
            CROSS JOIN totals
        ),
        scored AS (
            SELECT p.id, sum(p.weight * query.idf ORDER BY p.term) AS score
            FROM {postings} p JOIN query ON p.term = query.term
            GROUP BY p.id
        )
    """
    projected = _projected("c.payload", properties)
    if not hybrid:
        sql = f"""
            {scoring}
            SELECT id, c.embedding <=> {vector} AS distance, NULL::int4 AS dense_rank, NULL::int4 AS lexical_rank,
                   l.score AS lexical_score, NULL::float8 AS fused, {projected} AS payload
            FROM ({ranked}) l JOIN {table} c USING (id)
        """
        return sql, args
    sql = f"""
        {scoring},
        dense AS (
            SELECT id, distance, row_number() OVER (ORDER BY distance, id) AS rank FROM (
                SELECT id, embedding <=> {vector} AS distance FROM {table}
                WHERE {conditions}
                ORDER BY embedding <=> {vector}
                LIMIT {depth}
            ) d
        ),
        keyword AS (SELECT id, score, row_number() OVER (ORDER BY score DESC, id) AS rank FROM ({ranked}) l),
        {_fused(table, weight, limit, fusion)}
        SELECT id, c.embedding <=> {vector} AS distance, f.dense_rank::int4, f.lexical_rank::int4, f.lexical_score,
               f.fused, {projected} AS payload
        FROM fused f JOIN {table} c USING (id)
    """
    return sql, args


def _fused(table: str, weight: str, limit: str, fusion: Fusion) -> str:
    """The ``fused`` step of a hybrid statement: the ``limit`` best candidates of the ``dense`` and ``keyword`` legs
    by weighted RRF of their own ranks or, per document, of their document's best ranks (the document as
    :func:`common.vectors.fusion.document_key` says it; ``document_lead``: for the document's best chunk by its own
    score only), ties by their own score then id."""

    def rrf(dense: str, lexical: str) -> str:
        return (
            f"coalesce({weight}::float8 / ({RRF_K} + {dense}), 0)"
            f" + coalesce((1 - {weight}::float8) / ({RRF_K} + {lexical}), 0)"
        )

    ranks = "SELECT id, dense.rank AS dense_rank, keyword.rank AS lexical_rank, keyword.score AS lexical_score"
    if fusion == "chunk":
        return f"""fused AS (
            {ranks}, {rrf("dense.rank", "keyword.rank")} AS fused
            FROM dense FULL JOIN keyword USING (id)
            ORDER BY fused DESC, id
            LIMIT {limit}
        )"""
    document = (
        "CASE WHEN jsonb_typeof(c.payload->'document_id') = 'string' THEN 'd:' || (c.payload->>'document_id')"
        " ELSE 'c:' || id::text END"
    )
    credited = "place = 1" if fusion == "document_lead" else "true"
    return f"""legs AS ({ranks} FROM dense FULL JOIN keyword USING (id)),
        keyed AS (
            SELECT legs.*, {document} AS document, {rrf("legs.dense_rank", "legs.lexical_rank")} AS own
            FROM legs JOIN {table} c USING (id)
        ),
        documents AS (
            SELECT document, min(dense_rank) AS dense_rank, min(lexical_rank) AS lexical_rank
            FROM keyed GROUP BY document
        ),
        placed AS (
            SELECT k.*, {rrf("d.dense_rank", "d.lexical_rank")} AS credit,
                   row_number() OVER (PARTITION BY document ORDER BY k.own DESC, k.id) AS place
            FROM keyed k JOIN documents d USING (document)
        ),
        fused AS (
            SELECT id, dense_rank, lexical_rank, lexical_score, CASE WHEN {credited} THEN credit ELSE own END AS fused,
                   own
            FROM placed
            ORDER BY fused DESC, own DESC, id
            LIMIT {limit}
        )"""


def _finds_nothing(limit: int, where: SearchFilter | None) -> bool:
    return limit < 1 or (where is not None and where.document_ids is not None and not where.document_ids)


def _ef_search(fetch: int) -> int:
    """HNSW's candidate list: the session's default, or twice the rows wanted when that is more."""
    return min(_MAX_EF_SEARCH, max(DEFAULT_EF_SEARCH, 2 * fetch))


def _ties_past(rows: Sequence[asyncpg.Record], limit: int, fetched: int) -> bool:
    """Whether chunks as close as the last one kept may lie past the rows fetched: then fetch more."""
    return len(rows) == fetched > limit and rows[-1]["distance"] == rows[limit - 1]["distance"]


def _hit(row: asyncpg.Record, *, score: float | None = None) -> SearchHit:
    """A row as a hit; ``score`` defaults to the cosine similarity."""
    distance: float = row["distance"]
    similarity = 1.0 - distance if score is None else score
    return SearchHit(id=str(row["id"]), score=similarity, distance=distance, payload=row["payload"] or {})


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


def stats_of(name: str) -> str:
    """The quoted table of a collection's term statistics (:func:`lexical_index`)."""
    return f'{LEXICAL_SCHEMA}."{checked_name(name)}"'


def postings_of(name: str) -> str:
    """The quoted table of a collection's inverted index (:func:`lexical_index`)."""
    return f'{POSTINGS_SCHEMA}."{checked_name(name)}"'
