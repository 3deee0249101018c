"""The console's ASGI app: the page, its static assets, and development sign-in.

Everything the console shows comes from chonkit's and kappi's public APIs, called by the browser with the
user's own bearer token, so the console holds no privileges of its own. The one exception is
``POST /console/dev-token``: with the embedded development setup (no JWKS) there is no identity provider to
sign in with, so the console mints a token the way ``ragu token`` does. With a JWKS it refuses, because
tokens must then come from the identity provider.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Final

import msgspec
from litestar import Litestar, get, post
from litestar.datastructures import ResponseHeader, State
from litestar.params import JSONBody
from litestar.response import File
from litestar.static_files import create_static_files_router
from litestar.status_codes import HTTP_200_OK

from common.auth import DEV_TOKEN_TTL_SECONDS, mint_dev_token
from common.config import Settings
from common.errors import Forbidden
from common.http.problems import EXCEPTION_HANDLERS

STATIC_DIR: Final = Path(__file__).parent / "static"

# The page loads only its own scripts and styles and talks only to its own origin: an injected script
# could read the in-memory token, so none may run.
CONTENT_SECURITY_POLICY: Final = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)

GroupName = Annotated[str, msgspec.Meta(min_length=1, max_length=255)]


class DevTokenRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    subject: Annotated[str, msgspec.Meta(min_length=1, max_length=255)]
    name: str | None = None
    groups: Annotated[list[GroupName], msgspec.Meta(max_length=100)] = msgspec.field(default_factory=list)
    admin: bool = False


class DevToken(msgspec.Struct, frozen=True, kw_only=True):
    token: str
    subject: str
    groups: list[str]
    is_admin: bool
    expires_in: int


class ConsoleConfig(msgspec.Struct, frozen=True, kw_only=True):
    dev_sign_in: bool
    """False when a JWKS is configured: sign-in then belongs to the identity provider."""
    services: dict[str, str]
    """Where each service is mounted, e.g. ``{"chonkit": "/chonkit"}``."""


@get("/", media_type="text/html", include_in_schema=False)
async def index() -> File:
    return File(STATIC_DIR / "index.html", content_disposition_type="inline", media_type="text/html")


@get("/console/config", sync_to_thread=False)
def config(state: State) -> ConsoleConfig:
    """What the page needs before sign-in: whether development sign-in exists, and where the services live."""
    settings: Settings = state.settings
    return ConsoleConfig(dev_sign_in=not settings.uses_jwks, services=dict(state.services))


@post("/console/dev-token", status_code=HTTP_200_OK, sync_to_thread=False)
def dev_token(state: State, data: JSONBody[DevTokenRequest]) -> DevToken:
    """Development only: a token for whoever the form names. Refused with 403 ``jwks_configured`` when a JWKS
    is configured, so a production deployment never hands out tokens it did not verify."""
    settings: Settings = state.settings
    if settings.uses_jwks:
        raise Forbidden(
            "development sign-in is disabled because an identity provider (JWKS) is configured",
            code="jwks_configured",
        )
    groups = sorted(set(data.groups))
    token = mint_dev_token(
        settings,
        subject=data.subject,
        name=data.name,
        groups=groups,
        roles=[settings.auth_admin_role] if data.admin else [],
    )
    return DevToken(
        token=token, subject=data.subject, groups=groups, is_admin=data.admin, expires_in=DEV_TOKEN_TTL_SECONDS
    )


def create_app(settings: Settings, *, services: Mapping[str, str]) -> Litestar:
    """The console app. ``services`` maps each service name to the path it is mounted under."""
    return Litestar(
        route_handlers=[
            index,
            config,
            dev_token,
            create_static_files_router(path="/console/static", directories=[STATIC_DIR], include_in_schema=False),
        ],
        state=State({"settings": settings, "services": dict(services)}),
        exception_handlers=EXCEPTION_HANDLERS,
        response_headers=[
            ResponseHeader(name="Content-Security-Policy", value=CONTENT_SECURITY_POLICY),
            ResponseHeader(name="X-Content-Type-Options", value="nosniff"),
            ResponseHeader(name="Referrer-Policy", value="no-referrer"),
            ResponseHeader(name="Cache-Control", value="no-cache"),
        ],
        openapi_config=None,
        logging_config=None,
        debug=False,
    )
