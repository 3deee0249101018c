"""Issue #26, item 10: ``DELETE /documents/{id}`` in a collection moving to another model answered 204 where every
other change of its documents answers ``409 collection_migrating`` — and the move then failed on the missing
document, throwing away the re-embedding of all the others (29 of 30 in the report)."""

from __future__ import annotations

import uuid

import httpx
import pytest

from chonkit.embedding.worker import EmbeddingWorker
from common.vectors.registry import VectorRegistry
from tests.chonkit.conftest import drain
from tests.chonkit.reembedding.conftest import WIDER, embedded_collection, valid_identity


@pytest.mark.parametrize("provider", ["pgvector", "qdrant"])
async def test_deleting_a_document_of_a_migrating_collection_is_refused_and_the_move_completes(
    chonkit2: httpx.AsyncClient, worker2: EmbeddingWorker, vectors: VectorRegistry, provider: str
) -> None:
    name = f"Deleting_{uuid.uuid4().hex[:8]}"
    collection = await embedded_collection(chonkit2, worker2, provider, name)
    documents = [d["document_id"] for d in (await chonkit2.get(f"/collections/{collection['id']}/documents")).json()]
    assert len(documents) == 4
    started = await chonkit2.put(f"/collections/{collection['id']}/embedding", json=WIDER)
    assert started.status_code == 202, started.text

    refused = await chonkit2.delete(f"/documents/{documents[0]}")

    assert refused.status_code == 409, (refused.status_code, refused.text)
    assert refused.json()["code"] == "collection_migrating"
    assert name in refused.json()["detail"]
    assert (await chonkit2.get(f"/documents/{documents[0]}")).status_code == 200  # nothing was deleted
    await drain(worker2)
    moved = (await chonkit2.get(f"/collections/{collection['id']}/embedding")).json()
    assert moved["migration"]["state"] == "done", moved
    assert (moved["model"], moved["job"]["progress"]) == (WIDER["model"], {"done": 4})
    assert valid_identity(await vectors.get(provider).read_identity(name))["model"] == WIDER["model"]
    after = (await chonkit2.get(f"/collections/{collection['id']}/documents")).json()
    assert sorted(d["document_id"] for d in after) == sorted(documents)

    # Once the move is over, the document can go, and takes its vectors (now the new model's) with it.
    assert (await chonkit2.delete(f"/documents/{documents[0]}")).status_code == 204
    assert await vectors.get(provider).count(name, document_id=documents[0]) == 0
    assert await vectors.get(provider).count(name) > 0


async def test_a_document_in_another_collection_than_the_migrating_one_can_be_deleted(
    chonkit2: httpx.AsyncClient, worker2: EmbeddingWorker
) -> None:
    """The refusal is for the collections that hold the document, not for every migration under way."""
    moving = await embedded_collection(chonkit2, worker2, "qdrant", f"Moving_{uuid.uuid4().hex[:8]}", documents=1)
    assert (await chonkit2.put(f"/collections/{moving['id']}/embedding", json=WIDER)).status_code == 202
    upload = await chonkit2.post("/documents", files=[("files", ("elsewhere.md", b"# Elsewhere\n\nNot moving.\n"))])
    doc_id = upload.json()["results"][0]["document"]["id"]

    assert (await chonkit2.delete(f"/documents/{doc_id}")).status_code == 204
