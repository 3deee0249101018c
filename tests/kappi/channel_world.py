"""What the live tests of kappi's channels for other applications (the OpenAI-compatible endpoint, MCP) share: a
served Ragu with an ``hr`` collection holding a marker word, a public one, an agent over both and an agent only
``exec`` may use, and the users' development tokens."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx

from common.auth import mint_dev_token
from common.config import Settings
from tests.hardening.live_stack import RaguServer, embedded_collection, served


@dataclass
class ChannelWorld:
    server: RaguServer
    settings: Settings
    agent_id: str = ""
    secret_agent_id: str = ""
    restricted: dict[str, Any] = field(default_factory=dict)
    public: dict[str, Any] = field(default_factory=dict)

    def token(self, subject: str, *groups: str, admin: bool = False) -> str:
        roles = [self.settings.auth.admin_role] if admin else []
        return mint_dev_token(self.settings, subject=subject, groups=groups, roles=roles)


World = TypeVar("World", bound=ChannelWorld)


@asynccontextmanager
async def channel_world(
    kind: type[World], prefix: str, secret: str, *, issuer: str, audience: str, marker: str
) -> AsyncIterator[World]:
    """A ``ragu serve`` whose tokens carry ``issuer`` and ``audience``, populated as the module docstring says."""
    env = {"RAGU_AUTH_ISSUER": issuer, "RAGU_AUTH_AUDIENCE": audience, "RAGU_WORKER_HEARTBEAT_SECONDS": "0.3"}
    async with served(prefix, secret, **env) as running:
        settings = running.settings.with_(auth_issuer=issuer, auth_audience=audience)
        world = kind(server=running.server, settings=settings)
        await _populate(world, marker)
        yield world


async def _populate(world: ChannelWorld, marker: str) -> None:
    suffix = uuid.uuid4().hex[:6]
    headers = {"Authorization": f"Bearer {world.token('admin', admin=True)}"}
    async with httpx.AsyncClient(base_url=world.server.base_url, headers=headers, timeout=60) as admin:
        world.restricted = await embedded_collection(
            admin,
            f"Hr_{suffix}",
            f"Vacation: employees get 25 vacation days per year under the {marker} policy. "
            "Sick leave needs a note after three days.".encode(),
            ["hr"],
        )
        world.public = await embedded_collection(
            admin, f"Public_{suffix}", b"Vacation requests go through the portal. Office hours are 9 to 5.", []
        )
        extractive = {"llm_provider": "extractive", "llm_model": "extractive"}
        agent = (await admin.post("/kappi/admin/agents", json={"name": "Helper", **extractive})).json()
        assign = {
            "add": [
                {"vector_provider": "pgvector", "name": c["name"], "instruction": "policies"}
                for c in (world.restricted, world.public)
            ]
        }
        report = (await admin.put(f"/kappi/admin/agents/{agent['id']}/collections", json=assign)).json()
        assert all(r["ok"] for r in report["results"]), report
        secret = (await admin.post("/kappi/admin/agents", json={"name": "Board", "groups": ["exec"]})).json()
    world.agent_id, world.secret_agent_id = agent["id"], secret["id"]
