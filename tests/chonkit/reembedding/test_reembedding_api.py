"""``PUT /collections/{id}/embedding`` end to end through the worker, in pgvector and Qdrant's local mode: the new
version is built beside the collection while it keeps answering with the old model, one swap makes it the
collection (identity valid before and after, naming the new model), the old version is gone; writes meanwhile are
refused; a cancelled or failed change leaves the collection as it was."""

from __future__ import annotations

import uuid

import httpx
import pytest

from chonkit.embedding.worker import EmbeddingWorker
from common.vectors import Search
from common.vectors.registry import VectorRegistry
from tests.chonkit.conftest import drain
from tests.chonkit.reembedding.conftest import OLD, SAME_DIMENSION, WIDER, embedded_collection, valid_identity

PROVIDERS = ["pgvector", "qdrant"]


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


async def models_in(vectors: VectorRegistry, provider: str, name: str) -> set[tuple[str, str]]:
    """The (embeddingProvider, model) of every chunk the collection's name reaches, and how many chunks."""
    store = vectors.get(provider)
    identity = valid_identity(await store.read_identity(name))
    hits = await store.search(
        Search(
            name=name,
            vector=[1.0] + [0.0] * 95 if identity["model"] == "hashed-words-96" else [0.0, 1.0] + [0.0] * 62,
            limit=200,
            properties=("model", "embeddingProvider", "content"),
        )
    )
    return {(h.payload["embeddingProvider"], h.payload["model"]) for h in hits}


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_model_change_builds_beside_the_collection_and_swaps_in_whole(
    chonkit2: httpx.AsyncClient, worker2: EmbeddingWorker, vectors: VectorRegistry, provider: str
) -> None:
    name = unique("Reembed")
    collection = await embedded_collection(chonkit2, worker2, provider, name)
    store = vectors.get(provider)
    before = valid_identity(await store.read_identity(name))
    assert (before["embeddingProvider"], before["model"]) == (OLD["embedding_provider"], OLD["model"])
    chunks = await store.count(name)
    assert chunks > 0

    started = await chonkit2.put(f"/collections/{collection['id']}/embedding", json=WIDER)
    assert started.status_code == 202, started.text
    migration = started.json()["migration"]
    assert migration["state"] == "building"
    assert started.json()["job"]["kind"] == "reembed"
    assert started.json()["job"]["total"] == 4

    # Nothing readers see has changed yet: the identity, the chunks and their model are the old ones.
    assert await store.read_identity(name) == before
    assert await models_in(vectors, provider, name) == {("words", "hashed-words-64a")}
    assert [i.name for i in await store.list_identities()].count(name) == 1  # the version is not listed

    # Writes that the version being built would miss are refused.
    doc_id = (await chonkit2.get(f"/collections/{collection['id']}/documents")).json()[0]["document_id"]
    refused = [
        await chonkit2.post(f"/collections/{collection['id']}/documents", json={"document_ids": [doc_id]}),
        await chonkit2.post(f"/collections/{collection['id']}/documents/remove", json={"document_ids": [doc_id]}),
        await chonkit2.put(f"/collections/{collection['id']}/groups", json={"groups": ["hr"]}),
        await chonkit2.put(f"/collections/{collection['id']}/embedding", json=SAME_DIMENSION),
    ]
    assert [(r.status_code, r.json()["code"]) for r in refused] == [(409, "collection_migrating")] * 4

    await drain(worker2)

    status = (await chonkit2.get(f"/collections/{collection['id']}/embedding")).json()
    assert status["migration"]["state"] == "done", status
    assert status["job"]["status"] == "done"
    after = valid_identity(await store.read_identity(name))
    assert after == {**before, "embeddingProvider": "words", "model": "hashed-words-96"}
    assert await models_in(vectors, provider, name) == {("words", "hashed-words-96")}
    detail = (await chonkit2.get(f"/collections/{collection['id']}")).json()
    assert (detail["collection"]["model"], detail["collection"]["dimension"]) == ("hashed-words-96", 96)
    assert detail["identity"]["valid"]
    assert detail["identity"]["matches_database"]
    assert detail["vector_count"] == sum(d["chunk_count"] for d in detail["documents"]) == chunks
    assert all(d["current"] for d in detail["documents"])
    # pgvector renamed the version's tables to the collection's; Qdrant's name is now an alias of the version.
    assert await store.collection_exists(migration["version"]) == (provider == "qdrant")
    assert [i.name for i in await store.list_identities()].count(name) == 1

    # The collection is an ordinary one again: its documents embed with the new model, unchanged ones are skipped.
    job = (await chonkit2.post(f"/collections/{collection['id']}/documents", json={"document_ids": [doc_id]})).json()
    await drain(worker2)
    assert (await chonkit2.get(f"/jobs/{job['job']['id']}")).json()["progress"] == {"skipped": 1}

    # A second change (Qdrant: alias to alias) drops the version the first one made.
    again = await chonkit2.put(f"/collections/{collection['id']}/embedding", json=SAME_DIMENSION)
    assert again.status_code == 202, again.text
    await drain(worker2)
    assert valid_identity(await store.read_identity(name))["model"] == "hashed-words-64b"
    assert await models_in(vectors, provider, name) == {("words", "hashed-words-64b")}
    assert not await store.collection_exists(migration["version"])
    assert await store.count(name) == chunks

    assert (await chonkit2.delete(f"/collections/{collection['id']}")).status_code == 204
    assert not await store.collection_exists(name)
    assert not await store.collection_exists(again.json()["migration"]["version"])


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_cancelled_change_leaves_the_collection_as_it_was(
    chonkit2: httpx.AsyncClient, worker2: EmbeddingWorker, vectors: VectorRegistry, provider: str
) -> None:
    name = unique("Cancel")
    collection = await embedded_collection(chonkit2, worker2, provider, name)
    store = vectors.get(provider)
    before = valid_identity(await store.read_identity(name))
    chunks = await store.count(name)
    started = (await chonkit2.put(f"/collections/{collection['id']}/embedding", json=WIDER)).json()
    assert await worker2.run_once()  # one document into the new version, then the admin changes their mind
    assert (await chonkit2.post(f"/jobs/{started['job']['id']}/cancel")).status_code == 200
    await drain(worker2)

    status = (await chonkit2.get(f"/collections/{collection['id']}/embedding")).json()
    assert status["migration"]["state"] == "cancelled"
    assert await store.read_identity(name) == before
    assert await store.count(name) == chunks
    assert await models_in(vectors, provider, name) == {("words", "hashed-words-64a")}
    assert not await store.collection_exists(started["migration"]["version"])
    # and it takes writes again
    doc_id = (await chonkit2.get(f"/collections/{collection['id']}/documents")).json()[0]["document_id"]
    response = await chonkit2.post(f"/collections/{collection['id']}/documents", json={"document_ids": [doc_id]})
    assert response.status_code == 202


async def test_a_failed_change_leaves_the_collection_as_it_was(
    chonkit2: httpx.AsyncClient, worker2: EmbeddingWorker, vectors: VectorRegistry
) -> None:
    """MiniLM's 254-token limit is below the chunks the stored config makes for the words model: the worker refuses
    them (``chunks_too_long``), the change fails, the new version is dropped."""
    name = unique("Failed")
    collection = await embedded_collection(chonkit2, worker2, "pgvector", name, documents=1)
    doc_id = (await chonkit2.get(f"/collections/{collection['id']}/documents")).json()[0]["document_id"]
    config = {"chunk": {"strategy": "fixed", "size": 380, "overlap": 0}}
    assert (await chonkit2.put(f"/documents/{doc_id}/config", json=config)).status_code in {200, 204}
    store = vectors.get("pgvector")
    before = valid_identity(await store.read_identity(name))
    chunks = await store.count(name)
    started = await chonkit2.put(
        f"/collections/{collection['id']}/embedding", json={"embedding_provider": "local", "model": "all-MiniLM-L6-v2"}
    )
    assert started.status_code == 202, started.text
    await drain(worker2)

    status = (await chonkit2.get(f"/collections/{collection['id']}/embedding")).json()
    assert (status["migration"]["state"], status["migration"]["error_code"]) == ("failed", "chunks_too_long"), status
    assert await store.read_identity(name) == before
    assert await store.count(name) == chunks
    assert not await store.collection_exists(started.json()["migration"]["version"])


async def test_changes_are_validated_like_a_new_collection(
    chonkit2: httpx.AsyncClient, worker2: EmbeddingWorker
) -> None:
    collection = await embedded_collection(chonkit2, worker2, "pgvector", unique("Checked"), documents=1)
    path = f"/collections/{collection['id']}/embedding"
    answers = [
        await chonkit2.put(path, json=OLD),
        await chonkit2.put(path, json={"embedding_provider": "words", "model": "no-such-model"}),
        await chonkit2.put(path, json={"embedding_provider": "nobody"}),
        await chonkit2.put(path, json={"embedding_provider": "words", "dimension": 3}),
        await chonkit2.put(f"/collections/{uuid.uuid4()}/embedding", json=WIDER),
    ]
    never = (await chonkit2.get(path)).json()
    assert (never["model"], never["migration"], never["job"]) == (OLD["model"], None, None)
    assert [(a.status_code, a.json().get("code")) for a in answers] == [
        (409, "same_embedding_model"),
        (422, "unknown_embedding_model"),
        (422, "unknown_embedding_provider"),
        (400, "invalid_request"),
        (404, "collection_not_found"),
    ]


async def test_an_empty_collection_swaps_at_once(
    chonkit2: httpx.AsyncClient, worker2: EmbeddingWorker, vectors: VectorRegistry
) -> None:
    name = unique("Empty")
    created = (await chonkit2.post("/collections", json={"name": name, **OLD})).json()
    started = await chonkit2.put(f"/collections/{created['id']}/embedding", json=WIDER)
    assert started.status_code == 202, started.text
    await drain(worker2)
    assert (await chonkit2.get(f"/collections/{created['id']}/embedding")).json()["migration"]["state"] == "done"
    assert valid_identity(await vectors.get("pgvector").read_identity(name))["model"] == "hashed-words-96"
