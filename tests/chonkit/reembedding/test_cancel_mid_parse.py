"""A migration's document is parsed as an embedding's is, and stops as one does: a cancel of the migration while
a long scan of it is read by OCR ends the item within seconds, not when the parse ends (issue #26, item 9 —
noticed after the embedding worker's fix: the re-embedding step parsed without a way to stop)."""

from __future__ import annotations

import asyncio
import time

import httpx

from chonkit.embedding.worker import EmbeddingWorker
from tests.chonkit.conftest import drain
from tests.chonkit.embedding.test_cancel_mid_parse import CANCEL_BAR_SECONDS, OCR_UNDERWAY_SECONDS
from tests.chonkit.parsing.test_ocr_bounds import text_page_frames
from tests.chonkit.reembedding.conftest import OLD, WIDER


async def test_a_cancelled_migration_stops_its_documents_ocr_within_seconds(
    chonkit2: httpx.AsyncClient, worker2: EmbeddingWorker
) -> None:
    created = await chonkit2.post("/collections", json={"name": "Cancel_scan", "vector_provider": "qdrant", **OLD})
    assert created.status_code == 201, created.text
    collection = created.json()
    upload = await chonkit2.post("/documents", files=[("files", ("scan.tiff", text_page_frames(40), "image/tiff"))])
    scan = upload.json()["results"][0]["document"]["id"]
    one_frame = {"parse": {"page_range": {"start": 1, "end": 1}}}
    assert (await chonkit2.put(f"/documents/{scan}/config", json=one_frame)).status_code == 200
    url = f"/collections/{collection['id']}/documents"
    assert (await chonkit2.post(url, json={"document_ids": [scan]})).status_code == 202
    await drain(worker2)  # embedded from its first frame: seconds
    assert (await chonkit2.put(f"/documents/{scan}/config", json={"parse": {}})).status_code == 200

    started = (await chonkit2.put(f"/collections/{collection['id']}/embedding", json=WIDER)).json()
    running = asyncio.create_task(worker2.run_once())  # the migration's item: all 40 frames, minutes of OCR
    await asyncio.sleep(OCR_UNDERWAY_SECONDS)
    assert not running.done()
    asked = time.perf_counter()
    assert (await chonkit2.post(f"/jobs/{started['job']['id']}/cancel")).status_code == 200
    done, _ = await asyncio.wait([running], timeout=CANCEL_BAR_SECONDS)
    if not done:
        running.cancel()
    print(f"\nmigration cancel mid-OCR: item finished {time.perf_counter() - asked:.2f}s after the cancel")

    assert done, f"the migration's item was still parsing {CANCEL_BAR_SECONDS}s after its cancel"
    job = (await chonkit2.get(f"/jobs/{started['job']['id']}")).json()
    assert [i["stage"] for i in job["items"]] == ["cancelled"]
