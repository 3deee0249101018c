"""Endpoints every service exposes without authentication: liveness, readiness and the published schemas."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Controller, Response, get
from litestar.datastructures import State
from litestar.params import FromPath

import schemas
from common.db import Database
from common.errors import NotFound, Unavailable


class Health(msgspec.Struct, frozen=True):
    status: str
    service: str


class SystemController(Controller):
    """Health checks for orchestrators (compose, Kubernetes) and the shared JSON Schemas for other applications."""

    tags = ["system"]

    @get("/health", summary="Liveness")
    async def health(self, state: State) -> Health:
        """The process is up and serving requests. Never touches the database."""
        return Health(status="ok", service=state.service_name)

    @get("/ready", summary="Readiness")
    async def ready(self, state: State) -> Health:
        """The service can do its work: the database answers."""
        db: Database = state.db
        try:
            await db.ping()
        except (OSError, TimeoutError) as exc:
            raise Unavailable("the database is unavailable", code="database_unavailable") from exc
        return Health(status="ready", service=state.service_name)

    @get("/schemas", summary="List the published JSON Schemas")
    async def list_schemas(self) -> list[str]:
        """Names accepted by ``GET /schemas/{name}``."""
        return list(schemas.SCHEMA_NAMES)

    @get("/schemas/{name:str}", summary="A published JSON Schema", media_type="application/schema+json")
    async def get_schema(self, name: FromPath[str]) -> Response[Any]:
        """The contract file byte for byte (JSON Schema 2020-12), e.g. ``identity`` or ``text-payload``."""
        if name.removesuffix(".schema.json") not in schemas.SCHEMA_NAMES:
            raise NotFound(
                f"no schema named {name!r}; known: {', '.join(schemas.SCHEMA_NAMES)}", code="schema_not_found"
            )
        return Response(schemas.schema_bytes(name.removesuffix(".schema.json")), media_type="application/schema+json")
