"""The skeleton both services are built on: state, lifespan, dependencies, errors, OpenAPI, and the request log
wrapped around whatever ``ragu serve`` serves."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from typing import Any

from litestar import Litestar, Request
from litestar.datastructures import State
from litestar.di import Provide
from litestar.middleware import DefineMiddleware
from litestar.openapi import OpenAPIConfig
from litestar.openapi.spec import Components, SecurityScheme
from litestar.types import ControllerRouterHandler

from common import telemetry
from common.auth import Authenticator
from common.config import Settings
from common.db import Database, PoolDatabase
from common.errors import BadRequest
from common.http.docs import MountedOpenAPIDocument, SwaggerUIPage, docs_router
from common.http.problems import EXCEPTION_HANDLERS
from common.http.security import provide_principal
from common.http.system import SystemController
from common.http.telemetry import BeforeScrape, RequestMetrics, metrics_handler, tracing

access_log = logging.getLogger("ragu.access")

Lifespan = Callable[[Litestar], AbstractAsyncContextManager[None]]
# Plain ASGI types for a wrapper that sees every scope type (Litestar's types exclude lifespan).
Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[..., Awaitable[None]]  # Litestar apps and plain ones alike


class BoundedRequest(Request[Any, Any, Any]):
    """Litestar's request, whose JSON body may not nest deeper than the decoder can recurse.

    msgspec decodes a body into plain values before it is validated against the handler's type, and raises
    ``RecursionError`` at Python's recursion limit (about 1000 levels, less the stack already in use): a body
    ``[[[[...`` 1,000 deep was a 500 for any caller (#26). No request of ours nests past a few levels, so such a
    body is refused as unreadable, ``400 json_too_deep``, before any handler runs. The bound is the decoder's own
    rather than a depth count of ours, which would read every byte of every body in Python once more.
    """

    async def json(self) -> Any:
        try:
            return await super().json()
        except RecursionError:
            raise BadRequest(
                "the JSON body is nested too deeply to read; no request nests more than a few levels",
                code="json_too_deep",
            ) from None


class AccessLog:
    """One structured line per HTTP request (method, path, status, duration), wrapped around a whole ASGI app.

    Outside the app rather than Litestar middleware, which runs only for paths a route matches: this also
    logs unknown paths (404) and the console and index of ``ragu serve all``.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the client gets when the app fails before it starts a response

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            access_log.info(
                "%s %s %s",
                scope.get("method"),
                scope.get("root_path", "") + scope["path"],
                status,
                extra={"status": status, "duration_ms": round((time.perf_counter() - started) * 1000, 2)},
            )


@contextmanager
def _directory_reads(authenticator: Authenticator, database: Database) -> Iterator[None]:
    """The directory (docs/directory.md) is read through the service's database while it is open."""
    authenticator.bind_database(database)
    try:
        yield
    finally:
        authenticator.unbind_database(database)


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
    dependencies: dict[str, Provide] | None = None,
    before_scrape: BeforeScrape | None = None,
) -> Litestar:
    """A Ragu service. Without ``database`` the lifespan opens a pool on ``settings.database.url``;
    ``before_scrape`` refreshes what ``/metrics`` reads from the database."""

    authenticator = authenticator or Authenticator(settings)

    @asynccontextmanager
    async def open_database(app: Litestar) -> AsyncIterator[None]:
        if database is not None:
            app.state.db = database
            with _directory_reads(authenticator, database):
                yield
            return
        if not settings.database.url:
            raise RuntimeError("database_url must be resolved before the app starts (see ragu.serve)")
        db = await PoolDatabase.connect(
            settings.database.url, min_size=settings.database.pool_min_size, max_size=settings.database.pool_max_size
        )
        app.state.db = db
        try:
            with _directory_reads(authenticator, db):
                yield
        finally:
            await db.aclose()

    telemetry.configure_tracing(settings.server.otel_exporter)
    plugins, middleware = tracing(service_name)
    if settings.server.metrics:
        route_handlers = [metrics_handler(before_scrape), *route_handlers]
        middleware.insert(0, DefineMiddleware(RequestMetrics, service=service_name))
    return Litestar(
        route_handlers=[SystemController, *route_handlers],
        plugins=plugins,
        middleware=middleware,
        state=State(
            {
                "service_name": service_name,
                "settings": settings,
                "authenticator": authenticator,
                **(state or {}),
            }
        ),
        lifespan=[open_database, *lifespans],
        dependencies={
            "principal": Provide(provide_principal),
            **(dependencies or {}),
        },
        exception_handlers=EXCEPTION_HANDLERS,
        request_class=BoundedRequest,
        openapi_config=OpenAPIConfig(
            title=title,
            version="0.1.0",
            description=description,
            openapi_router=docs_router(),
            render_plugins=[SwaggerUIPage(), MountedOpenAPIDocument()],
            components=Components(
                security_schemes={"bearer": SecurityScheme(type="http", scheme="bearer", bearer_format="JWT")}
            ),
            security=[{"bearer": []}],
        ),
        logging_config=None,
        debug=False,
    )
