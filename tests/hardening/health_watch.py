"""What the hostile-source suites measure while an attack runs: kappi's ``/health`` latency, polled every 50 ms on
a connection of its own, and the server process's resident memory (with its children: the parse processes that
OCR and parse documents), sampled as often.

The health poller runs in a process of its own (``python -m tests.hardening.health_watch URL CONTROL``), so what
it times is the server's answer, not the test process's own load: that process also serves the hostile site from a
thread, and a 325 ms poll was once measured there while the server answered in time. Each round it also asks a
*control*: a server in another process that does nothing but answer (``python -m tests.hardening.health_watch
--control``). What the control's answers take is what the machine's load alone adds to a poll (the suite's other
worker may be recognising pages or loading a model on the same two cores).

The bar the issue set: no health answer slower than :data:`HEALTH_BAR_SECONDS` while a hostile source syncs or a
hostile image parses, beyond the slowest control answer of the same watch; the peak RSS is reported so each test
can state its own bound.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil

HEALTH_BAR_SECONDS = 0.3
EVERY_SECONDS = 0.05
REPOSITORY = Path(__file__).resolve().parents[2]


@dataclass
class Watched:
    """What was seen while the watch ran."""

    health_seconds: list[float] = field(default_factory=list)
    control_seconds: list[float] = field(default_factory=list)
    """The control's answers in the same rounds: the machine's load, with no server work in them."""
    failures: list[str] = field(default_factory=list)
    """Health answers that were not 200, or no answer at all (said how)."""
    peak_rss_bytes: int = 0
    """The server process and its children together, at the highest sample."""
    answered: asyncio.Event = field(default_factory=asyncio.Event)
    """Set at the poller's first line: health is being watched from then on."""

    @property
    def worst(self) -> float:
        return max(self.health_seconds, default=0.0)

    @property
    def worst_control(self) -> float:
        return max(self.control_seconds, default=0.0)

    def summary(self) -> str:
        return (
            f"{len(self.health_seconds)} health polls, worst {self.worst * 1000:.0f} ms "
            f"(the control's worst {self.worst_control * 1000:.0f} ms), peak RSS {self.peak_rss_bytes / 2**20:.0f} MiB"
        )

    async def polled(self) -> None:
        """Wait for the first health answer: the watch covers what follows (its poller is a process of its own,
        which takes a moment to start)."""
        await self.answered.wait()

    def assert_healthy(self, *, min_polls: int = 2) -> None:
        assert not self.failures, f"health failed while watched: {self.failures[:3]}"
        assert len(self.health_seconds) >= min_polls, f"kappi was not polled while the attack ran ({self.summary()})"
        assert self.worst <= HEALTH_BAR_SECONDS + self.worst_control, f"kappi's health stalled: {self.summary()}"


def tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and its descendants (0 for those gone meanwhile)."""
    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0
    total = 0
    for process in processes:
        try:
            total += process.memory_info().rss
        except psutil.Error:
            continue
    return total


@asynccontextmanager
async def watching(base_url: str, pid: int) -> AsyncIterator[Watched]:
    """Poll ``{base_url}/kappi/health`` from a process of its own and sample the RSS of ``pid``'s tree until the
    block ends."""
    watched = Watched()
    done = asyncio.Event()
    control = await _process("--control")
    assert control.stdout is not None
    assert control.stdin is not None
    control_url = (await control.stdout.readline()).decode().strip()
    poller = await _process(base_url, control_url)
    assert poller.stdout is not None
    assert poller.stdin is not None

    async def read_polls() -> None:
        assert poller.stdout is not None
        async for line in poller.stdout:
            kind, _, value = line.decode().rstrip("\n").partition(" ")
            if kind == "ok":
                watched.health_seconds.append(float(value))
            elif kind == "control":
                watched.control_seconds.append(float(value))
            else:
                watched.failures.append(value)
            watched.answered.set()

    async def sample_rss() -> None:
        while not done.is_set():
            watched.peak_rss_bytes = max(watched.peak_rss_bytes, await asyncio.to_thread(tree_rss, pid))
            await asyncio.sleep(EVERY_SECONDS)

    reader = asyncio.create_task(read_polls())
    sampler = asyncio.create_task(sample_rss())
    try:
        yield watched
    finally:
        done.set()
        poller.stdin.close()
        await poller.wait()
        control.stdin.close()
        await control.wait()
        await reader
        await sampler


async def _process(*arguments: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.hardening.health_watch",
        *arguments,
        stdout=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.PIPE,
        cwd=REPOSITORY,
    )


async def _poll_until_stdin_closes(base_url: str, control_url: str) -> None:
    """Print ``ok <seconds>`` per health answer (``fail <why>`` otherwise), then ``control <seconds>`` for the
    control's, every :data:`EVERY_SECONDS` until the parent closes stdin."""
    loop = asyncio.get_running_loop()
    closed = loop.run_in_executor(None, sys.stdin.read)
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as client, httpx.AsyncClient(timeout=30) as peer:
        while not closed.done():
            started = time.perf_counter()
            try:
                response = await client.get("/kappi/health")
            except httpx.HTTPError as exc:
                print(f"fail {type(exc).__name__}: {exc}", flush=True)
            else:
                elapsed = time.perf_counter() - started
                print(
                    f"ok {elapsed}" if response.status_code == 200 else f"fail HTTP {response.status_code}", flush=True
                )
            started = time.perf_counter()
            (await peer.get(control_url)).raise_for_status()
            print(f"control {time.perf_counter() - started}", flush=True)
            await asyncio.sleep(EVERY_SECONDS)


async def _serve_control() -> None:
    """Answer every request at once, on a port of its own, until the parent closes stdin; print the URL first."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await reader.readuntil(b"\r\n\r\n"):
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    print(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/", flush=True)
    async with server:
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


if __name__ == "__main__":
    if sys.argv[1:] == ["--control"]:
        asyncio.run(_serve_control())
    else:
        asyncio.run(_poll_until_stdin_closes(sys.argv[1], sys.argv[2]))
