"""Where the SCIM endpoint sits in kappi, kept apart from the endpoint itself (:mod:`common.directory.scim`):
the SCIM libraries take most of a second to import, and a server without ``RAGU_SCIM_TOKEN`` never needs them.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, Final

from litestar import asgi

SCIM_PATH: Final = "/scim/v2"
"""Where kappi mounts the endpoint: ``/kappi/scim/v2`` under ``ragu serve``."""
CODE_HEADER: Final = "Ragu-Error-Code"
"""The header carrying a SCIM error's stable code (``scim_credential_required``, ``scim_uniqueness``...)."""
ERROR_SCHEMA: Final = "urn:ietf:params:scim:api:messages:2.0:Error"

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


@asgi(SCIM_PATH, is_mount=True, copy_scope=True, include_in_schema=False)
async def scim_mount(scope: Scope, receive: Receive, send: Send) -> None:
    """The SCIM endpoint in a Litestar service (``state.scim``); 404 ``scim_not_configured`` without
    ``RAGU_SCIM_TOKEN``."""
    state = scope["app"].state
    endpoint = state.get("scim")
    if endpoint is None:
        detail = "no directory is configured here (RAGU_SCIM_TOKEN is unset)"
        body = json.dumps({"schemas": [ERROR_SCHEMA], "status": "404", "detail": detail}).encode()
        headers = [(b"content-type", b"application/scim+json"), (CODE_HEADER.lower().encode(), b"scim_not_configured")]
        await send({"type": "http.response.start", "status": 404, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return
    await endpoint.handle(scope, receive, send, state.db)
