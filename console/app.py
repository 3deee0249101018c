"""The console's ASGI app: the page, its static assets, and sign-in.

Everything the console shows comes from chonkit's and kappi's public APIs, called by the browser with the
user's own bearer token, so the console holds no privileges of its own. Sign-in takes one of two forms:

* ``POST /console/dev-token`` (development): with the embedded setup (no JWKS) there is no identity provider,
  so the console mints a token the way ``ragu token`` does. With a JWKS it refuses: tokens must then come from
  the identity provider.
* OpenID Connect (``oidc_issuer`` and ``oidc_client_id``): the authorization-code flow with PKCE, the code
  exchanged by ``POST /console/oidc/token`` (see :mod:`console.oidc`); ``/console/oidc/refresh`` renews tokens.

``GET /console/config`` tells the page which forms exist. Tokens live in the page's memory only; responses
carrying one are ``Cache-Control: no-store``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Final, Literal

import msgspec
from litestar import Litestar, get, post
from litestar.datastructures import ResponseHeader, State
from litestar.params import JSONBody
from litestar.response import File
from litestar.static_files import create_static_files_router
from litestar.status_codes import HTTP_200_OK

from common.auth import DEV_TOKEN_TTL_SECONDS, mint_dev_token
from common.config import Settings
from common.errors import Forbidden, NotFound
from common.groups import GroupName
from common.http.app import BoundedRequest
from common.http.problems import EXCEPTION_HANDLERS
from console.oidc import CodeExchange, OidcClient, OidcSession, ProviderEndpoints, RefreshRequest, check_oidc_settings

STATIC_DIR: Final = Path(__file__).parent / "static"

# The page loads only its own scripts and styles and talks only to its own origin: an injected script
# could read the in-memory token, so none may run.
CONTENT_SECURITY_POLICY: Final = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)

SignInMode = Literal["development", "oidc"]
NO_STORE: Final = [ResponseHeader(name="Cache-Control", value="no-store")]


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


class OidcConfig(msgspec.Struct, frozen=True, kw_only=True):
    issuer: str
    client_id: str
    scopes: str
    redirect_uri: str | None
    """``None``: the page uses its own address."""


class ConsoleConfig(msgspec.Struct, frozen=True, kw_only=True):
    sign_in: list[SignInMode]
    """``development`` without a JWKS; ``oidc`` when an OpenID Connect provider is configured; none when a
    JWKS is configured without one (tokens then come from elsewhere, for API use)."""
    oidc: OidcConfig | None
    services: dict[str, str]
    """Where each service is mounted, e.g. ``{"chonkit": "/chonkit"}``."""


@get("/", media_type="text/html", include_in_schema=False)
async def index() -> File:
    return File(STATIC_DIR / "index.html", content_disposition_type="inline", media_type="text/html")


@get("/console/config", sync_to_thread=False)
def config(state: State) -> ConsoleConfig:
    """What the page needs before sign-in: which ways to sign in exist, and where the services live."""
    settings: Settings = state.settings
    modes: list[SignInMode] = [] if settings.auth.uses_jwks else ["development"]
    oidc = None
    if settings.oidc.issuer is not None and settings.oidc.client_id is not None:
        modes.append("oidc")
        oidc = OidcConfig(
            issuer=settings.oidc.issuer,
            client_id=settings.oidc.client_id,
            scopes=settings.oidc.scopes,
            redirect_uri=settings.oidc.redirect_uri,
        )
    return ConsoleConfig(sign_in=modes, oidc=oidc, services=dict(state.services))


@post("/console/dev-token", status_code=HTTP_200_OK, sync_to_thread=False, response_headers=NO_STORE)
def dev_token(state: State, data: JSONBody[DevTokenRequest]) -> DevToken:
    """Development only: a token for whoever the form names. Refused with 403 ``oidc_configured`` or
    ``jwks_configured`` when an identity provider is configured, so a production deployment never hands out
    tokens it did not verify."""
    settings: Settings = state.settings
    if settings.oidc.issuer is not None:
        raise Forbidden(
            "development sign-in is disabled: sign in through the identity provider", code="oidc_configured"
        )
    if settings.auth.uses_jwks:
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
        roles=[settings.auth.admin_role] if data.admin else [],
    )
    return DevToken(
        token=token, subject=data.subject, groups=groups, is_admin=data.admin, expires_in=DEV_TOKEN_TTL_SECONDS
    )


def _oidc(state: State) -> OidcClient:
    client: OidcClient | None = state.oidc
    if client is None:
        raise NotFound("sign-in through an identity provider is not configured", code="oidc_not_configured")
    return client


@get("/console/oidc/provider")
async def oidc_provider(state: State) -> ProviderEndpoints:
    """Where the page sends the user to sign in and out, from the provider's discovery document (read here,
    so the page talks only to its own origin)."""
    return await _oidc(state).endpoints()


@post("/console/oidc/token", status_code=HTTP_200_OK, response_headers=NO_STORE)
async def oidc_token(state: State, data: JSONBody[CodeExchange]) -> OidcSession:
    """Redeem the authorization code with the page's PKCE verifier; the ID token must carry the page's
    ``nonce``, and the bearer token must be one chonkit and kappi accept. Nothing is stored here."""
    return await _oidc(state).exchange(data)


@post("/console/oidc/refresh", status_code=HTTP_200_OK, response_headers=NO_STORE)
async def oidc_refresh(state: State, data: JSONBody[RefreshRequest]) -> OidcSession:
    """Fresh tokens for a refresh token, before the bearer token expires."""
    return await _oidc(state).refresh(data)


def create_app(settings: Settings, *, services: Mapping[str, str]) -> Litestar:
    """The console app. ``services`` maps each service name to the path it is mounted under.

    Raises:
        InvalidInput: The OpenID Connect settings cannot work (see :func:`console.oidc.check_oidc_settings`).
    """
    check_oidc_settings(settings)
    oidc = OidcClient(settings) if settings.oidc.issuer is not None else None
    return Litestar(
        route_handlers=[
            index,
            config,
            dev_token,
            oidc_provider,
            oidc_token,
            oidc_refresh,
            create_static_files_router(path="/console/static", directories=[STATIC_DIR], include_in_schema=False),
        ],
        state=State({"settings": settings, "services": dict(services), "oidc": oidc}),
        exception_handlers=EXCEPTION_HANDLERS,
        request_class=BoundedRequest,
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
