"""Kappi learns every collection from its identity record, read live from the vector store.

A short cache (``ttl_seconds``, default 0.5 s; the questions arriving while a record is being read share that
one read) keeps the per-question cost of several collections low. It is safe for a
question because every search also filters on the chunks' own copy of ``groups`` (see
:mod:`kappi.access.policy`), so a stale entry can never widen what a user reads — and a group removed in
chonkit stops matching as soon as the chunks say so: at once in PostgreSQL, and in kappi's in-memory copy
of a pgvector collection as soon as the write's change notice arrives (milliseconds;
``common.vectors.resident``).

Whatever has no second check reads live instead (:meth:`IdentityReader.read_live`): the history of a chat
is decided by the identity alone, so a cached entry there could show a revoked answer until it expired.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Literal

import msgspec

import schemas
from common.errors import AppError
from common.vectors.registry import VectorRegistry
from schemas.models import Identity

log = logging.getLogger(__name__)

Problem = Literal["provider_unavailable", "identity_missing", "identity_invalid", "provider_mismatch"]


class IdentityStatus(msgspec.Struct, frozen=True, kw_only=True):
    identity: Identity | None
    problem: Problem | None = None
    detail: str | None = None


Key = tuple[str, str]
"""(vector provider, collection name)."""

MAX_ENTRIES = 4096
"""Collections a process remembers at once: far more than its agents use; bounds names made up in requests."""


class IdentityReader:
    """One cache of identity statuses, each kept ``ttl_seconds`` from when its read began (so it never outlives
    the TTL); questions arriving while a record is being read share that one read."""

    def __init__(self, vectors: VectorRegistry, *, ttl_seconds: float = 0.5) -> None:
        self.vectors = vectors
        self.ttl = ttl_seconds
        self._entries: dict[Key, tuple[float, IdentityStatus]] = {}
        self._reading: dict[Key, asyncio.Task[IdentityStatus]] = {}

    async def read(self, vector_provider: str, name: str) -> IdentityStatus:
        key = (vector_provider, name)
        entry = self._entries.get(key)
        if entry is not None and entry[0] > time.monotonic():
            return entry[1]
        return await self._shared_read(key)

    async def read_many(self, keys: Sequence[Key]) -> list[IdentityStatus]:
        """Several records at once: straight from memory when all are fresh (the common case: no task is made),
        else the stale ones read concurrently."""
        now = time.monotonic()
        entries = [self._entries.get(key) for key in keys]
        if all(entry is not None and entry[0] > now for entry in entries):
            return [entry[1] for entry in entries if entry is not None]
        return list(await asyncio.gather(*(self.read(provider, name) for provider, name in keys)))

    async def read_live(self, keys: Sequence[Key]) -> list[IdentityStatus]:
        """Several records read now, bypassing the cache: for decisions no chunk filter double-checks."""
        return list(await asyncio.gather(*(self._status(provider, name) for provider, name in keys)))

    def forget(self) -> None:
        self._entries.clear()

    def expire(self, keys: Sequence[Key]) -> None:
        """The next read of these records goes to the store (a question found one out of date)."""
        for key in keys:
            self._entries.pop(key, None)

    async def _shared_read(self, key: Key) -> IdentityStatus:
        task = self._reading.get(key)
        if task is None:
            task = asyncio.ensure_future(self._read(key))
            self._reading[key] = task
            task.add_done_callback(lambda _: self._reading.pop(key, None))
        # shield: a question that gives up (its client left) must not cancel the read others wait on
        return await asyncio.shield(task)

    async def _read(self, key: Key) -> IdentityStatus:
        expires = time.monotonic() + self.ttl
        status = await self._status(*key)
        if len(self._entries) >= MAX_ENTRIES:
            self._entries.clear()
        self._entries[key] = (expires, status)
        return status

    async def _status(self, vector_provider: str, name: str) -> IdentityStatus:
        try:
            raw = await self.vectors.get(vector_provider).read_identity(name)
        except AppError as exc:
            log.warning("identity of %s/%s not read: %s (%s)", vector_provider, name, exc.detail, exc.code)
            return IdentityStatus(identity=None, problem="provider_unavailable", detail=exc.detail)
        if raw is None:
            return IdentityStatus(identity=None, problem="identity_missing", detail="no identity record")
        violations = schemas.errors("identity", raw)
        if violations:
            detail = "; ".join(f"{v.path or '/'}: {v.message}" for v in violations)
            return IdentityStatus(identity=None, problem="identity_invalid", detail=detail)
        identity = msgspec.convert(raw, Identity)
        if identity.vectorProvider != vector_provider:
            return IdentityStatus(
                identity=None,
                problem="provider_mismatch",
                detail=f"identity names vectorProvider {identity.vectorProvider!r}",
            )
        return IdentityStatus(identity=identity)
