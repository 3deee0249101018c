"""OCR through chonkit's HTTP API, on the real embedded PostgreSQL, the local model and real stores: a scan (rendered
from a text PDF, so its text is known) and an image are uploaded, embedded and found by a phrase they hold; the
per-document ``ocr`` option is saved, validated and obeyed."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from chonkit.embedding.worker import EmbeddingWorker
from tests.chonkit.collection.test_collections_api import create_collection, embed
from tests.chonkit.parsing.conftest import make_pdf, make_scanned_pdf, make_text_image

SCANNED_PAGES = [
    "Harbour safety rules\nLife jackets are mandatory on the pier after sunset.",
    "Forklift licence\nOnly certified drivers may operate the forklift in hall seven.",
]


async def _upload(chonkit: httpx.AsyncClient, name: str, data: bytes) -> dict[str, Any]:
    response = await chonkit.post("/documents", files=[("files", (name, data, "application/octet-stream"))])
    assert response.status_code == 201, response.text
    (result,) = response.json()["results"]
    assert result["status"] == "created", result
    document: dict[str, Any] = result["document"]
    return document


async def _search(chonkit: httpx.AsyncClient, collection_id: str, query: str) -> list[dict[str, Any]]:
    response = await chonkit.post(f"/collections/{collection_id}/search", json={"query": query, "limit": 3})
    assert response.status_code == 200, response.text
    hits: list[dict[str, Any]] = response.json()["hits"]
    return hits


@pytest.mark.parametrize("provider", ["pgvector", "qdrant"])
async def test_a_scanned_pdf_is_embedded_and_found_by_a_phrase_it_holds(
    chonkit: httpx.AsyncClient, worker: EmbeddingWorker, provider: str
) -> None:
    scan = await _upload(chonkit, "harbour-scan.pdf", make_scanned_pdf(SCANNED_PAGES))
    other = await _upload(chonkit, "canteen.pdf", make_pdf(["Canteen menu\nSoup of the day is tomato."]))
    collection = await create_collection(chonkit, provider)

    job = await embed(chonkit, worker, collection["id"], scan["id"], other["id"])

    assert job["status"] == "done", job
    assert (scan["page_count"], scan["ocr_pages"], other["ocr_pages"]) == (2, [1, 2], [])
    hits = await _search(chonkit, collection["id"], "who may operate the forklift in hall seven")
    assert hits[0]["document_id"] == scan["id"], hits
    assert "forklift" in str(hits[0]).lower()
    assert hits[0]["ocr"] is True
    canteen = await _search(chonkit, collection["id"], "soup of the day")
    assert (canteen[0]["document_id"], canteen[0]["ocr"]) == (other["id"], False)
    preview = (await chonkit.post(f"/documents/{scan['id']}/preview/chunks", json={})).json()
    assert preview["chunks"], preview
    assert all(chunk["ocr"] for chunk in preview["chunks"]), preview


async def test_an_image_upload_is_ocrd_embedded_and_found(chonkit: httpx.AsyncClient, worker: EmbeddingWorker) -> None:
    image = await _upload(chonkit, "whiteboard.png", make_text_image(["Retrospective: deploy freeze on Fridays"]))
    collection = await create_collection(chonkit, "pgvector")

    job = await embed(chonkit, worker, collection["id"], image["id"])

    assert job["status"] == "done", job
    assert (image["doc_type"], image["media_type"], image["page_count"], image["ocr_pages"]) == (
        "png",
        "image/png",
        1,
        [1],
    )
    hits = await _search(chonkit, collection["id"], "deploy freeze")
    assert hits[0]["document_id"] == image["id"], hits
    parsed = (await chonkit.post(f"/documents/{image['id']}/preview/parse", json={})).json()
    assert parsed["ocr_pages"] == [1]
    assert [block["ocr"] for block in parsed["sections"][0]["blocks"]] == [True]


async def test_ocr_off_leaves_a_scan_without_text_with_a_clear_code(
    chonkit: httpx.AsyncClient, worker: EmbeddingWorker
) -> None:
    scan = await _upload(chonkit, "scan.pdf", make_scanned_pdf(SCANNED_PAGES[:1]))
    saved = await chonkit.put(f"/documents/{scan['id']}/config", json={"parse": {"ocr": "off"}})
    assert saved.status_code == 200, saved.text
    assert (await chonkit.get(f"/documents/{scan['id']}/config")).json()["parse"]["ocr"] == "off"
    collection = await create_collection(chonkit, "pgvector")

    job = await embed(chonkit, worker, collection["id"], scan["id"])

    assert job["status"] == "failed", job
    (item,) = job["items"]
    assert item["error_code"] == "no_text"
    assert "OCR is off" in item["error"]
    preview = await chonkit.post(f"/documents/{scan['id']}/preview/parse", json={})
    assert (preview.status_code, preview.json()["code"]) == (422, "no_text")


async def test_force_reads_a_text_pdf_by_ocr_in_the_preview(chonkit: httpx.AsyncClient) -> None:
    document = await _upload(chonkit, "typed.pdf", make_pdf(SCANNED_PAGES[1:]))

    auto = (await chonkit.post(f"/documents/{document['id']}/preview/parse", json={})).json()
    forced = (await chonkit.post(f"/documents/{document['id']}/preview/parse", json={"parse": {"ocr": "force"}})).json()

    assert (auto["ocr_pages"], forced["ocr_pages"]) == ([], [1])
    assert "forklift" in forced["sections"][0]["blocks"][0]["text"].lower()


async def test_an_unknown_ocr_mode_and_a_broken_image_are_refused_and_store_nothing(
    chonkit: httpx.AsyncClient,
) -> None:
    document = await _upload(chonkit, "typed.pdf", make_pdf(["Some text"]))
    refused = await chonkit.put(f"/documents/{document['id']}/config", json={"parse": {"ocr": "sometimes"}})
    assert refused.status_code in (400, 422), refused.text
    assert (await chonkit.get(f"/documents/{document['id']}/config")).json()["parse"].get("ocr", "auto") == "auto"

    before = (await chonkit.get("/documents")).json()["total"]
    data = make_text_image(["Torn in transit"])
    response = await chonkit.post("/documents", files=[("files", ("torn.png", data[:200], "image/png"))])

    (result,) = response.json()["results"]
    assert (result["status"], result["error"]["code"]) == ("rejected", "document_corrupt"), result
    assert (await chonkit.get("/documents")).json()["total"] == before
