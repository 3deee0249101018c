"""The loop every kind of background work runs in, and the heartbeat that keeps a claim.

Work is claimed by its repository with ``FOR UPDATE SKIP LOCKED``, so any number of runners on any number of machines
share a queue. A runner asks for work until stopped: while there is none, or a dependency is down (waited out with a
growing backoff) or its work raised (logged and retried the same way: a runner that stopped would leave its queue
unseen), it waits; work queued in the same process wakes it at once. While a claim's work runs, :func:`keep_claim`
refreshes it: a runner that dies stops heartbeating, and another takes the work over once the heartbeat is stale.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from common.errors import Unavailable

logger = logging.getLogger(__name__)

MAX_BACKOFF_SECONDS = 30.0


class Runner:
    """Calls ``work`` (True: it did something, ask again at once) until stopped."""

    def __init__(self, label: str, work: Callable[[], Awaitable[bool]]) -> None:
        self.label = label
        self.work = work
        self._wake = asyncio.Event()

    def wake(self) -> None:
        """New work was queued in this process: skip the rest of the idle wait."""
        self._wake.set()

    async def run(self, stop: asyncio.Event, *, idle_seconds: float) -> None:
        backoff = idle_seconds
        while not stop.is_set():
            try:
                worked = await self.work()
                backoff = idle_seconds
            except Unavailable as exc:
                logger.warning("%s waiting for a dependency: %s", self.label, exc.detail)
                worked, backoff = False, min(backoff * 2, MAX_BACKOFF_SECONDS)
            except Exception:
                logger.exception("%s loop failed; retrying", self.label)
                worked, backoff = False, min(backoff * 2, MAX_BACKOFF_SECONDS)
            if not worked:
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(_first(stop.wait(), self._wake.wait()), timeout=backoff)


async def keep_claim(
    step: Callable[[bool], Awaitable[bool]], *, every: float, what: str, poll: float | None = None
) -> None:
    """Run ``step(beat)`` every ``poll`` seconds (every ``every`` when not given) until it returns False (the claim is
    gone) or this is cancelled; ``beat`` is True when the claim's heartbeat is due (``every`` seconds after the last
    one), so a step can poll for more (a cancel) between beats. A database that is down is a missed beat, not an
    end: the next step tries again."""
    interval = every if poll is None else min(every, poll)
    due = time.monotonic() + every
    while True:
        await asyncio.sleep(interval)
        beat = poll is None or time.monotonic() >= due
        try:
            if not await step(beat):
                return
        except Unavailable:
            logger.warning("heartbeat missed for %s", what)
            continue
        if beat:
            due = time.monotonic() + every


async def _first(*waits: Awaitable[Any]) -> None:
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
