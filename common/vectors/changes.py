"""pgvector collections announce their writes: the channel, the trigger SQL, and the listener that hears them.

Every statement that writes a collection table sends ``NOTIFY ragu_vectors, '<collection>'`` (a statement-level
trigger; PostgreSQL delivers it at commit and folds duplicates within a transaction, so a batch of upserts costs
one notice). ``DROP TABLE`` fires no trigger, so a drop announces itself (:func:`announce`). Whoever the writer
is — chonkit, a worker, plain SQL — a process that keeps collections in memory (kappi's copies,
``common.vectors.resident``) learns of it. Only those processes listen: writers never open a :class:`ChangeFeed`.

Migration 0006 runs :data:`NOTIFY_FUNCTION` and :func:`add_trigger`'s statement on the tables existing then;
:meth:`~common.vectors.pgvector.PgVectorStore.create_collection` adds the trigger to each new one. A migration
must keep producing the same schema: a change to this SQL needs a new migration, never an edit here alone.

Notices are proven to arrive, not assumed: :class:`ChangeFeed` sends a probe notice through the pool writes use,
before it reports itself listening and every :data:`PING_SECONDS` after, and waits for it on its own connection.
A connection pooler in transaction mode (PgBouncer) or a half-open connection swallows notices silently; then
the probe fails and the feed reports a gap.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable

import asyncpg

from common.db.database import Connection, Pool

_log = logging.getLogger(__name__)

CHANNEL = "ragu_vectors"
TRIGGER = "ragu_collection_changed"
NOTIFY_FUNCTION = f"""
CREATE OR REPLACE FUNCTION vectors.{TRIGGER}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('{CHANNEL}', TG_TABLE_NAME);
    RETURN NULL;
END
$$
"""
"""The trigger function: the notice carries the table's name, which is the collection's."""
PING_SECONDS = 5.0
"""How often the feed proves that notices still reach it, and how long it waits for its probe."""
PROBE = "ragu-probe:"
"""Payload prefix of the feed's own probe notices; no collection name can start so (``^[A-Z]...``)."""


def add_trigger(table: str) -> str:
    """The statement that makes ``table`` (already quoted) announce its writes."""
    return (
        f"CREATE OR REPLACE TRIGGER {TRIGGER} AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {table} "
        f"FOR EACH STATEMENT EXECUTE FUNCTION vectors.{TRIGGER}()"
    )


async def announce(conn: Connection, name: str) -> None:
    """Announce a write no trigger sees (a drop); sent at the commit of ``conn``'s transaction."""
    await conn.execute("SELECT pg_notify($1, $2)", CHANNEL, name)


async def announces_writes(conn: Connection, table: str) -> bool:
    """Whether ``table`` carries the enabled trigger: a table made otherwise may be written unannounced."""
    found: bool = await conn.fetchval(
        "SELECT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = to_regclass($1) AND tgname = $2 AND tgenabled <> 'D')",
        table,
        TRIGGER,
    )
    return found


class ChangeFeed:
    """One connection that LISTENs on :data:`CHANNEL`, reconnecting after any loss.

    Args:
        url: The database URL, for the listening connection (a session of its own: LISTEN lasts with it).
        pool: The pool writes go through; probes travel the same way.
        changed: Called with the collection's name for every notice.
        lost: Called whenever notices may have been missed (connection gone, probe lost, feed stopped).
    """

    def __init__(self, url: str, pool: Pool, *, changed: Callable[[str], None], lost: Callable[[], None]) -> None:
        self._url = url
        self._pool = pool
        self._changed = changed
        self._lost = lost
        self._task: asyncio.Task[None] | None = None
        self._probes: dict[str, asyncio.Future[None]] = {}
        self.listening = asyncio.Event()
        """Set while notices provably arrive: from the first probe's return until a loss."""

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._listen(), name="ragu-vector-notices")

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _listen(self) -> None:
        delay = 0.5
        while True:
            conn: Connection | None = None
            try:
                conn = await asyncpg.connect(self._url)
                gone = asyncio.Event()
                conn.add_termination_listener(_setter(gone))
                await conn.add_listener(CHANNEL, self._on_notice)
                await self._probe()
                self.listening.set()
                delay = 0.5
                while not gone.is_set():
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(gone.wait(), PING_SECONDS)
                    if not gone.is_set():
                        await self._probe()
            except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError) as exc:
                _log.info("not listening for vector changes (%s); searching PostgreSQL until back", exc)
            finally:
                self.listening.clear()
                self._lost()
                if conn is not None:
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(conn.close(), 1.0)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10.0)

    def _on_notice(self, _conn: Connection, _pid: int, _channel: str, payload: object) -> None:
        name = str(payload)
        if name.startswith(PROBE):  # ours arrived; another process's probe means nothing here
            probe = self._probes.get(name)
            if probe is not None and not probe.done():
                probe.set_result(None)
            return
        self._changed(name)

    async def _probe(self) -> None:
        """A notice sent through the pool must come back on the listening connection within PING_SECONDS."""
        token = PROBE + uuid.uuid4().hex
        arrived: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._probes[token] = arrived
        try:
            async with self._pool.acquire() as conn:
                await announce(conn, token)
            await asyncio.wait_for(arrived, PING_SECONDS)
        finally:
            self._probes.pop(token, None)


def _setter(event: asyncio.Event) -> Callable[[object], None]:
    return lambda _: event.set()
