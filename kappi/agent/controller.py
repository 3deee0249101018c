"""``/admin/agents``: build agents, assign collections, and explain who can search what. Admin only."""

from __future__ import annotations

from uuid import UUID

import msgspec
from litestar import Controller, delete, get, patch, post, put
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody
from litestar.status_codes import HTTP_200_OK, HTTP_201_CREATED

from common.auth import Principal
from common.errors import AppError, InvalidInput, NotFound, Unavailable
from kappi.agent.models import (
    AccessExplanation,
    AccessQuery,
    Agent,
    AgentCreate,
    AgentUpdate,
    AgentVersion,
    AssignmentChanges,
    AssignmentReport,
)
from kappi.agent.service import AgentService

FAILURES: dict[str, type[AppError]] = {
    "collection_not_found": NotFound,
    "not_assigned": NotFound,
    "provider_unavailable": Unavailable,
}
"""The error of an assignment that failed, by its code; an identity missing, invalid or of another provider is
``InvalidInput``."""


class AgentAdminController(Controller):
    path = "/admin/agents"
    tags = ["agents (admin)"]

    @post("/", status_code=HTTP_201_CREATED, summary="Create an agent")
    async def create(
        self, agents: NamedDependency[AgentService], principal: NamedDependency[Principal], data: JSONBody[AgentCreate]
    ) -> Agent:
        """An LLM (unsent: this server's default — the embedded model when one runs, else ``extractive``, which
        works offline with no key), instructions, an optional reranker (``cohere`` when configured) and optional
        groups (who may use it: any one group suffices; none = everyone). Assign collections with
        ``PUT .../collections``."""
        return await agents.create(data, principal)

    @get("/", summary="List agents")
    async def list_agents(self, agents: NamedDependency[AgentService]) -> list[Agent]:
        return await agents.all()

    @get("/{agent_id:uuid}", summary="Get an agent")
    async def get_agent(self, agents: NamedDependency[AgentService], agent_id: FromPath[UUID]) -> Agent:
        return await agents.get(agent_id)

    @patch("/{agent_id:uuid}", summary="Edit an agent")
    async def update(
        self,
        agents: NamedDependency[AgentService],
        principal: NamedDependency[Principal],
        agent_id: FromPath[UUID],
        data: JSONBody[AgentUpdate],
    ) -> Agent:
        """Only the fields sent change. Changing the LLM, prompts, temperature or max tokens creates a new
        version; old answers keep pointing at the version that produced them."""
        return await agents.update(agent_id, data, principal)

    @delete("/{agent_id:uuid}", summary="Delete an agent (and its chats)")
    async def delete_agent(self, agents: NamedDependency[AgentService], agent_id: FromPath[UUID]) -> None:
        await agents.delete(agent_id)

    @post("/{agent_id:uuid}/activate", status_code=HTTP_200_OK, summary="Activate")
    async def activate(self, agents: NamedDependency[AgentService], agent_id: FromPath[UUID]) -> Agent:
        return await agents.set_active(agent_id, True)

    @post("/{agent_id:uuid}/deactivate", status_code=HTTP_200_OK, summary="Deactivate")
    async def deactivate(self, agents: NamedDependency[AgentService], agent_id: FromPath[UUID]) -> Agent:
        """Hidden from users at once; existing chats cannot ask it anything until it is activated again."""
        return await agents.set_active(agent_id, False)

    @get("/{agent_id:uuid}/versions", summary="Configuration history")
    async def versions(self, agents: NamedDependency[AgentService], agent_id: FromPath[UUID]) -> list[AgentVersion]:
        return await agents.versions(agent_id)

    @put("/{agent_id:uuid}/collections", summary="Assign or unassign collections")
    async def assign(
        self, agents: NamedDependency[AgentService], agent_id: FromPath[UUID], data: JSONBody[AssignmentChanges]
    ) -> AssignmentReport:
        """Collections are named by ``vector_provider`` + ``name`` and learned from their identity record;
        a missing or invalid identity fails that item only (per-item results). Each says how it is searched:
        ``mode`` (``hybrid`` for a new assignment), ``dense_weight`` and ``tags``/``labels`` filters; an update
        that leaves those out keeps the assignment's own. When every change fails, the answer is the first
        failure's status and code (``404 collection_not_found``, ``404 not_assigned``...), with every result and
        the collections attached, as for an upload whose every file is rejected; partial success is 200."""
        report = await agents.assign(agent_id, data)
        if report.results and not any(r.ok for r in report.results):
            first = report.results[0]
            error = FAILURES.get(first.code or "", InvalidInput)
            raise error(first.detail or "nothing was assigned", code=first.code, extra=msgspec.to_builtins(report))
        return report

    @post("/{agent_id:uuid}/access", status_code=HTTP_200_OK, summary="Explain access")
    async def explain(
        self, agents: NamedDependency[AgentService], agent_id: FromPath[UUID], data: JSONBody[AccessQuery]
    ) -> AccessExplanation:
        """For a set of ``groups`` (or a user's ``token``): whether the agent is visible, which collections
        are searchable, and why each other one is not."""
        return await agents.explain(agent_id, data)
