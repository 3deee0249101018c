"""``POST /agents/{id}/retrieve``: the stateless query's retrieval without its LLM, through kappi's HTTP API
on the world of ``test_end_to_end`` (hr, legal and public collections; a Board agent only ``exec`` may use)."""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from chonkit.embedding.worker import EmbeddingWorker
from common.config import Settings
from tests.chonkit.conftest import drain
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
    assert set(body) == {"citations", "timings", "reranked"}  # no answer, no usage: no LLM was asked
    assert set(body["timings"]) == {"embed_ms", "search_ms", "rerank_ms"}
    assert body["reranked"] is None  # the agent names no reranker
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
    "body", [{"content": QUESTION, "top_k": 0}, {"content": QUESTION, "top_k": 201}, {"content": ""}]
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


# retrieval controls: filters, grouping, depth, legs — through both services' HTTP APIs


@dataclass
class Tagged:
    """One public collection of three documents — tagged policy+hr/final, faq/draft, and plain — and agents over it:
    ``hybrid`` (its assignment sent no mode), ``dense``, and ``policy`` (hybrid, only documents tagged policy)."""

    collection: dict[str, Any]
    documents: dict[str, str]
    agents: dict[str, str]


TAGGED_DOCUMENTS = {
    "policy": ("policy.txt", ["policy", "hr"], "final", "Vacation policy: employees get 25 vacation days a year."),
    "faq": ("faq.txt", ["faq"], "draft", "FAQ: how do I ask for vacation days? Through the portal."),
    "plain": ("plain.txt", None, None, "Office hours are 9 to 5, and the canteen opens at noon."),
}


@pytest.fixture
async def tagged(
    chonkit: httpx.AsyncClient, kappi: httpx.AsyncClient, worker: EmbeddingWorker, settings: Settings
) -> Tagged:
    name = f"Tagged_{uuid.uuid4().hex[:6]}"
    collection = (await chonkit.post("/collections", json={"name": name, "vector_provider": "pgvector"})).json()
    documents = {}
    for key, (filename, tags, label, text) in TAGGED_DOCUMENTS.items():
        upload = await chonkit.post("/documents", files=[("files", (filename, text.encode(), "text/plain"))])
        document_id = upload.json()["results"][0]["document"]["id"]
        if tags is not None:
            patched = await chonkit.patch(f"/documents/{document_id}", json={"tags": tags, "label": label})
            assert patched.status_code == 200, patched.text
        documents[key] = document_id
    await chonkit.post(f"/collections/{collection['id']}/documents", json={"document_ids": list(documents.values())})
    await drain(worker)
    admin = as_user(settings, "root", admin=True)
    assignments: dict[str, dict[str, Any]] = {"hybrid": {}, "dense": {"mode": "dense"}, "policy": {"tags": ["policy"]}}
    agents = {}
    for key, extra in assignments.items():
        agent = (await kappi.post("/admin/agents", json={"name": key}, headers=admin)).json()
        spec = {"vector_provider": "pgvector", "name": name, **extra}
        report = await kappi.put(f"/admin/agents/{agent['id']}/collections", json={"add": [spec]}, headers=admin)
        assert report.json()["collections"][0]["mode"] == extra.get("mode", "hybrid")
        agents[key] = agent["id"]
    return Tagged(collection=collection, documents=documents, agents=agents)


async def _retrieved(kappi: httpx.AsyncClient, settings: Settings, agent_id: str, **body: Any) -> list[dict[str, Any]]:
    response = await kappi.post(
        f"/agents/{agent_id}/retrieve", json={"content": QUESTION, **body}, headers=as_user(settings, "u")
    )
    assert response.status_code == 200, response.text
    citations: list[dict[str, Any]] = response.json()["citations"]
    return citations


def _documents(tagged: Tagged, citations: list[dict[str, Any]]) -> set[str]:
    names = {v: k for k, v in tagged.documents.items()}
    return {names[c["document_id"]] for c in citations}


@pytest.mark.parametrize(
    ("filters", "found"),
    [
        ({}, {"policy", "faq", "plain"}),
        ({"tags": ["faq"]}, {"faq"}),
        ({"tags": ["hr", "faq"]}, {"policy", "faq"}),
        ({"labels": ["final"]}, {"policy"}),
        ({"tags": ["faq"], "labels": ["final"]}, set()),
        ({"tags": ["nobody-uses-this"]}, set()),
    ],
)
async def test_retrieve_filters_keep_only_the_documents_they_name(
    kappi: httpx.AsyncClient, tagged: Tagged, settings: Settings, filters: dict[str, Any], found: set[str]
) -> None:
    citations = await _retrieved(kappi, settings, tagged.agents["hybrid"], filters=filters)
    assert _documents(tagged, citations) == found


@pytest.mark.parametrize(
    ("filters", "found"),
    [
        ({}, {"policy"}),
        ({"tags": ["faq"]}, set()),
        ({"tags": ["faq", "policy"]}, {"policy"}),
        ({"labels": ["draft"]}, set()),
    ],
)
async def test_a_requests_filters_narrow_the_assignments_and_never_widen_them(
    kappi: httpx.AsyncClient, tagged: Tagged, settings: Settings, filters: dict[str, Any], found: set[str]
) -> None:
    citations = await _retrieved(kappi, settings, tagged.agents["policy"], filters=filters)
    assert _documents(tagged, citations) == found


async def test_the_query_api_takes_filters_too(kappi: httpx.AsyncClient, tagged: Tagged, settings: Settings) -> None:
    user = as_user(settings, "u")
    path = f"/agents/{tagged.agents['hybrid']}/query"
    response = await kappi.post(path, json={"content": QUESTION, "filters": {"tags": ["faq"]}}, headers=user)
    assert response.status_code == 200, response.text
    body = response.json()
    given = body["citations"] + body.get("also_retrieved", [])
    assert given
    assert _documents(tagged, given) == {"faq"}


async def test_hybrid_citations_say_which_leg_found_them_and_dense_ones_carry_none(
    kappi: httpx.AsyncClient, tagged: Tagged, settings: Settings
) -> None:
    hybrid = await _retrieved(kappi, settings, tagged.agents["hybrid"])
    dense = await _retrieved(kappi, settings, tagged.agents["dense"])

    assert all(c["legs"] is None for c in dense)
    legs = {name: c["legs"] for c in hybrid for name in _documents(tagged, [c])}
    assert set(legs["policy"]) == {"dense_rank", "lexical_rank", "lexical_score", "fused_score"}
    assert legs["policy"]["lexical_rank"] is not None
    assert legs["policy"]["dense_rank"] is not None
    assert legs["plain"]["lexical_rank"] is None  # not one of the question's words
    assert [c["score"] for c in hybrid] == [round(c["legs"]["fused_score"], 6) for c in hybrid]
    assert all(c["rerank_score"] is None for c in hybrid + dense)


async def test_group_by_document_gives_each_documents_best_passage_with_its_count(
    chonkit: httpx.AsyncClient, kappi: httpx.AsyncClient, worker: EmbeddingWorker, settings: Settings
) -> None:
    name = f"Long_{uuid.uuid4().hex[:6]}"
    collection = (await chonkit.post("/collections", json={"name": name, "vector_provider": "pgvector"})).json()
    texts = {
        "long.txt": " ".join(f"Vacation rule {i}: employees get vacation days for reason {i}." for i in range(120)),
        "short.txt": "Vacation days are counted in working days.",
    }
    ids = []
    for filename, text in texts.items():
        upload = await chonkit.post("/documents", files=[("files", (filename, text.encode(), "text/plain"))])
        ids.append(upload.json()["results"][0]["document"]["id"])
        small = {"chunk": {"strategy": "fixed", "size": 16, "overlap": 0}}
        assert (await chonkit.put(f"/documents/{ids[-1]}/config", json=small)).status_code == 200
    await chonkit.post(f"/collections/{collection['id']}/documents", json={"document_ids": ids})
    await drain(worker)
    admin = as_user(settings, "root", admin=True)
    agent = (await kappi.post("/admin/agents", json={"name": "Long"}, headers=admin)).json()
    spec = {"vector_provider": "pgvector", "name": name, "top_k": 50}
    await kappi.put(f"/admin/agents/{agent['id']}/collections", json={"add": [spec]}, headers=admin)

    chunks = await _retrieved(kappi, settings, agent["id"], top_k=200)
    grouped = await _retrieved(kappi, settings, agent["id"], top_k=200, group_by="document")

    assert len(chunks) > 50  # searched 200 deep, past the assignment's own 50
    assert len({c["document_id"] for c in chunks}) == 2
    assert [c["document_id"] for c in grouped] == list(dict.fromkeys(c["document_id"] for c in chunks))
    counts = Counter(c["document_id"] for c in chunks)
    assert [c["document_hits"] for c in grouped] == [counts[c["document_id"]] for c in grouped]
    best = {c["document_id"]: c for c in reversed(chunks)}
    assert [c["text"] for c in grouped] == [best[c["document_id"]]["text"] for c in grouped]
    assert [c["citation"] for c in grouped] == [1, 2]
    assert all(c["document_hits"] is None for c in chunks)


@pytest.mark.parametrize(
    "body",
    [
        {"content": QUESTION, "top_k": 201},
        {"content": QUESTION, "group_by": "page"},
        {"content": QUESTION, "filters": {"tags": []}},
        {"content": QUESTION, "filters": {"tags": ["a"], "owner": "me"}},
        {"content": QUESTION, "filters": {"labels": [""]}},
    ],
)
async def test_bad_retrieval_controls_are_a_400_with_a_code(
    kappi: httpx.AsyncClient, world: World, settings: Settings, body: dict[str, object]
) -> None:
    response = await kappi.post(f"/agents/{world.agent['id']}/retrieve", json=body, headers=as_user(settings, "a"))
    assert (response.status_code, response.json()["code"]) == (400, "invalid_request")
    query = await kappi.post(
        f"/agents/{world.agent['id']}/query",
        json={"content": QUESTION, "filters": body.get("filters", {"tags": []})},
        headers=as_user(settings, "a"),
    )
    assert (query.status_code, query.json()["code"]) == (400, "invalid_request")
