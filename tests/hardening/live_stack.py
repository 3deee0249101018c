"""Ragu as real processes, for the fault-injection suite: an embedded PostgreSQL the test stops and starts,
``ragu serve`` it can SIGKILL, an LLM stand-in it can pause mid-answer, and what the suite checks afterwards
(row and vector counts, reconcile drift).

The server gets ``DATABASE_URL`` pointing at the test's own PostgreSQL, so it holds no handle on it: stopping
the database is the test's decision alone, and the socket path (hence the URL) survives restarts.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import httpx
import msgspec

from chonkit.collection.reconcile import Drift, reconcile
from common.config import Settings, load_settings
from common.db import PoolDatabase
from common.db import migrate as migrations
from common.db.database import init_connection
from common.db.embedded import (
    HANDLES_FILE,
    WATCHDOG_LOCK_FILE,
    WATCHDOG_LOG_FILE,
    EmbeddedPostgres,
    ensure_database,
    with_database,
)
from common.vectors.pgvector import PgVectorStore
from common.vectors.registry import VectorRegistry
from tests.support import llm_standins

T = TypeVar("T")
SseEvent = tuple[str, Any]
REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


_TEMPLATE_LOCK = threading.Lock()
_NOT_COPIED = {HANDLES_FILE, WATCHDOG_LOCK_FILE, WATCHDOG_LOG_FILE, "postmaster.pid", "log"}
"""The template's holders, watchdog and server log: each copy starts with none of its own."""


@functools.cache
def _template() -> Path:
    """A stopped embedded PostgreSQL with its ``ragu`` database migrated, made once per test process (removed at
    its exit): copying it (~0.2 s) instead of running ``initdb`` (~3 s on this machine, more when it is busy) for
    each of the suite's twenty-odd servers."""
    folder = Path(tempfile.mkdtemp(prefix="ragu-test-pg-template-"))
    folder.chmod(0o755)  # as root, PostgreSQL runs as its own user, which must reach its data (see served())
    atexit.register(shutil.rmtree, folder, ignore_errors=True)  # and remove_template(), at the session's end
    server = EmbeddedPostgres(folder)
    admin_url = server.start()
    try:
        asyncio.run(ensure_database(admin_url, "ragu"))
        migrations.upgrade(with_database(admin_url, "ragu"))
    finally:
        server.stop()
    assert not (server.pgdata / "postmaster.pid").exists(), "the template's server did not stop"
    return server.pgdata


def remove_template() -> None:
    """Delete this process's template, if it made one (tests/conftest.py, when the session ends: an xdist worker
    may end before its ``atexit`` handlers run)."""
    if _template.cache_info().currsize:
        shutil.rmtree(_template().parent, ignore_errors=True)
        _template.cache_clear()


def seed_postgres(pgdata: Path) -> None:
    """Make ``pgdata`` a copy of the template, so the embedded server that starts on it skips ``initdb`` and finds
    ``ragu`` migrated. ``cp -a``: as root the files belong to PostgreSQL's own user, and must stay so."""
    with _TEMPLATE_LOCK:
        template = _template()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", str(template), str(pgdata)], check=True)  # noqa: S603, S607 -- coreutils
    for name in _NOT_COPIED:
        path = pgdata / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)


class Postgres:
    """The embedded server in ``folder / "database"``. This process holds its only handle, so :meth:`stop` really
    stops it (``pg_ctl stop``, fast mode: every session is terminated mid-statement, as in an outage or a restart).

    Not in ``folder`` itself: a folder holding an embedded database is a data directory, and ``ragu serve`` refuses
    to make its own (``folder / "data"``) inside another platform's (``data_dir_inside_data_dir``)."""

    def __init__(self, folder: Path) -> None:
        self._server = EmbeddedPostgres(folder / "database")
        self.url = ""
        self.running = False

    async def start(self) -> str:
        """Start (the first time: from a copy of the template) the server; returns the URL of its ``ragu``
        database."""
        if not self._server.pgdata.exists():
            await asyncio.to_thread(seed_postgres, self._server.pgdata)
        admin_url = await asyncio.to_thread(self._server.start)
        self.running = True
        await ensure_database(admin_url, "ragu")
        self.url = with_database(admin_url, "ragu")
        return self.url

    async def stop(self) -> None:
        await asyncio.to_thread(self._server.stop)
        self.running = False


class RaguServer:
    """``ragu serve`` (chonkit at ``/chonkit``, kappi at ``/kappi``, the in-process embedding worker) on a free
    port, its log appended to ``log`` across restarts."""

    def __init__(self, *, env: Mapping[str, str], log: Path) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log = log
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("RAGU_") and k != "DATABASE_URL"}
        self.env = {**inherited, **env, "RAGU_PORT": str(self.port)}
        self._process: asyncio.subprocess.Process | None = None

    @property
    def pid(self) -> int:
        assert self._process is not None, "not started"
        return self._process.pid

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.returncode is None

    async def start(self, *, within: float = 90) -> float:
        """Start and wait until chonkit is ready (its database answers); returns the seconds it took."""
        started = time.monotonic()
        with self.log.open("ab") as stderr:  # the child keeps its own copy of the descriptor
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "ragu.cli",
                "serve",
                env=self.env,
                cwd=REPO,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=stderr,
            )
        self._process = process
        async with httpx.AsyncClient(timeout=2) as client:
            while time.monotonic() - started < within:
                if process.returncode is not None:
                    raise AssertionError(f"ragu serve exited with {process.returncode}:\n{self.tail()}")
                try:
                    if (await client.get(f"{self.base_url}/chonkit/ready")).status_code == 200:
                        return time.monotonic() - started
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.1)
        raise AssertionError(f"ragu serve was not ready within {within}s:\n{self.tail()}")

    async def kill(self) -> None:
        """SIGKILL: no shutdown code runs, as when the OOM killer or a power cut takes the process."""
        await self._signal(signal.SIGKILL)

    async def terminate(self, *, grace: float = 30) -> int | None:
        """SIGTERM, the graceful stop an orchestrator sends, then SIGKILL after ``grace`` seconds (as the
        orchestrator would); returns the exit status (negative: the signal that ended it)."""
        try:
            await self._signal(signal.SIGTERM, grace)
        except TimeoutError:
            await self.kill()
        return None if self._process is None else self._process.returncode

    async def _signal(self, signum: int, wait: float = 30) -> None:
        if self._process is None or self._process.returncode is not None:
            return
        self._process.send_signal(signum)
        async with asyncio.timeout(wait):
            await self._process.wait()

    def tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""

    def errors(self, last: int = 3) -> str:
        """The last ``ERROR`` entries of the log, each with its traceback (for assertion messages)."""
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        entries = re.split(r"\n(?=\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)", text)
        return "\n".join([e for e in entries if " ERROR " in e.partition("\n")[0]][-last:])


class Served(msgspec.Struct, frozen=True, kw_only=True):
    """A running ``ragu serve`` on its own migrated PostgreSQL, and the settings its tokens are signed with."""

    server: RaguServer
    settings: Settings
    env: dict[str, str]


@asynccontextmanager
async def served(prefix: str, secret: str, **extra_env: str) -> AsyncIterator[Served]:
    """An embedded PostgreSQL (migrated) and ``ragu serve`` on it in a temporary folder, for one test module.

    Not below pytest's basetemp: as root, PostgreSQL runs as its own user, and every pytest start makes that
    folder private again, after which ``pg_ctl`` can no longer reach its data.
    """
    with tempfile.TemporaryDirectory(prefix=prefix) as name:
        folder = Path(name)
        postgres = Postgres(folder)
        url = await postgres.start()
        try:
            await asyncio.to_thread(migrations.upgrade, url)
            settings = load_settings({}, data_dir=str(folder / "data"), auth_hs256_secret=secret)
            env = {
                "DATABASE_URL": url,
                "RAGU_DATA_DIR": settings.server.data_dir,
                "RAGU_AUTH_HS256_SECRET": secret,
                "RAGU_AUTO_MIGRATE": "false",
                "RAGU_LOCAL_LLM_MODEL": "none",  # unless a test asks: results must not depend on what is installed
                **extra_env,
            }
            server = RaguServer(env=env, log=folder / "serve.log")
            await server.start()
            try:
                yield Served(server=server, settings=settings, env=env)
            finally:
                await server.terminate()
        finally:
            await postgres.stop()


class PausingOpenAIStandin(llm_standins.OpenAIStandin):
    """The OpenAI-compatible stand-in, except that ``Script.stall_after`` pauses the answer until
    :attr:`resume` is set and then finishes it (the base class stalls for good), so a test can take the
    database away while an answer is half streamed."""

    def __init__(self) -> None:
        super().__init__()
        self.resume = asyncio.Event()

    async def _hold(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await self.resume.wait()
        stalled_after = self.script.stall_after or 0
        plan = self.plan(self.requests[-1].body, self.script)
        rest = plan.events[plan.token_positions[stalled_after - 1] + 1 :] if stalled_after else plan.events[1:]
        writer.write(llm_standins._chunk(b"".join(rest)) + b"0\r\n\r\n")
        await writer.drain()
        self.completed_streams += 1


async def eventually(check: Callable[[], Awaitable[T | None]], *, within: float, what: str, every: float = 0.1) -> T:
    """Poll ``check`` every ``every`` seconds until it returns something other than ``None``."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if (result := await check()) is not None:
            return result
        await asyncio.sleep(every)
    raise AssertionError(f"{what}: not within {within}s")


async def sse(response: httpx.Response) -> AsyncIterator[SseEvent]:
    """(event, decoded data) pairs as they arrive on a streamed response."""
    name, data = "message", []
    async for line in response.aiter_lines():
        if line.startswith("event:"):
            name = line.removeprefix("event:").strip()
        elif line.startswith("data:"):
            data.append(line.removeprefix("data:").lstrip())
        elif not line and data:
            yield name, msgspec.json.decode("\n".join(data))
            name, data = "message", []


async def embedded_collection(admin: httpx.AsyncClient, name: str, text: bytes, groups: list[str]) -> dict[str, Any]:
    """A collection readable by ``groups`` holding ``text`` as one document, embedded (through the public API)."""
    uploaded = await admin.post("/chonkit/documents", files=[("files", ("handbook.txt", text))])
    document_id = uploaded.json()["results"][0]["document"]["id"]
    created = await admin.post("/chonkit/collections", json={"name": name, "groups": groups})
    assert created.status_code == 201, created.text
    collection: dict[str, Any] = created.json()
    queued = await admin.post(
        f"/chonkit/collections/{collection['id']}/documents", json={"document_ids": [document_id]}
    )
    job_id = queued.json()["job"]["id"]

    async def finished() -> bool | None:
        job = (await admin.get(f"/chonkit/jobs/{job_id}")).json()
        assert job["status"] not in ("failed", "cancelled"), job
        return True if job["status"] == "done" else None

    await eventually(finished, within=60, what="the embedding job")
    return collection


async def counts(url: str) -> dict[str, Any]:
    """What a restart must not change: row counts, and per pgvector collection the vectors chonkit expects (the
    sum of its documents' chunk counts) next to those its table holds, and how many of those are distinct chunks."""
    conn = await asyncpg.connect(url)
    try:
        found: dict[str, Any] = {}
        for table in (
            "chonkit.documents",
            "chonkit.collections",
            "chonkit.collection_documents",
            "kappi.agents",
            "kappi.chats",
            "kappi.messages",
        ):
            found[table] = await conn.fetchval(f"SELECT count(*) FROM {table}")
        rows = await conn.fetch(
            """SELECT c.name, coalesce(sum(d.chunk_count), 0) AS expected FROM chonkit.collections c
               LEFT JOIN chonkit.collection_documents d ON d.collection_id = c.id
               WHERE c.vector_provider = 'pgvector' GROUP BY c.name ORDER BY c.name"""
        )
        vectors = {}
        for row in rows:
            stored = await conn.fetchrow(
                "SELECT count(*) AS n, count(DISTINCT (payload->>'document_id', payload->>'chunk_index')) AS d "
                f"""FROM vectors."{row["name"]}" WHERE payload ? 'chunk_index'"""
            )
            assert stored is not None
            vectors[row["name"]] = {"expected": row["expected"], "stored": stored["n"], "distinct": stored["d"]}
        found["vectors"] = vectors
        return found
    finally:
        await conn.close()


async def drift(url: str) -> list[Drift]:
    """:func:`chonkit.collection.reconcile.reconcile` without repairing, over pgvector (the only store used here)."""
    db = await PoolDatabase.connect(url, min_size=1, max_size=2)
    pool = await asyncpg.create_pool(url, min_size=1, max_size=2, init=init_connection)
    try:
        report = await reconcile(db, VectorRegistry({"pgvector": PgVectorStore(pool)}), repair=False)
    finally:
        await pool.close()
        await db.aclose()
    return report.drift
