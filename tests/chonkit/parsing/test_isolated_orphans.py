"""Parse processes end with the process that started them, even when it is killed (SIGKILL runs no clean-up).

A parse process holds its own queue's pipe and the forkserver's liveness pipe open, so neither ever sees the
killed parent's end: before, a killed ``ragu serve`` or ``ragu worker`` left its forkserver and a parse process
running for good (the suite's SIGKILL tests left four behind per run).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.chonkit.parsing.conftest import make_pdf

_STARTER = """
import asyncio, json, multiprocessing.forkserver as fs, sys, time
from chonkit.document import isolated
from chonkit.document.parsing import DocumentType, ParseConfig

asyncio.run(isolated.parse_isolated(bytes.fromhex(sys.argv[1]), DocumentType.PDF, ParseConfig()))
pool = isolated._pool
workers = list(pool._processes)
print(json.dumps({"workers": workers, "forkserver": fs._forkserver._forkserver_pid}), flush=True)
time.sleep(120)
"""


def _running(pid: int) -> bool:
    """Whether ``pid`` still runs: a process that exited but nobody reaped (a zombie) does not."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    state = next(line for line in status.splitlines() if line.startswith("State:"))
    return "Z" not in state.split()[1]


def test_a_killed_parent_takes_its_parse_processes_and_forkserver_with_it() -> None:
    repo = Path(__file__).resolve().parents[3]
    starter = subprocess.Popen(  # noqa: S603 - our own interpreter and script
        [sys.executable, "-c", _STARTER, make_pdf(["one page"]).hex()], cwd=repo, stdout=subprocess.PIPE, text=True
    )
    try:
        assert starter.stdout is not None
        started = json.loads(starter.stdout.readline())
        children = [*started["workers"], started["forkserver"]]
        assert all(_running(pid) for pid in children), started
    finally:
        starter.send_signal(signal.SIGKILL)
        starter.wait()
        if starter.stdout is not None:
            starter.stdout.close()

    deadline = time.monotonic() + 20
    while any(_running(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [pid for pid in children if _running(pid)]
    for pid in left:  # do not leave them to the next test
        os.kill(pid, signal.SIGKILL)
    assert not left, f"still running after their parent was killed: {left} of {started}"
