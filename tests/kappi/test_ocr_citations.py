"""A citation says when its passage was read by OCR: a scan (rendered from a text PDF) and a typed PDF embedded by
chonkit, asked about through kappi's HTTP API; the store's chunks carry chonkit's mark to kappi's citations."""

from __future__ import annotations

import uuid

import httpx

from chonkit.embedding.worker import EmbeddingWorker
from common.config import Settings
from tests.chonkit.conftest import drain
from tests.chonkit.parsing.conftest import make_pdf, make_scanned_pdf
from tests.kappi.conftest import as_user, sse_events


async def _upload(chonkit: httpx.AsyncClient, name: str, data: bytes) -> str:
    response = await chonkit.post("/documents", files=[("files", (name, data, "application/octet-stream"))])
    doc_id: str = response.json()["results"][0]["document"]["id"]
    return doc_id


async def test_citations_of_ocrd_passages_are_marked_and_typed_ones_are_not(
    chonkit: httpx.AsyncClient, kappi: httpx.AsyncClient, worker: EmbeddingWorker, settings: Settings
) -> None:
    name = f"Plant_{uuid.uuid4().hex[:6]}"
    collection = (await chonkit.post("/collections", json={"name": name, "vector_provider": "pgvector"})).json()
    scan = await _upload(
        chonkit,
        "forklift-scan.pdf",
        make_scanned_pdf(["Forklift licence\nOnly certified drivers may operate the forklift."]),
    )
    typed = await _upload(
        chonkit, "forklift-typed.pdf", make_pdf(["Forklift servicing\nThe forklift is serviced every month."])
    )
    await chonkit.post(f"/collections/{collection['id']}/documents", json={"document_ids": [scan, typed]})
    await drain(worker)
    admin = as_user(settings, "root", admin=True)
    agent = (await kappi.post("/admin/agents", json={"name": "Plant"}, headers=admin)).json()
    assign = {"add": [{"vector_provider": "pgvector", "name": name, "instruction": "plant safety"}]}
    await kappi.put(f"/admin/agents/{agent['id']}/collections", json=assign, headers=admin)

    user = as_user(settings, "dana")
    chat = (await kappi.post("/chats", json={"agent_id": agent["id"]}, headers=user)).json()
    response = await kappi.post(
        f"/chats/{chat['id']}/messages/stream", json={"content": "Who may operate the forklift?"}, headers=user
    )

    assert response.status_code == 200, response.text
    events = sse_events(response.text)
    done = events[-1][1]
    given = done["citations"] + done["also_retrieved"]
    marks = {c["document_id"]: c["ocr"] for c in given}
    assert marks == {scan: True, typed: False}, given
