"""The HTTP side of :mod:`common.telemetry`: ``/metrics`` for Prometheus and the request histogram behind it,
and Litestar's OpenTelemetry plugin (a server span per request) while tracing is on.

Our own middleware, not Litestar's ``PrometheusMiddleware``: that one builds a ``Request`` and updates four
series per request, ~20 µs against /health's 13 µs; one histogram observation keyed by the route template
costs ~2 µs (its ``_count`` is the request rate). Routes are templates (``/chats/{chat_id}``), never raw paths:
no label holds an id or a collection name. Both services of ``ragu serve`` share one process and so one
registry; each series says which service it belongs to.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from time import perf_counter
from typing import Any

from litestar import Response, get
from litestar.datastructures import State
from litestar.enums import ScopeType
from litestar.handlers import HTTPRouteHandler
from litestar.middleware import DefineMiddleware
from litestar.plugins import InitPlugin
from litestar.types import ASGIApp, Message, Receive, Scope, Send
from opentelemetry import trace
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Histogram, generate_latest

from common import telemetry
from common.db import Database
from common.errors import AppError

logger = logging.getLogger(__name__)

BeforeScrape = Callable[[Database], Awaitable[None]]
"""What a service refreshes from its database before each scrape (chonkit: the embedding queue)."""
SCRAPE_DB_SECONDS = 2.0
MEDIA_TYPE = CONTENT_TYPE_LATEST.removesuffix("; charset=utf-8")
"""Prometheus' text format; Litestar adds the charset to every ``text/`` type itself."""

HTTP_SECONDS = Histogram(
    "ragu_http_request_duration_seconds",
    "Time from a request to its response's last byte (streams included), by service, method, route and status.",
    ["service", "method", "route", "status"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)


class RequestMetrics:
    """Litestar middleware (so the route is known): one observation per request that reached a route."""

    def __init__(self, app: ASGIApp, service: str) -> None:
        self.app = app
        self.service = service
        self._series: dict[tuple[str, str, int], Histogram] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return
        started = perf_counter()
        status = 500  # what the client gets when the app fails before it starts a response

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            key = (scope["method"], scope["path_template"], status)
            series = self._series.get(key)
            if series is None:
                series = self._series[key] = HTTP_SECONDS.labels(self.service, key[0], key[1], str(status))
            series.observe(perf_counter() - started)


def metrics_handler(before_scrape: BeforeScrape | None) -> HTTPRouteHandler:
    """``GET /metrics``: unauthenticated, like ``/health`` (Prometheus scrapes carry no token); nothing in it
    names a collection, a user or an id."""

    @get("/metrics", summary="Prometheus metrics", tags=["system"], media_type=MEDIA_TYPE, security=[])
    async def metrics(state: State) -> Response[bytes]:
        """Request rates and latencies by route, the embedding queue and its outcomes, retrieval and LLM
        timings, LLM tokens: Prometheus' text format."""
        if before_scrape is not None:
            try:
                async with asyncio.timeout(SCRAPE_DB_SECONDS):
                    await before_scrape(state.db)
            except (AppError, OSError, TimeoutError) as exc:  # the rest of the page is still worth serving
                logger.warning("metrics: could not read the database: %r", exc)
        return Response(generate_latest(REGISTRY), media_type=MEDIA_TYPE)

    return metrics


class RouteSpanName:
    """Litestar middleware: names the request's server span by its route template once routing has found it
    (the plugin's middleware wraps the whole app, before routing, and would name it by the raw path)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        server_span = trace.get_current_span()
        if server_span.is_recording():
            route = scope["path_template"]
            server_span.update_name(f"{scope.get('method', scope['type'])} {route}")
            server_span.set_attribute("http.route", route)
        await self.app(scope, receive, send)


def tracing(service_name: str) -> tuple[list[InitPlugin], list[DefineMiddleware]]:
    """Litestar's OpenTelemetry plugin and our span naming, while tracing is on; nothing otherwise. The
    per-message ``http send``/``receive`` spans are left out: one per token of a streamed answer."""
    provider = telemetry.tracer_provider()
    if provider is None:
        return [], []
    from litestar.plugins.opentelemetry import OpenTelemetryConfig, OpenTelemetryPlugin

    def method_only(scope: Scope) -> tuple[str, dict[str, Any]]:
        return str(scope.get("method", scope["type"])), {"ragu.service": service_name}

    config = OpenTelemetryConfig(
        tracer_provider=provider, exclude_spans=["receive", "send"], scope_span_details_extractor=method_only
    )
    return [OpenTelemetryPlugin(config)], [DefineMiddleware(RouteSpanName)]
