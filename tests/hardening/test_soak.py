"""The soak (``bench/soak.py``) in a short, bounded form: a real ``ragu serve`` under mixed load from a few users.

The full form (ten minutes, 24 users) is ``python -m bench.soak``; this one keeps every check and shortens
only the clock, so a defect that shows up in the first minute of sustained concurrent use fails CI.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from bench.soak import (
    CHONKIT,
    COLLECTIONS,
    OPERATIONS,
    CollectionInfo,
    Load,
    RaguServer,
    Recorder,
    World,
    chat_user,
    percentiles,
    rss_figures,
    soak,
    sse_events,
    verdict,
)

DURATION_SECONDS = 35.0
USERS = 6
"""One admin and five chat users (profiles: no groups, hr, legal, eng, hr + legal)."""
MAX_RSS_GROWTH_MB = 24.0
"""How much the server's RSS may grow after the warm-up (its first 9 s). Legitimate growth is bounded: the
query-vector cache holds at most 2,048 vectors (~4 MB with keys), asyncpg's statement caches and pools are
capped, and onnxruntime's arena grows once to the largest batch; runs grow by 1-2 MB. A per-request leak of
50 KB (a retained response, parsed PDF or stream buffer) over the ~500 requests after warm-up exceeds it."""
MIN_DONE = {"chat_stream": 20, "query": 10, "chat_history": 3, "chat_list": 3, "agents_list": 3, "probe": 3}
"""Successful operations required of each type; any type not listed needs at least one."""


@pytest.fixture(scope="module")
def result() -> dict[str, Any]:
    outcome = soak(DURATION_SECONDS, USERS)
    print(verdict(outcome))
    return outcome


def test_soak_has_no_errors(result: dict[str, Any]) -> None:
    errors = result["errors"]
    assert errors["total"] == 0, (errors["by_kind"], errors["samples"], result["server"]["log"])
    assert result["server"]["clean_shutdown"]


def test_soak_leaks_nothing_outside_the_users_groups(result: dict[str, Any]) -> None:
    leaks = result["leaks"]
    assert leaks["total"] == 0, (leaks["by_kind"], leaks["samples"])
    checks = result["checks"]
    assert checks["citations_checked"] > 100
    assert checks["user_responses_checked"] > 100
    assert sum(v for k, v in checks.items() if k.startswith("probes_")) >= 3


def test_soak_completes_every_kind_of_operation(result: dict[str, Any]) -> None:
    done = {op: result["operations"][op]["count"] for op in OPERATIONS}
    short = {op: n for op, n in done.items() if n < MIN_DONE.get(op, 1)}
    assert not short, f"too few successful operations: {short} (all: {done})"
    assert result["checks"]["documents_embedded"] >= 1
    assert result["checks"]["chat_events_parsed"] >= 3 * done["chat_stream"]


def test_soak_server_memory_stays_bounded_after_warmup(result: dict[str, Any]) -> None:
    rss = result["server"]["rss_mb"]
    growth = rss["max_after_warmup"] - rss["at_warmup_end"]
    assert growth < MAX_RSS_GROWTH_MB, rss
    assert len(result["server"]["samples"]) >= 10


async def test_the_leak_checks_catch_what_the_users_groups_do_not_allow() -> None:
    """The soak's zero is only worth something if its checks see a leak: a marker, a name, a collection or
    document id, or a citation of a collection outside the user's groups."""
    world = World({name: CollectionInfo(name, groups, f"mark{i}z", str(uuid.uuid4())) for i, (name, groups) in
                   enumerate(COLLECTIONS)})  # fmt: skip
    hr, legal, public = (world.collections[n] for n in ("Soak_Hr", "Soak_Legal", "Soak_Public"))
    hr_document, public_document = str(uuid.uuid4()), str(uuid.uuid4())
    world.documents = {hr_document: {hr.name}, public_document: {public.name}}
    user = chat_user(world, "soak-user", ("legal",), lambda *_: {}, random.Random(0))
    async with httpx.AsyncClient() as client:
        load = Load(client, world, Recorder())
        load.inspect("query", user, f"{legal.marker} {legal.name} {legal.id} {public.marker} {public_document}")
        assert not load.rec.leaks
        for seen in (hr.marker, hr.name, hr.id, hr_document):
            load.inspect("query", user, f'{{"text": "... {seen} ..."}}')
        load.check_citations("query", user, [{"collection": hr.name, "document_id": hr_document}], None)
    assert load.rec.leaks == Counter(
        {
            "query:forbidden_text": 2,
            "query:forbidden_collection_id": 1,
            "query:forbidden_document_id": 1,
            "query:citation_outside_groups": 1,
        }
    )


def test_rss_figures_fit_a_line_after_the_warmup() -> None:
    # 100 MB during the warm-up, then +1 MB every 6 s: 10 MB/min
    samples = [(0.0, 100.0, 1, 1), (5.0, 150.0, 1, 1)] + [(10.0 + 6 * i, 200.0 + i, 1, 1) for i in range(10)]
    figures = rss_figures(samples, warmup=10.0)
    assert figures["slope_mb_per_min_after_warmup"] == pytest.approx(10.0)
    assert (figures["start"], figures["at_warmup_end"], figures["end"], figures["max"]) == (100.0, 200.0, 209.0, 209.0)
    assert figures["growth_after_warmup"] == 9.0


def test_percentiles_are_nearest_rank() -> None:
    figures = percentiles([i / 1000 for i in range(1, 101)])
    assert (figures["p50_ms"], figures["p95_ms"], figures["p99_ms"], figures["max_ms"]) == (50.0, 95.0, 99.0, 100.0)
    assert percentiles([]) == {}


async def test_sse_events_follow_the_html_parsing_rules() -> None:
    body = b': ping\n\nevent: sources\ndata: {"a": 1}\n\ndata: line one\ndata: line two\n\nevent: done\ndata: {}'
    response = httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})
    events = [event async for event in sse_events(response)]
    assert events == [("sources", '{"a": 1}'), ("message", "line one\nline two"), ("done", "{}")]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RaguServer]:
    """A ``ragu serve`` process for the regression tests of defects the soak found."""
    with RaguServer(tmp_path_factory.mktemp("ragu")) as running:
        yield running


def test_a_request_on_a_connection_idle_for_almost_five_seconds_survives_a_server_stall(server: RaguServer) -> None:
    """Found by the soak at 64 users: httpx reuses an idle connection for up to 5 s, uvicorn's default
    keep-alive was 5 s, and when the server's event loop stalled across that moment, uvloop ran the keep-alive
    timer before reading the request already waiting on the socket, and reset the connection (``ReadError``).
    ``ragu serve`` now keeps idle connections longer than common clients and proxies, so they close first.
    The stall is made with SIGSTOP: the request is sent 4.8 s after the previous response and read at 5.4 s."""
    with httpx.Client(base_url=server.base_url) as client:
        assert client.get("/kappi/health").status_code == 200
        time.sleep(4.6)
        os.kill(server.pid, signal.SIGSTOP)
        resume = threading.Timer(0.8, os.kill, (server.pid, signal.SIGCONT))
        resume.start()
        try:
            time.sleep(0.2)
            response = client.get("/kappi/health")
        finally:
            resume.join()
            os.kill(server.pid, signal.SIGCONT)
        assert response.status_code == 200


def test_a_question_whose_client_leaves_before_the_stream_begins_gets_a_cancelled_answer(server: RaguServer) -> None:
    """Found by the soak (unanswered questions in histories): a client that sends a question and disconnects
    at once had its question saved but the response cancelled before the answer's generator ever ran, so no
    answer was saved, against :meth:`kappi.chat.answering.Answerer.events`' promise. It is now saved as
    ``cancelled``. The request is written on a raw socket that is closed without reading anything."""
    user = server.headers("soak-leaver")
    with httpx.Client(base_url=server.base_url) as client:
        created = client.post(
            "/kappi/admin/agents", json={"name": "Leaver"}, headers=server.headers("root", admin=True)
        )
        chat = client.post("/kappi/chats", json={"agent_id": created.json()["id"]}, headers=user).json()["id"]
        body = json.dumps({"content": "How many vacation days are there?"}).encode()
        head = (
            f"POST /kappi/chats/{chat}/messages/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: {user['Authorization']}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        with socket.create_connection(("127.0.0.1", server.port)) as raw:
            raw.sendall(head.encode() + body)
        deadline = time.monotonic() + 10
        # The question and its pending answer are stored together; the answer then settles as cancelled.
        while not (messages := client.get(f"/kappi/chats/{chat}", headers=user).json()["messages"]) or (
            messages[-1]["status"] == "pending"
        ):
            assert time.monotonic() < deadline, f"the question's answer was never settled: {messages}"
            time.sleep(0.1)
    assert [(m["role"], m["status"]) for m in messages] == [("user", "complete"), ("assistant", "cancelled")]
    assert messages[1]["error_code"] == "client_disconnected"


async def test_the_soak_counts_an_embedding_from_the_events_progress_not_its_items(server: RaguServer) -> None:
    """A job's events carry only the items that changed, and the first one none: followed once it has finished,
    the stream is that one event, and the soak counted no documents in it. It counts ``progress`` now."""
    headers = server.headers("soak-follower", admin=True)
    files = [
        (f"followed-{n}.md", f"# Followed {n}\n\nDocument {n} of a job followed late.\n".encode()) for n in range(3)
    ]
    async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as client:
        body = {"name": "Soak_followed", "vector_provider": "pgvector"}
        collection = (await client.post(f"{CHONKIT}/collections", json=body, headers=headers)).json()
        uploaded = await client.post(f"{CHONKIT}/documents", files=[("files", f) for f in files], headers=headers)
        ids = [r["document"]["id"] for r in uploaded.json()["results"]]
        url = f"{CHONKIT}/collections/{collection['id']}/documents"
        job = (await client.post(url, json={"document_ids": ids}, headers=headers)).json()["job"]
        deadline = time.monotonic() + 120
        while (await client.get(f"{CHONKIT}/jobs/{job['id']}", headers=headers)).json()["status"] != "done":
            assert time.monotonic() < deadline, f"job {job['id']} did not finish"
            await asyncio.sleep(0.2)
        load = Load(client, World({}), Recorder())
        assert await load.follow_embedding(job["id"], len(ids), headers), load.rec.error_samples
    assert load.rec.checks["documents_embedded"] == 3
    assert load.rec.checks["job_events_parsed"] == 1
