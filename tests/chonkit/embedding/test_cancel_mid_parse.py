"""Issue #26, item 9: a job cancelled while its document is being read by OCR stops within seconds, not when the
parse ends (a TIFF's 2,000 frames held the only worker 7 min 46 s and ignored its cancel), and the item behind it
runs. The real worker, parse processes, RapidOCR and local model."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from chonkit.embedding.worker import EmbeddingWorker
from tests.chonkit.collection.test_collections_api import create_collection, upload
from tests.chonkit.parsing.test_ocr_bounds import text_page_frames

CANCEL_BAR_SECONDS = 5.0
"""The worker asks for a cancel every heartbeat here (0.2 s) and leaves the parse at once; the TIFF's OCR takes
minutes."""
OCR_UNDERWAY_SECONDS = 4.0
"""Long enough after the item enters ``parsing`` for the parse processes to start and recognise a frame or so."""


async def _job(chonkit: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    job: dict[str, Any] = (await chonkit.get(f"/jobs/{job_id}")).json()
    return job


async def test_a_cancel_ends_an_item_mid_ocr_within_seconds_and_the_next_item_runs(
    chonkit: httpx.AsyncClient, worker: EmbeddingWorker
) -> None:
    collection = await create_collection(chonkit, "qdrant")
    scan = await upload(chonkit, "fax.tiff", text_page_frames(40))
    note = await upload(chonkit, "note.md", b"# Note\n\nThe job queued behind the long scan still runs.")
    url = f"/collections/{collection['id']}/documents"
    first = (await chonkit.post(url, json={"document_ids": [scan]})).json()["job"]
    second = (await chonkit.post(url, json={"document_ids": [note]})).json()["job"]

    running = asyncio.create_task(worker.run_once())
    for _ in range(300):  # the claim sets ``parsing`` at once
        if (await _job(chonkit, first["id"]))["items"][0]["stage"] == "parsing":
            break
        await asyncio.sleep(0.1)
    await asyncio.sleep(OCR_UNDERWAY_SECONDS)
    assert not running.done()
    asked = time.perf_counter()
    assert (await chonkit.post(f"/jobs/{first['id']}/cancel")).status_code == 200
    done, _ = await asyncio.wait([running], timeout=CANCEL_BAR_SECONDS)
    latency = time.perf_counter() - asked
    if not done:  # the old worker: the item would still be parsing for minutes
        running.cancel()
    print(f"\ncancel mid-OCR: item finished {latency:.2f}s after the cancel")

    assert done, f"the item was still running {CANCEL_BAR_SECONDS}s after its job's cancel"
    assert [i["stage"] for i in (await _job(chonkit, first["id"]))["items"]] == ["cancelled"]
    assert await worker.run_once()
    after = await _job(chonkit, second["id"])
    assert (after["status"], after["items"][0]["stage"]) == ("done", "done"), after
