"""Test harness: one real PostgreSQL per test session, migrated once; every test rolls back.

``TEST_DATABASE_URL`` names a server to use; otherwise an embedded PostgreSQL 18 (with pgvector) is
started in a temporary folder for the session and deleted afterwards.
"""

from __future__ import annotations

import ast
import asyncio
import functools
import logging
import os
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import asyncpg
import httpx
import pytest
from litestar import Litestar

from chonkit.document.parsing import DocumentType
from chonkit.document.storage import BlobStore
from chonkit.embedding.worker import EmbeddingWorker
from common.clients import SharedClients
from common.config import Settings, load_settings
from common.db import SingleConnectionDatabase
from common.db import migrate as migrations
from common.db.database import Connection, Pool, init_connection
from common.db.embedded import EmbeddedPostgres, ensure_database, with_database
from common.embedders.base import EmbedderRegistry
from common.embedders.registry import default_registry
from common.vectors.registry import VectorRegistry

TEST_SECRET = "test-only-hs256-secret-0123456789abcdef"

SLOW_FIXTURES = frozenset({"browser", "smollm2", "embedders", "image_only_pdf"})
"""Fixtures that start Chromium, start the embedded LLM (llama.cpp with SmolLM2), hold the local embedding model, or
give a PDF of pictures that OCR's models read: a test that uses one, itself or through another fixture (``chonkit``,
``worker``, ``clients``...), is ``slow``; so is one parametrized with a picture's ``DocumentType`` (read by OCR)."""
SLOW_IMPORTS = (
    "subprocess",
    "playwright",
    "onnxruntime",
    "bench.soak",
    "ragu.local_llm",
    "tests.hardening.live_stack",
    "tests.console.harness",
    "chonkit.document.isolated",
    "chonkit.document.parsing.ocr",
    "common.embedders.local",
    "common.embedders.registry",
)
"""What starts a process (``ragu serve``, ``ragu worker``, a command), a browser or a model (llama.cpp, the ONNX
embedder, OCR, the parse processes): a test module that imports any of it (or a name from it) is ``slow`` as a
whole, as is one that calls ``asyncio.create_subprocess_exec``."""
SLOW_CALLS = frozenset({"create_subprocess_exec", "create_subprocess_shell"})
LATENCY_WATCH = "tests.hardening.health_watch"
"""What times kappi's ``/health`` against a bar while an attack runs: a module that imports it runs last."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The fast tier (``-m "not slow"``) runs what starts no server subprocess, browser or model; the real
    PostgreSQL is fine. Decided by the two rules above, never by a list of tests.

    Then the longest modules run first: those that start processes, then those with another slow test, then the
    rest. Under ``-n`` (``--dist=loadfile --no-loadscope-reorder``) a worker takes the next module when it is done,
    so the many short modules come last and even out the two workers' ends. In xdist's default order (most tests
    first) one-test modules that run a server for a minute or two came last, and one worker ran them while the
    other idled. The modules that time kappi's health against a bar (:data:`LATENCY_WATCH`) run last of all, beside
    the short modules, where they have passed every CI run: beside the other worker's server and model starts the
    two cores are shared four ways, which a latency bar should not have to absorb."""
    slow_modules: set[Path] = set()
    for item in items:
        callspec = getattr(item, "callspec", None)
        params = callspec.params.values() if callspec else ()
        if (
            SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ()))
            or any(isinstance(p, DocumentType) and p.media_type.startswith("image/") for p in params)
            or _starts_something(item.path)
        ):
            item.add_marker(pytest.mark.slow)
            slow_modules.add(item.path)
    # stable: a module's tests keep their order
    items.sort(key=lambda item: _run_order(item.path, slow_modules))


def _run_order(path: Path, slow_modules: set[Path]) -> int:
    if _imports(path, (LATENCY_WATCH,)):
        return 3
    return 0 if _starts_something(path) else 1 if path in slow_modules else 2


def pytest_configure() -> None:
    """The suite writes bytecode caches even where ``PYTHONDONTWRITEBYTECODE`` is set (as on the CI machine): it
    starts some 300 Python processes (xdist workers, servers, parse processes, commands), started after this and
    inheriting it, and without caches each compiled every module of ours it imported again. The installed packages
    come compiled (``uv pip install --compile-bytecode``, the README's test command)."""
    if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
        sys.dont_write_bytecode = False


def pytest_unconfigure() -> None:
    """The live servers' template database (``tests/hardening/live_stack.py``) goes with the session."""
    if live_stack := sys.modules.get("tests.hardening.live_stack"):
        live_stack.remove_template()


def _starts_something(path: Path) -> bool:
    """Whether the test module at ``path`` imports from :data:`SLOW_IMPORTS` or calls :data:`SLOW_CALLS`."""
    return _imports(path, SLOW_IMPORTS, calls=SLOW_CALLS)


@functools.cache
def _imports(path: Path, modules: tuple[str, ...], *, calls: frozenset[str] = frozenset()) -> bool:
    """Whether the test module at ``path`` imports from ``modules`` (or a name from them) or calls ``calls``."""
    for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
        if isinstance(node, ast.Import):
            imported = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            imported = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Attribute | ast.Name):
            if (node.attr if isinstance(node, ast.Attribute) else node.id) in calls:
                return True
            continue
        else:
            continue
        if any(name == slow or name.startswith(f"{slow}.") for name in imported for slow in modules):
            return True
    return False


@pytest.fixture(autouse=True)
def root_logger_left_alone() -> Iterator[None]:
    """A handler a test leaves on the root logger keeps pytest's captured stream, closed by the time the session's
    last records arrive: "I/O operation on closed file" after the summary. (A Litestar app built without
    ``logging_config=None`` configures the root logger, for one.)"""
    yield
    root = logging.getLogger()
    foreign = [handler for handler in root.handlers if not type(handler).__module__.startswith("_pytest")]
    for handler in foreign:
        root.removeHandler(handler)
    assert foreign == [], f"the test left handlers on the root logger: {foreign}"


@pytest.fixture(scope="session")
def postgres_admin_url() -> Iterator[str]:
    """URL of a server we may create databases on."""
    if url := os.environ.get("TEST_DATABASE_URL"):
        yield url
        return
    with tempfile.TemporaryDirectory(prefix="ragu-test-pg-") as folder:
        server = EmbeddedPostgres(Path(folder))
        try:
            yield server.start()
        finally:
            server.stop()


@pytest.fixture(scope="session")
def database_url(postgres_admin_url: str) -> str:
    """A freshly migrated ``ragu_test`` database, shared by the session.

    Under pytest-xdist every worker is a session of its own, with its own embedded server; on a shared
    ``TEST_DATABASE_URL`` server each worker gets a database of its own (``ragu_test_gw0``, ...), since a session
    drops and re-creates its database at start."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    name = f"ragu_test_{worker}" if worker else "ragu_test"
    url = with_database(postgres_admin_url, name)
    asyncio.run(_recreate(postgres_admin_url, name))
    migrations.upgrade(url)
    return url


async def _recreate(admin_url: str, name: str) -> None:
    conn = await asyncpg.connect(admin_url)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()
    await ensure_database(admin_url, name)


@pytest.fixture
async def conn(database_url: str) -> AsyncIterator[Connection]:
    """A connection inside a transaction that is rolled back after the test."""
    connection = await asyncpg.connect(database_url)
    await init_connection(connection)
    tx = connection.transaction()
    await tx.start()
    try:
        yield connection
    finally:
        await tx.rollback()
        await connection.close()


@pytest.fixture
def db(conn: Connection) -> SingleConnectionDatabase:
    return SingleConnectionDatabase(conn)


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    return load_settings({}, data_dir=str(tmp_path / "data"), database_url=database_url, auth_hs256_secret=TEST_SECRET)


AppClient = Callable[[Litestar], AbstractAsyncContextManager[httpx.AsyncClient]]


@pytest.fixture
def app_client() -> AppClient:
    """Drive an app in the test's own event loop (Litestar's test client runs it on another loop,
    where the test's asyncpg connection cannot follow), with its lifespan entered.

    The lifespan runs in a task of its own: it holds anyio cancel scopes that must be exited by the
    task that entered them, and fixture set-up and tear-down may run in different tasks.
    """

    @asynccontextmanager
    async def open_client(app: Litestar) -> AsyncIterator[httpx.AsyncClient]:
        started, stopping = asyncio.Event(), asyncio.Event()

        async def lifespan() -> None:
            async with app.lifespan():
                started.set()
                await stopping.wait()

        task = asyncio.create_task(lifespan())
        await asyncio.wait([task, asyncio.create_task(started.wait())], return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            task.result()  # start-up failed: raise its error here
        try:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://ragu.test") as client:
                yield client
        finally:
            stopping.set()
            await task

    return open_client


@pytest.fixture(scope="session")
def embedders() -> EmbedderRegistry:
    """One registry per session: the local model loads once."""
    return default_registry()


@pytest.fixture(scope="session")
async def vector_pool(database_url: str) -> AsyncIterator[Pool]:
    """pgvector's own pool: its tables are committed (like a real store), so tests drop what they create."""
    from common.vectors.pgvector import open_pool

    pool = await open_pool(database_url, max_size=4)
    yield pool
    await pool.close()


@pytest.fixture
async def vectors(vector_pool: Pool) -> AsyncIterator[VectorRegistry]:
    """pgvector on the test server and a fresh in-memory Qdrant (the client's local mode) per test."""
    from qdrant_client import AsyncQdrantClient

    from common.vectors.pgvector import PgVectorStore
    from common.vectors.qdrant import QdrantStore

    pgvector = PgVectorStore(vector_pool)
    registry = VectorRegistry({"pgvector": pgvector, "qdrant": QdrantStore(AsyncQdrantClient(location=":memory:"))})
    before = {i.name for i in await pgvector.list_identities()}
    yield registry
    for identity in await pgvector.list_identities():
        if identity.name not in before:
            await pgvector.drop_collection(identity.name)
    await registry.get("qdrant").aclose()


@pytest.fixture
def clients(settings: Settings, embedders: EmbedderRegistry, vectors: VectorRegistry) -> SharedClients:
    return SharedClients(settings, embedders=embedders, vectors=vectors)


@pytest.fixture
def worker(settings: Settings, db: SingleConnectionDatabase, clients: SharedClients) -> EmbeddingWorker:
    return EmbeddingWorker(
        db,
        BlobStore(settings.server.data_path / "documents"),
        clients.embedders,
        clients.vectors,
        heartbeat_seconds=0.2,
    )
