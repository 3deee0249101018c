"""A job's event stream and its paged items: a big job streams what changed, not every item each time."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import msgspec

from chonkit.embedding.worker import EmbeddingWorker
from tests.chonkit.conftest import drain

DOCUMENTS = 300
LARGEST_EVENT_BYTES = 64 * 1024
STREAM_BYTES = 5 * 1024 * 1024


async def queue_documents(chonkit: httpx.AsyncClient, count: int) -> tuple[str, list[str]]:
    """A collection and a queued embedding job of ``count`` small Markdown documents."""
    name = f"Events_{uuid.uuid4().hex[:8]}"
    collection = (await chonkit.post("/collections", json={"name": name, "vector_provider": "qdrant"})).json()
    files = [("files", (f"note-{n:03}.md", f"# Note {n}\n\nText of note number {n}.".encode())) for n in range(count)]
    uploaded = (await chonkit.post("/documents", files=files)).json()["results"]
    ids = [r["document"]["id"] for r in uploaded]
    queued = await chonkit.post(f"/collections/{collection['id']}/documents", json={"document_ids": ids})
    assert queued.status_code == 202, queued.text
    job_id: str = queued.json()["job"]["id"]
    return job_id, ids


def events_of(stream: str) -> list[tuple[str, dict[str, Any]]]:
    events, name = [], "message"
    for line in stream.splitlines():
        if line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            events.append((name, msgspec.json.decode(line.removeprefix("data: "))))
            name = "message"
    return events


async def test_a_300_document_job_streams_changes_in_small_events(
    chonkit: httpx.AsyncClient, worker: EmbeddingWorker
) -> None:
    job_id, ids = await queue_documents(chonkit, DOCUMENTS)
    stop = asyncio.Event()
    running = asyncio.create_task(worker.run(stop, idle_seconds=0.05))
    try:
        response = await chonkit.get(f"/jobs/{job_id}/events", timeout=600)
    finally:
        stop.set()
        await running

    sizes = [len(line.encode()) for line in response.text.splitlines() if line.startswith("data: ")]
    events = events_of(response.text)
    print(f"{len(events)} events, largest {max(sizes)} bytes, stream {len(response.content)} bytes")
    assert max(sizes) <= LARGEST_EVENT_BYTES
    assert len(response.content) <= STREAM_BYTES
    assert {name for name, _ in events} == {"job"}
    first, last = events[0][1], events[-1][1]
    assert (first["total"], first["items"]) == (DOCUMENTS, [])
    assert (last["status"], last["progress"], last["total"]) == ("done", {"done": DOCUMENTS}, DOCUMENTS)
    final: dict[str, dict[str, Any]] = {}  # the last state streamed for each item
    for _, event in events[1:]:
        final.update({item["document_id"]: item for item in event["items"]})
    assert sorted(final) == sorted(ids)
    assert {item["stage"] for item in final.values()} == {"done"}


async def test_job_items_are_paged_and_filtered_by_stage(chonkit: httpx.AsyncClient, worker: EmbeddingWorker) -> None:
    job_id, ids = await queue_documents(chonkit, 5)
    await drain(worker)

    first = (await chonkit.get(f"/jobs/{job_id}", params={"limit": 2})).json()
    rest = (await chonkit.get(f"/jobs/{job_id}", params={"limit": 10, "offset": 2})).json()
    done = (await chonkit.get(f"/jobs/{job_id}", params={"stage": "done"})).json()
    failed = (await chonkit.get(f"/jobs/{job_id}", params={"stage": "failed"})).json()
    bad = await chonkit.get(f"/jobs/{job_id}", params={"limit": 0})

    assert (first["total"], first["progress"]) == (5, {"done": 5})
    assert [i["document_id"] for i in first["items"] + rest["items"]] == ids
    assert len(done["items"]) == 5
    assert (failed["items"], failed["total"]) == ([], 5)
    assert bad.status_code == 400
