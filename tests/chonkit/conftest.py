"""Chonkit's app on the test database, and tokens for an admin and a plain user."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

import httpx
import pytest
from litestar import Litestar

from chonkit.app import create_app
from chonkit.embedding.worker import EmbeddingWorker
from common.auth import mint_dev_token
from common.clients import SharedClients
from common.config import Settings
from common.db import SingleConnectionDatabase

AppClient = Callable[[Litestar], AbstractAsyncContextManager[httpx.AsyncClient]]


def bearer(
    settings: Settings, subject: str = "admin", *, admin: bool = True, groups: tuple[str, ...] = ()
) -> dict[str, str]:
    roles = [settings.auth.admin_role] if admin else []
    return {"Authorization": f"Bearer {mint_dev_token(settings, subject=subject, roles=roles, groups=groups)}"}


@pytest.fixture
async def chonkit(
    settings: Settings, db: SingleConnectionDatabase, clients: SharedClients, app_client: AppClient
) -> AsyncIterator[httpx.AsyncClient]:
    """Chonkit as an admin sees it; tests drive the embedding worker themselves (see ``worker``)."""
    async with app_client(create_app(settings, database=db, clients=clients, worker=False)) as client:
        client.headers.update(bearer(settings))
        yield client


async def drain(worker: EmbeddingWorker) -> int:
    """Run the worker until the queue is empty; returns how many items it processed."""
    processed = 0
    while await worker.run_once():
        processed += 1
    return processed
