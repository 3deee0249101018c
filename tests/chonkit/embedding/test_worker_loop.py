"""The worker's loop outlives what goes wrong around a job: it waits and tries again, it never stops."""

from __future__ import annotations

import asyncio

import pytest

from chonkit.embedding.worker import EmbeddingWorker
from common.errors import Unavailable


class Flaky(EmbeddingWorker):
    """The real worker, whose first two attempts fail the ways the loop must survive."""

    failures: list[BaseException]
    attempts = 0

    async def run_once(self) -> bool:
        self.attempts += 1
        if self.failures:
            raise self.failures.pop(0)
        return await super().run_once()


async def test_the_loop_survives_a_lost_dependency_and_an_unexpected_error(
    worker: EmbeddingWorker, caplog: pytest.LogCaptureFixture
) -> None:
    flaky = Flaky(worker.db, worker.blobs, worker.embedders, worker.vectors, heartbeat_seconds=0.2)
    flaky.failures = [Unavailable("PostgreSQL is down", code="database_unavailable"), RuntimeError("a bug")]
    stop = asyncio.Event()
    running = asyncio.create_task(flaky.run(stop, idle_seconds=0.01))
    for _ in range(500):
        if flaky.attempts >= 4:
            break
        await asyncio.sleep(0.01)
    stop.set()
    await asyncio.wait_for(running, timeout=10)

    assert flaky.attempts >= 4  # two failures, then attempts that found the (empty) queue
    assert not running.exception()
    assert "worker loop failed; retrying" in caplog.text
