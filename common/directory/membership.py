"""The membership rule: when a directory is configured, a user's groups are the directory's current membership.

The token still proves who the caller is (signature, expiry, issuer, audience, admin role); the directory then says
which groups they are in, read from PostgreSQL on every request by one indexed query, so a membership change is in
force for the next request after the SCIM call that made it returns. Nothing is cached: a cache would delay a
removal past that moment. docs/directory.md states the rule in full.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import re
from typing import Final

import msgspec

from common.config import Settings
from common.db import Database, PoolDatabase
from common.errors import Forbidden, InvalidInput, Unavailable

MIN_SCIM_TOKEN_LENGTH: Final = 32
_JWT_LIKE: Final = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")

_BY_USER_NAME: Final = """
SELECT u.active, coalesce(array_agg(g.display_name) FILTER (WHERE g.id IS NOT NULL), '{}') AS groups
FROM directory.users u
LEFT JOIN directory.members m ON m.user_id = u.id
LEFT JOIN directory.groups g ON g.id = m.group_id
WHERE lower(u.user_name) = lower($1)
GROUP BY u.id
LIMIT 2
"""
_BY_EXTERNAL_ID: Final = _BY_USER_NAME.replace("lower(u.user_name) = lower($1)", "u.external_id = $1")


class Membership(msgspec.Struct, frozen=True):
    """What the directory says of one user."""

    active: bool
    groups: frozenset[str]


def check_scim_token(token: str) -> None:
    """Refuse a SCIM credential that is short or could be mistaken for a user's JWT.

    Raises:
        InvalidInput: ``invalid_scim_token``.
    """
    if len(token) < MIN_SCIM_TOKEN_LENGTH or _JWT_LIKE.fullmatch(token):
        raise InvalidInput(
            f"RAGU_SCIM_TOKEN must be at least {MIN_SCIM_TOKEN_LENGTH} characters and not shaped like a JWT "
            "(three dot-separated parts); generate one with: "
            "python -c 'import secrets; print(secrets.token_urlsafe(32))'",
            code="invalid_scim_token",
        )


def is_scim_token(scim_token: str | None, bearer: str) -> bool:
    """Whether ``bearer`` is the SCIM credential, compared in constant time (digests, so lengths leak nothing)."""
    if scim_token is None:
        return False
    expected = hashlib.sha256(scim_token.encode()).digest()
    return hmac.compare_digest(expected, hashlib.sha256(bearer.encode()).digest())


class Directory:
    """The membership rule over the directory tables; one per :class:`~common.auth.Authenticator`.

    Each service binds its database when it starts (:meth:`bind`). A process that binds none (the console's own
    authenticator) opens a small pool of its own on ``database_url`` at its first lookup; with neither, every lookup
    fails closed with 503 ``directory_unavailable`` rather than fall back to the token's groups.
    """

    def __init__(self, settings: Settings) -> None:
        if settings.directory.scim_token is None:
            raise InvalidInput("a directory needs RAGU_SCIM_TOKEN", code="invalid_scim_token")
        check_scim_token(settings.directory.scim_token.reveal())
        self.claim = settings.directory.user_claim
        self._query = _BY_USER_NAME if settings.directory.user_attribute == "userName" else _BY_EXTERNAL_ID
        self._attribute = settings.directory.user_attribute
        self._databases: list[Database] = []
        self._database_url = settings.database.url
        self._own: Database | None = None
        self._opening = asyncio.Lock()

    def bind(self, database: Database) -> None:
        """Read membership through ``database`` (the first bound, while it is)."""
        self._databases.append(database)

    def unbind(self, database: Database) -> None:
        if database in self._databases:
            self._databases.remove(database)

    async def _database(self) -> Database:
        if self._databases:
            return self._databases[0]
        if self._database_url is None:
            raise Unavailable("the directory cannot be read: no database", code="directory_unavailable")
        async with self._opening:
            if self._own is None:
                self._own = await PoolDatabase.connect(self._database_url, min_size=0, max_size=2)
        return self._own

    async def membership(self, user: str) -> Membership:
        """The directory's current word on ``user`` (the token's claim value).

        Raises:
            Forbidden: ``user_not_in_directory`` (never provisioned, or deleted), ``user_deactivated``
                (``active`` false), ``directory_user_ambiguous`` (two users share the ``externalId``).
            Unavailable: ``directory_unavailable`` when no database is bound.
        """
        async with (await self._database()).transaction() as conn:
            rows = await conn.fetch(self._query, user)
        if not rows:
            raise Forbidden(
                f"the directory has no user whose {self._attribute} is the token's {self.claim}",
                code="user_not_in_directory",
            )
        if len(rows) > 1:
            raise Forbidden(f"two directory users share this {self._attribute}", code="directory_user_ambiguous")
        if not rows[0]["active"]:
            raise Forbidden("this user is deactivated in the directory", code="user_deactivated")
        return Membership(active=True, groups=frozenset(rows[0]["groups"]))
