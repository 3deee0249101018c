"""OpenID Connect sign-in for the console: the authorization-code flow with PKCE, the code exchanged by the server.

The flow, split between the page (``static/js/oidc.js``) and this module::

    browser: verifier, S256 challenge, state, nonce  ->  provider's authorization endpoint  ->  back with code
    browser: state matches?  ->  POST /console/oidc/token {code, code_verifier, redirect_uri, nonce}
    server:  discovery  ->  provider's token endpoint  ->  ID token verified (signature, issuer, audience, nonce)
             ->  the bearer token verified exactly as chonkit and kappi will  ->  the session, back to the browser

Why the server exchanges the code: the provider's token endpoint need not allow cross-origin calls, and the
page's Content-Security-Policy keeps ``connect-src 'self'``. The server stores nothing — it answers the tokens
to the browser, which keeps them in memory only — so any number of console processes serve one provider.
The client is public (PKCE, no secret), as a browser application must be.

Errors: a provider that cannot be reached or is misconfigured is :class:`~common.errors.Unavailable`
(``oidc_unavailable``, ``oidc_misconfigured``); a refused code or refresh token, a wrong nonce, or a token the
platform would not accept is :class:`~common.errors.Unauthorized` (``oidc_token_refused``, ``oidc_nonce_mismatch``,
``oidc_token_not_accepted`` …), each with a ``detail`` the page shows as it is.
"""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any, Final, TypeVar
from urllib.parse import urlsplit

import httpx
import msgspec

from common.auth import Authenticator
from common.config import Settings
from common.errors import InvalidInput, Unauthorized, Unavailable

DISCOVERY_TTL_SECONDS: Final = 300.0
HTTP_TIMEOUT_SECONDS: Final = 10.0
LOOPBACK_HOSTS: Final = frozenset({"localhost", "127.0.0.1", "::1"})

T = TypeVar("T")

# RFC 7636: 43 to 128 characters from the unreserved set.
Verifier = Annotated[str, msgspec.Meta(min_length=43, max_length=128, pattern=r"^[A-Za-z0-9._~-]+$")]
Opaque = Annotated[str, msgspec.Meta(min_length=1, max_length=8192)]


class ProviderMetadata(msgspec.Struct, frozen=True, kw_only=True):
    """The part of the provider's discovery document the console uses."""

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    end_session_endpoint: str | None = None
    code_challenge_methods_supported: list[str] | None = None


class ProviderEndpoints(msgspec.Struct, frozen=True, kw_only=True):
    """What the browser needs to send the user to the provider and back."""

    issuer: str
    authorization_endpoint: str
    end_session_endpoint: str | None


class CodeExchange(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    code: Opaque
    code_verifier: Verifier
    redirect_uri: Annotated[str, msgspec.Meta(min_length=1, max_length=2048)]
    nonce: Annotated[str, msgspec.Meta(min_length=16, max_length=256)]


class RefreshRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    refresh_token: Opaque


class OidcSession(msgspec.Struct, frozen=True, kw_only=True):
    """A signed-in user as the page keeps it, in memory."""

    token: str
    """The bearer for chonkit and kappi (the access token, or the ID token with ``oidc_use_id_token``)."""
    subject: str
    name: str | None
    groups: list[str]
    is_admin: bool
    expires_in: int
    """Seconds until ``token`` expires: the page refreshes it before then when it has a refresh token."""
    id_token: str | None
    """Sent back to the provider as ``id_token_hint`` on sign-out; ``None`` after a refresh that brought no new
    one (the page keeps the one it has)."""
    refresh_token: str | None


class _TokenResponse(msgspec.Struct, frozen=True, kw_only=True):
    access_token: str | None = None
    id_token: str | None = None
    refresh_token: str | None = None


class _TokenError(msgspec.Struct, frozen=True, kw_only=True):
    error: str = "unknown_error"
    error_description: str | None = None


def check_oidc_settings(settings: Settings) -> None:
    """Refuse OpenID Connect settings that cannot work, at start rather than at the first sign-in.

    Raises:
        InvalidInput: ``invalid_setting`` (issuer without client id or the reverse, no ``openid`` scope, an
            issuer that is neither https nor loopback) or ``oidc_needs_jwks`` (chonkit and kappi would refuse
            every token the provider issues).
    """
    if (settings.oidc.issuer is None) != (settings.oidc.client_id is None):
        raise InvalidInput("set both oidc_issuer and oidc_client_id, or neither", code="invalid_setting")
    if settings.oidc.issuer is None:
        return
    if not settings.auth.uses_jwks:
        raise InvalidInput(
            "oidc_issuer needs auth_jwks_url (the provider's JWKS) so chonkit and kappi accept its tokens",
            code="oidc_needs_jwks",
        )
    if "openid" not in settings.oidc.scopes.split():
        raise InvalidInput("oidc_scopes must include 'openid'", code="invalid_setting")
    _require_secure("oidc_issuer", settings.oidc.issuer, InvalidInput, "invalid_setting")


class OidcClient:
    """The server half of the console's sign-in; one per console app, holding only caches.

    Args:
        settings: An OpenID Connect configuration that passed :func:`check_oidc_settings`.
    """

    def __init__(self, settings: Settings) -> None:
        check_oidc_settings(settings)
        if settings.oidc.issuer is None or settings.oidc.client_id is None:
            raise InvalidInput("OpenID Connect is not configured", code="oidc_not_configured")
        self._settings = settings
        self._issuer = settings.oidc.issuer
        self._client_id = settings.oidc.client_id
        self._platform = Authenticator(settings)
        self._metadata: ProviderMetadata | None = None
        self._id_tokens: Authenticator | None = None
        self._fetched_at = -DISCOVERY_TTL_SECONDS
        self._lock = asyncio.Lock()

    async def endpoints(self) -> ProviderEndpoints:
        """The provider's browser-facing endpoints, from its discovery document."""
        metadata, _ = await self._discovered()
        return ProviderEndpoints(
            issuer=metadata.issuer,
            authorization_endpoint=metadata.authorization_endpoint,
            end_session_endpoint=metadata.end_session_endpoint,
        )

    async def exchange(self, request: CodeExchange) -> OidcSession:
        """Redeem an authorization code with its PKCE verifier, and check the ID token was made for this sign-in.

        Raises:
            Unauthorized: The provider refused the code (a wrong verifier among others), the ID token is not
                valid for this client and ``nonce``, or chonkit and kappi would not accept the bearer token.
            Unavailable: The provider cannot be reached or answers nonsense.
            InvalidInput: ``redirect_uri`` differs from ``oidc_redirect_uri``.
        """
        redirect_uri = self._settings.oidc.redirect_uri
        if redirect_uri is not None and request.redirect_uri != redirect_uri:
            raise InvalidInput("redirect_uri is not the configured oidc_redirect_uri", code="invalid_redirect_uri")
        metadata, id_tokens = await self._discovered()
        tokens = await self._token_request(
            metadata,
            {
                "grant_type": "authorization_code",
                "code": request.code,
                "redirect_uri": request.redirect_uri,
                "client_id": self._client_id,
                "code_verifier": request.code_verifier,
            },
            refused_code="oidc_token_refused",
        )
        if tokens.id_token is None:
            raise Unauthorized("the identity provider sent no ID token", code="oidc_token_missing")
        claims = await _verify(id_tokens, tokens.id_token, "ID token")
        if claims.get("nonce") != request.nonce:
            raise Unauthorized(
                "the ID token was issued for another sign-in (nonce mismatch)", code="oidc_nonce_mismatch"
            )
        audience = claims.get("aud")
        if isinstance(audience, list) and len(audience) > 1 and claims.get("azp") != self._client_id:
            raise Unauthorized("the ID token was issued to another client (azp)", code="oidc_token_not_accepted")
        return await self._session(tokens, tokens.id_token)

    async def refresh(self, request: RefreshRequest) -> OidcSession:
        """Trade a refresh token for fresh tokens, so a session outlives a short-lived access token.

        Raises:
            Unauthorized: ``oidc_refresh_refused`` (expired or revoked) or, as for :meth:`exchange`, a token
                chonkit and kappi would not accept.
            Unavailable: The provider cannot be reached or answers nonsense.
        """
        metadata, id_tokens = await self._discovered()
        tokens = await self._token_request(
            metadata,
            {"grant_type": "refresh_token", "refresh_token": request.refresh_token, "client_id": self._client_id},
            refused_code="oidc_refresh_refused",
        )
        if tokens.id_token is not None:
            await _verify(id_tokens, tokens.id_token, "ID token")
        return await self._session(tokens, tokens.id_token, refresh_token=request.refresh_token)

    async def _session(
        self, tokens: _TokenResponse, id_token: str | None, *, refresh_token: str | None = None
    ) -> OidcSession:
        """The session for the chosen bearer token, verified exactly as chonkit and kappi will verify it."""
        use_access_token = not self._settings.oidc.use_id_token
        bearer = tokens.access_token if use_access_token else id_token
        label = "access token" if use_access_token else "ID token"
        if not bearer:
            raise Unauthorized(f"the identity provider sent no {label}", code="oidc_token_missing")
        claims = await _verify(self._platform, bearer, label)
        try:
            principal = await self._platform.authenticate(f"Bearer {bearer}")
        except Unauthorized as exc:
            raise _not_accepted(label, exc) from None
        return OidcSession(
            token=bearer,
            subject=principal.subject,
            name=principal.name,
            groups=sorted(principal.groups),
            is_admin=principal.is_admin,
            expires_in=max(0, int(claims["exp"] - time.time())),
            id_token=id_token,
            refresh_token=tokens.refresh_token or refresh_token,
        )

    async def _discovered(self) -> tuple[ProviderMetadata, Authenticator]:
        async with self._lock:
            if self._metadata is None or self._id_tokens is None or self._stale():
                metadata = await self._discover()
                if self._id_tokens is None or self._metadata is None or metadata.jwks_uri != self._metadata.jwks_uri:
                    self._id_tokens = Authenticator(
                        self._settings.with_(
                            auth_jwks_url=metadata.jwks_uri,
                            auth_jwks_file=None,
                            auth_issuer=metadata.issuer,
                            auth_audience=self._client_id,
                        )
                    )
                self._metadata, self._fetched_at = metadata, time.monotonic()
            return self._metadata, self._id_tokens

    def _stale(self) -> bool:
        return time.monotonic() - self._fetched_at >= DISCOVERY_TTL_SECONDS

    async def _discover(self) -> ProviderMetadata:
        url = self._issuer.rstrip("/") + "/.well-known/openid-configuration"
        try:
            async with httpx.AsyncClient(timeout=HTTP_TIMEOUT_SECONDS) as client:
                response = await client.get(url, headers={"Accept": "application/json"})
            response.raise_for_status()
            metadata = msgspec.json.decode(response.content, type=ProviderMetadata)
        except (httpx.HTTPError, msgspec.DecodeError) as exc:
            raise Unavailable(
                f"the identity provider's discovery document ({url}) could not be read: {exc}", code="oidc_unavailable"
            ) from exc
        if metadata.issuer != self._issuer:
            raise Unavailable(
                f"the identity provider calls itself {metadata.issuer!r}, not {self._issuer!r} (oidc_issuer)",
                code="oidc_misconfigured",
            )
        methods = metadata.code_challenge_methods_supported
        if methods is not None and "S256" not in methods:
            raise Unavailable("the identity provider does not support PKCE with S256", code="oidc_misconfigured")
        for name in ("authorization_endpoint", "token_endpoint", "jwks_uri", "end_session_endpoint"):
            value = getattr(metadata, name)
            if value is not None:
                _require_secure(name, value, Unavailable, "oidc_misconfigured")
        return metadata

    async def _token_request(
        self, metadata: ProviderMetadata, form: dict[str, str], *, refused_code: str
    ) -> _TokenResponse:
        try:
            async with httpx.AsyncClient(timeout=HTTP_TIMEOUT_SECONDS) as client:
                response = await client.post(metadata.token_endpoint, data=form, headers={"Accept": "application/json"})
        except httpx.HTTPError as exc:
            raise Unavailable(f"the identity provider could not be reached: {exc}", code="oidc_unavailable") from exc
        if 400 <= response.status_code < 500:
            refusal = _decode_or_none(response.content, _TokenError) or _TokenError()
            reason = refusal.error_description or refusal.error
            raise Unauthorized(
                f"the identity provider refused the sign-in: {reason}",
                code=refused_code,
                extra={"error": refusal.error},
            )
        tokens = _decode_or_none(response.content, _TokenResponse) if response.status_code == 200 else None
        if tokens is None:
            raise Unavailable(
                f"the identity provider's token endpoint answered {response.status_code} without tokens",
                code="oidc_unavailable",
            )
        return tokens


async def _verify(authenticator: Authenticator, token: str, label: str) -> dict[str, Any]:
    """Verified claims, or a refusal that says which token failed and why, in words the page can show."""
    try:
        return await authenticator.claims(f"Bearer {token}")
    except Unauthorized as exc:
        raise _not_accepted(label, exc) from None


def _not_accepted(label: str, exc: Unauthorized) -> Unauthorized:
    return Unauthorized(
        f"signed in at the identity provider, but its {label} is not accepted: {exc.detail}",
        code="oidc_token_not_accepted",
        extra={"reason": exc.code},
    )


def _decode_or_none(content: bytes, kind: type[T]) -> T | None:
    try:
        return msgspec.json.decode(content, type=kind)
    except msgspec.DecodeError:
        return None


def _require_secure(name: str, url: str, error: type[InvalidInput] | type[Unavailable], code: str) -> None:
    """Tokens and codes travel through these addresses: https only, except on this machine."""
    parts = urlsplit(url)
    if parts.scheme == "https" or (parts.scheme == "http" and parts.hostname in LOOPBACK_HOSTS):
        return
    raise error(f"{name} must be an https address (or http on localhost), got {url!r}", code=code)
