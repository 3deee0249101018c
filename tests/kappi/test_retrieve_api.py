"""``POST /agents/{id}/retrieve``: the stateless query's retrieval without its LLM, through kappi's HTTP API
on the world of ``test_end_to_end`` (hr, legal and public collections; a Board agent only ``exec`` may use)."""

from __future__ import annotations

import uuid

import httpx
import pytest

from common.config import Settings
from tests.kappi.conftest import as_user
from tests.kappi.test_end_to_end import QUESTION, World, world

__all__ = ["world"]


@pytest.mark.parametrize(
    ("groups", "allowed"), [((), {"public"}), (("hr",), {"hr", "public"}), (("legal", "hr"), {"hr", "legal", "public"})]
)
async def test_retrieve_returns_only_the_passages_the_users_groups_may_read(
    kappi: httpx.AsyncClient, world: World, settings: Settings, groups: tuple[str, ...], allowed: set[str]
) -> None:
    user = as_user(settings, "user-" + "-".join(groups), *groups)
    response = await kappi.post(f"/agents/{world.agent['id']}/retrieve", json={"content": QUESTION}, headers=user)
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"citations", "timings"}  # no answer, no usage: no LLM was asked
    assert set(body["timings"]) == {"embed_ms", "search_ms"}
    assert {c["collection"] for c in body["citations"]} == {world.collections[k]["name"] for k in allowed}
    forbidden = {c["name"] for k, c in world.collections.items() if k not in allowed}
    assert not any(name in response.text for name in forbidden)
    scores = [c["score"] for c in body["citations"]]
    assert scores == sorted(scores, reverse=True)
    assert [c["citation"] for c in body["citations"]] == list(range(1, len(scores) + 1))
    assert (await kappi.get("/chats", headers=user)).json() == []


async def test_top_k_caps_the_merged_passages_best_first(
    kappi: httpx.AsyncClient, world: World, settings: Settings
) -> None:
    alice = as_user(settings, "alice", "hr", "legal")
    path = f"/agents/{world.agent['id']}/retrieve"
    everything = (await kappi.post(path, json={"content": QUESTION}, headers=alice)).json()["citations"]
    assert len(everything) >= 3
    capped = (await kappi.post(path, json={"content": QUESTION, "top_k": 2}, headers=alice)).json()["citations"]
    assert capped == everything[:2]


@pytest.mark.parametrize(
    "body", [{"content": QUESTION, "top_k": 0}, {"content": QUESTION, "top_k": 51}, {"content": ""}]
)
async def test_a_bad_retrieve_body_is_a_400_with_a_code(
    kappi: httpx.AsyncClient, world: World, settings: Settings, body: dict[str, object]
) -> None:
    response = await kappi.post(f"/agents/{world.agent['id']}/retrieve", json=body, headers=as_user(settings, "a"))
    assert (response.status_code, response.json()["code"]) == (400, "invalid_request")


async def test_an_agent_the_user_may_not_use_is_not_found_as_an_unknown_one(
    kappi: httpx.AsyncClient, world: World, settings: Settings
) -> None:
    outsider = as_user(settings, "carol", "hr")
    for agent_id in (world.secret_agent["id"], str(uuid.uuid4())):
        response = await kappi.post(f"/agents/{agent_id}/retrieve", json={"content": QUESTION}, headers=outsider)
        assert (response.status_code, response.json()["code"]) == (404, "agent_not_found")
    insider = as_user(settings, "erin", "exec")
    path = f"/agents/{world.secret_agent['id']}/retrieve"
    assert (await kappi.post(path, json={"content": QUESTION}, headers=insider)).status_code == 200
