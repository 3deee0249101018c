"""Litestar wiring for :mod:`common.auth`: guards enforce, the ``principal`` dependency reads.

Routers that need a user carry the :func:`authenticated` or the :func:`admin_only` guard, so a handler cannot
forget authentication by leaving out a parameter (and guards add up: a guard set closer to a route cannot
replace the router's); either caches the principal on the request and :func:`provide_principal` hands it to
handlers that want it.
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


async def authenticated(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    """Guard: any valid token (401 otherwise). Its cost against a ``before_request`` hook:
    ``bench/auth_wiring_bench.py``."""
    await _principal_of(connection)


async def admin_only(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    """Guard: a valid token carrying the admin role (401 without a valid token, 403 without the role)."""
    principal = await _principal_of(connection)
    authenticator: Authenticator = connection.app.state.authenticator
    authenticator.require_admin(principal)


async def provide_principal(request: Request[Any, Any, Any]) -> Principal:
    """Dependency: the caller, authenticated once per request."""
    return await _principal_of(request)
