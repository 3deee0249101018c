"""One port for the whole platform: each service's ASGI app under its own path prefix.

``ragu serve`` (all in one) mounts chonkit at ``/chonkit`` and kappi at ``/kappi``, answers ``/api`` with a
JSON index of the services, and hands every other path to a fallback app (the console, at ``/``); deployed
on their own (compose), each service is served at ``/`` with no host in front. The host also drives every
child's lifespan, which mounted Litestar apps would otherwise never receive.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from typing import Any

import msgspec
from litestar import Litestar

# Plain ASGI types: the host sees every scope type, including lifespan, which Litestar's types exclude.
Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

_encoder = msgspec.json.Encoder()


INDEX_PATH = "/api"


class ServiceHost:
    def __init__(self, mounts: Mapping[str, Litestar], *, fallback: Litestar | None = None) -> None:
        self.mounts = {"/" + prefix.strip("/"): app for prefix, app in mounts.items()}
        self.fallback = fallback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        path: str = scope["path"]
        for prefix, app in self.mounts.items():
            if path == prefix or path.startswith(prefix + "/"):
                child = {**scope, "root_path": scope.get("root_path", "") + prefix}
                await app(child, receive, send)  # type: ignore[arg-type]
                return
        if scope["type"] == "http" and (path == INDEX_PATH or self.fallback is None):
            await self._index(send)
        elif self.fallback is not None:
            await self.fallback(scope, receive, send)  # type: ignore[arg-type]

    async def _index(self, send: Send) -> None:
        body = _encoder.encode(
            {"services": {p.lstrip("/"): {"health": f"{p}/health", "docs": f"{p}/docs"} for p in self.mounts}}
        )
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        async with AsyncExitStack() as stack:
            await receive()  # lifespan.startup
            try:
                for app in [*self.mounts.values(), *([self.fallback] if self.fallback else [])]:
                    await stack.enter_async_context(app.lifespan())
            except Exception as exc:  # noqa: BLE001 -- the ASGI lifespan protocol reports any start-up failure
                await send({"type": "lifespan.startup.failed", "message": f"{type(exc).__name__}: {exc}"})
                return
            await send({"type": "lifespan.startup.complete"})
            await receive()  # lifespan.shutdown
        await send({"type": "lifespan.shutdown.complete"})
