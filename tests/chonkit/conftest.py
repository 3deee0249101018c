"""Chonkit's app on the test database, and tokens for an admin and a plain user."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

import httpx
import pytest
from litestar import Litestar

from chonkit.app import create_app
from common.auth import mint_dev_token
from common.config import Settings
from common.db import SingleConnectionDatabase
from common.embedders.base import EmbedderRegistry
from common.embedders.registry import default_registry

AppClient = Callable[[Litestar], AbstractAsyncContextManager[httpx.AsyncClient]]


@pytest.fixture(scope="session")
def embedders() -> EmbedderRegistry:
    """One registry per session: the local model loads once."""
    return default_registry()


def bearer(
    settings: Settings, subject: str = "admin", *, admin: bool = True, groups: tuple[str, ...] = ()
) -> dict[str, str]:
    roles = [settings.auth_admin_role] if admin else []
    return {"Authorization": f"Bearer {mint_dev_token(settings, subject=subject, roles=roles, groups=groups)}"}


@pytest.fixture
async def chonkit(
    settings: Settings, db: SingleConnectionDatabase, embedders: EmbedderRegistry, app_client: AppClient
) -> AsyncIterator[httpx.AsyncClient]:
    """Chonkit as an admin sees it."""
    async with app_client(create_app(settings, database=db, embedders=embedders)) as client:
        client.headers.update(bearer(settings))
        yield client
