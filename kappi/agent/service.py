"""Agents for admins: configuration with versions, collection assignments learned from identity
records, and an explanation of who can search what."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any, Protocol
from uuid import UUID

import msgspec

from common.auth import Authenticator, Principal
from common.db import Database
from common.errors import InvalidInput, NotFound
from common.groups import check_groups
from common.vectors.base import DEFAULT_DENSE_WEIGHT
from kappi.access.identities import IdentityReader
from kappi.access.policy import Verdict, agent_visible, searches_nothing
from kappi.agent.models import (
    VERSIONED_FIELDS,
    AccessExplanation,
    AccessQuery,
    Agent,
    AgentCreate,
    AgentUpdate,
    AgentVersion,
    Assignment,
    AssignmentChanges,
    AssignmentReport,
    AssignmentResult,
    AssignmentSpec,
)
from kappi.agent.repository import AgentRepository
from kappi.llm.prompt import validate_context_template
from kappi.llm.registry import LlmRegistry

ModelCheck = Callable[[str, str], None]
"""Raises ``InvalidInput`` for an unknown LLM provider or model."""
DefaultLlm = Callable[[str | None], tuple[str, str]]
"""The ``(provider, model)`` a new agent gets when it names no model: for no provider, or the one given
(:func:`llm_defaults`)."""
RerankerCheck = Callable[[str, str | None], str]
"""The model an agent gets for a reranker and an optional model (``RerankerRegistry.resolve``); raises
``InvalidInput`` for an unknown reranker or model."""
NEW_ASSIGNMENT = {"mode": "hybrid", "dense_weight": DEFAULT_DENSE_WEIGHT, "tags": None, "labels": None}
"""What a new assignment gets for the retrieval settings it does not send."""


def llm_defaults(llms: LlmRegistry) -> DefaultLlm:
    """New agents' LLM from the registry: its default choice (``LlmRegistry.default_choice``), or a named
    provider's default model (the default choice's when it is that provider, else its first listed)."""

    def choose(provider: str | None) -> tuple[str, str]:
        default = llms.default_choice()
        if provider is None or provider == default[0]:
            return default
        models = llms.get(provider).models()  # unknown_llm_provider
        if not models:
            raise InvalidInput(f"Name the llm_model to use with {provider!r}.", code="llm_model_required")
        return provider, models[0]

    return choose


def _extractive(provider: str | None) -> tuple[str, str]:
    return provider or "extractive", "extractive"


def _no_rerankers(provider: str, model: str | None) -> str:
    """No reranker configured here: every name is unknown."""
    from common.rerankers.base import RerankerRegistry

    return RerankerRegistry([]).resolve(provider, model)


class CollectionVerdicts(Protocol):
    """What the access explanation asks of retrieval (:class:`kappi.retrieval.service.Retriever`): the verdict it
    would reach for each assigned collection. A protocol, because retrieval reads this package's models."""

    async def verdicts(
        self, assignments: Sequence[Assignment], user_groups: frozenset[str]
    ) -> Sequence[tuple[Verdict, object]]: ...


class AgentService:
    """Each method runs in one transaction of its own; after a write commits, ``changed`` tells this process's
    agent cache, so its next stateless question sees the agent as it is."""

    def __init__(
        self,
        db: Database,
        identities: IdentityReader,
        retriever: CollectionVerdicts,
        check_model: ModelCheck,
        authenticator: Authenticator,
        *,
        changed: Callable[[], None] = lambda: None,
        default_llm: DefaultLlm = _extractive,
        check_reranker: RerankerCheck = _no_rerankers,
    ) -> None:
        self.db = db
        self.identities = identities
        self.retriever = retriever
        self.check_model = check_model
        self.authenticator = authenticator
        self.changed = changed
        self.default_llm = default_llm
        self.check_reranker = check_reranker

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
        config = {field: getattr(request, field) for field in VERSIONED_FIELDS}
        config["llm_provider"], config["llm_model"] = self._llm_choice(request.llm_provider, request.llm_model)
        self.check_model(config["llm_provider"], config["llm_model"])
        config["rerank_model"] = self._rerank_model(request.reranker, request.rerank_model)
        if request.context_template is not None:
            validate_context_template(request.context_template)
        agent_id = uuid.uuid4()
        async with self._writing() as repo:
            await repo.insert(agent_id, request.name, request.description, check_groups(request.groups))
            await repo.add_version(agent_id, 1, config, admin.subject)
            return await _agent(repo, agent_id)

    def _llm_choice(self, provider: str | msgspec.UnsetType, model: str | msgspec.UnsetType) -> tuple[str, str]:
        """A new agent's LLM: as sent; an unsent model is the provider's default (:data:`DefaultLlm`), an unsent
        provider the server's default one."""
        named = None if isinstance(provider, msgspec.UnsetType) else provider
        if isinstance(model, msgspec.UnsetType):
            return self.default_llm(named)
        return (self.default_llm(None)[0] if named is None else named), model

    def _rerank_model(self, reranker: str | None, model: str | None) -> str | None:
        if reranker is None:
            if model is not None:
                raise InvalidInput("A rerank_model needs a reranker.", code="reranker_required")
            return None
        return self.check_reranker(reranker, model)

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
            if "reranker" in sent and "rerank_model" not in sent and sent["reranker"] != current["reranker"]:
                wanted["rerank_model"] = None  # another reranker: its default model, not the old one's
            if wanted != current:
                self.check_model(wanted["llm_provider"], wanted["llm_model"])
                wanted["rerank_model"] = self._rerank_model(wanted["reranker"], wanted["rerank_model"])
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
            existing = {(a.vector_provider, a.name): a for a in await repo.assignments(agent_id)}
            for spec in changes.add:
                results.append(await self._add(repo, agent_id, spec, existing.get((spec.vector_provider, spec.name))))
            return AssignmentReport(results=results, collections=await repo.assignments(agent_id))

    async def _add(
        self, repo: AgentRepository, agent_id: UUID, spec: AssignmentSpec, existing: Assignment | None
    ) -> AssignmentResult:
        base = {"vector_provider": spec.vector_provider, "name": spec.name}
        status = await self.identities.read(spec.vector_provider, spec.name)
        if status.identity is None:
            code: str | None = status.problem
            detail = status.detail or "no identity record"
            if status.problem == "identity_missing":
                code, detail = await self._why_missing(spec.vector_provider, spec.name)
            return AssignmentResult(**base, action="add", ok=False, code=code, detail=detail)
        created = await repo.assign(agent_id, _assignment(spec, status.identity.collection_id, existing))
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
            searches_nothing=searches_nothing([v.reason for v, _ in verdicts]),
            collections=[v for v, _ in verdicts],
        )


def _assignment(spec: AssignmentSpec, collection_id: str, existing: Assignment | None) -> Assignment:
    """The assignment to store: what ``spec`` sends; for the retrieval settings it leaves out, what ``existing``
    has, else :data:`NEW_ASSIGNMENT`. Tags and labels are kept sorted and unique."""
    kept = {f: getattr(existing, f) if existing is not None else NEW_ASSIGNMENT[f] for f in NEW_ASSIGNMENT}
    sent = {f: v for f in NEW_ASSIGNMENT if (v := getattr(spec, f)) is not msgspec.UNSET}
    retrieval: dict[str, Any] = {**kept, **sent}
    for field in ("tags", "labels"):
        if retrieval[field] is not None:
            retrieval[field] = sorted(set(retrieval[field]))
    return Assignment(
        vector_provider=spec.vector_provider,
        name=spec.name,
        collection_id=collection_id,
        top_k=spec.top_k,
        max_distance=spec.max_distance,
        instruction=spec.instruction,
        created_at=existing.created_at if existing is not None else datetime.now(UTC),
        **retrieval,
    )


async def _agent(repo: AgentRepository, agent_id: UUID) -> Agent:
    row = await repo.row(agent_id)
    if row is None:
        raise NotFound(f"No agent {agent_id}.", code="agent_not_found")
    return await repo.assemble(row)
