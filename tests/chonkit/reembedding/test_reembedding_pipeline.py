"""A migration's document goes through the same ingest pipeline as an embedding's (``chonkit.ingest.pipeline``): it
stops between embedding batches once its job is cancelled (or its claim lost), not after embedding the whole
document, and its item records every stage's milliseconds, the write's too (#32: the re-embedding step was a copy of
the worker's stages that had drifted from it)."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence

import httpx
import pytest

from chonkit.embedding.worker import EMBED_BATCH, EmbeddingWorker
from common.clients import SharedClients
from common.embedders.base import Vectors
from tests.chonkit.conftest import drain
from tests.chonkit.reembedding.conftest import OLD, WIDER
from tests.support.words_embedder import WordsEmbedder

SMALL_CHUNKS = {"chunk": {"strategy": "fixed", "unit": "characters", "size": 120, "overlap": 0}}


async def _collection_of_one_long_document(
    chonkit: httpx.AsyncClient, worker: EmbeddingWorker, name: str
) -> tuple[str, int]:
    """A collection holding one document of some ten embedding batches; its id and the document's chunk count."""
    created = await chonkit.post("/collections", json={"name": name, "vector_provider": "pgvector", **OLD})
    assert created.status_code == 201, created.text
    text = " ".join(f"Sentence {i} of the long handbook says the leave policy has rule {i}." for i in range(1000))
    upload = await chonkit.post("/documents", files=[("files", ("handbook.txt", text.encode(), "text/plain"))])
    document = upload.json()["results"][0]["document"]["id"]
    assert (await chonkit.put(f"/documents/{document}/config", json=SMALL_CHUNKS)).status_code == 200
    collection = created.json()["id"]
    job = await chonkit.post(f"/collections/{collection}/documents", json={"document_ids": [document]})
    assert job.status_code == 202, job.text
    await drain(worker)
    [item] = (await chonkit.get(f"/jobs/{job.json()['job']['id']}")).json()["items"]
    assert item["stage"] == "done", item
    return collection, item["chunks"]


async def test_a_cancelled_migration_stops_between_embedding_batches(
    chonkit2: httpx.AsyncClient,
    worker2: EmbeddingWorker,
    reembed_clients: SharedClients,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    collection, chunks = await _collection_of_one_long_document(chonkit2, worker2, "Cancel_batches")
    batches = math.ceil(chunks / EMBED_BATCH)
    assert batches >= 8, chunks
    target = reembed_clients.embedders.get(WIDER["embedding_provider"], WIDER["model"])
    assert isinstance(target, WordsEmbedder)
    monkeypatch.setattr(target, "delay", 0.3)  # a batch outlasts the worker's cancel poll (0.2 s here)
    monkeypatch.setattr(target, "calls", 0)
    embedding = asyncio.Event()
    embed = target.embed_documents

    async def first_batch_seen(texts: Sequence[str]) -> Vectors:
        embedding.set()
        return await embed(texts)

    monkeypatch.setattr(target, "embed_documents", first_batch_seen)

    started = (await chonkit2.put(f"/collections/{collection}/embedding", json=WIDER)).json()
    running = asyncio.create_task(worker2.run_once())
    await asyncio.wait_for(embedding.wait(), timeout=30)
    assert (await chonkit2.post(f"/jobs/{started['job']['id']}/cancel")).status_code == 200
    await asyncio.wait_for(running, timeout=30)

    job = (await chonkit2.get(f"/jobs/{started['job']['id']}")).json()
    assert [i["stage"] for i in job["items"]] == ["cancelled"]
    assert target.calls <= 5, f"{target.calls} of {batches} batches embedded; the cancel came during the first"


async def test_a_migrated_documents_item_records_every_stages_time(
    chonkit2: httpx.AsyncClient, worker2: EmbeddingWorker
) -> None:
    collection, _ = await _collection_of_one_long_document(chonkit2, worker2, "Stage_timings")
    started = (await chonkit2.put(f"/collections/{collection}/embedding", json=WIDER)).json()
    await drain(worker2)

    [item] = (await chonkit2.get(f"/jobs/{started['job']['id']}")).json()["items"]
    assert item["stage"] == "done", item
    assert set(item["timings"]) == {"parse_ms", "chunk_ms", "embed_ms", "write_ms"}
    assert (await chonkit2.get(f"/collections/{collection}/embedding")).json()["model"] == WIDER["model"]
