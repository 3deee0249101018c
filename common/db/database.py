"""The database handle services receive: transactions from an asyncpg pool.

Tests swap in :class:`SingleConnectionDatabase`, which runs every "transaction" as a savepoint inside
one outer transaction that the test rolls back, so each test starts from the migrated, empty schema.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager, suppress
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

import asyncpg
import msgspec
from asyncpg.pool import PoolConnectionProxy
from pgvector.asyncpg import register_vector

from common.errors import Conflict, NotFound, Unavailable

if TYPE_CHECKING:  # asyncpg's classes are generic only in its stubs
    Connection: TypeAlias = asyncpg.Connection[asyncpg.Record] | PoolConnectionProxy[asyncpg.Record]
    Pool: TypeAlias = asyncpg.Pool[asyncpg.Record]
else:
    # At run time Litestar validates injected dependencies against their annotation, and msgspec cannot
    # check a union of two foreign classes; the type checker still sees the precise union above.
    Connection = Any
    Pool = asyncpg.Pool

_CONNECTION_LOST = (
    OSError,
    asyncpg.PostgresConnectionError,  # refused, or dropped mid-statement
    asyncpg.exceptions.AdminShutdownError,  # pg_ctl stop (fast) ends every session
    asyncpg.exceptions.CrashShutdownError,
    asyncpg.exceptions.CannotConnectNowError,  # starting up or shutting down
    # A statement sent while the reply to the last one (the server's FATAL before it went away) is still being
    # consumed: "cannot switch to state …; another operation is in progress". The session is gone either way.
    asyncpg.exceptions.InternalClientError,
)

_json_encoder = msgspec.json.Encoder()
_json_decoder = msgspec.json.Decoder()


async def init_connection(conn: Connection) -> None:
    """Decode json/jsonb with msgspec (fast, and the same types our Structs expect), and send pgvector's
    ``vector`` in its binary format once the extension is installed (``common.vectors.pgvector`` needs it;
    before the migration that installs it there is no such type to register)."""
    for typ in ("json", "jsonb"):
        await conn.set_type_codec(
            typ,
            schema="pg_catalog",
            encoder=lambda v: _json_encoder.encode(v).decode(),
            decoder=_json_decoder.decode,
        )
    vector_schema = await conn.fetchval(
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'"
    )
    if vector_schema is not None:
        # The pool hands init the raw connection; the stubs only know that class, not our union with the proxy.
        await register_vector(conn, schema=vector_schema)  # type: ignore[arg-type]


class Database(Protocol):
    """What services and repositories need from PostgreSQL."""

    def transaction(self) -> AbstractAsyncContextManager[Connection]:
        """One connection inside one transaction: committed on normal exit, rolled back on error."""
        ...

    async def ping(self) -> None: ...

    async def aclose(self) -> None: ...


class PoolDatabase:
    """An asyncpg pool; every :meth:`transaction` is one connection and one transaction."""

    def __init__(self, pool: Pool) -> None:
        self.pool = pool

    @classmethod
    async def connect(cls, url: str, *, min_size: int = 1, max_size: int = 10) -> PoolDatabase:
        try:
            pool = await asyncpg.create_pool(url, min_size=min_size, max_size=max_size, init=init_connection)
        except (OSError, asyncpg.PostgresError) as exc:
            raise Unavailable(f"cannot reach the database: {exc}", code="database_unavailable") from exc
        return cls(pool)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Connection]:
        with translate_db_errors():
            async with self.pool.acquire() as conn, _transaction(conn):
                yield conn

    async def ping(self) -> None:
        with translate_db_errors():
            async with self.pool.acquire(timeout=2) as conn:
                await conn.fetchval("SELECT 1")

    async def aclose(self) -> None:
        await self.pool.close()


class SingleConnectionDatabase:
    """One shared connection (tests): transactions nest as savepoints and are serialised by a lock."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self._lock = asyncio.Lock()

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Connection]:
        async with self._lock:
            with translate_db_errors():
                async with self.conn.transaction():
                    yield self.conn

    async def ping(self) -> None:
        async with self._lock:
            await self.conn.fetchval("SELECT 1")

    async def aclose(self) -> None:
        """The owner of the connection closes it."""


@asynccontextmanager
async def _transaction(conn: Connection) -> AsyncIterator[None]:
    """``conn.transaction()``, but aware that the server may end the session (a shutdown, a restart): such a
    connection has nothing to roll back, and asyncpg's complaints about using it ("released back to the pool",
    "connection is closed") mean that the database went away, not that our code misused a connection."""
    tx = conn.transaction()
    await tx.start()
    try:
        try:
            yield
        except BaseException:
            if not _dropped(conn):
                # A session the server is ending may fail the rollback too; the pool discards such a connection.
                with suppress(asyncpg.InterfaceError, *_CONNECTION_LOST):
                    await tx.rollback()
            raise
        await tx.commit()
    except asyncpg.InterfaceError as exc:
        if _dropped(conn):
            raise _database_unavailable() from exc
        raise


def _dropped(conn: Connection) -> bool:
    """Closed under us: asyncpg then hands the connection back to its pool at once, detaching our proxy."""
    try:
        return conn.is_closed()
    except asyncpg.InterfaceError:  # the detached proxy refuses every call
        return True


def _database_unavailable() -> Unavailable:
    return Unavailable("the database is unavailable; try again shortly", code="database_unavailable")


@contextmanager
def translate_db_errors() -> Iterator[None]:
    """Turn constraint violations and lost connections into our error tree; anything else is a bug."""
    try:
        yield
    except asyncpg.UniqueViolationError as exc:
        raise Conflict(_constraint_detail(exc, "already exists"), code="already_exists") from exc
    except asyncpg.ForeignKeyViolationError as exc:
        raise NotFound(
            _constraint_detail(exc, "refers to something that does not exist"), code="reference_missing"
        ) from exc
    except _CONNECTION_LOST as exc:
        raise _database_unavailable() from exc


def _constraint_detail(exc: asyncpg.PostgresError, what: str) -> str:
    constraint = getattr(exc, "constraint_name", None)
    return f"{constraint or 'record'} {what}"
