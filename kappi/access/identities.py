"""Kappi learns every collection from its identity record, read live from the vector store.

A short cache (``ttl_seconds``, default 0.5 s) keeps the per-question cost of several collections
low; it is safe because every search also filters on the chunks' own copy of ``groups`` (see
:mod:`kappi.access.policy`), so a stale entry can never widen what a user reads — and a group
removed in chonkit stops matching on the very next question.
"""

from __future__ import annotations

import time
from typing import Literal

import msgspec

import schemas
from common.errors import AppError
from common.vectors.registry import VectorRegistry
from schemas.models import Identity

Problem = Literal["provider_unavailable", "identity_missing", "identity_invalid", "provider_mismatch"]


class IdentityStatus(msgspec.Struct, frozen=True, kw_only=True):
    identity: Identity | None
    problem: Problem | None = None
    detail: str | None = None


class IdentityReader:
    def __init__(self, vectors: VectorRegistry, *, ttl_seconds: float = 0.5) -> None:
        self.vectors = vectors
        self.ttl = ttl_seconds
        self._cache: dict[tuple[str, str], tuple[float, IdentityStatus]] = {}

    async def read(self, vector_provider: str, name: str) -> IdentityStatus:
        key = (vector_provider, name)
        now = time.monotonic()
        cached = self._cache.get(key)
        if cached is not None and now - cached[0] < self.ttl:
            return cached[1]
        status = await self._read(vector_provider, name)
        self._cache[key] = (now, status)
        return status

    async def _read(self, vector_provider: str, name: str) -> IdentityStatus:
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
        self._cache.clear()
