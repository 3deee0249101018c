"""Agents as the stateless query API reads them: from memory for ``ttl_seconds`` (default 0.5 s; async-lru, so
the questions arriving while an agent is being loaded share that one load).

With it a question needs no database round trip before retrieval. It cannot widen what anyone reads:
which collections a user may search is decided per question by the retriever, from live identities and
the vector store's own filter, never from here. What an admin changes about an agent (its groups,
activation, configuration, collections) reaches this process at once — the admin API forgets the cache
after every write — and every other kappi process within the TTL.
"""

from __future__ import annotations

from uuid import UUID

from async_lru import alru_cache

from common.db import Database
from kappi.agent.models import Agent
from kappi.agent.repository import AgentRepository

MAX_ENTRIES = 4096
"""Ids users ask for are remembered even when no such agent exists; this bounds what made-up ids cost."""


class AgentCache:
    def __init__(self, db: Database, *, ttl_seconds: float = 0.5) -> None:
        self.db = db
        self.ttl = ttl_seconds
        self._cached = alru_cache(maxsize=MAX_ENTRIES, ttl=ttl_seconds)(self._load)

    async def get(self, agent_id: UUID) -> Agent | None:
        """The agent with its current configuration and collections, or ``None`` if there is no such agent."""
        return await self._cached(agent_id)

    def forget(self) -> None:
        self._cached.cache_clear()

    async def _load(self, agent_id: UUID) -> Agent | None:
        async with self.db.transaction() as conn:
            repository = AgentRepository(conn)
            row = await repository.row(agent_id)
            return None if row is None else await repository.assemble(row)
