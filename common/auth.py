"""Bearer-token authentication: an ``Authorization`` header becomes a :class:`Principal`, or a 401.

Key sources — exactly one is active, chosen from :class:`~common.config.Settings`:

* ``auth_jwks_url`` or ``auth_jwks_file`` (production): RS256 and ES256 tokens, the key picked by the header's
  ``kid`` (required). The key set is cached ``auth_jwks_cache_seconds``; a token naming an unknown ``kid`` triggers
  one early re-read (at most every 10 s), so a key the identity provider publishes is accepted without a restart and
  a withdrawn key stops being accepted once the cache expires. If the key set cannot be read after it expired,
  requests fail with 503 ``jwks_unavailable`` rather than trusting keys that may have been withdrawn.
* ``auth_hs256_secret`` (development): HS256 only.
* neither (development): HS256 with a random secret kept at ``<data_dir>/auth/dev-secret``, see :func:`dev_secret`.

Why forged tokens fail: the accepted algorithms follow from the key source, never from the token. The unverified
header is read first and its ``alg`` must be in that allow-list (so ``none`` and HS256-signed-with-a-public-key are
refused before any key is touched); a JWKS key is only usable with the algorithm its ``kty`` (and ``alg``, if given)
implies; the allow-list is passed to python-jose again on every verify; keys are built from JWK members, never from
PEM or DER bytes, and an asymmetric key is never handed to an HMAC verifier. Time and audience claims are checked
here rather than by ``jose.jwt.decode`` so each failure has its own code and one injectable clock governs both
token validity and the key cache.

Claims to principal — the matching rule:

* ``sub`` must be a non-empty string.
* Groups (``auth_groups_claim``) and roles (``auth_roles_claim``) are compared exactly: case-sensitive, no
  whitespace trimming. When present the claim MUST be a JSON array of strings; a string (even one group name), a
  number or a non-string item is refused with 401 ``malformed_claims``, never coerced. An absent (or ``null``)
  claim means none: a user without groups reads only public collections.
* Claim names may be dotted paths into nested objects (``realm_access.roles`` for Keycloak). A top-level claim
  whose name literally contains dots (Auth0's ``https://example.com/groups``) wins over the nested reading; a path
  running into a non-object is ``malformed_claims``.
* The display name is ``auth_name_claim``, else ``preferred_username``, else ``None``; it is cosmetic, so a
  non-string value is skipped rather than refused.
* ``is_admin`` is true when the roles contain ``auth_admin_role``.

The directory — when ``scim_token`` is set (docs/directory.md): the token still proves who the caller is, but their
groups are the directory's current membership, never the token's groups claim. The user is the SCIM user whose
``directory_user_attribute`` matches the token's ``directory_user_claim`` (a non-empty string, else
``malformed_claims``); one unknown to the directory, deleted or deactivated is refused 403 (``user_not_in_directory``,
``user_deactivated``). It is read on every :meth:`Authenticator.authenticate`, which every channel goes through, and
cached nowhere. The SCIM credential is refused as a user token (401 ``scim_credential_not_user_token``).

Errors — every rejection is :class:`~common.errors.Unauthorized` with one of these codes, and no message echoes the
token: ``missing_token``, ``malformed_token``, ``unsupported_algorithm``, ``unknown_key``, ``invalid_signature``,
``token_expired``, ``token_not_yet_valid`` (``nbf`` or ``iat`` in the future), ``invalid_issuer``,
``invalid_audience``, ``malformed_claims`` (also a missing ``sub`` or ``exp``), ``scim_credential_not_user_token``. A
key set that cannot be read is
:class:`~common.errors.Unavailable` ``jwks_unavailable``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import re
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, Final

import httpx
import msgspec
from jose import jwk, jws
from jose.backends.base import Key
from jose.exceptions import JOSEError
from jose.utils import base64_to_long

from common.config import Settings, reveal
from common.db import Database
from common.directory.membership import Directory, is_scim_token
from common.errors import Forbidden, InvalidInput, NotFound, Unauthorized, Unavailable

logger = logging.getLogger(__name__)

JWKS_ALGORITHMS: Final = frozenset({"RS256", "ES256"})
SECRET_ALGORITHMS: Final = frozenset({"HS256"})
JWKS_MIN_REFETCH_SECONDS: Final = 10.0
JWKS_FETCH_TIMEOUT_SECONDS: Final = 5.0
MIN_RSA_BITS: Final = 2048
MAX_TOKEN_LENGTH: Final = 16_384
DEV_TOKEN_TTL_SECONDS: Final = 8 * 3600

# Three base64url segments; the signature may be empty so that ``alg: none`` reaches the algorithm check.
_JWT_SHAPE: Final = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")

FetchJwks = Callable[[str], Awaitable[dict[str, Any]]]
Clock = Callable[[], float]
_KeysByKid = dict[str, dict[str, Key]]


class Principal(msgspec.Struct, frozen=True, kw_only=True):
    """Who made a request, reduced to what access control needs."""

    subject: str
    name: str | None
    groups: frozenset[str]
    roles: frozenset[str]
    is_admin: bool


VERIFIED_TOKENS = 4096
"""Verified tokens remembered at once (see ``Authenticator._verified``)."""


class Authenticator:
    """Verifies bearer tokens against the configured key source; one instance per process.

    Args:
        settings: Chooses the key source, issuer, audience, leeway and claim names.
        fetch_jwks: Fetches the JWKS document at ``auth_jwks_url``; defaults to :func:`fetch_jwks_over_http`.
            It reports failure by raising :class:`~common.errors.Unavailable`, ``httpx.HTTPError``, ``OSError``
            or ``ValueError``.
        clock: Seconds since the epoch; injectable so tests move time instead of sleeping.

    Raises:
        InvalidInput: ``conflicting_auth_settings`` when more than one key source is configured.
    """

    def __init__(self, settings: Settings, *, fetch_jwks: FetchJwks | None = None, clock: Clock = time.time) -> None:
        if settings.auth.jwks_url and settings.auth.jwks_file:
            raise InvalidInput("set auth_jwks_url or auth_jwks_file, not both", code="conflicting_auth_settings")
        if settings.auth.uses_jwks and settings.auth.hs256_secret:
            raise InvalidInput(
                "auth_hs256_secret is for development and must not be set with a JWKS",
                code="conflicting_auth_settings",
            )
        self._settings = settings
        self._clock = clock
        self._key_source: _JwksCache | Key
        if settings.auth.jwks_url:
            load = _url_loader(settings.auth.jwks_url, fetch_jwks or fetch_jwks_over_http)
            self._key_source = _JwksCache(load, settings.auth.jwks_cache_seconds, clock)
        elif settings.auth.jwks_file:
            load = _file_loader(Path(settings.auth.jwks_file))
            self._key_source = _JwksCache(load, settings.auth.jwks_cache_seconds, clock)
        else:
            self._key_source = jwk.construct(dev_secret(settings), "HS256")
            signer = "RAGU_AUTH_HS256_SECRET" if settings.auth.hs256_secret else str(_dev_secret_path(settings))
            logger.warning(
                "development authentication: HS256 tokens signed with %s; configure a JWKS for production", signer
            )
        self._directory = Directory(settings) if settings.directory.configured else None
        self._algorithms = JWKS_ALGORITHMS if settings.auth.uses_jwks else SECRET_ALGORITHMS
        self._verified: dict[str, tuple[float, dict[str, Any]]] = {}
        """Tokens whose signature checked out, by token, with when: a client sends the same one again and
        again, and verifying it is most of what authentication costs. Held no longer than the key set is."""

    async def authenticate(self, authorization: str | None) -> Principal:
        """Verify the raw ``Authorization`` header value and return who sent it.

        Raises:
            Unauthorized: The token is missing, malformed, forged, expired or carries unusable claims.
            Unavailable: ``jwks_unavailable`` when the key set cannot be read.
        """
        claims = await self.claims(authorization)
        principal = self._principal(claims)
        if self._directory is None:
            return principal
        user = _claim(claims, self._directory.claim)
        if not isinstance(user, str) or not user:
            raise Unauthorized(f"the token has no {self._directory.claim} to find its user by", code="malformed_claims")
        membership = await self._directory.membership(user)
        return msgspec.structs.replace(principal, groups=membership.groups)

    def bind_database(self, database: Database) -> None:
        """Read the directory (when one is configured) through ``database``; each service binds its own."""
        if self._directory is not None:
            self._directory.bind(database)

    def unbind_database(self, database: Database) -> None:
        if self._directory is not None:
            self._directory.unbind(database)

    async def claims(self, authorization: str | None) -> dict[str, Any]:
        """The verified claims of the bearer token (signature, time, issuer and audience checked), for callers
        that need more than the principal, such as the console checking an ID token's ``nonce``.

        Raises:
            Unauthorized: As :meth:`authenticate`, except for the claims-to-principal rules.
            Unavailable: ``jwks_unavailable`` when the key set cannot be read.
        """
        if authorization is not None and is_scim_token(
            reveal(self._settings.directory.scim_token), authorization.strip().partition(" ")[2].strip()
        ):
            raise Unauthorized(
                "the SCIM credential is for the directory endpoint only, not a user's token",
                code="scim_credential_not_user_token",
            )
        token = _bearer_token(authorization)
        now = self._clock()
        verified = self._verified.get(token)
        if verified is not None and now - verified[0] < self._settings.auth.jwks_cache_seconds:
            claims = verified[1]
            self._check_validity(claims)  # expiry moves with the clock, whatever was checked before
            return claims
        header = _unverified_header(token)
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in self._algorithms:
            raise Unauthorized("the token's signing algorithm is not accepted", code="unsupported_algorithm")
        key = await self._key_for(header, alg)
        claims = _verified_claims(token, key, alg)
        self._check_validity(claims)
        if len(self._verified) >= VERIFIED_TOKENS:
            self._verified.pop(next(iter(self._verified)))  # the oldest
        self._verified[token] = (now, claims)
        return claims

    @staticmethod
    def require_admin(principal: Principal) -> None:
        """Refuse non-admins with 403 ``admin_required``."""
        if not principal.is_admin:
            raise Forbidden("this action requires the admin role", code="admin_required")

    async def _key_for(self, header: dict[str, Any], alg: str) -> Key:
        if not isinstance(self._key_source, _JwksCache):
            return self._key_source
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid:
            raise Unauthorized("the token does not name its signing key (kid)", code="unknown_key")
        return await self._key_source.key(kid, alg)

    def _check_validity(self, claims: dict[str, Any]) -> None:
        settings = self._settings
        now, leeway = self._clock(), settings.auth.leeway_seconds
        expires = _numeric_date(claims, "exp")
        if expires is None:
            raise Unauthorized("the token has no expiry (exp)", code="malformed_claims")
        if now >= expires + leeway:
            raise Unauthorized("the token has expired", code="token_expired")
        for name in ("nbf", "iat"):
            moment = _numeric_date(claims, name)
            if moment is not None and now + leeway < moment:
                raise Unauthorized("the token is not valid yet", code="token_not_yet_valid")
        if settings.auth.issuer is not None and claims.get("iss") != settings.auth.issuer:
            raise Unauthorized("the token was issued by someone else", code="invalid_issuer")
        if settings.auth.audience is not None:
            audience = claims.get("aud")
            audiences = [audience] if isinstance(audience, str) else audience if isinstance(audience, list) else []
            if settings.auth.audience not in audiences:
                raise Unauthorized("the token is meant for another audience", code="invalid_audience")

    def _principal(self, claims: dict[str, Any]) -> Principal:
        settings = self._settings
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject:
            raise Unauthorized("the token has no subject (sub)", code="malformed_claims")
        roles = _string_set(claims, settings.auth.roles_claim)
        return Principal(
            subject=subject,
            name=_display_name(claims, settings.auth.name_claim),
            groups=_string_set(claims, settings.auth.groups_claim),
            roles=roles,
            is_admin=settings.auth.admin_role in roles,
        )


def _bearer_token(authorization: str | None) -> str:
    if authorization is None or not authorization.strip():
        raise Unauthorized("an Authorization: Bearer token is required", code="missing_token")
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or len(token) > MAX_TOKEN_LENGTH or not _JWT_SHAPE.fullmatch(token):
        raise Unauthorized("the Authorization header is not 'Bearer <JWT>'", code="malformed_token")
    return token


def _unverified_header(token: str) -> dict[str, Any]:
    try:
        header = jws.get_unverified_header(token)
    except (JOSEError, RecursionError):  # a header nested past the JSON decoder's depth is as undecodable
        raise Unauthorized("the token cannot be decoded", code="malformed_token") from None
    if "crit" in header:
        raise Unauthorized("the token uses critical header extensions", code="malformed_token")
    return header


def _verified_claims(token: str, key: Key, alg: str) -> dict[str, Any]:
    try:
        payload = jws.verify(token, key, algorithms=[alg])
    except JOSEError:
        raise Unauthorized("the token signature is invalid", code="invalid_signature") from None
    try:
        claims = msgspec.json.decode(payload)
    except msgspec.DecodeError:
        raise Unauthorized("the token claims cannot be decoded", code="malformed_token") from None
    if not isinstance(claims, dict):
        raise Unauthorized("the token claims are not a JSON object", code="malformed_token")
    return claims


def _numeric_date(claims: dict[str, Any], name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise Unauthorized(f"the token's {name} claim is not a number", code="malformed_claims")
    return float(value)


def _claim(claims: dict[str, Any], path: str) -> Any:
    """The claim at ``path`` (literal name first, then a dotted path); ``None`` when absent."""
    if path in claims:
        return claims[path]
    value: Any = claims
    for part in path.split("."):
        if value is None:
            return None
        if not isinstance(value, dict):
            raise Unauthorized(f"the token's {path} claim does not resolve to a value", code="malformed_claims")
        value = value.get(part)
    return value


def _string_set(claims: dict[str, Any], path: str) -> frozenset[str]:
    value = _claim(claims, path)
    if value is None:
        return frozenset()
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise Unauthorized(f"the token's {path} claim must be a list of strings", code="malformed_claims")
    return frozenset(value)


def _display_name(claims: dict[str, Any], path: str) -> str | None:
    for candidate in (path, "preferred_username"):
        value = _claim(claims, candidate)
        if isinstance(value, str) and value:
            return value
    return None


class _Jwk(msgspec.Struct, frozen=True):
    """The JWK members we read; anything else (``x5c``, private members) is ignored."""

    kty: str
    kid: str | None = None
    use: str | None = None
    key_ops: list[str] | None = None
    alg: str | None = None
    n: str | None = None
    e: str | None = None
    crv: str | None = None
    x: str | None = None
    y: str | None = None


class _JwksDocument(msgspec.Struct, frozen=True):
    keys: list[Any]


def _parse_jwks(document: object) -> _KeysByKid:
    """Verification keys by ``kid`` and algorithm. Keys we would not accept are left out, so a key set may mix in
    encryption keys or other algorithms; a signing key we cannot read is logged and skipped, not fatal for the rest.

    Raises:
        Unavailable: ``jwks_unavailable`` when the document is not a JWKS at all.
    """
    try:
        entries = msgspec.convert(document, _JwksDocument).keys
    except msgspec.ValidationError:
        raise Unavailable("the JWKS document has no 'keys' list", code="jwks_unavailable") from None
    keys: _KeysByKid = {}
    for entry in entries:
        try:
            usable = _verification_key(msgspec.convert(entry, _Jwk))
        except (msgspec.ValidationError, JOSEError, ValueError) as exc:
            kid = entry.get("kid") if isinstance(entry, dict) else None
            logger.warning("ignoring an unreadable JWKS key (kid %r): %s", kid, exc)
            continue
        if usable is not None:
            kid, alg, key = usable
            keys.setdefault(kid, {})[alg] = key
    return keys


def _verification_key(entry: _Jwk) -> tuple[str, str, Key] | None:
    if entry.kid is None or entry.use not in (None, "sig"):
        return None
    if entry.key_ops is not None and "verify" not in entry.key_ops:
        return None
    # Only the public members go to jose: a key set that leaks private parts still yields a public key.
    if entry.kty == "RSA" and entry.alg in (None, "RS256"):
        if entry.n is None or entry.e is None:
            raise ValueError("RSA key without n or e")
        if base64_to_long(entry.n).bit_length() < MIN_RSA_BITS:
            raise ValueError(f"RSA key shorter than {MIN_RSA_BITS} bits")
        return entry.kid, "RS256", jwk.construct({"kty": "RSA", "n": entry.n, "e": entry.e}, "RS256")
    if entry.kty == "EC" and entry.crv == "P-256" and entry.alg in (None, "ES256"):
        if entry.x is None or entry.y is None:
            raise ValueError("EC key without x or y")
        public = {"kty": "EC", "crv": "P-256", "x": entry.x, "y": entry.y}
        return entry.kid, "ES256", jwk.construct(public, "ES256")
    return None


class _JwksCache:
    """The current key set, refreshed on expiry and, rate-limited, when a token names a ``kid`` it lacks."""

    def __init__(self, load: Callable[[], Awaitable[object]], ttl_seconds: float, clock: Clock) -> None:
        self._load = load
        self._ttl = ttl_seconds
        self._clock = clock
        self._keys: _KeysByKid | None = None
        self._loaded_at = -math.inf
        self._attempted_at = -math.inf
        self._generation = 0
        self._lock = asyncio.Lock()

    async def key(self, kid: str, alg: str) -> Key:
        keys = await self._fresh_keys()
        if kid not in keys and self._clock() - self._attempted_at >= JWKS_MIN_REFETCH_SECONDS:
            keys = await self._refresh()
        by_alg = keys.get(kid)
        if by_alg is None:
            raise Unauthorized("the token is signed with an unknown key", code="unknown_key")
        key = by_alg.get(alg)
        if key is None:
            raise Unauthorized("the token's algorithm does not match its key", code="unsupported_algorithm")
        return key

    def _expired(self) -> bool:
        return self._clock() - self._loaded_at >= self._ttl

    async def _fresh_keys(self) -> _KeysByKid:
        if self._keys is not None and not self._expired():
            return self._keys
        failed_recently = self._keys is None and self._clock() - self._attempted_at < JWKS_MIN_REFETCH_SECONDS
        if failed_recently and not self._lock.locked():
            raise Unavailable("the JWKS could not be read recently; retry shortly", code="jwks_unavailable")
        return await self._refresh()

    async def _refresh(self) -> _KeysByKid:
        # Requests that queued behind one reload share its outcome instead of each hitting the identity provider.
        generation = self._generation
        async with self._lock:
            if generation == self._generation:
                await self._reload()
            if self._keys is None:
                raise Unavailable("the JWKS could not be read", code="jwks_unavailable")
            return self._keys

    async def _reload(self) -> None:
        self._attempted_at = self._clock()
        try:
            keys = _parse_jwks(await self._load())
        except Unavailable:
            if self._expired():
                self._keys = None
            raise
        else:
            self._keys, self._loaded_at = keys, self._attempted_at
        finally:
            self._generation += 1  # only once the outcome is known, for those queued behind this reload


def _url_loader(url: str, fetch: FetchJwks) -> Callable[[], Awaitable[object]]:
    async def load() -> object:
        try:
            return await fetch(url)
        except (httpx.HTTPError, OSError, ValueError) as exc:
            logger.warning("fetching the JWKS from %s failed: %s", url, exc)
            raise Unavailable("the identity provider's JWKS could not be fetched", code="jwks_unavailable") from exc

    return load


def _file_loader(path: Path) -> Callable[[], Awaitable[object]]:
    async def load() -> object:
        try:
            return msgspec.json.decode(await asyncio.to_thread(path.read_bytes))
        except (OSError, msgspec.DecodeError) as exc:
            logger.warning("reading the JWKS file %s failed: %s", path, exc)
            raise Unavailable("the JWKS file could not be read", code="jwks_unavailable") from exc

    return load


async def fetch_jwks_over_http(url: str) -> dict[str, Any]:
    """Fetch a JWKS with one GET and a short timeout, so a slow identity provider cannot stall requests for long."""
    async with httpx.AsyncClient(timeout=JWKS_FETCH_TIMEOUT_SECONDS) as client:
        response = await client.get(url, headers={"Accept": "application/json"})
        response.raise_for_status()
        document = response.json()
    if not isinstance(document, dict):
        raise ValueError("the JWKS is not a JSON object")
    return document


def dev_secret(settings: Settings, *, create: bool = True) -> str:
    """The HS256 secret for development: ``auth_hs256_secret``, else one generated once under ``data_dir``.

    The generated secret survives restarts so that tokens minted by ``ragu`` keep working, and both services
    started on one ``data_dir`` share it. ``create=False`` is for ``ragu token``: a secret it created would sign
    tokens that the server, started on another data directory, rejects.

    Raises:
        InvalidInput: ``jwks_configured`` when a JWKS is configured (tokens then come from the identity provider).
        NotFound: ``no_dev_secret`` when there is no secret yet and ``create`` is false.
    """
    if settings.auth.uses_jwks:
        raise InvalidInput("a JWKS is configured; tokens come from the identity provider", code="jwks_configured")
    if settings.auth.hs256_secret:
        return settings.auth.hs256_secret.reveal()
    path = _dev_secret_path(settings)
    if not path.exists():
        if not create:
            raise NotFound(
                f"no development secret at {path}: ragu serve creates it in its data directory at its first start; "
                "run this where ragu serve runs, or set RAGU_DATA_DIR to its data directory",
                code="no_dev_secret",
            )
        _create_secret(path)
    secret = path.read_text(encoding="utf-8").strip()
    if not secret:
        raise InvalidInput(f"{path} is empty; delete it to have a new secret generated", code="invalid_dev_secret")
    return secret


def _dev_secret_path(settings: Settings) -> Path:
    return (settings.server.data_path / "auth" / "dev-secret").absolute()


def _create_secret(path: Path) -> None:
    path.parent.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        path.parent.mkdir(mode=0o700)
    # Written under a private name, then linked into place: a process starting alongside never reads half a file.
    draft = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as draft_file:
            draft_file.write(secrets.token_urlsafe(32))
        with contextlib.suppress(FileExistsError):  # another process won the race: its secret is everybody's
            os.link(draft, path)
            logger.info("created a development signing secret at %s", path)
    finally:
        draft.unlink()


def mint_dev_token(
    settings: Settings,
    *,
    subject: str,
    groups: Iterable[str] = (),
    roles: Iterable[str] = (),
    name: str | None = None,
    ttl_seconds: int = DEV_TOKEN_TTL_SECONDS,
) -> str:
    """Sign a development token that :class:`Authenticator` built from the same settings accepts.

    Claims go under the configured claim names (nested for dotted paths), with ``iss``/``aud`` when configured.

    Raises:
        InvalidInput: ``jwks_configured`` with a JWKS (minting is refused: the identity provider issues tokens);
            ``invalid_token_request`` for an empty subject, a non-positive TTL or a bare string as groups/roles.
    """
    secret = dev_secret(settings)
    if not subject:
        raise InvalidInput("a token needs a subject", code="invalid_token_request")
    if ttl_seconds <= 0:
        raise InvalidInput("ttl_seconds must be positive", code="invalid_token_request")
    if isinstance(groups, str) or isinstance(roles, str):
        raise InvalidInput("groups and roles are collections of names, not one string", code="invalid_token_request")
    now = int(time.time())
    claims: dict[str, Any] = {"sub": subject, "iat": now, "nbf": now, "exp": now + ttl_seconds}
    if settings.auth.issuer is not None:
        claims["iss"] = settings.auth.issuer
    if settings.auth.audience is not None:
        claims["aud"] = settings.auth.audience
    if name is not None:
        _set_claim(claims, settings.auth.name_claim, name)
    _set_claim(claims, settings.auth.groups_claim, sorted(set(groups)))
    _set_claim(claims, settings.auth.roles_claim, sorted(set(roles)))
    return jws.sign(claims, secret, headers={"typ": "JWT"}, algorithm="HS256")


def _set_claim(claims: dict[str, Any], path: str, value: object) -> None:
    *parents, leaf = path.split(".")
    target = claims
    for part in parents:
        target = target.setdefault(part, {})
    target[leaf] = value
