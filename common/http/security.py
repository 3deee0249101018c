"""Litestar wiring for :mod:`common.auth`: router hooks and guards enforce, the ``principal`` dependency reads.

Routers that need a user carry the :func:`authenticate_request` hook or the :func:`admin_only` guard, so
a handler cannot forget authentication by leaving out a parameter; either caches the principal on the
request and :func:`provide_principal` hands it to handlers that want it.
"""

from __future__ import annotations

from typing import Any

from litestar import Request
from litestar.connection import ASGIConnection
from litestar.handlers import BaseRouteHandler

from common.auth import Authenticator, Principal
from common.telemetry import span

_PRINCIPAL_KEY = "ragu_principal"


async def _principal_of(connection: ASGIConnection[Any, Any, Any, Any]) -> Principal:
    cached = connection.scope.get(_PRINCIPAL_KEY)
    if isinstance(cached, Principal):
        return cached
    authenticator: Authenticator = connection.app.state.authenticator
    with span("ragu.auth"):
        principal = await authenticator.authenticate(connection.headers.get("authorization"))
    connection.scope[_PRINCIPAL_KEY] = principal  # type: ignore[literal-required]
    return principal


async def authenticate_request(request: Request[Any, Any, Any]) -> None:
    """Router ``before_request`` hook: any valid token (401 otherwise).

    A hook, not a guard: Litestar copies the route handler for every guard call, 3 % of a kappi question's
    CPU at c=16 (``bench/kappi_bench.py``). It runs before the request's parameters are read, as a guard
    does; a hook set closer to a route would replace it, so tests check which hook every route resolves to.
    """
    await _principal_of(request)


async def admin_only(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    """Guard: a valid token carrying the admin role (401 without a valid token, 403 without the role)."""
    principal = await _principal_of(connection)
    authenticator: Authenticator = connection.app.state.authenticator
    authenticator.require_admin(principal)


async def provide_principal(request: Request[Any, Any, Any]) -> Principal:
    """Dependency: the caller, authenticated once per request."""
    return await _principal_of(request)
