"""``/metrics`` on both services, served at ``/`` and mounted by ``ragu serve``: the series an operator watches,
labelled by route templates, and never a collection's name."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from chonkit.embedding.worker import EmbeddingWorker
from common.clients import SharedClients
from common.config import Settings
from common.db import Database, SingleConnectionDatabase
from common.errors import Unavailable
from common.http.app import build_service_app
from common.telemetry import LlmCall
from kappi.app import create_app as create_kappi
from tests.chonkit.conftest import bearer, drain
from tests.common.conftest import Served
from tests.kappi.conftest import AppClient, as_user

METRIC_NAMES = {
    "ragu_http_request_duration_seconds",
    "ragu_embedding_queue_items",
    "ragu_embedding_items_total",
    "ragu_embedding_stage_seconds",
    "ragu_retrieval_seconds",
    "ragu_llm_time_to_first_token_seconds",
    "ragu_llm_duration_seconds",
    "ragu_llm_tokens_total",
}


async def seed(
    chonkit: httpx.AsyncClient, chonkit_prefix: str, kappi: httpx.AsyncClient, kappi_prefix: str, settings: Settings
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A restricted collection holding one document (queued, not yet embedded) and an agent that searches it."""
    admin = bearer(settings)
    name = f"Board_secret_{uuid.uuid4().hex[:6]}"
    collection = (
        await chonkit.post(
            f"{chonkit_prefix}/collections",
            json={"name": name, "vector_provider": "pgvector", "groups": ["board"]},
            headers=admin,
        )
    ).json()
    upload = await chonkit.post(
        f"{chonkit_prefix}/documents",
        files=[("files", ("plan.md", b"# Plan\n\nThe merger closes in March.", "text/markdown"))],
        headers=admin,
    )
    document_id = upload.json()["results"][0]["document"]["id"]
    queued = await chonkit.post(
        f"{chonkit_prefix}/collections/{collection['id']}/documents",
        json={"document_ids": [document_id]},
        headers=admin,
    )
    assert queued.status_code < 300, queued.text
    agent = (await kappi.post(f"{kappi_prefix}/admin/agents", json={"name": "Board helper"}, headers=admin)).json()
    assign = {"add": [{"vector_provider": "pgvector", "name": name}]}
    assigned = await kappi.put(f"{kappi_prefix}/admin/agents/{agent['id']}/collections", json=assign, headers=admin)
    assert all(r["ok"] for r in assigned.json()["results"]), assigned.text
    return collection, agent


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of a metrics page, keyed by name and labels (parsed by prometheus_client's own parser)."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(name: str, **labels: str) -> float:
    """One sample from this process's registry (0 before its first observation)."""
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def scrape(client: httpx.AsyncClient, prefix: str) -> str:
    response = await client.get(f"{prefix}/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "text/plain; version=1.0.0; charset=utf-8"
    return response.text


async def test_metrics_answer_on_each_service_and_name_no_collection(
    served: Served, settings: Settings, worker: EmbeddingWorker
) -> None:
    (chonkit, chonkit_prefix), (kappi, kappi_prefix) = served["chonkit"], served["kappi"]
    collection, agent = await seed(chonkit, chonkit_prefix, kappi, kappi_prefix, settings)
    await drain(worker)
    member = as_user(settings, "ann", "board")
    asked = await kappi.post(
        f"{kappi_prefix}/agents/{agent['id']}/query", json={"content": "When does the merger close?"}, headers=member
    )
    assert asked.status_code == 200, asked.text
    assert asked.json()["citations"][0]["collection"] == collection["name"]  # the name was there to leak

    for client, prefix in served.values():
        text = await scrape(client, prefix)
        families = {f.name for f in text_string_to_metric_families(text)}
        assert {n.removesuffix("_total") for n in METRIC_NAMES} <= families
        assert collection["name"] not in text
        assert collection["id"] not in text
        assert agent["id"] not in text  # routes are templates, not the paths requested
    routes = {dict(labels).get("route") for (_, labels) in samples(text)}
    assert "/agents/{agent_id}/query" in routes
    assert "/collections/{collection_id}/documents" in routes


async def test_the_embedding_queue_and_its_outcomes_are_counted(
    served: Served, settings: Settings, worker: EmbeddingWorker
) -> None:
    (chonkit, chonkit_prefix), (kappi, kappi_prefix) = served["chonkit"], served["kappi"]
    await seed(chonkit, chonkit_prefix, kappi, kappi_prefix, settings)
    queued = samples(await scrape(chonkit, chonkit_prefix))
    assert queued[("ragu_embedding_queue_items", frozenset({("stage", "queued")}))] == 1
    done, parsed = (
        value("ragu_embedding_items_total", outcome="done"),
        value("ragu_embedding_stage_seconds_count", stage="parse"),
    )

    assert await drain(worker) == 1

    assert value("ragu_embedding_items_total", outcome="done") == done + 1
    for stage in ("parse", "chunk", "embed", "write"):
        assert value("ragu_embedding_stage_seconds_count", stage=stage) >= 1
    assert value("ragu_embedding_stage_seconds_count", stage="parse") == parsed + 1
    drained = samples(await scrape(chonkit, chonkit_prefix))
    assert drained[("ragu_embedding_queue_items", frozenset({("stage", "queued")}))] == 0


async def test_requests_are_timed_by_route_template_and_status(served: Served, settings: Settings) -> None:
    kappi, prefix = served["kappi"]
    labels = {"service": "kappi", "method": "GET", "route": "/chats/{chat_id}", "status": "404"}
    before = value("ragu_http_request_duration_seconds_count", **labels)
    missing = uuid.uuid4()
    response = await kappi.get(f"{prefix}/chats/{missing}", headers=as_user(settings, "ann"))
    assert response.status_code == 404
    assert value("ragu_http_request_duration_seconds_count", **labels) == before + 1
    assert str(missing) not in await scrape(kappi, prefix)


async def test_a_question_records_retrieval_and_llm_timings(
    served: Served, settings: Settings, worker: EmbeddingWorker
) -> None:
    (chonkit, chonkit_prefix), (kappi, kappi_prefix) = served["chonkit"], served["kappi"]
    _, agent = await seed(chonkit, chonkit_prefix, kappi, kappi_prefix, settings)
    await drain(worker)
    before = {
        "embed": value("ragu_retrieval_seconds_count", step="embed"),
        "search": value("ragu_retrieval_seconds_count", step="search"),
        "first_token": value("ragu_llm_time_to_first_token_seconds_count", provider="extractive"),
        "llm": value("ragu_llm_duration_seconds_count", provider="extractive", outcome="complete"),
    }
    member = as_user(settings, "ann", "board")
    chat = (await kappi.post(f"{kappi_prefix}/chats", json={"agent_id": agent["id"]}, headers=member)).json()
    stream = await kappi.post(
        f"{kappi_prefix}/chats/{chat['id']}/messages/stream", json={"content": "When does it close?"}, headers=member
    )
    assert stream.status_code == 200
    after = {
        "embed": value("ragu_retrieval_seconds_count", step="embed"),
        "search": value("ragu_retrieval_seconds_count", step="search"),
        "first_token": value("ragu_llm_time_to_first_token_seconds_count", provider="extractive"),
        "llm": value("ragu_llm_duration_seconds_count", provider="extractive", outcome="complete"),
    }
    assert {k: after[k] - before[k] for k in before} == {"embed": 1, "search": 1, "first_token": 1, "llm": 1}


def test_llm_tokens_and_failures_are_counted_by_provider() -> None:
    def counts() -> dict[str, float]:
        return {
            "input": value("ragu_llm_tokens_total", provider="stand-in", kind="input"),
            "output": value("ragu_llm_tokens_total", provider="stand-in", kind="output"),
            "first_token": value("ragu_llm_time_to_first_token_seconds_count", provider="stand-in"),
            "complete": value("ragu_llm_duration_seconds_count", provider="stand-in", outcome="complete"),
            "error": value("ragu_llm_duration_seconds_count", provider="stand-in", outcome="error"),
        }

    before = counts()
    with LlmCall("stand-in", "model-a") as call:
        call.token()
        call.token()  # only the first token is the time to first token
        call.usage(120, 7)
    with pytest.raises(Unavailable), LlmCall("stand-in", "model-a"):
        raise Unavailable("upstream down", code="llm_unavailable")
    after = counts()
    assert {k: after[k] - before[k] for k in before} == {
        "input": 120,
        "output": 7,
        "first_token": 1,
        "complete": 1,
        "error": 1,
    }


async def test_metrics_can_be_switched_off(
    settings: Settings, db: SingleConnectionDatabase, clients: SharedClients, app_client: AppClient
) -> None:
    off = settings.with_(metrics=False)
    async with app_client(create_kappi(off, database=db, clients=clients)) as kappi:
        response = await kappi.get("/metrics")
    assert (response.status_code, response.json()["code"]) == (404, "route_not_found")


async def test_metrics_still_answer_when_the_database_does_not(
    settings: Settings, db: SingleConnectionDatabase, app_client: AppClient, caplog: pytest.LogCaptureFixture
) -> None:
    async def database_down(_: Database) -> None:
        raise Unavailable("the database is unavailable", code="database_unavailable")

    app = build_service_app(
        service_name="chonkit",
        title="t",
        description="d",
        settings=settings,
        route_handlers=[],
        database=db,
        before_scrape=database_down,
    )
    async with app_client(app) as client:
        text = await scrape(client, "")
    assert "ragu_http_request_duration_seconds" in text
    assert "could not read the database" in caplog.text
