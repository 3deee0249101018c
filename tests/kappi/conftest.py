"""Both services on one database (the test's transaction), sharing the vector stores and embedders."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import httpx
import msgspec
import pytest
from litestar import Litestar

from chonkit.app import create_app as create_chonkit
from common.clients import SharedClients
from common.config import Settings
from common.db import SingleConnectionDatabase
from kappi.app import create_app as create_kappi
from tests.chonkit.conftest import bearer

AppClient = Callable[[Litestar], AbstractAsyncContextManager[httpx.AsyncClient]]


@pytest.fixture
async def chonkit(
    settings: Settings, db: SingleConnectionDatabase, clients: SharedClients, app_client: AppClient
) -> AsyncIterator[httpx.AsyncClient]:
    async with app_client(create_chonkit(settings, database=db, clients=clients, worker=False)) as client:
        client.headers.update(bearer(settings))
        yield client


@pytest.fixture
async def kappi(
    settings: Settings, db: SingleConnectionDatabase, clients: SharedClients, app_client: AppClient
) -> AsyncIterator[httpx.AsyncClient]:
    """Kappi with no default identity; each request names its user with :func:`as_user`."""
    async with app_client(create_kappi(settings, database=db, clients=clients)) as client:
        yield client


def as_user(settings: Settings, subject: str, *groups: str, admin: bool = False) -> dict[str, str]:
    return bearer(settings, subject, admin=admin, groups=groups)


def sse_events(body: str) -> list[tuple[str, Any]]:
    """Parse a complete SSE body into (event, decoded data) pairs."""
    events = []
    for block in body.split("\r\n\r\n" if "\r\n\r\n" in body else "\n\n"):
        name, data = "message", []
        for line in block.splitlines():
            if line.startswith("event:"):
                name = line.removeprefix("event:").strip()
            elif line.startswith("data:"):
                data.append(line.removeprefix("data:").lstrip())
        if data:
            events.append((name, msgspec.json.decode("\n".join(data))))
    return events
