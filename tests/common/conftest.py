"""Both services driven in-process, at the root and mounted under ``/chonkit`` and ``/kappi`` as ``ragu serve``
mounts them, for the suites that check what a client sees in either layout."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import httpx
import pytest

from chonkit.app import create_app as create_chonkit
from common.clients import SharedClients
from common.config import Settings
from common.db import SingleConnectionDatabase
from kappi.app import create_app as create_kappi
from ragu.host import ServiceHost
from tests.conftest import AppClient

Served = dict[str, tuple[httpx.AsyncClient, str]]
"""Each service's client and the prefix its paths start with there ("" at the root)."""


@asynccontextmanager
async def both_services(
    settings: Settings, db: SingleConnectionDatabase, clients: SharedClients, app_client: AppClient, *, mounted: bool
) -> AsyncIterator[Served]:
    apps = {
        "chonkit": create_chonkit(settings, database=db, clients=clients, worker=False),
        "kappi": create_kappi(settings, database=db, clients=clients),
    }
    async with AsyncExitStack() as stack:
        direct = {name: await stack.enter_async_context(app_client(app)) for name, app in apps.items()}
        if not mounted:
            yield {name: (client, "") for name, client in direct.items()}
            return
        transport = httpx.ASGITransport(app=ServiceHost(apps))
        async with httpx.AsyncClient(transport=transport, base_url="http://ragu.test") as host:
            yield {name: (host, f"/{name}") for name in apps}


@pytest.fixture(params=[False, True], ids=["at-root", "mounted"])
async def served(
    request: pytest.FixtureRequest,
    settings: Settings,
    db: SingleConnectionDatabase,
    clients: SharedClients,
    app_client: AppClient,
) -> AsyncIterator[Served]:
    async with both_services(settings, db, clients, app_client, mounted=request.param) as services:
        yield services
