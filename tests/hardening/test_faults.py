"""Faults on real processes: ``ragu serve`` killed with SIGKILL mid-upload, its PostgreSQL (which is also the
pgvector store) stopped during an embedding job and during chat, and everything restarted. (Qdrant's local mode
runs inside the server process, so the only vector store that can go down on its own here is PostgreSQL.)

What must hold: while the database is down every request gets a prompt 503 problem with a code (never a 500,
never a hang), a stream already open ends with an ``error`` event that has a code (never a reset connection),
jobs resume when the database returns, nothing is half-stored, duplicated or lost, and chonkit's rows and the
vector store agree afterwards (reconcile finds no drift).

One embedded PostgreSQL and one server serve the module (starting them is most of the cost); each test leaves
them running, and the ``live`` fixture restarts whatever a failed test left down. Timings are printed (``-s``).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import msgspec
import pytest

from chonkit.document.storage import BlobStore, sha256_hex
from common.auth import mint_dev_token
from common.config import Settings, load_settings
from common.db import migrate as migrations
from tests.hardening.live_stack import (
    REPO,
    PausingOpenAIStandin,
    Postgres,
    RaguServer,
    SseEvent,
    counts,
    drift,
    eventually,
    sse,
)
from tests.support.documents import pdf
from tests.support.llm_standins import Script

SECRET = "fault-suite-hs256-secret-0123456789abcdef"
PROMPT_SECONDS = 5.0
"""Longest a request may take to be refused while the database is down."""
DATABASE = frozenset({"database_unavailable"})
DATABASE_OR_VECTORS = frozenset({"database_unavailable", "vector_store_unavailable"})
"""pgvector is PostgreSQL: a question whose agent kappi still has cached fails at retrieval instead."""


@dataclass
class Stack:
    postgres: Postgres
    server: RaguServer
    llm: PausingOpenAIStandin
    settings: Settings
    folder: Path

    @property
    def url(self) -> str:
        return self.postgres.url

    @property
    def blobs(self) -> BlobStore:
        return BlobStore(self.settings.server.data_path / "documents")

    @property
    def token(self) -> str:
        return mint_dev_token(self.settings, subject="admin", roles=[self.settings.auth.admin_role])

    def client(self) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {self.token}"}
        return httpx.AsyncClient(base_url=self.server.base_url, headers=headers, timeout=30)

    def unavailable(self, response: httpx.Response, codes: frozenset[str] = DATABASE) -> str:
        """The response is a 503 problem whose code is one of ``codes``; returns the code (for the figures)."""
        request = f"{response.request.method} {response.request.url.path}"
        assert response.status_code == 503, f"{request}: {response.text}\n{self.server.errors()}"
        assert response.headers["content-type"] == "application/problem+json"
        code: str = response.json()["code"]
        assert code in codes, response.text
        return code


@pytest.fixture(scope="module")
async def stack() -> AsyncIterator[Stack]:
    # Not below pytest's basetemp: as root, PostgreSQL runs as its own user, and every pytest start (ours or a
    # concurrent one) makes that folder private again, after which pg_ctl can no longer reach its data.
    with tempfile.TemporaryDirectory(prefix="ragu-faults-") as name:
        async with _running(Path(name)) as stack:
            yield stack


@asynccontextmanager
async def _running(folder: Path) -> AsyncIterator[Stack]:
    postgres = Postgres(folder)
    url = await postgres.start()
    try:
        await asyncio.to_thread(migrations.upgrade, url)
        settings = load_settings({}, data_dir=str(folder / "data"), auth_hs256_secret=SECRET)
        async with PausingOpenAIStandin() as llm:
            env = {
                "DATABASE_URL": url,
                "RAGU_DATA_DIR": settings.server.data_dir,
                "RAGU_AUTH_HS256_SECRET": SECRET,
                "RAGU_AUTO_MIGRATE": "false",
                "RAGU_WORKER_HEARTBEAT_SECONDS": "0.3",
                "RAGU_OPENAI_BASE_URL": llm.base_url,
                "RAGU_OPENAI_MODELS": "standin",
                "RAGU_LLM_TIMEOUT_SECONDS": "20",
                "RAGU_LOCAL_LLM_MODEL": "none",  # the answers come from the stand-in, whatever else is installed
            }
            server = RaguServer(env=env, log=folder / "serve.log")
            try:
                print(f"\nfaults: first start {await server.start():.1f}s")
                yield Stack(postgres=postgres, server=server, llm=llm, settings=settings, folder=folder)
            finally:
                await server.terminate()
    finally:
        if postgres.running:
            await postgres.stop()


@pytest.fixture
async def live(stack: Stack) -> AsyncIterator[Stack]:
    """The module's stack, brought back up after the test whatever the test left down."""
    yield stack
    if not stack.postgres.running:
        await stack.postgres.start()
    if not stack.server.alive:
        await stack.server.start()


async def test_service_killed_mid_upload_leaves_no_half_stored_document(live: Stack) -> None:
    """Two uploads are in flight when ``ragu serve`` gets SIGKILL: a large one still being sent, and one whose
    original has just landed in the blob store (its row inserted, its transaction about to commit)."""
    large, racing = _text_file("large", megabytes=4), _text_file("racing", megabytes=1)
    async with live.client() as client:
        before = await _documents(client)

        _, writer = await asyncio.open_connection("127.0.0.1", live.server.port)
        head, body = _multipart(live, "large.txt", large)
        writer.write(head)
        for offset in range(0, len(body) * 6 // 10, 256 * 1024):  # 60 % of the body, sent slowly
            writer.write(body[offset : offset + 256 * 1024])
            await writer.drain()
            await asyncio.sleep(0.01)

        upload = asyncio.create_task(client.post("/chonkit/documents", files=[("files", ("racing.txt", racing))]))
        blob = live.blobs.path_for(sha256_hex(racing))

        async def landed() -> bool | None:
            return True if blob.exists() or upload.done() else None

        await eventually(landed, within=60, what="the racing upload in the blob store", every=0.002)
        assert blob.exists(), f"the racing upload ended without storing its original: {upload.result()}"
        await live.server.kill()
        answered = await asyncio.gather(upload, return_exceptions=True)
        writer.close()
        restart = await live.server.start()

        after = await _documents(client)
        known = {d["sha256"] for d in before}
        new = [d for d in after if d["sha256"] not in known]
        assert [d["sha256"] for d in new] in ([], [sha256_hex(racing)]), "only the racing upload could have committed"
        for document in after:  # no row without its original, and every original reads back whole
            content = await client.get(f"/chonkit/documents/{document['id']}/content")
            assert content.status_code == 200
            assert len(content.content) == document["size_bytes"]
        assert not list(live.blobs.root.rglob(".incoming-*")), "a partial blob was left behind"

        for name, data in (("large.txt", large), ("racing.txt", racing)):
            first, again = await _upload(client, name, data), await _upload(client, name, data)
            assert first["status"] == ("duplicate" if new and data is racing else "created")
            assert again["status"] == "duplicate"
            assert again["document"]["id"] == first["document"]["id"]
        assert len(await _documents(client)) == len(before) + 2
    assert await drift(live.url) == []
    print(
        f"\nfaults: upload kill — racing upload {'committed' if new else 'rolled back'} "
        f"(client saw {type(answered[0]).__name__}), restart {restart:.1f}s"
    )


async def test_postgres_stopped_during_an_embedding_job(live: Stack, request: pytest.FixtureRequest) -> None:
    async with live.client() as client:
        collection = await _collection(client, "Outage")
        ids = []
        for i in range(10):
            pages = [f"Report {i}, page {p}. " + f"Findings about subject number {i * 7 + p}. " * 40 for p in range(4)]
            ids.append((await _upload(client, f"outage-{i}.pdf", pdf(pages)))["document"]["id"])
        queued = await client.post(f"/chonkit/collections/{collection['id']}/documents", json={"document_ids": ids})
        job_id = queued.json()["job"]["id"]
        follower = asyncio.create_task(_follow_job(client, job_id))
        request.addfinalizer(follower.cancel)

        async def under_way() -> dict[str, Any] | None:
            job: dict[str, Any] = (await client.get(f"/chonkit/jobs/{job_id}")).json()
            return job if job["progress"].get("done", 0) >= 2 else None

        progress = (await eventually(under_way, within=120, what="two documents embedded"))["progress"]
        assert progress.get("done", 0) < len(ids), "the job finished before the database could be stopped"

        stopped = time.monotonic()
        codes = [live.unavailable(await _stop_with_a_request_in_flight(live, client))]

        for path in (
            f"/chonkit/jobs/{job_id}",
            "/chonkit/documents",
            f"/chonkit/collections/{collection['id']}",
            "/chonkit/ready",
            "/kappi/agents",
            "/kappi/chats",
        ):
            codes.append(live.unavailable(await client.get(path, timeout=PROMPT_SECONDS)))
        retry = await client.post(f"/chonkit/collections/{collection['id']}/documents", json={"document_ids": ids})
        codes.append(live.unavailable(retry))

        events = await asyncio.wait_for(follower, timeout=PROMPT_SECONDS)
        assert events[-1] == ("error", {"code": "database_unavailable", "detail": events[-1][1]["detail"]})
        assert all(name == "job" for name, _ in events[:-1])

        await asyncio.sleep(max(0.0, 2 - (time.monotonic() - stopped)))  # a real outage, not a blip
        await live.postgres.start()
        restarted = time.monotonic()

        async def finished() -> dict[str, Any] | None:
            job: dict[str, Any] = (await client.get(f"/chonkit/jobs/{job_id}")).json()
            return job if job["status"] not in {"queued", "running"} else None

        job = await eventually(finished, within=120, what="the job finished after the database returned")
        resumed_in = time.monotonic() - restarted
        assert job["status"] == "done", job
        assert {item["stage"] for item in job["items"]} == {"done"}
        detail = (await client.get(f"/chonkit/collections/{collection['id']}")).json()
        expected = sum(d["chunk_count"] for d in detail["documents"])
        assert len(detail["documents"]) == len(ids)
        assert detail["vector_count"] == expected
        jobs = (await client.get("/chonkit/jobs", params={"collection_id": collection["id"]})).json()
        assert [j["id"] for j in jobs] == [job_id], "the request refused during the outage queued nothing"
    stored = (await counts(live.url))["vectors"][collection["name"]]
    assert stored == {"expected": expected, "stored": expected, "distinct": expected}
    assert await drift(live.url) == []
    print(
        f"\nfaults: postgres stopped mid-job at {progress} — 503 codes {sorted(set(codes))}, job events ended with "
        f"an error event, job done {resumed_in:.1f}s after restart, {expected} vectors, "
        f"{sum(i['attempts'] > 1 for i in job['items'])} document(s) redone"
    )


async def test_postgres_stopped_during_chat(live: Stack) -> None:
    async with live.client() as client:
        agent, chat = await _agent_and_chat(client, "Policies", llm="openai")
        query = f"/kappi/agents/{agent['id']}/query"
        stream = f"/kappi/chats/{chat['id']}/messages/stream"
        question = {"content": "What is the notice period?"}
        assert (await client.post(query, json=question)).status_code == 200

        # The database goes away while an answer is half streamed: it cannot be saved, and the stream says so.
        # Grounding passes an answer on sentence by sentence: the first sentence is out when the model stalls.
        two_sentences = ("The notice", " period is", " 30 days [1].", " It is 30", " days [1].")
        live.llm.script = Script(tokens=two_sentences, stall_after=4)
        live.llm.resume.clear()
        events: list[SseEvent] = []
        started = time.monotonic()
        async with client.stream("POST", stream, json=question) as response:
            assert response.status_code == 200
            async for event in sse(response):
                events.append(event)
                if [name for name, _ in events].count("token") == 1:
                    await live.postgres.stop()
                    live.llm.resume.set()
        streamed_in = time.monotonic() - started
        events = [event for event in events if event[0] != "preliminary"]  # extractive's quote, shown while it reads
        names = [name for name, _ in events]
        assert (names[0], names[1], names[-1]) == ("sources", "token", "error")
        assert set(names[1:-1]) == {"token"}
        assert "30 days" in events[1][1]["text"]
        assert events[-1][1]["code"] == "database_unavailable"

        live.llm.script = Script()
        codes = [
            live.unavailable(await client.post(query, json=question, timeout=PROMPT_SECONDS), DATABASE_OR_VECTORS),
            live.unavailable(await client.post(stream, json=question, timeout=PROMPT_SECONDS)),
            live.unavailable(await client.get(f"/kappi/chats/{chat['id']}", timeout=PROMPT_SECONDS)),
        ]

        await live.postgres.start()
        answered = await client.post(query, json=question)
        assert answered.status_code == 200, answered.text
        assert "30 days" in answered.json()["answer"]
        async with client.stream("POST", stream, json=question) as response:
            names = [name async for name, _ in sse(response) if name != "preliminary"]
        assert names == ["sources", "token", "done"]  # the one sentence, whole
        messages = (await client.get(f"/kappi/chats/{chat['id']}")).json()["messages"]
        # The first question keeps the answer stored with it, still pending (the outage cut it off and its client
        # got the error event; it reads as interrupted once past the deadline), the one asked while the database
        # was down was refused before it was stored, the last one is answered.
        assert [(m["role"], m["status"]) for m in messages] == [
            ("user", "complete"),
            ("assistant", "pending"),
            ("user", "complete"),
            ("assistant", "complete"),
        ]
    print(
        f"\nfaults: postgres stopped mid-answer — stream ended with an error event in {streamed_in:.1f}s, 503 {codes}"
    )


async def test_restarting_everything_keeps_every_count(live: Stack) -> None:
    async with live.client() as client:
        agent, chat = await _agent_and_chat(client, "Restart", llm="extractive")
        asked = await client.post(f"/kappi/chats/{chat['id']}/messages", json={"content": "What is the notice period?"})
        assert asked.status_code == 200, asked.text
        history = (await client.get(f"/kappi/chats/{chat['id']}")).json()["messages"]
    before = await counts(live.url)
    assert all(v["expected"] == v["stored"] == v["distinct"] for v in before["vectors"].values()), before

    started = time.monotonic()
    assert await live.server.terminate() == 0, live.server.tail()
    await live.postgres.stop()
    await live.postgres.start()
    await live.server.start()
    restarted_in = time.monotonic() - started

    assert await counts(live.url) == before
    async with live.client() as client:
        assert (await client.get(f"/kappi/chats/{chat['id']}")).json()["messages"] == history
        answer = await client.post(f"/kappi/agents/{agent['id']}/query", json={"content": "What is the notice period?"})
        assert answer.status_code == 200, answer.text
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "ragu.cli",
        "reconcile",
        env={**live.server.env, "RAGU_QDRANT_PATH": str(live.folder / "reconcile-qdrant")},  # serve holds its own
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    report = msgspec.json.decode(out)
    assert report == {"collections_checked": before["chonkit.collections"], "drift": []}
    print(f"\nfaults: restart of everything {restarted_in:.1f}s — counts unchanged: {before}")


def _text_file(label: str, *, megabytes: int) -> bytes:
    line = f"{label} {uuid.uuid4()}: a line about what happens to uploads when the server dies.\n".encode()
    return line * (megabytes * 1024 * 1024 // len(line))


def _multipart(stack: Stack, filename: str, data: bytes) -> tuple[bytes, bytes]:
    """The head and body of a one-file upload, for sending by hand (and slowly)."""
    boundary = uuid.uuid4().hex
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="{filename}"\r\n'
            "Content-Type: text/plain\r\n\r\n"
        ).encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    head = (
        f"POST /chonkit/documents HTTP/1.1\r\nHost: 127.0.0.1:{stack.server.port}\r\n"
        f"Authorization: Bearer {stack.token}\r\nContent-Type: multipart/form-data; boundary={boundary}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    return head, body


async def _documents(client: httpx.AsyncClient) -> list[dict[str, Any]]:
    response = await client.get("/chonkit/documents", params={"limit": 200})
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


async def _upload(client: httpx.AsyncClient, name: str, data: bytes) -> dict[str, Any]:
    response = await client.post("/chonkit/documents", files=[("files", (name, data))])
    assert response.status_code in {200, 201}, response.text
    result: dict[str, Any] = response.json()["results"][0]
    return result


async def _collection(client: httpx.AsyncClient, prefix: str) -> dict[str, Any]:
    name = f"{prefix}_{uuid.uuid4().hex[:6]}"
    response = await client.post("/chonkit/collections", json={"name": name, "vector_provider": "pgvector"})
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


async def _agent_and_chat(client: httpx.AsyncClient, prefix: str, *, llm: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A collection holding one embedded policy, an agent over it answering with ``llm``, and a chat."""
    collection = await _collection(client, prefix)
    policy = b"# Leave\n\nThe notice period is 30 days. Vacation is 25 days a year."
    document = (await _upload(client, f"{prefix.lower()}-policy.md", policy))["document"]
    queued = await client.post(
        f"/chonkit/collections/{collection['id']}/documents", json={"document_ids": [document["id"]]}
    )

    job: dict[str, Any] = queued.json()["job"]

    async def embedded() -> bool | None:
        nonlocal job
        job = (await client.get(f"/chonkit/jobs/{job['id']}")).json()
        assert job["status"] in {"queued", "running", "done"}, job
        return job["status"] == "done" or None

    try:
        await eventually(embedded, within=60, what="the policy embedded")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the job: {job}") from None
    spec = {"name": f"{prefix} helper", "llm_provider": llm, "llm_model": "standin" if llm == "openai" else llm}
    agent: dict[str, Any] = (await client.post("/kappi/admin/agents", json=spec)).json()
    assign = {"add": [{"vector_provider": "pgvector", "name": collection["name"], "instruction": "leave policy"}]}
    report = (await client.put(f"/kappi/admin/agents/{agent['id']}/collections", json=assign)).json()
    assert all(r["ok"] for r in report["results"]), report
    chat: dict[str, Any] = (await client.post("/kappi/chats", json={"agent_id": agent["id"]})).json()
    return agent, chat


async def _follow_job(client: httpx.AsyncClient, job_id: str) -> list[SseEvent]:
    async with client.stream("GET", f"/chonkit/jobs/{job_id}/events") as response:
        return [event async for event in sse(response)]


async def _stop_with_a_request_in_flight(live: Stack, client: httpx.AsyncClient) -> httpx.Response:
    """Stop PostgreSQL while a request is mid-statement (waiting on a lock the test holds); returns its response."""
    blocker, observer = await asyncpg.connect(live.url), await asyncpg.connect(live.url)
    in_flight = None
    try:
        await blocker.execute("BEGIN; LOCK TABLE chonkit.documents IN ACCESS EXCLUSIVE MODE")
        in_flight = asyncio.create_task(client.get("/chonkit/documents"))

        async def waiting() -> bool | None:  # a fresh snapshot each time: the observer runs no transaction
            query = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1"
            return True if await observer.fetchval(query, "%count(*) OVER ()%") else None

        await eventually(waiting, within=10, what="the document listing waiting on the lock")
        # A fast shutdown signals every backend, and the lock holder's abort can hand the lock to the listing
        # before the listing's own signal lands (it then answers 200). The holder is frozen meanwhile, so the
        # listing always meets the outage mid-statement.
        holder = blocker.get_server_pid()
        os.kill(holder, signal.SIGSTOP)
        try:
            stopping = asyncio.create_task(live.postgres.stop())
            response = await in_flight
        finally:
            os.kill(holder, signal.SIGCONT)
        await stopping
        return response
    finally:
        if in_flight is not None:
            in_flight.cancel()
        blocker.terminate()
        observer.terminate()
