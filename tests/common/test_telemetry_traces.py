"""OpenTelemetry traces of a question and of an embedding job, recorded with the SDK's in-memory exporter."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from chonkit.app import create_app as create_chonkit
from chonkit.embedding.worker import EmbeddingWorker
from common import telemetry
from common.clients import SharedClients
from common.config import Settings, load_settings
from common.db import SingleConnectionDatabase
from common.errors import InvalidInput
from kappi.app import create_app as create_kappi
from tests.chonkit.conftest import drain
from tests.common.test_telemetry import seed
from tests.kappi.conftest import AppClient, as_user

QUESTION_SPANS = ["ragu.auth", "kappi.access", "kappi.embed", "kappi.search", "kappi.llm"]


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Tracing on for this test only: every finished span lands in the exporter."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.use_tracer_provider(provider)
    yield exporter
    telemetry.use_tracer_provider(None)
    provider.shutdown()


@pytest.fixture
async def services(
    spans: InMemorySpanExporter,
    settings: Settings,
    db: SingleConnectionDatabase,
    clients: SharedClients,
    app_client: AppClient,
) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    """Chonkit and kappi built while tracing is on (the apps take Litestar's tracing plugin then)."""
    async with (
        app_client(create_chonkit(settings, database=db, clients=clients, worker=False)) as chonkit,
        app_client(create_kappi(settings, database=db, clients=clients)) as kappi,
    ):
        yield chonkit, kappi


def named(spans: Sequence[ReadableSpan], name: str) -> ReadableSpan:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, (name, [s.name for s in spans])
    return found[0]


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


def trace_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.trace_id


def everything_said(spans: Sequence[ReadableSpan]) -> str:
    """Names, attributes and events of every span, as one text to search for what must not be there."""
    parts: list[Any] = []
    for s in spans:
        parts += [s.name, dict(s.attributes or {}), [(e.name, dict(e.attributes or {})) for e in s.events]]
    return repr(parts)


async def test_a_streamed_question_is_one_trace_with_auth_access_embed_search_and_llm_spans(
    services: tuple[httpx.AsyncClient, httpx.AsyncClient],
    spans: InMemorySpanExporter,
    settings: Settings,
    worker: EmbeddingWorker,
) -> None:
    chonkit, kappi = services
    collection, agent = await seed(chonkit, "", kappi, "", settings)
    await drain(worker)
    member = as_user(settings, "ann", "board")
    chat = (await kappi.post("/chats", json={"agent_id": agent["id"]}, headers=member)).json()
    spans.clear()

    response = await kappi.post(
        f"/chats/{chat['id']}/messages/stream", json={"content": "When does the merger close?"}, headers=member
    )
    assert response.status_code == 200
    assert collection["name"] in response.text  # cited: the name was there to leak

    finished = spans.get_finished_spans()
    server = named(finished, "POST /chats/{chat_id}/messages/stream")
    assert server.parent is None
    assert (server.attributes or {})["http.route"] == "/chats/{chat_id}/messages/stream"
    steps = [named(finished, name) for name in QUESTION_SPANS]
    assert {trace_id(s) for s in steps} == {trace_id(server)}
    assert [parent_id(s) for s in steps] == [span_id(server)] * len(steps)
    starts = [s.start_time or 0 for s in steps]
    assert starts == sorted(starts)  # auth, then access, embed, search, then the LLM
    llm = named(finished, "kappi.llm")
    assert [e.name for e in llm.events] == ["first_token"]
    attributes = llm.attributes or {}
    assert attributes["gen_ai.system"] == "extractive"
    assert attributes["ragu.outcome"] == "complete"
    assert float(str(attributes["ragu.time_to_first_token_ms"])) >= 0
    assert (named(finished, "kappi.search").attributes or {})["ragu.collections_searched"] == 1
    said = everything_said(finished)
    assert collection["name"] not in said


async def test_a_stateless_question_traces_the_same_steps(
    services: tuple[httpx.AsyncClient, httpx.AsyncClient],
    spans: InMemorySpanExporter,
    settings: Settings,
    worker: EmbeddingWorker,
) -> None:
    chonkit, kappi = services
    _, agent = await seed(chonkit, "", kappi, "", settings)
    await drain(worker)
    spans.clear()
    member = as_user(settings, "ann", "board")
    asked = await kappi.post(
        f"/agents/{agent['id']}/query", json={"content": "When does the merger close?"}, headers=member
    )
    assert asked.status_code == 200

    finished = spans.get_finished_spans()
    server = named(finished, "POST /agents/{agent_id}/query")
    assert [parent_id(named(finished, name)) for name in QUESTION_SPANS] == [span_id(server)] * len(QUESTION_SPANS)


async def test_an_embedding_job_item_traces_parse_chunk_embed_and_write(
    services: tuple[httpx.AsyncClient, httpx.AsyncClient],
    spans: InMemorySpanExporter,
    settings: Settings,
    worker: EmbeddingWorker,
) -> None:
    chonkit, kappi = services
    collection, _ = await seed(chonkit, "", kappi, "", settings)
    spans.clear()

    assert await drain(worker) == 1

    finished = spans.get_finished_spans()
    item = named(finished, "chonkit.job_item")
    assert item.parent is None
    assert (item.attributes or {})["ragu.collection_id"] == collection["id"]
    stages = [named(finished, f"chonkit.{stage}") for stage in ("parse", "chunk", "embed", "write")]
    assert [parent_id(s) for s in stages] == [span_id(item)] * 4
    for earlier, later in itertools.pairwise(stages):
        assert (earlier.end_time or 0) <= (later.start_time or 0)  # one after the other, as they ran
    assert (item.start_time or 0) <= (stages[0].start_time or 0)
    assert (stages[-1].end_time or 0) <= (item.end_time or 0)
    assert collection["name"] not in everything_said(finished)


async def test_tracing_off_records_nothing_and_adds_no_plugin(
    settings: Settings, db: SingleConnectionDatabase, clients: SharedClients, app_client: AppClient
) -> None:
    assert telemetry.tracer_provider() is None
    app = create_kappi(settings, database=db, clients=clients)
    assert not [p for p in app.plugins if type(p).__name__ == "OpenTelemetryPlugin"]
    with telemetry.span("kappi.access") as span:
        assert not span.is_recording()


def test_the_console_exporter_writes_each_span_when_the_process_ends() -> None:
    """In a process of its own: a configured exporter is the process's tracer provider from then on."""
    script = (
        "from common import telemetry\n"
        "telemetry.configure_tracing('console')\n"
        "with telemetry.span('kappi.search', {'ragu.collections_searched': 2}):\n"
        "    pass\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(  # noqa: S603
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60, check=True
    )
    assert '"name": "kappi.search"' in done.stdout
    assert '"service.name": "ragu"' in done.stdout
    assert '"ragu.collections_searched": 2' in done.stdout


def test_an_unknown_exporter_is_refused_by_name() -> None:
    with pytest.raises(InvalidInput) as refused:
        load_settings({"RAGU_OTEL_EXPORTER": "jaeger"})
    assert refused.value.code == "invalid_setting"
    assert "otel_exporter" in refused.value.detail or "RAGU_OTEL_EXPORTER" in refused.value.detail
