"""Every way we could think of for a non-member to reach a collection restricted to ``hr``, one test each.

The attacker holds a valid token (unless the attack is the token) and knows the restricted collection's name,
id and document id, as a former member or a curious colleague would. Each test asserts the door stays shut
*and* that nothing identifying the collection comes back (:func:`assert_no_leak`). Routes are enumerated from
the apps' route tables, so a new route is attacked without anyone listing it here.

The attacks that read what an answer gives back (citations, sources, also retrieved passages, history, timings,
counts) run with ``extractive`` and with the embedded model (:data:`every_llm`): a model may write anything, so
they also check that the model was the one answering and that it was given nothing restricted
(:func:`answered_by`).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from http import HTTPStatus
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from litestar import Litestar
from litestar.routes import HTTPRoute

from chonkit.app import create_app as create_chonkit
from common.auth import mint_dev_token
from common.clients import SharedClients
from common.config import Settings, load_settings
from common.db import SingleConnectionDatabase
from common.directory.mount import CODE_HEADER, SCIM_PATH
from common.http.security import admin_only, authenticated
from kappi.app import create_app as create_kappi
from ragu.local_llm import LocalLlmServer
from tests.conftest import TEST_SECRET, AppClient
from tests.hardening.conftest import (
    QUESTION,
    LlmCall,
    World,
    assert_given_nothing_restricted,
    assert_no_leak,
    every_llm,
    fill_path,
    is_public,
    operations,
)
from tests.kappi.conftest import as_user, sse_events
from tests.support.answers import QUOTED_INSTEAD

NON_MEMBER_GROUPS = ("legal",)
BONUS_QUESTION = "How large is the executive bonus pool?"
"""Answered from the restricted passage alone; SmolLM2 quotes it too ("... seven million crowns. [1]")."""


def outsider(settings: Settings, *groups: str) -> dict[str, str]:
    return as_user(settings, "mallory", *(groups or NON_MEMBER_GROUPS))


def given_collections(answer: dict[str, Any]) -> set[str]:
    """Collections of every passage an answer was given: those it cites and those kept apart as also retrieved."""
    return {c["collection"] for c in [*answer["citations"], *answer.get("also_retrieved", [])]}


async def ask_query(kappi: httpx.AsyncClient, headers: dict[str, str], agent_id: str, **extra: Any) -> httpx.Response:
    return await kappi.post(f"/agents/{agent_id}/query", json={"content": QUESTION}, headers=headers, **extra)


def answered_by(llm: str, world: World, calls: list[LlmCall], *, sent: tuple[str, ...] = ()) -> None:
    """Every answer came from ``llm`` (not from the extractive fallback of a model that is down), and none of them
    was given anything identifying the restricted collection."""
    assert calls, "no answer reached an LLM"
    assert {call.provider for call in answering(llm, calls)} == {llm}
    assert_given_nothing_restricted(world, calls, sent=sent)  # the preliminary quote's request too


def answering(llm: str, calls: list[LlmCall]) -> list[LlmCall]:
    """The calls that answered: not the extractive quote every model answer asks for beside its own."""
    return [call for call in calls if llm == "extractive" or not _preliminary(call)]


def _preliminary(call: LlmCall) -> bool:
    """The extractive quote a model answer ends with (and, streamed, shows first): asked of ``extractive`` by its
    own name, where an extractive fallback is asked with the agent's model name."""
    return call.provider == "extractive" and call.request.model == "extractive"


# -- through an agent that holds it ---------------------------------------------------------------------------


@every_llm
@pytest.mark.parametrize("route", ["messages", "messages/stream", "query"])
async def test_an_agent_holding_the_collection_answers_a_non_member_without_it(
    kappi: httpx.AsyncClient, world: World, settings: Settings, route: str, llm: str, llm_calls: list[LlmCall]
) -> None:
    headers = outsider(settings)
    if route == "query":
        response = await ask_query(kappi, headers, world.agent["id"])
        given = response.json()
    else:
        chat = (await kappi.post("/chats", json={"agent_id": world.agent["id"]}, headers=headers)).json()
        response = await kappi.post(f"/chats/{chat['id']}/{route}", json={"content": QUESTION}, headers=headers)
        # The sources event holds every passage the answer is given.
        given = response.json()["answer"] if route == "messages" else sse_events(response.text)[0][1]
        assert_no_leak(world, await kappi.get(f"/chats/{chat['id']}", headers=headers))
    assert response.status_code == 200, response.text
    assert given_collections(given) == {world.public["name"]}
    assert_no_leak(world, response)
    answered_by(llm, world, llm_calls)


@every_llm
async def test_a_member_gets_it_through_the_same_agent(
    kappi: httpx.AsyncClient, world: World, settings: Settings, llm: str, llm_calls: list[LlmCall]
) -> None:
    """The control for every test here: the restricted collection is reachable, so its absence means something
    (and the spy on what the LLM is given sees it, so its absence there means something too)."""
    response = await ask_query(kappi, as_user(settings, "alice", "hr"), world.agent["id"])
    # The restricted passage answers the question far better: the relevance floor may keep the public one apart.
    assert world.restricted["name"] in given_collections(response.json())
    assert "bonus pool is seven million" in response.text
    assert [call.provider for call in answering(llm, llm_calls)] == [llm]
    assert "bonus pool is seven million" in answering(llm, llm_calls)[0].given


@every_llm
async def test_admins_get_no_bypass_in_chat(
    kappi: httpx.AsyncClient, world: World, settings: Settings, llm: str, llm_calls: list[LlmCall]
) -> None:
    response = await ask_query(kappi, as_user(settings, "root", admin=True), world.agent["id"])
    assert given_collections(response.json()) == {world.public["name"]}
    assert_no_leak(world, response)
    answered_by(llm, world, llm_calls)


GROUP_VARIANTS = [
    "HR",
    "Hr",
    " hr",
    "hr ",
    "hr\t",
    "hr\n",
    "\u200bhr",  # zero-width space
    "\uff48\uff52",  # fullwidth "hr"
    "\u04bbr",  # Cyrillic shha, looks like "h"
    "hr\x00",
    "hr,legal",
    "*",
    "%",
    "",
]


async def test_group_name_variants_do_not_match(
    kappi: httpx.AsyncClient, world: World, settings: Settings, llm: str, llm_calls: list[LlmCall]
) -> None:
    """Extractive only: which passages a variant's asker is given is decided before any LLM is chosen, and a
    non-member's answer by the embedded model, given only the public passage, is
    ``test_an_agent_holding_the_collection_answers_a_non_member_without_it[query-local]`` (fourteen more answers
    of the model here cost ten seconds and proved nothing more)."""
    for variant in GROUP_VARIANTS:
        response = await ask_query(kappi, as_user(settings, "mallory", variant), world.agent["id"])
        assert response.status_code == 200, (variant, response.text)
        assert given_collections(response.json()) == {world.public["name"]}, variant
        assert_no_leak(world, response)
    assert len(llm_calls) == len(GROUP_VARIANTS)
    answered_by(llm, world, llm_calls)


AGENT_GROUP_VARIANTS = ["EXEC", "Exec", " exec", "exec ", "exec\n", "\u0435xec", ""]


async def test_agent_group_variants_do_not_match(kappi: httpx.AsyncClient, world: World, settings: Settings) -> None:
    hidden = world.secret_agent["id"]
    for variant in AGENT_GROUP_VARIANTS:
        headers = as_user(settings, "mallory", variant)
        assert (await kappi.get(f"/agents/{hidden}", headers=headers)).status_code == 404, variant
        assert hidden not in (await kappi.get("/agents", headers=headers)).text
        chat = await kappi.post("/chats", json={"agent_id": hidden}, headers=headers)
        assert (chat.status_code, chat.json()["code"]) == (404, "agent_not_found"), variant
        assert (await ask_query(kappi, headers, hidden)).status_code == 404, variant


@pytest.mark.parametrize("variant", [" hr", "hr ", "hr\n", "\thr"], ids=repr)
async def test_chonkit_refuses_to_save_a_group_with_whitespace(
    chonkit: httpx.AsyncClient, world: World, variant: str
) -> None:
    response = await chonkit.put(f"/collections/{world.restricted['id']}/groups", json={"groups": [variant]})
    assert response.status_code == 422, response.text
    assert (await chonkit.get(f"/collections/{world.restricted['id']}")).json()["collection"]["groups"] == ["hr"]


# -- by naming it in any field ---------------------------------------------------------------------------------


def _named_requests(world: World) -> list[tuple[str, str, str, Any, int]]:
    """(label, method, path, JSON body, expected status) for requests that name the restricted collection."""
    collection_id, name = world.restricted["id"], world.restricted["name"]
    doc_id = world.restricted_document["id"]
    agent = world.agent["id"]
    return [
        ("collection id as agent_id", "POST", "/chats", {"agent_id": collection_id}, 404),
        ("hidden agent as agent_id", "POST", "/chats", {"agent_id": world.secret_agent["id"]}, 404),
        ("collections field on a chat", "POST", "/chats", {"agent_id": agent, "collections": [name]}, 400),
        ("collection field on a question", "POST", f"/agents/{agent}/query", {"content": "x", "collection": name}, 400),
        (
            "document_ids filter on a question",
            "POST",
            f"/agents/{agent}/query",
            {"content": "x", "document_ids": [doc_id]},
            400,
        ),
        ("groups field on a question", "POST", f"/agents/{agent}/query", {"content": "x", "groups": ["hr"]}, 400),
        ("collection id as an agent", "GET", f"/agents/{collection_id}", None, 404),
        ("collection id as a chat", "GET", f"/chats/{collection_id}", None, 404),
        ("collection id as a chat to ask", "POST", f"/chats/{collection_id}/messages", {"content": "x"}, 404),
        ("collection id as an agent to query", "POST", f"/agents/{collection_id}/query", {"content": "x"}, 404),
        ("document id as an agent", "GET", f"/agents/{doc_id}", None, 404),
        ("name as a path segment", "GET", f"/agents/{name}", None, 400),  # invalid_id: a name is never an id
        (
            "assign it with a user token",
            "PUT",
            f"/admin/agents/{agent}/collections",
            {"add": [{"vector_provider": "pgvector", "name": name}]},
            403,
        ),
        ("explain access with a user token", "POST", f"/admin/agents/{agent}/access", {"groups": ["hr"]}, 403),
    ]


async def test_naming_the_collection_in_a_kappi_request_field(
    kappi: httpx.AsyncClient, world: World, settings: Settings
) -> None:
    for label, method, path, body, status in _named_requests(world):
        response = await kappi.request(method, path, json=body, headers=outsider(settings))
        assert response.status_code == status, (label, response.text)
        assert_no_leak(world, response)


@every_llm
async def test_naming_the_collection_in_the_question_does_not_search_it(
    kappi: httpx.AsyncClient, world: World, settings: Settings, llm: str, llm_calls: list[LlmCall]
) -> None:
    question = f"{world.restricted['name']} {world.restricted['id']} {world.restricted_document['id']} bonus pool"
    response = await kappi.post(
        f"/agents/{world.agent['id']}/query", json={"content": question}, headers=outsider(settings)
    )
    assert response.status_code == 200, response.text
    assert given_collections(response.json()) <= {world.public["name"]}  # (the floor may decline the public one)
    assert "seven million" not in response.text
    if llm_calls:  # (declined by the floor: no LLM was asked)
        answered_by(llm, world, llm_calls, sent=(question,))


@every_llm
async def test_query_parameters_and_headers_do_not_add_groups(
    kappi: httpx.AsyncClient, world: World, settings: Settings, llm: str, llm_calls: list[LlmCall]
) -> None:
    headers = {**outsider(settings), "X-Groups": "hr", "X-Forwarded-User": "alice", "X-Roles": "admin"}
    params = {"groups": "hr", "collection": world.restricted["name"], "collection_id": world.restricted["id"]}
    response = await ask_query(kappi, headers, world.agent["id"], params=params)
    assert given_collections(response.json()) == {world.public["name"]}
    assert "seven million" not in response.text
    answered_by(llm, world, llm_calls)


async def test_assignment_with_a_user_token_changes_nothing(
    kappi: httpx.AsyncClient, world: World, settings: Settings
) -> None:
    """An hr member may not attach the hr collection to an agent everyone can use."""
    admin, alice = as_user(settings, "root", admin=True), as_user(settings, "alice", "hr")
    public_agent = (await kappi.post("/admin/agents", json={"name": "Open"}, headers=admin)).json()
    add = {"add": [{"vector_provider": "pgvector", "name": world.restricted["name"]}]}
    response = await kappi.put(f"/admin/agents/{public_agent['id']}/collections", json=add, headers=alice)
    assert (response.status_code, response.json()["code"]) == (403, "admin_required")
    assert (await kappi.get(f"/admin/agents/{public_agent['id']}", headers=admin)).json()["collections"] == []


# -- the admin APIs with a user token, every route from the route tables ----------------------------------------


def _path_values(world: World) -> dict[str, str]:
    return {
        "collection_id": world.restricted["id"],
        "document_id": world.restricted_document["id"],
        "job_id": world.job_id,
        "agent_id": world.agent["id"],
        "name": "identity",
        "path": "openapi.yaml",
    }


async def _probe(client: httpx.AsyncClient, method: str, path: str, headers: dict[str, str], world: World) -> Any:
    body = {"document_ids": [world.restricted_document["id"]], "query": "bonus", "groups": []}
    response = await client.request(
        method, path, json=body if method in {"POST", "PUT", "PATCH"} else None, headers=headers
    )
    assert_no_leak(world, response)
    return response.status_code, response.json().get("code") or response.headers.get(CODE_HEADER)


async def test_every_chonkit_route_is_403_for_a_non_admin(
    chonkit: httpx.AsyncClient, world: World, settings: Settings
) -> None:
    """Even an ``hr`` member, naming the hr collection, its document and its job in the path and body."""
    routes = [(m, p) for m, p in operations(create_chonkit(settings)) if not is_public(p)]
    assert len(routes) >= 20
    for headers in (as_user(settings, "alice", "hr"), as_user(settings, "mallory", "admin")):  # a group is not a role
        for method, template in routes:
            result = await _probe(chonkit, method, fill_path(template, _path_values(world)), headers, world)
            assert result == (403, "admin_required"), (method, template, result)
    detail = (await chonkit.get(f"/collections/{world.restricted['id']}")).json()
    assert (detail["collection"]["groups"], len(detail["documents"])) == (["hr"], 1)


async def test_every_kappi_admin_route_is_403_for_a_non_admin(
    kappi: httpx.AsyncClient, world: World, settings: Settings
) -> None:
    routes = [(m, p) for m, p in operations(create_kappi(settings)) if p.startswith("/admin")]
    assert len(routes) >= 9
    for method, template in routes:
        result = await _probe(kappi, method, fill_path(template, _path_values(world)), outsider(settings), world)
        assert result == (403, "admin_required"), (method, template, result)


@pytest.mark.parametrize("service", ["chonkit", "kappi"])
async def test_every_non_public_route_is_401_without_a_token(
    chonkit: httpx.AsyncClient, kappi: httpx.AsyncClient, world: World, settings: Settings, service: str
) -> None:
    client, factory = (chonkit, create_chonkit) if service == "chonkit" else (kappi, create_kappi)
    routes = [(m, p) for m, p in operations(factory(settings)) if not is_public(p)]
    for method, template in routes:
        result = await _probe(client, method, fill_path(template, _path_values(world)), {"Authorization": ""}, world)
        # SCIM has a credential of its own (tests/common/test_directory_scim.py attacks it); here it is off
        expected = (404, "scim_not_configured") if template.startswith(SCIM_PATH) else (401, "missing_token")
        assert result == expected, (method, template, result)


@every_llm
async def test_the_public_metrics_name_nothing_restricted(
    chonkit: httpx.AsyncClient, kappi: httpx.AsyncClient, world: World, settings: Settings, llm: str,
    llm_calls: list[LlmCall],
) -> None:  # fmt: skip
    """``/metrics`` needs no token: after questions to the restricted collection and a search of it, neither
    service's metrics hold any of its names or ids."""
    alice = as_user(settings, "alice", "hr")
    chat = (await kappi.post("/chats", json={"agent_id": world.agent["id"]}, headers=alice)).json()
    asked = await kappi.post(f"/chats/{chat['id']}/messages", json={"content": QUESTION}, headers=alice)
    assert world.restricted["name"] in asked.text  # the restricted collection was searched and cited
    assert [call.provider for call in answering(llm, llm_calls)] == [llm]  # the LLM's own metrics are counted too
    await chonkit.post(f"/collections/{world.restricted['id']}/search", json={"query": QUESTION})
    for client in (chonkit, kappi):
        response = await client.get("/metrics", headers={"Authorization": ""})
        assert response.status_code == 200
        assert "ragu_" in response.text
        assert_no_leak(world, response)


def test_every_non_public_kappi_route_resolves_to_an_authentication_check(settings: Settings) -> None:
    """Every route a user reaches carries the authentication guard or the admin guard."""
    app = create_kappi(settings)
    checked = 0
    for route in app.routes:
        if not isinstance(route, HTTPRoute) or is_public(route.path):
            continue
        for handler in route.route_handlers:
            guards = handler.resolve_guards()
            assert admin_only in guards or authenticated in guards, (route.path, handler)
            checked += 1
    assert checked >= 20


# -- through another user's chat -------------------------------------------------------------------------------


@every_llm
async def test_another_users_chat_history_and_messages_are_unreachable(
    kappi: httpx.AsyncClient, world: World, settings: Settings, llm: str, llm_calls: list[LlmCall]
) -> None:
    alice, mallory = as_user(settings, "alice", "hr"), outsider(settings)
    chat = (await kappi.post("/chats", json={"agent_id": world.agent["id"]}, headers=alice)).json()
    answered = await kappi.post(f"/chats/{chat['id']}/messages", json={"content": QUESTION}, headers=alice)
    assert world.restricted["name"] in answered.text  # alice's history now holds the restricted passage
    title = (await kappi.get(f"/chats/{chat['id']}", headers=alice)).json()["chat"]["title"]
    for method, path, body in [
        ("GET", f"/chats/{chat['id']}", None),
        ("PATCH", f"/chats/{chat['id']}", {"title": "mine"}),
        ("POST", f"/chats/{chat['id']}/messages", {"content": "repeat your last answer"}),
        ("POST", f"/chats/{chat['id']}/messages/stream", {"content": "repeat your last answer"}),
        ("DELETE", f"/chats/{chat['id']}", None),
    ]:
        response = await kappi.request(method, path, json=body, headers=mallory)
        assert (response.status_code, response.json()["code"]) == (404, "chat_not_found"), (method, path)
        assert_no_leak(world, response)
    listing = await kappi.get("/chats", headers=mallory, params={"limit": 200})
    assert listing.json() == []
    assert [call.provider for call in answering(llm, llm_calls)] == [
        llm
    ]  # alice's question only: mallory's never reached an LLM
    assert (await kappi.get(f"/chats/{chat['id']}", headers=alice)).json()["chat"]["title"] == title


async def test_a_chat_id_of_someone_else_answers_like_one_that_does_not_exist(
    kappi: httpx.AsyncClient, world: World, settings: Settings
) -> None:
    """No existence oracle: the same status, code and body shape (only the echoed id differs)."""
    alice, mallory = as_user(settings, "alice", "hr"), outsider(settings)
    chat = (await kappi.post("/chats", json={"agent_id": world.agent["id"]}, headers=alice)).json()
    missing = "00000000-0000-4000-8000-000000000000"
    theirs = (await kappi.get(f"/chats/{chat['id']}", headers=mallory)).json()
    nothing = (await kappi.get(f"/chats/{missing}", headers=mallory)).json()
    assert json.dumps(theirs).replace(chat["id"], missing) == json.dumps(nothing)
    hidden = (await kappi.get(f"/agents/{world.secret_agent['id']}", headers=mallory)).json()
    absent = (await kappi.get(f"/agents/{missing}", headers=mallory)).json()
    assert json.dumps(hidden).replace(world.secret_agent["id"], missing) == json.dumps(absent)


# -- through errors, timings and the OpenAPI documents -----------------------------------------------------------


@pytest.mark.parametrize(
    ("label", "method", "suffix", "body"),
    [
        ("empty question", "POST", "query", {"content": ""}),
        ("question too long", "POST", "query", {"content": "x" * 10_001}),
        ("not JSON", "POST", "query", "{not json"),
        ("JSON nested 1,000 deep", "POST", "query", "[" * 1_000 + "]" * 1_000),
        ("a question nested 100,000 deep", "POST", "query", '{"content":' + "[" * 100_000 + "]" * 100_000 + "}"),
        ("filters nested 5,000 deep", "POST", "retrieve", '{"query":"x","filters":' + '{"a":' * 5_000 + "}" * 5_001),
        ("wrong method", "DELETE", "query", None),
        ("unknown sub-route", "GET", "collections", None),
    ],
)
async def test_errors_about_an_agent_name_nothing_restricted(
    kappi: httpx.AsyncClient, world: World, settings: Settings, label: str, method: str, suffix: str, body: Any
) -> None:
    content = body if isinstance(body, str) else None
    response = await kappi.request(
        method,
        f"/agents/{world.agent['id']}/{suffix}",
        json=None if isinstance(body, str) else body,
        content=content,
        headers={**outsider(settings), "Content-Type": "application/json"},
    )
    assert 400 <= response.status_code < 500, (label, response.text)
    assert response.json()["code"]
    assert_no_leak(world, response)


@pytest.mark.parametrize("offset", ["9223372036854775808", "99999999999999999999", "-1"])
async def test_paging_past_its_bound_is_400_for_any_user_and_names_nothing_restricted(
    kappi: httpx.AsyncClient, world: World, settings: Settings, offset: str
) -> None:
    """An ``offset`` past PostgreSQL's bigint was a 500 for anyone (#26); now refused before any query runs."""
    response = await kappi.get("/chats", params={"offset": offset}, headers=outsider(settings))
    assert (response.status_code, response.json()["code"]) == (400, "invalid_request"), response.text
    assert_no_leak(world, response)


@every_llm
async def test_timings_and_counts_say_nothing_about_restricted_collections(
    kappi: httpx.AsyncClient, world: World, settings: Settings, llm: str, llm_calls: list[LlmCall]
) -> None:
    headers = outsider(settings)
    chat = (await kappi.post("/chats", json={"agent_id": world.agent["id"]}, headers=headers)).json()
    stream = await kappi.post(f"/chats/{chat['id']}/messages/stream", json={"content": QUESTION}, headers=headers)
    events = sse_events(stream.text)
    sources, done = events[0][1], events[-1][1]
    assert set(done) == {
        "message_id",
        "usage",
        "timings",
        "sources_used",
        "citations",
        "also_retrieved",
        "grounding",
        "llm_fallback",
    }
    assert set(done["timings"]) == {"embed_ms", "search_ms", "llm_ms", "total_ms"}
    assert done["sources_used"] == len(done["citations"])
    assert len(done["citations"]) + len(done["also_retrieved"]) == len(sources["citations"])  # only what it was given
    assert given_collections(done) == given_collections(sources) == {world.public["name"]}
    answer = (await ask_query(kappi, headers, world.agent["id"])).json()
    assert set(answer) == {"answer", "citations", "also_retrieved", "usage", "timings", "llm_fallback", "grounding"}
    assert_no_leak(world, stream)
    assert done["llm_fallback"] in (None, *QUOTED_INSTEAD)  # the agent's own LLM ran (perhaps quoted instead)
    answered_by(llm, world, llm_calls)


def _examples(node: Any) -> list[Any]:
    if isinstance(node, dict):
        found = [v for k, v in node.items() if k in {"example", "examples"}]
        return found + [e for v in node.values() for e in _examples(v)]
    if isinstance(node, list):
        return [e for v in node for e in _examples(v)]
    return []


def _carries_data(example: Any) -> bool:
    """Litestar documents its validation error with ``{"status_code": 400, "detail": "Bad Request", "extra": {}}``:
    a status and its phrase. Anything beyond that would be data."""
    if isinstance(example, list):
        return any(_carries_data(e) for e in example)
    if not isinstance(example, dict) or set(example) - {"status_code", "detail", "extra"}:
        return True
    status = example.get("status_code")
    return not (isinstance(status, int) and example.get("detail") == HTTPStatus(status).phrase and not example["extra"])


@pytest.mark.parametrize("service", ["chonkit", "kappi"])
async def test_openapi_documents_carry_no_examples_and_no_data(
    chonkit: httpx.AsyncClient, kappi: httpx.AsyncClient, world: World, settings: Settings, service: str
) -> None:
    client = chonkit if service == "chonkit" else kappi
    for headers in (outsider(settings), {"Authorization": ""}):
        response = await client.get("/docs/openapi.json", headers=headers)
        assert response.status_code == 200
        assert [e for e in _examples(response.json()) if _carries_data(e)] == []
        assert_no_leak(world, response)


# -- revocation --------------------------------------------------------------------------------------------------


@asynccontextmanager
async def kappi_with_stale_identities(
    settings: Settings,
    db: SingleConnectionDatabase,
    clients: SharedClients,
    app_client: AppClient,
    local_llm: LocalLlmServer | None,
) -> AsyncIterator[httpx.AsyncClient]:
    """Identity records cached for an hour: only the chunks' own ``groups`` filter can stop a revoked reader."""
    app = create_kappi(settings, database=db, clients=clients, identity_ttl_seconds=3600, local_llm=local_llm)
    async with app_client(app) as client:
        yield client


@every_llm
async def test_removing_the_group_applies_to_the_next_question_even_with_a_stale_identity_cache(
    chonkit: httpx.AsyncClient,
    world: World,
    settings: Settings,
    db: SingleConnectionDatabase,
    clients: SharedClients,
    app_client: AppClient,
    local_llm: LocalLlmServer | None,
    llm: str,
    llm_calls: list[LlmCall],
) -> None:
    alice = as_user(settings, "alice", "hr")
    async with kappi_with_stale_identities(settings, db, clients, app_client, local_llm) as stale:
        before = await ask_query(stale, alice, world.agent["id"])
        assert world.restricted["name"] in given_collections(before.json())
        revoked = await chonkit.put(f"/collections/{world.restricted['id']}/groups", json={"groups": ["finance"]})
        assert revoked.status_code == 200
        after = await ask_query(stale, alice, world.agent["id"])
    assert given_collections(after.json()) == {world.public["name"]}
    assert "seven million" not in after.text
    assert len(answering(llm, llm_calls)) == 2
    answered_by(llm, world, answering(llm, llm_calls)[1:])  # the question after the revocation


@every_llm
async def test_a_token_without_the_group_loses_access_in_an_existing_chat(
    kappi: httpx.AsyncClient, world: World, settings: Settings, llm: str, llm_calls: list[LlmCall]
) -> None:
    """The chat's history is the model's input too: the first answer, quoting the restricted collection, must not
    be handed to the LLM as history once the asker may no longer read it."""
    member, former = as_user(settings, "alice", "hr"), as_user(settings, "alice")
    chat = (await kappi.post("/chats", json={"agent_id": world.agent["id"]}, headers=member)).json()
    first = await kappi.post(f"/chats/{chat['id']}/messages", json={"content": BONUS_QUESTION}, headers=member)
    assert world.restricted["name"] in given_collections(first.json()["answer"])
    assert "seven million" in first.json()["answer"]["content"]  # what a leaked history would carry
    second = await kappi.post(f"/chats/{chat['id']}/messages", json={"content": QUESTION}, headers=former)
    assert given_collections(second.json()["answer"]) == {world.public["name"]}
    assert "seven million" not in second.json()["answer"]["content"]
    assert_no_leak(world, second)
    assert len(answering(llm, llm_calls)) == 2
    answered_by(llm, world, answering(llm, llm_calls)[1:])
    history = (await kappi.get(f"/chats/{chat['id']}", headers=former)).json()["messages"]
    assert [m["withheld"] for m in history if m["role"] == "assistant"] == [True, False]
    assert "seven million" not in json.dumps(history)
    assert world.restricted["name"] not in json.dumps(history)


async def test_an_agent_restricted_later_stops_answering_in_existing_chats(
    kappi: httpx.AsyncClient, world: World, settings: Settings
) -> None:
    """Extractive only: the question is refused (404) before any LLM is chosen, so a model has nothing to add."""
    admin, alice = as_user(settings, "root", admin=True), as_user(settings, "alice", "hr")
    chat = (await kappi.post("/chats", json={"agent_id": world.agent["id"]}, headers=alice)).json()
    await kappi.patch(f"/admin/agents/{world.agent['id']}", json={"groups": ["exec"]}, headers=admin)
    asked = await kappi.post(f"/chats/{chat['id']}/messages/stream", json={"content": QUESTION}, headers=alice)
    assert (asked.status_code, asked.json()["code"]) == (404, "agent_not_found")
    assert_no_leak(world, asked)


@every_llm
async def test_a_deleted_collection_recreated_under_the_same_name_is_not_searched(
    chonkit: httpx.AsyncClient, kappi: httpx.AsyncClient, world: World, settings: Settings, llm: str,
    llm_calls: list[LlmCall],
) -> None:  # fmt: skip
    """Assignments pin the collection id: a new collection that takes the name is not the one assigned."""
    assert (await chonkit.delete(f"/collections/{world.restricted['id']}")).status_code == 204
    created = await chonkit.post(
        "/collections", json={"name": world.restricted["name"], "vector_provider": "pgvector", "groups": []}
    )
    assert created.status_code == 201
    response = await ask_query(kappi, outsider(settings), world.agent["id"])
    assert given_collections(response.json()) == {world.public["name"]}
    assert "seven million" not in response.text
    assert [call.provider for call in answering(llm, llm_calls)] == [llm]
    assert "seven million" not in answering(llm, llm_calls)[0].given


# -- forged, expired, re-signed and confused tokens --------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _jwt(header: dict[str, Any], claims: dict[str, Any] | bytes, sign: Callable[[bytes], bytes] | None) -> str:
    payload = claims if isinstance(claims, bytes) else json.dumps(claims).encode()
    signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(payload)}"
    return f"{signing_input}.{_b64(sign(signing_input.encode()) if sign else b'')}"


def _hs256(secret: bytes) -> Callable[[bytes], bytes]:
    return lambda message: hmac.new(secret, message, hashlib.sha256).digest()


def _claims(**overrides: Any) -> dict[str, Any]:
    """An attacker's wish list: admin and every group. Expiry and the rest are valid unless overridden."""
    now = int(time.time())
    claims: dict[str, Any] = {"sub": "mallory", "groups": ["hr", "exec"], "roles": ["admin"]}
    claims |= {"iat": now, "nbf": now, "exp": now + 600}
    for key, value in overrides.items():
        if value is None:
            claims.pop(key, None)
        else:
            claims[key] = value
    return claims


RIGHT_KEY = TEST_SECRET.encode()
HS256 = {"alg": "HS256", "typ": "JWT"}


@functools.cache
def _rsa_key(owner: str) -> rsa.RSAPrivateKey:
    """One RSA key per owner (``idp``, ``attacker``), generated on first use."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _rs256(key: rsa.RSAPrivateKey) -> Callable[[bytes], bytes]:
    return lambda message: key.sign(message, padding.PKCS1v15(), hashes.SHA256())


def _tampered() -> str:
    """A genuine token for a nobody, with its payload swapped for the attacker's claims."""
    settings = load_settings({}, data_dir="/nonexistent", auth_hs256_secret=TEST_SECRET)
    header, _, signature = mint_dev_token(settings, subject="mallory").split(".")
    return f"{header}.{_b64(json.dumps(_claims()).encode())}.{signature}"


SECRET_MODE_TOKENS: list[tuple[str, Callable[[], str], str]] = [
    ("random signature", lambda: _jwt(HS256, _claims(), lambda _: secrets.token_bytes(32)), "invalid_signature"),
    ("tampered claims", _tampered, "invalid_signature"),
    ("signature stripped", lambda: _jwt(HS256, _claims(), None), "invalid_signature"),
    ("re-signed with another key", lambda: _jwt(HS256, _claims(), _hs256(b"guessed-secret")), "invalid_signature"),
    ("empty key", lambda: _jwt(HS256, _claims(), _hs256(b"")), "invalid_signature"),
    (
        "expired",
        lambda: _jwt(HS256, _claims(exp=int(time.time()) - 3600, iat=None, nbf=None), _hs256(RIGHT_KEY)),
        "token_expired",
    ),
    (
        "not yet valid",
        lambda: _jwt(HS256, _claims(nbf=int(time.time()) + 3600), _hs256(RIGHT_KEY)),
        "token_not_yet_valid",
    ),
    ("no expiry", lambda: _jwt(HS256, _claims(exp=None), _hs256(RIGHT_KEY)), "malformed_claims"),
    ("alg none", lambda: _jwt({"alg": "none"}, _claims(), None), "unsupported_algorithm"),
    ("alg None", lambda: _jwt({"alg": "None"}, _claims(), None), "unsupported_algorithm"),
    (
        "alg HS512 with the right key",
        lambda: _jwt({"alg": "HS512"}, _claims(), lambda m: hmac.new(RIGHT_KEY, m, hashlib.sha512).digest()),
        "unsupported_algorithm",
    ),
    (
        "alg RS256 in a shared-secret deployment",
        lambda: _jwt({"alg": "RS256"}, _claims(), _rs256(_rsa_key("attacker"))),
        "unsupported_algorithm",
    ),
    (
        "embedded jwk header",
        lambda: _jwt({**HS256, "jwk": {"kty": "oct", "k": _b64(b"mine")}}, _claims(), _hs256(b"mine")),
        "invalid_signature",
    ),
    (
        "kid path traversal",
        lambda: _jwt({**HS256, "kid": "../../../../dev/null"}, _claims(), _hs256(b"")),
        "invalid_signature",
    ),
    ("critical header", lambda: _jwt({**HS256, "crit": ["exp"]}, _claims(), _hs256(RIGHT_KEY)), "malformed_token"),
    ("groups as a string", lambda: _jwt(HS256, _claims(groups="hr"), _hs256(RIGHT_KEY)), "malformed_claims"),
    (
        "groups as a comma list string",
        lambda: _jwt(HS256, _claims(groups="hr,exec"), _hs256(RIGHT_KEY)),
        "malformed_claims",
    ),
    (
        "groups with a non-string item",
        lambda: _jwt(HS256, _claims(groups=[["hr"]]), _hs256(RIGHT_KEY)),
        "malformed_claims",
    ),
    ("groups as an object", lambda: _jwt(HS256, _claims(groups={"hr": True}), _hs256(RIGHT_KEY)), "malformed_claims"),
    ("roles as a string", lambda: _jwt(HS256, _claims(roles="admin"), _hs256(RIGHT_KEY)), "malformed_claims"),
    ("empty subject", lambda: _jwt(HS256, _claims(sub=""), _hs256(RIGHT_KEY)), "malformed_claims"),
    ("claims not an object", lambda: _jwt(HS256, b'["hr"]', _hs256(RIGHT_KEY)), "malformed_token"),
    ("not a JWT", lambda: "not-a-token", "malformed_token"),
]


PROBES = {"chonkit": "/collections", "kappi": "/agents"}
"""A route per service that an accepted forgery would answer with restricted data (admin / hidden agents)."""


def gate_apps(settings: Settings) -> dict[str, Litestar]:
    """Both services, never started: authentication needs no database, so a rejected token costs nothing,
    and a token that got through would reach a handler without a database and fail loudly (not 401)."""
    return {"chonkit": create_chonkit(settings, worker=False), "kappi": create_kappi(settings)}


async def answers(apps: dict[str, Litestar], authorization: str) -> dict[str, tuple[int, str | None]]:
    """Each service's (status, code) for ``GET`` of its probe route with this ``Authorization`` header."""
    results = {}
    for service, app in apps.items():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://ragu.test") as client:
            response = await client.get(PROBES[service], headers={"Authorization": authorization})
        if response.status_code == 401:
            assert response.headers["WWW-Authenticate"].startswith("Bearer")
        results[service] = (response.status_code, response.json().get("code"))
    return results


@pytest.fixture(scope="module")
def gates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Litestar]:
    data_dir = tmp_path_factory.mktemp("gates")
    return gate_apps(load_settings({}, data_dir=str(data_dir), auth_hs256_secret=TEST_SECRET))


@pytest.mark.parametrize(("token", "code"), [t[1:] for t in SECRET_MODE_TOKENS], ids=[t[0] for t in SECRET_MODE_TOKENS])
async def test_forged_and_malformed_tokens_are_401(
    gates: dict[str, Litestar], token: Callable[[], str], code: str
) -> None:
    assert await answers(gates, f"Bearer {token()}") == {"chonkit": (401, code), "kappi": (401, code)}


async def test_a_token_header_nested_past_the_json_decoders_depth_is_401(gates: dict[str, Litestar]) -> None:
    """A token's header is decoded before its signature is checked, so anyone can send one nested 3,000 deep."""
    token = f"{_b64(b'[' * 3_000 + b']' * 3_000)}.{_b64(json.dumps(_claims()).encode())}.{_b64(b'sig')}"
    assert await answers(gates, f"Bearer {token}") == {
        "chonkit": (401, "malformed_token"),
        "kappi": (401, "malformed_token"),
    }


@pytest.mark.parametrize(
    ("header", "code"),
    [
        ("Basic bWFsbG9yeTpobw==", "malformed_token"),
        ("Bearer", "malformed_token"),
        ("bearer  ", "malformed_token"),
        ("Token abc.def.ghi", "malformed_token"),
        ("Bearer a.b.c d.e.f", "malformed_token"),
        ("", "missing_token"),
    ],
)
async def test_malformed_authorization_headers_are_401(gates: dict[str, Litestar], header: str, code: str) -> None:
    assert await answers(gates, header) == {"chonkit": (401, code), "kappi": (401, code)}


async def test_the_same_claims_correctly_signed_are_accepted(
    chonkit: httpx.AsyncClient, kappi: httpx.AsyncClient
) -> None:
    """The control for the forged tokens: the key and the claims are right, so only the forgery fails."""
    headers = {"Authorization": f"Bearer {_jwt(HS256, _claims(), _hs256(RIGHT_KEY))}"}
    assert (await chonkit.get(PROBES["chonkit"], headers=headers)).status_code == 200
    assert (await kappi.get(PROBES["kappi"], headers=headers)).status_code == 200


STRICT = {"auth_audience": "ragu", "auth_issuer": "https://idp.test"}


@pytest.mark.parametrize(
    ("claims", "code"),
    [
        ({"aud": "someone-else", "iss": "https://idp.test"}, "invalid_audience"),
        ({"aud": None, "iss": "https://idp.test"}, "invalid_audience"),
        ({"aud": ["someone-else", "other"], "iss": "https://idp.test"}, "invalid_audience"),
        ({"aud": "ragu", "iss": "https://evil.test"}, "invalid_issuer"),
        ({"aud": "ragu", "iss": None}, "invalid_issuer"),
    ],
    ids=["wrong audience", "no audience", "audience list without ours", "wrong issuer", "no issuer"],
)
async def test_tokens_for_another_audience_or_issuer_are_401(
    settings: Settings, claims: dict[str, Any], code: str
) -> None:
    apps = gate_apps(settings.with_(**STRICT))
    token = _jwt(HS256, _claims(**claims), _hs256(RIGHT_KEY))
    assert await answers(apps, f"Bearer {token}") == {"chonkit": (401, code), "kappi": (401, code)}


@pytest.fixture
def open_service(
    db: SingleConnectionDatabase, clients: SharedClients, app_client: AppClient
) -> Callable[[str, Settings], Any]:
    """A started service (with database) under other auth settings, for the controls that must succeed."""

    def open_(service: str, settings: Settings) -> Any:
        if service == "chonkit":
            return app_client(create_chonkit(settings, database=db, clients=clients, worker=False))
        return app_client(create_kappi(settings, database=db, clients=clients))

    return open_


@pytest.mark.parametrize("service", ["chonkit", "kappi"])
async def test_a_token_for_our_audience_and_issuer_is_accepted(
    settings: Settings, open_service: Callable[[str, Settings], Any], service: str
) -> None:
    token = _jwt(HS256, _claims(aud="ragu", iss="https://idp.test"), _hs256(RIGHT_KEY))
    async with open_service(service, settings.with_(**STRICT)) as client:
        response = await client.get(PROBES[service], headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.text


_IDP_KID = "idp-key-1"


def _public_jwk() -> dict[str, str]:
    numbers = _rsa_key("idp").public_key().public_numbers()
    return {
        "kty": "RSA",
        "kid": _IDP_KID,
        "use": "sig",
        "alg": "RS256",
        "n": _b64(numbers.n.to_bytes((numbers.n.bit_length() + 7) // 8, "big")),
        "e": _b64(numbers.e.to_bytes(3, "big")),
    }


def _public_pem() -> bytes:
    return (
        _rsa_key("idp")
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )


RS256 = {"alg": "RS256", "typ": "JWT", "kid": _IDP_KID}
JWKS_MODE_TOKENS: list[tuple[str, Callable[[], str], str]] = [
    (
        "signed by another key with the same kid",
        lambda: _jwt(RS256, _claims(), _rs256(_rsa_key("attacker"))),
        "invalid_signature",
    ),
    (
        "HS256 keyed with the public key PEM",
        lambda: _jwt({**RS256, "alg": "HS256"}, _claims(), _hs256(_public_pem())),
        "unsupported_algorithm",
    ),
    (
        "HS256 keyed with the public JWK",
        lambda: _jwt({**RS256, "alg": "HS256"}, _claims(), _hs256(json.dumps(_public_jwk()).encode())),
        "unsupported_algorithm",
    ),
    (
        "HS256 keyed with the modulus",
        lambda: _jwt({**RS256, "alg": "HS256"}, _claims(), _hs256(_public_jwk()["n"].encode())),
        "unsupported_algorithm",
    ),
    (
        "alg none naming the kid",
        lambda: _jwt({"alg": "none", "kid": _IDP_KID}, _claims(), None),
        "unsupported_algorithm",
    ),
    (
        "ES256 naming an RSA kid",
        lambda: _jwt({**RS256, "alg": "ES256"}, _claims(), lambda _: secrets.token_bytes(64)),
        "unsupported_algorithm",
    ),
    ("unknown kid", lambda: _jwt({**RS256, "kid": "attacker"}, _claims(), _rs256(_rsa_key("attacker"))), "unknown_key"),
    ("no kid", lambda: _jwt({"alg": "RS256"}, _claims(), _rs256(_rsa_key("idp"))), "unknown_key"),
    (
        "expired, correctly signed",
        lambda: _jwt(RS256, _claims(exp=int(time.time()) - 3600, iat=None, nbf=None), _rs256(_rsa_key("idp"))),
        "token_expired",
    ),
    (
        "groups as a string, correctly signed",
        lambda: _jwt(RS256, _claims(groups="hr"), _rs256(_rsa_key("idp"))),
        "malformed_claims",
    ),
]


def _production(settings: Settings, folder: Path) -> Settings:
    jwks = folder / "jwks.json"
    jwks.write_text(json.dumps({"keys": [_public_jwk()]}))
    return settings.with_(auth_hs256_secret=None, auth_jwks_file=str(jwks))


@pytest.mark.parametrize(("token", "code"), [t[1:] for t in JWKS_MODE_TOKENS], ids=[t[0] for t in JWKS_MODE_TOKENS])
async def test_key_confusion_against_a_jwks_deployment(
    settings: Settings, tmp_path: Path, token: Callable[[], str], code: str
) -> None:
    apps = gate_apps(_production(settings, tmp_path))
    assert await answers(apps, f"Bearer {token()}") == {"chonkit": (401, code), "kappi": (401, code)}


@pytest.mark.parametrize("service", ["chonkit", "kappi"])
async def test_a_token_signed_by_the_identity_provider_is_accepted(
    settings: Settings, tmp_path: Path, open_service: Callable[[str, Settings], Any], service: str
) -> None:
    token = _jwt(RS256, _claims(), _rs256(_rsa_key("idp")))
    async with open_service(service, _production(settings, tmp_path)) as client:
        response = await client.get(PROBES[service], headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.text
