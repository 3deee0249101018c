"""What the hostile-source suites measure while an attack runs: kappi's ``/health`` latency, polled every 50 ms on
a connection of its own, and the server process's resident memory (with its children: the parse processes that
OCR and parse documents), sampled as often.

The bar the issue set: no health answer slower than :data:`HEALTH_BAR_SECONDS` while a hostile source syncs or a
hostile image parses; the peak RSS is reported so each test can state its own bound.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import httpx
import psutil

HEALTH_BAR_SECONDS = 0.3
EVERY_SECONDS = 0.05


@dataclass
class Watched:
    """What was seen while the watch ran."""

    health_seconds: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    """Health answers that were not 200, or no answer at all (said how)."""
    peak_rss_bytes: int = 0
    """The server process and its children together, at the highest sample."""

    @property
    def worst(self) -> float:
        return max(self.health_seconds, default=0.0)

    def summary(self) -> str:
        return (
            f"{len(self.health_seconds)} health polls, worst {self.worst * 1000:.0f} ms, "
            f"peak RSS {self.peak_rss_bytes / 2**20:.0f} MiB"
        )

    def assert_healthy(self, *, min_polls: int = 2) -> None:
        assert not self.failures, f"health failed while watched: {self.failures[:3]}"
        assert len(self.health_seconds) >= min_polls, f"kappi was not polled while the attack ran ({self.summary()})"
        assert self.worst <= HEALTH_BAR_SECONDS, f"kappi's health stalled: {self.summary()}"


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
    """Poll ``{base_url}/kappi/health`` and sample the RSS of ``pid``'s tree until the block ends."""
    watched = Watched()
    done = asyncio.Event()

    async def poll(client: httpx.AsyncClient) -> None:
        while not done.is_set():
            started = time.perf_counter()
            try:
                response = await client.get("/kappi/health")
            except httpx.HTTPError as exc:
                watched.failures.append(f"{type(exc).__name__}: {exc}")
            else:
                watched.health_seconds.append(time.perf_counter() - started)
                if response.status_code != 200:
                    watched.failures.append(f"HTTP {response.status_code}")
            watched.peak_rss_bytes = max(watched.peak_rss_bytes, await asyncio.to_thread(tree_rss, pid))
            await asyncio.sleep(EVERY_SECONDS)

    async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
        poller = asyncio.create_task(poll(client))
        try:
            yield watched
        finally:
            done.set()
            await poller
