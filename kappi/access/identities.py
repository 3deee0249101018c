"""Kappi learns every collection from its identity record, read live from the vector store.

A short cache (``ttl_seconds``, default 0.5 s; async-lru, so the questions arriving while a record is
being read share that one read) keeps the per-question cost of several collections low. It is safe for a
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
import time
from collections.abc import Sequence
from typing import Literal

import msgspec
from async_lru import alru_cache

import schemas
from common.errors import AppError
from common.vectors.registry import VectorRegistry
from schemas.models import Identity

Problem = Literal["provider_unavailable", "identity_missing", "identity_invalid", "provider_mismatch"]


class IdentityStatus(msgspec.Struct, frozen=True, kw_only=True):
    identity: Identity | None
    problem: Problem | None = None
    detail: str | None = None


MAX_ENTRIES = 4096
"""Collections a process remembers at once: far more than its agents use; bounds names made up in requests."""


class IdentityReader:
    def __init__(self, vectors: VectorRegistry, *, ttl_seconds: float = 0.5) -> None:
        self.vectors = vectors
        self.ttl = ttl_seconds
        self._cached = alru_cache(maxsize=MAX_ENTRIES, ttl=ttl_seconds)(self._read)
        self._fresh: dict[tuple[str, str], tuple[float, IdentityStatus]] = {}
        """What :meth:`read_many` answers without a task per record: each status until the TTL it was read with."""

    async def read(self, vector_provider: str, name: str) -> IdentityStatus:
        return await self._cached(vector_provider, name)

    async def read_many(self, keys: Sequence[tuple[str, str]]) -> list[IdentityStatus]:
        """Several records at once: straight from memory when all are fresh (the common case, and no task per
        record then), else all read concurrently."""
        now = time.monotonic()
        fresh = [self._fresh.get(key) for key in keys]
        if all(entry is not None and entry[0] > now for entry in fresh):
            return [entry[1] for entry in fresh if entry is not None]
        return list(await asyncio.gather(*(self.read(provider, name) for provider, name in keys)))

    async def read_live(self, keys: Sequence[tuple[str, str]]) -> list[IdentityStatus]:
        """Several records read now, bypassing the cache: for decisions no chunk filter double-checks."""
        return list(await asyncio.gather(*(self._status(provider, name) for provider, name in keys)))

    async def _read(self, vector_provider: str, name: str) -> IdentityStatus:
        expires = time.monotonic() + self.ttl
        status = await self._status(vector_provider, name)
        if len(self._fresh) >= MAX_ENTRIES:
            self._fresh.clear()
        self._fresh[(vector_provider, name)] = (expires, status)
        return status

    async def _status(self, vector_provider: str, name: str) -> IdentityStatus:
        try:
            raw = await self.vectors.get(vector_provider).read_identity(name)
        except AppError as exc:
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

    def forget(self) -> None:
        self._cached.cache_clear()
        self._fresh.clear()
