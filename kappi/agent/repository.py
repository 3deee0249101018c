"""SQL for ``kappi.agents``, ``kappi.agent_versions`` and ``kappi.agent_collections``."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import msgspec

from common.db.database import Connection
from kappi.agent.models import Agent, AgentVersion, Assignment

_VERSION_COLUMNS = (
    "version, llm_provider, llm_model, system_prompt, context_template, temperature, max_tokens, reranker, "
    "rerank_model, created_by, created_at"
)


class AgentRow(msgspec.Struct, frozen=True, kw_only=True):
    id: UUID
    name: str
    description: str
    groups: list[str]
    active: bool
    current_version: int
    created_at: Any
    updated_at: Any


class AgentRepository:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    async def insert(self, agent_id: UUID, name: str, description: str, groups: list[str]) -> None:
        await self.conn.execute(
            """INSERT INTO kappi.agents (id, name, description, groups, current_version)
               VALUES ($1, $2, $3, $4, 1)""",
            agent_id,
            name,
            description,
            groups,
        )

    async def add_version(self, agent_id: UUID, version: int, config: dict[str, Any], created_by: str) -> None:
        await self.conn.execute(
            """INSERT INTO kappi.agent_versions
                   (agent_id, version, llm_provider, llm_model, system_prompt, context_template, temperature,
                    max_tokens, reranker, rerank_model, created_by)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)""",
            agent_id,
            version,
            config["llm_provider"],
            config["llm_model"],
            config["system_prompt"],
            config["context_template"],
            config["temperature"],
            config["max_tokens"],
            config["reranker"],
            config["rerank_model"],
            created_by,
        )
        await self.conn.execute(
            "UPDATE kappi.agents SET current_version = $2, updated_at = now() WHERE id = $1", agent_id, version
        )

    async def row(self, agent_id: UUID) -> AgentRow | None:
        record = await self.conn.fetchrow(
            """SELECT id, name, description, groups, active, current_version, created_at, updated_at
               FROM kappi.agents WHERE id = $1""",
            agent_id,
        )
        return None if record is None else msgspec.convert(dict(record), AgentRow)

    async def rows(self, *, active_only: bool = False) -> list[AgentRow]:
        records = await self.conn.fetch(
            """SELECT id, name, description, groups, active, current_version, created_at, updated_at
               FROM kappi.agents WHERE active OR NOT $1 ORDER BY name, id""",
            active_only,
        )
        return [msgspec.convert(dict(r), AgentRow) for r in records]

    async def version(self, agent_id: UUID, version: int) -> AgentVersion | None:
        record = await self.conn.fetchrow(
            f"SELECT {_VERSION_COLUMNS} FROM kappi.agent_versions WHERE agent_id = $1 AND version = $2",
            agent_id,
            version,
        )
        return None if record is None else msgspec.convert(dict(record), AgentVersion)

    async def versions(self, agent_id: UUID) -> list[AgentVersion]:
        records = await self.conn.fetch(
            f"SELECT {_VERSION_COLUMNS} FROM kappi.agent_versions WHERE agent_id = $1 ORDER BY version DESC",
            agent_id,
        )
        return [msgspec.convert(dict(r), AgentVersion) for r in records]

    async def assignments(self, agent_id: UUID) -> list[Assignment]:
        records = await self.conn.fetch(
            """SELECT vector_provider, collection_name AS name, collection_id, top_k, max_distance, instruction,
                      created_at, mode, dense_weight, tags, labels
               FROM kappi.agent_collections WHERE agent_id = $1 ORDER BY collection_name, vector_provider""",
            agent_id,
        )
        return [msgspec.convert(dict(r), Assignment) for r in records]

    async def assign(self, agent_id: UUID, assignment: Assignment) -> bool:
        """Add or update (every field but ``created_at``); True when it was new."""
        inserted = await self.conn.fetchval(
            """INSERT INTO kappi.agent_collections
                   (agent_id, vector_provider, collection_name, collection_id, top_k, max_distance, instruction,
                    mode, dense_weight, tags, labels)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
               ON CONFLICT (agent_id, vector_provider, collection_name) DO UPDATE
               SET collection_id = $4, top_k = $5, max_distance = $6, instruction = $7, mode = $8,
                   dense_weight = $9, tags = $10, labels = $11
               RETURNING (xmax = 0)""",
            agent_id,
            assignment.vector_provider,
            assignment.name,
            assignment.collection_id,
            assignment.top_k,
            assignment.max_distance,
            assignment.instruction,
            assignment.mode,
            assignment.dense_weight,
            assignment.tags,
            assignment.labels,
        )
        return bool(inserted)

    async def unassign(self, agent_id: UUID, vector_provider: str, name: str) -> bool:
        status = await self.conn.execute(
            "DELETE FROM kappi.agent_collections WHERE agent_id = $1 AND vector_provider = $2 AND collection_name = $3",
            agent_id,
            vector_provider,
            name,
        )
        return status.endswith(" 1")

    async def update(self, agent_id: UUID, changes: dict[str, Any]) -> None:
        """Set agent-level columns; names come from our own struct, never from the request."""
        if not changes:
            return
        sets = ", ".join(f"{column} = ${i}" for i, column in enumerate(changes, start=2))
        await self.conn.execute(
            f"UPDATE kappi.agents SET {sets}, updated_at = now() WHERE id = $1", agent_id, *changes.values()
        )

    async def delete(self, agent_id: UUID) -> bool:
        status = await self.conn.execute("DELETE FROM kappi.agents WHERE id = $1", agent_id)
        return status.endswith(" 1")

    async def assemble(self, row: AgentRow) -> Agent:
        config = await self.version(row.id, row.current_version)
        if config is None:
            raise LookupError(f"agent {row.id} has no version {row.current_version}")
        return Agent(
            id=row.id,
            name=row.name,
            description=row.description,
            groups=row.groups,
            active=row.active,
            current_version=row.current_version,
            config=config,
            collections=await self.assignments(row.id),
            created_at=row.created_at,
            updated_at=row.updated_at,
        )
