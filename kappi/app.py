"""Kappi: agents grounded in the collections a user's groups may read."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from litestar import Litestar, Request, Router

from common.auth import Authenticator
from common.clients import SharedClients
from common.config import Settings
from common.db import Database
from common.http.app import build_service_app
from common.http.security import admin_only, authenticate_request
from kappi.access.identities import IdentityReader
from kappi.agent.cache import AgentCache
from kappi.agent.controller import AgentAdminController
from kappi.chat.controller import AgentController, ChatController
from kappi.llm.registry import LlmRegistry, default_llm_registry
from kappi.retrieval.service import QueryVectors, Retriever


def create_app(
    settings: Settings,
    *,
    database: Database | None = None,
    authenticator: Authenticator | None = None,
    clients: SharedClients | None = None,
    llms: LlmRegistry | None = None,
    identity_ttl_seconds: float = 0.5,
) -> Litestar:
    clients = clients or SharedClients(settings)
    llms = llms or default_llm_registry(
        cohere_api_key=settings.cohere_api_key,
        cohere_base_url=settings.cohere_base_url,
        openai_base_url=settings.openai_base_url,
        openai_api_key=settings.openai_api_key,
        openai_models=[m.strip() for m in settings.openai_models.split(",") if m.strip()],
        timeout_seconds=settings.llm_timeout_seconds,
    )

    @asynccontextmanager
    async def open_clients(app: Litestar) -> AsyncIterator[None]:
        async with clients.opened():
            app.state.identities = IdentityReader(clients.vectors, ttl_seconds=identity_ttl_seconds)
            app.state.retriever = Retriever(app.state.identities, clients.vectors, QueryVectors(clients.embedders))
            app.state.agents = AgentCache(app.state.db, ttl_seconds=identity_ttl_seconds)
            yield

    async def forget_agents(request: Request[Any, Any, Any]) -> None:
        """After an admin write (committed by now), this process's questions see the agent as it is."""
        if request.method != "GET":
            request.app.state.agents.forget()

    users = Router("/", route_handlers=[AgentController, ChatController], before_request=authenticate_request)
    admins = Router("/", route_handlers=[AgentAdminController], guards=[admin_only], after_response=forget_agents)
    return build_service_app(
        service_name="kappi",
        title="Kappi",
        description="Agents, group-enforced retrieval and streaming chat.",
        settings=settings,
        route_handlers=[users, admins],
        database=database,
        authenticator=authenticator,
        lifespans=[open_clients],
        state={"clients": clients, "llms": llms},
    )
