"""Kappi: agents grounded in the collections a user's groups may read."""

from __future__ import annotations

from litestar import Litestar

from common.auth import Authenticator
from common.config import Settings
from common.db import Database
from common.http.app import build_service_app


def create_app(
    settings: Settings, *, database: Database | None = None, authenticator: Authenticator | None = None
) -> Litestar:
    return build_service_app(
        service_name="kappi",
        title="Kappi",
        description="Agents, group-enforced retrieval and streaming chat.",
        settings=settings,
        route_handlers=[],
        database=database,
        authenticator=authenticator,
    )
