"""The skeleton both services are built on: state, lifespan, dependencies, errors, OpenAPI and request logs."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from litestar import Litestar
from litestar.datastructures import State
from litestar.di import Provide
from litestar.enums import ScopeType
from litestar.middleware import ASGIMiddleware
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import ScalarRenderPlugin
from litestar.openapi.spec import Components, SecurityScheme
from litestar.types import ASGIApp, ControllerRouterHandler, Message, Receive, Scope, Send

from common.auth import Authenticator
from common.config import Settings
from common.db import Database, PoolDatabase
from common.db.database import Connection
from common.http.problems import EXCEPTION_HANDLERS
from common.http.security import provide_principal
from common.http.system import SystemController

access_log = logging.getLogger("ragu.access")

Lifespan = Callable[[Litestar], AbstractAsyncContextManager[None]]


async def provide_connection(state: State) -> AsyncIterator[Connection]:
    """One transaction per request: committed when the handler returns, rolled back if it raises."""
    db: Database = state.db
    async with db.transaction() as conn:
        yield conn


class AccessLogMiddleware(ASGIMiddleware):
    """One structured line per request: method, path, status and duration."""

    scopes = (ScopeType.HTTP,)

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        started = time.perf_counter()
        status = 500

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await next_app(scope, receive, send_wrapper)
        finally:
            access_log.info(
                "%s %s %s",
                scope.get("method"),
                scope.get("root_path", "") + scope["path"],
                status,
                extra={"status": status, "duration_ms": round((time.perf_counter() - started) * 1000, 2)},
            )


def build_service_app(
    *,
    service_name: str,
    title: str,
    description: str,
    settings: Settings,
    route_handlers: Sequence[ControllerRouterHandler],
    database: Database | None = None,
    authenticator: Authenticator | None = None,
    lifespans: Sequence[Lifespan] = (),
    state: dict[str, Any] | None = None,
) -> Litestar:
    """A Ragu service. Without ``database`` the lifespan opens a pool on ``settings.database_url``."""

    @asynccontextmanager
    async def open_database(app: Litestar) -> AsyncIterator[None]:
        if database is not None:
            app.state.db = database
            yield
            return
        if not settings.database_url:
            raise RuntimeError("database_url must be resolved before the app starts (see ragu.serve)")
        db = await PoolDatabase.connect(
            settings.database_url, min_size=settings.db_pool_min_size, max_size=settings.db_pool_max_size
        )
        app.state.db = db
        try:
            yield
        finally:
            await db.close()

    return Litestar(
        route_handlers=[SystemController, *route_handlers],
        state=State(
            {
                "service_name": service_name,
                "settings": settings,
                "authenticator": authenticator or Authenticator(settings),
                **(state or {}),
            }
        ),
        lifespan=[open_database, *lifespans],
        dependencies={"conn": Provide(provide_connection), "principal": Provide(provide_principal)},
        exception_handlers=EXCEPTION_HANDLERS,
        middleware=[AccessLogMiddleware()],
        openapi_config=OpenAPIConfig(
            title=title,
            version="0.1.0",
            description=description,
            path="/docs",
            render_plugins=[ScalarRenderPlugin()],
            components=Components(
                security_schemes={"bearer": SecurityScheme(type="http", scheme="bearer", bearer_format="JWT")}
            ),
            security=[{"bearer": []}],
        ),
        logging_config=None,
        debug=False,
    )
