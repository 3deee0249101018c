"""A small world for the hardening suites: one collection restricted to ``hr``, one public, and agents over them.

Both services run in-process on the test's transaction (see ``tests/kappi/conftest.py``). Everything that
identifies the restricted collection is collected in :attr:`World.secrets`, so a test can assert that none of
it reaches a user who is not in ``hr``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from litestar import Litestar
from litestar.routes import HTTPRoute

from chonkit.embedding.worker import EmbeddingWorker
from common.config import Settings
from tests.chonkit.conftest import drain
from tests.kappi.conftest import as_user, chonkit, kappi

__all__ = ["World", "assert_no_leak", "chonkit", "kappi", "world"]

SECRET_PHRASE = "The executive bonus pool is seven million crowns"
PUBLIC_TEXT = b"Vacation days: every employee has 25 vacation days a year, and requests go through the portal."
"""Answers half the question, closely enough to pass kappi's relevance floor (cosine 0.53 with MiniLM; the shorter
"Vacation requests go through the portal." scores 0.36, under the floor, and would be declined)."""
QUESTION = "How large is the executive bonus pool and how many vacation days are there?"
PUBLIC_PATHS = frozenset({"/health", "/ready", "/metrics", "/schemas", "/schemas/{name:str}"})
"""Routes every service serves without a token (plus the OpenAPI documents under ``/docs``). ``/metrics`` is
for Prometheus; it names routes by template and holds no ids or collection names
(``tests/common/test_telemetry.py``, and :func:`assert_no_leak` on it below)."""


@dataclass(frozen=True)
class World:
    restricted: dict[str, Any]
    public: dict[str, Any]
    restricted_document: dict[str, Any]
    job_id: str
    agent: dict[str, Any]
    secret_agent: dict[str, Any]

    @property
    def secrets(self) -> dict[str, str]:
        """What identifies the restricted collection; none of it may reach a non-member."""
        return {
            "collection name": self.restricted["name"],
            "collection id": self.restricted["id"],
            "document id": self.restricted_document["id"],
            "document name": self.restricted_document["name"],
            "document sha256": self.restricted_document["sha256"],
            "job id": self.job_id,
            "content": "bonus pool is seven million",
        }


def assert_no_leak(world: World, response: httpx.Response, *, sent: Iterable[str] = ()) -> None:
    """No identifying value of the restricted collection in the body or headers, unless the caller sent it
    (an id echoed back in "no chat <id>" tells the caller nothing it did not already know)."""
    request_text = response.request.url.path + response.request.content.decode(errors="replace") + "".join(sent)
    seen = response.text + str(dict(response.headers))
    for what, value in world.secrets.items():
        if value not in request_text:
            assert value not in seen, f"the restricted {what} leaked: {response.request.method} {response.request.url}"


@pytest.fixture
async def world(
    chonkit: httpx.AsyncClient, kappi: httpx.AsyncClient, worker: EmbeddingWorker, settings: Settings
) -> World:
    suffix = uuid.uuid4().hex[:8]
    restricted = await _collection(chonkit, f"Payroll_{suffix}", ["hr"])
    public = await _collection(chonkit, f"Handbook_{suffix}", [])
    document = await _upload(chonkit, f"payroll-{suffix}.md", f"# Pay\n\n{SECRET_PHRASE}. Vacation: 30 days.".encode())
    public_document = await _upload(chonkit, f"handbook-{suffix}.txt", PUBLIC_TEXT)
    job = await chonkit.post(f"/collections/{restricted['id']}/documents", json={"document_ids": [document["id"]]})
    await chonkit.post(f"/collections/{public['id']}/documents", json={"document_ids": [public_document["id"]]})
    await drain(worker)

    admin = as_user(settings, "root", admin=True)
    agent = (await kappi.post("/admin/agents", json={"name": "Helper"}, headers=admin)).json()
    secret_agent = (await kappi.post("/admin/agents", json={"name": "Board", "groups": ["exec"]}, headers=admin)).json()
    for target in (agent, secret_agent):
        assign = {
            "add": [
                {"vector_provider": "pgvector", "name": c["name"], "instruction": "company documents"}
                for c in (restricted, public)
            ]
        }
        report = (await kappi.put(f"/admin/agents/{target['id']}/collections", json=assign, headers=admin)).json()
        assert all(r["ok"] for r in report["results"]), report
    return World(
        restricted=restricted,
        public=public,
        restricted_document=document,
        job_id=job.json()["job"]["id"],
        agent=agent,
        secret_agent=secret_agent,
    )


async def _collection(chonkit: httpx.AsyncClient, name: str, groups: list[str]) -> dict[str, Any]:
    response = await chonkit.post("/collections", json={"name": name, "vector_provider": "pgvector", "groups": groups})
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


async def _upload(chonkit: httpx.AsyncClient, name: str, data: bytes) -> dict[str, Any]:
    response = await chonkit.post("/documents", files=[("files", (name, data, "application/octet-stream"))])
    assert response.status_code == 201, response.text
    document: dict[str, Any] = response.json()["results"][0]["document"]
    return document


def operations(app: Litestar) -> list[tuple[str, str]]:
    """Every (method, path template) the app serves, from its route table (so new routes are covered)."""
    found: set[tuple[str, str]] = set()
    for route in app.routes:
        if isinstance(route, HTTPRoute):
            for handler in route.route_handlers:
                found.update((method, route.path) for method in handler.http_methods if method != "OPTIONS")
    return sorted(found)


def is_public(path: str) -> bool:
    return path in PUBLIC_PATHS or path == "/docs" or path.startswith("/docs/")


def fill_path(template: str, values: dict[str, str]) -> str:
    """``/collections/{collection_id:uuid}`` → ``/collections/<values["collection_id"]>``."""
    path = template
    while "{" in path:
        start, end = path.index("{"), path.index("}")
        name = path[start + 1 : end].split(":")[0]
        path = path[:start] + values.get(name, str(uuid.uuid4())) + path[end + 1 :]
    return path
