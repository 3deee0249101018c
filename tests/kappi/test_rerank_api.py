"""An agent's reranker through kappi's HTTP APIs, against the stand-in speaking Cohere's ``/v2/rerank``: saved with
the agent (its default model when none is named, 422 for an unknown one), applied to the merged passages of the
retrieve and query APIs, and — when the upstream is down — left out: the passages come in retrieval's order, with
no ``rerank_score``, and retrieve says ``reranked: false``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from common.clients import SharedClients
from common.config import Settings
from common.db import SingleConnectionDatabase
from common.rerankers import default_rerankers
from kappi.app import create_app as create_kappi
from tests.common.rerankers.standin import running_rerank_standin, standin_order, standin_relevance
from tests.kappi.conftest import QUESTION, AppClient, Placed, Shelf, as_user
from tests.support.cohere_standin import CohereStandIn

KEY = "kappi-rerank-key"
TEXTS = [
    "The cafeteria opens at eight.",
    "Vacation days: see the portal.",
    "How many vacation days do employees get? Thirty vacation days a year.",
]


@pytest.fixture
def standin() -> Iterator[CohereStandIn]:
    with running_rerank_standin(api_key=KEY) as server:
        yield server


@pytest.fixture
async def reranking_kappi(
    settings: Settings, db: SingleConnectionDatabase, clients: SharedClients, app_client: AppClient,
    standin: CohereStandIn,
) -> AsyncIterator[httpx.AsyncClient]:  # fmt: skip
    rerankers = default_rerankers(cohere_api_key=KEY, cohere_base_url=standin.base_url, timeout_seconds=5)
    async with app_client(create_kappi(settings, database=db, clients=clients, rerankers=rerankers)) as client:
        yield client


async def _agent(kappi: httpx.AsyncClient, settings: Settings, shelf: Shelf, **config: Any) -> dict[str, Any]:
    admin = as_user(settings, "root", admin=True)
    handbook = await shelf.collection(
        chunks=[Placed(score=s, content=t) for s, t in zip((0.9, 0.8, 0.7), TEXTS, strict=True)]
    )
    agent = (await kappi.post("/admin/agents", json={"name": "Reranked", **config}, headers=admin)).json()
    spec = {"vector_provider": "qdrant", "name": handbook.name, "mode": "dense"}
    report = await kappi.put(f"/admin/agents/{agent['id']}/collections", json={"add": [spec]}, headers=admin)
    assert report.json()["results"][0]["ok"], report.text
    result: dict[str, Any] = agent
    return result


async def test_an_agents_reranker_is_saved_with_its_default_model_and_an_unknown_one_is_a_422(
    reranking_kappi: httpx.AsyncClient, settings: Settings
) -> None:
    admin = as_user(settings, "root", admin=True)
    saved = await reranking_kappi.post("/admin/agents", json={"name": "R", "reranker": "cohere"}, headers=admin)
    assert saved.status_code == 201, saved.text
    assert (saved.json()["config"]["reranker"], saved.json()["config"]["rerank_model"]) == ("cohere", "rerank-v3.5")
    unknown = await reranking_kappi.post("/admin/agents", json={"name": "R", "reranker": "jina"}, headers=admin)
    assert (unknown.status_code, unknown.json()["code"]) == (422, "unknown_reranker")
    assert unknown.json()["valid_providers"] == ["cohere"]


async def test_retrieve_and_query_come_in_the_rerankers_order_standin(
    reranking_kappi: httpx.AsyncClient, settings: Settings, shelf: Shelf, standin: CohereStandIn
) -> None:
    agent = await _agent(reranking_kappi, settings, shelf, reranker="cohere")
    user = as_user(settings, "u")

    retrieved = (
        await reranking_kappi.post(f"/agents/{agent['id']}/retrieve", json={"content": QUESTION}, headers=user)
    ).json()
    queried = (
        await reranking_kappi.post(f"/agents/{agent['id']}/query", json={"content": QUESTION}, headers=user)
    ).json()

    order = [TEXTS[i] for i in standin_order(QUESTION, TEXTS)]
    assert order != TEXTS
    assert retrieved["reranked"] is True
    assert [c["text"] for c in retrieved["citations"]] == order
    assert [c["rerank_score"] for c in retrieved["citations"]] == [standin_relevance(QUESTION, t) for t in order]
    given = queried["citations"] + queried.get("also_retrieved", [])
    assert given
    assert [c["rerank_score"] for c in given] == [standin_relevance(QUESTION, c["text"]) for c in given]
    assert [r.path for r in standin.requests] == ["/v2/rerank", "/v2/rerank"]


async def test_with_the_reranker_down_the_answer_still_comes_unreranked_and_says_so_standin(
    reranking_kappi: httpx.AsyncClient, settings: Settings, shelf: Shelf, standin: CohereStandIn
) -> None:
    agent = await _agent(reranking_kappi, settings, shelf, reranker="cohere")
    user = as_user(settings, "u")
    standin.fail_next(503, times=2)

    retrieved = await reranking_kappi.post(f"/agents/{agent['id']}/retrieve", json={"content": QUESTION}, headers=user)
    queried = await reranking_kappi.post(f"/agents/{agent['id']}/query", json={"content": QUESTION}, headers=user)

    assert (retrieved.status_code, queried.status_code) == (200, 200)
    assert retrieved.json()["reranked"] is False
    assert [c["text"] for c in retrieved.json()["citations"]] == TEXTS  # retrieval's order
    body = queried.json()
    given = body["citations"] + body.get("also_retrieved", [])
    assert given
    assert all(c["rerank_score"] is None for c in retrieved.json()["citations"] + given)
    assert body["answer"].strip()


async def test_an_agent_without_a_reranker_never_calls_one(
    reranking_kappi: httpx.AsyncClient, settings: Settings, shelf: Shelf, standin: CohereStandIn
) -> None:
    agent = await _agent(reranking_kappi, settings, shelf)
    retrieved = (
        await reranking_kappi.post(
            f"/agents/{agent['id']}/retrieve", json={"content": QUESTION}, headers=as_user(settings, "u")
        )
    ).json()
    assert (retrieved["reranked"], [c["text"] for c in retrieved["citations"]]) == (None, TEXTS)
    assert standin.requests == []
