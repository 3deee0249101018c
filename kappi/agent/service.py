"""Agents for admins: configuration with versions, collection assignments learned from identity
records, and an explanation of who can search what."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any
from uuid import UUID

import msgspec

from common.auth import Authenticator, Principal
from common.db import Database
from common.errors import InvalidInput, NotFound
from common.groups import check_groups
from kappi.access.identities import IdentityReader
from kappi.access.policy import agent_visible
from kappi.agent.models import (
    VERSIONED_FIELDS,
    AccessExplanation,
    AccessQuery,
    Agent,
    AgentCreate,
    AgentUpdate,
    AgentVersion,
    AssignmentChanges,
    AssignmentReport,
    AssignmentResult,
    AssignmentSpec,
)
from kappi.agent.repository import AgentRepository
from kappi.llm.prompt import validate_context_template
from kappi.retrieval.service import Retriever

ModelCheck = Callable[[str, str], None]
"""Raises ``InvalidInput`` for an unknown LLM provider or model."""


class AgentService:
    """Each method runs in one transaction of its own; after a write commits, ``changed`` tells this process's
    agent cache, so its next stateless question sees the agent as it is."""

    def __init__(
        self,
        db: Database,
        identities: IdentityReader,
        retriever: Retriever,
        check_model: ModelCheck,
        authenticator: Authenticator,
        *,
        changed: Callable[[], None] = lambda: None,
    ) -> None:
        self.db = db
        self.identities = identities
        self.retriever = retriever
        self.check_model = check_model
        self.authenticator = authenticator
        self.changed = changed

    @asynccontextmanager
    async def _writing(self) -> AsyncIterator[AgentRepository]:
        async with self.db.transaction() as conn:
            yield AgentRepository(conn)
        self.changed()

    @asynccontextmanager
    async def _reading(self) -> AsyncIterator[AgentRepository]:
        async with self.db.transaction() as conn:
            yield AgentRepository(conn)

    async def create(self, request: AgentCreate, admin: Principal) -> Agent:
        self.check_model(request.llm_provider, request.llm_model)
        if request.context_template is not None:
            validate_context_template(request.context_template)
        agent_id = uuid.uuid4()
        async with self._writing() as repo:
            await repo.insert(agent_id, request.name, request.description, check_groups(request.groups))
            config = {field: getattr(request, field) for field in VERSIONED_FIELDS}
            await repo.add_version(agent_id, 1, config, admin.subject)
            return await _agent(repo, agent_id)

    async def all(self) -> list[Agent]:
        async with self._reading() as repo:
            return [await repo.assemble(row) for row in await repo.rows()]

    async def get(self, agent_id: UUID) -> Agent:
        async with self._reading() as repo:
            return await _agent(repo, agent_id)

    async def update(self, agent_id: UUID, request: AgentUpdate, admin: Principal) -> Agent:
        """Agent-level fields change in place; LLM and instruction changes become a new version, so
        earlier answers keep pointing at the configuration that produced them."""
        async with self._writing() as repo:
            agent = await _agent(repo, agent_id)
            sent = {f: v for f in request.__struct_fields__ if (v := getattr(request, f)) is not msgspec.UNSET}
            agent_fields: dict[str, Any] = {f: sent[f] for f in ("name", "description", "groups") if f in sent}
            if "groups" in agent_fields:
                agent_fields["groups"] = check_groups(agent_fields["groups"])
            await repo.update(agent_id, agent_fields)
            current = {f: getattr(agent.config, f) for f in VERSIONED_FIELDS}
            wanted = {**current, **{f: sent[f] for f in VERSIONED_FIELDS if f in sent}}
            if wanted != current:
                self.check_model(wanted["llm_provider"], wanted["llm_model"])
                if wanted["context_template"] is not None:
                    validate_context_template(wanted["context_template"])
                await repo.add_version(agent_id, agent.current_version + 1, wanted, admin.subject)
            return await _agent(repo, agent_id)

    async def set_active(self, agent_id: UUID, active: bool) -> Agent:
        async with self._writing() as repo:
            await _agent(repo, agent_id)
            await repo.update(agent_id, {"active": active})
            return await _agent(repo, agent_id)

    async def delete(self, agent_id: UUID) -> None:
        async with self._writing() as repo:
            if not await repo.delete(agent_id):
                raise NotFound(f"No agent {agent_id}.", code="agent_not_found")

    async def versions(self, agent_id: UUID) -> list[AgentVersion]:
        async with self._reading() as repo:
            await _agent(repo, agent_id)
            return await repo.versions(agent_id)

    async def assign(self, agent_id: UUID, changes: AssignmentChanges) -> AssignmentReport:
        """Each added collection is learned from its identity record (read and validated now); a missing
        or invalid identity fails that item only. Groups are not stored: they are read on every question."""
        async with self._writing() as repo:
            await _agent(repo, agent_id)
            results: list[AssignmentResult] = []
            for ref in changes.remove:
                removed = await repo.unassign(agent_id, ref.vector_provider, ref.name)
                results.append(
                    AssignmentResult(
                        vector_provider=ref.vector_provider,
                        name=ref.name,
                        action="removed",
                        ok=removed,
                        code=None if removed else "not_assigned",
                        detail=None if removed else "the collection was not assigned to this agent",
                    )
                )
            for spec in changes.add:
                results.append(await self._add(repo, agent_id, spec))
            return AssignmentReport(results=results, collections=await repo.assignments(agent_id))

    async def _add(self, repo: AgentRepository, agent_id: UUID, spec: AssignmentSpec) -> AssignmentResult:
        base = {"vector_provider": spec.vector_provider, "name": spec.name}
        status = await self.identities.read(spec.vector_provider, spec.name)
        if status.identity is None:
            code: str | None = status.problem
            detail = status.detail or "no identity record"
            if status.problem == "identity_missing":
                code, detail = await self._why_missing(spec.vector_provider, spec.name)
            return AssignmentResult(**base, action="add", ok=False, code=code, detail=detail)
        created = await repo.assign(agent_id, spec, status.identity.collection_id)
        return AssignmentResult(**base, action="added" if created else "updated", ok=True)

    async def _why_missing(self, vector_provider: str, name: str) -> tuple[str, str]:
        """Tell a collection with no identity record from a name that holds no collection (a typo, usually), and
        suggest the names that differ only in case: names are case-sensitive."""
        store = self.identities.vectors.get(vector_provider)
        if await store.collection_exists(name):
            return "identity_missing", f"The collection {name!r} has no identity record, so Ragu cannot use it."
        similar = sorted(i.name for i in await store.list_identities() if i.name.casefold() == name.casefold())
        hint = f" Did you mean {' or '.join(repr(n) for n in similar)}? Names are case-sensitive." if similar else ""
        return "collection_not_found", f"There is no collection named {name!r} in {vector_provider}.{hint}"

    async def explain(self, agent_id: UUID, query: AccessQuery) -> AccessExplanation:
        """What a user with these groups (or this token) could search through this agent, and why not the rest."""
        agent = await self.get(agent_id)
        subject = None
        if query.token is not None:
            principal = await self.authenticator.authenticate(f"Bearer {query.token}")
            groups, subject = principal.groups, principal.subject
        elif query.groups is not None:
            groups = frozenset(query.groups)
        else:
            raise InvalidInput("Give either 'groups' or 'token'.", code="groups_or_token_required")
        verdicts = await self.retriever.verdicts(agent.collections, groups)
        return AccessExplanation(
            groups=sorted(groups),
            subject=subject,
            agent_visible=agent.active and agent_visible(agent.groups, groups),
            collections=[v for v, _ in verdicts],
        )


async def _agent(repo: AgentRepository, agent_id: UUID) -> Agent:
    row = await repo.row(agent_id)
    if row is None:
        raise NotFound(f"No agent {agent_id}.", code="agent_not_found")
    return await repo.assemble(row)
