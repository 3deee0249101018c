"""Kappi: agents grounded in the collections a user's groups may read.

:class:`Kappi` is the composition root: every collaborator a handler may use, built once in the lifespan and
handed to handlers as typed dependencies. Handlers parse, call one service method and return. Here alone,
kappi searches pgvector collections in its own memory (:func:`searched_in_memory`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from litestar import Litestar, Router
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide

from common.auth import Authenticator, Principal
from common.clients import SharedClients
from common.config import Secret, Settings, reveal
from common.db import Database
from common.directory.mount import scim_mount
from common.http.app import build_service_app
from common.http.security import admin_only, authenticated
from common.rerankers import RerankerRegistry, default_rerankers
from common.vectors.pgvector import PgVectorStore
from common.vectors.registry import VectorRegistry
from common.vectors.resident import ResidentVectors
from kappi.access.identities import IdentityReader
from kappi.agent.cache import AgentCache
from kappi.agent.controller import AgentAdminController
from kappi.agent.service import AgentService, llm_defaults
from kappi.chat.controller import AgentController, ChatController
from kappi.chat.service import ChatService
from kappi.llm.controller import LlmAdminController
from kappi.llm.registry import LlmRegistry, LocalLlm, default_llm_registry, local_embed
from kappi.mcp_server import ROUTES as MCP_ROUTES
from kappi.mcp_server import serve_mcp
from kappi.openai_api.controller import openai_router
from kappi.retrieval.service import QueryVectors, Retriever

if TYPE_CHECKING:
    from common.directory.scim import ScimEndpoint


@dataclass(frozen=True, slots=True)
class Kappi:
    """What kappi's handlers are built from; one per app, made when its database and clients are open."""

    identities: IdentityReader
    retriever: Retriever
    agent_cache: AgentCache
    chats: ChatService
    agents: AgentService

    @classmethod
    def build(
        cls,
        db: Database,
        clients: SharedClients,
        vectors: VectorRegistry,
        llms: LlmRegistry,
        authenticator: Authenticator,
        *,
        ttl: float,
        rerankers: RerankerRegistry | None = None,
    ) -> Kappi:
        rerankers = rerankers or RerankerRegistry([])
        identities = IdentityReader(vectors, ttl_seconds=ttl)
        retriever = Retriever(identities, vectors, QueryVectors(clients.embedders), rerankers=rerankers)
        agent_cache = AgentCache(db, ttl_seconds=ttl)
        agents = AgentService(
            db,
            identities,
            retriever,
            llms.check_model,
            authenticator,
            changed=agent_cache.forget,
            default_llm=llm_defaults(llms),
            check_reranker=rerankers.resolve,
        )
        return cls(
            identities=identities,
            retriever=retriever,
            agent_cache=agent_cache,
            chats=ChatService(db, retriever, llms, agent_cache),
            agents=agents,
        )


@asynccontextmanager
async def searched_in_memory(clients: SharedClients) -> AsyncIterator[VectorRegistry]:
    """The clients' stores, pgvector's wrapped in copies searched in this process's memory
    (:class:`ResidentVectors`, kept exact by PostgreSQL's change notices): kappi searches at a rate chonkit and
    the workers never do. Stores a caller manages (tests) are used as they are; ``resident_max_chunks=0`` too."""
    settings = clients.settings
    store = clients.vectors.get("pgvector") if "pgvector" in clients.vectors.providers() else None
    if not clients.owns_vectors or settings.resident.max_chunks <= 0 or not isinstance(store, PgVectorStore):
        yield clients.vectors
        return
    if not settings.database.url:
        raise RuntimeError("database_url must be resolved before opening vector stores")
    resident = ResidentVectors(store, settings.database.url, max_chunks=settings.resident.max_chunks)
    resident.start()
    try:
        yield clients.vectors.replacing("pgvector", resident)
    finally:
        await resident.aclose()


def kappi_of(state: State) -> Kappi:
    kappi: Kappi = state.kappi
    return kappi


def provide_chats(state: State, principal: NamedDependency[Principal]) -> ChatService:
    """Taking ``principal`` (unused) orders this after authentication: Litestar resolves dependencies of one
    level concurrently in an anyio task group, which costs far more than the idiom is worth
    (``bench/auth_wiring_bench.py``, "plain order"); one after the other they cost nothing."""
    del principal
    return kappi_of(state).chats


def provide_agents(state: State) -> AgentService:
    return kappi_of(state).agents


def scim_endpoint(token: Secret) -> ScimEndpoint:
    """The SCIM endpoint, imported only where a directory is configured (its libraries are slow to import)."""
    from common.directory.scim import ScimEndpoint

    return ScimEndpoint(token.reveal())


def create_app(
    settings: Settings,
    *,
    database: Database | None = None,
    authenticator: Authenticator | None = None,
    clients: SharedClients | None = None,
    llms: LlmRegistry | None = None,
    identity_ttl_seconds: float = 0.5,
    local_llm: LocalLlm | None = None,
    local_llm_refused: str | None = None,
    rerankers: RerankerRegistry | None = None,
) -> Litestar:
    clients = clients or SharedClients(settings)
    authenticator = authenticator or Authenticator(settings)
    owns_llms = llms is None
    llms = llms or default_llm_registry(
        cohere_api_key=reveal(settings.cohere.api_key),
        cohere_base_url=settings.cohere.base_url,
        openai_base_url=settings.openai.base_url,
        openai_api_key=reveal(settings.openai.api_key),
        openai_models=[m.strip() for m in settings.openai.models.split(",") if m.strip()],
        timeout_seconds=settings.llm.timeout_seconds,
        local=local_llm,
        local_refused=local_llm_refused,
        local_passage_tokens=settings.local_llm.passage_tokens,
        extractive_embed=local_embed(clients.embedders),
    )

    rerankers = rerankers or default_rerankers(
        cohere_api_key=reveal(settings.cohere.api_key),
        cohere_base_url=settings.cohere.base_url,
        timeout_seconds=settings.llm.rerank_timeout_seconds,
    )

    @asynccontextmanager
    async def compose(app: Litestar) -> AsyncIterator[None]:
        async with clients.opened(), searched_in_memory(clients) as vectors:
            app.state.kappi = Kappi.build(
                app.state.db, clients, vectors, llms, authenticator, ttl=identity_ttl_seconds, rerankers=rerankers
            )
            try:
                yield
            finally:
                await rerankers.aclose()
                if owns_llms:  # its HTTP clients' connections (an OpenAI-compatible server's) end with the app
                    await llms.aclose()

    users = Router("/", route_handlers=[AgentController, ChatController], guards=[authenticated])
    admins = Router("/", route_handlers=[AgentAdminController, LlmAdminController], guards=[admin_only])
    return build_service_app(
        service_name="kappi",
        title="Kappi",
        description="Agents, group-enforced retrieval and streaming chat.",
        settings=settings,
        route_handlers=[users, admins, *MCP_ROUTES, openai_router(), scim_mount],
        database=database,
        authenticator=authenticator,
        lifespans=[compose, serve_mcp],  # serve_mcp reads what compose builds
        state={"scim": scim_endpoint(scim)} if (scim := settings.directory.scim_token) else None,  # docs/directory.md
        dependencies={
            "chats": Provide(provide_chats, sync_to_thread=False),
            "agents": Provide(provide_agents, sync_to_thread=False),
            "llms": Provide(lambda: llms, sync_to_thread=False),
        },
    )
