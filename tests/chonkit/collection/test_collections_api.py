"""Collections end to end: identity records, embedding jobs through a real worker, search, groups, drift."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import jsonschema_rs
import msgspec
import pytest

import schemas
from chonkit.collection.reconcile import ReconcileReport, reconcile, upgrade_lexical_indexes
from chonkit.embedding.worker import EmbeddingWorker
from chonkit.ingest import pipeline
from common.db import SingleConnectionDatabase
from common.db.database import Connection, Pool
from common.vectors import Search
from common.vectors.base import SearchFilter
from common.vectors.qdrant import QdrantStore
from common.vectors.registry import VectorRegistry
from schemas.models import Identity
from tests.chonkit.conftest import drain
from tests.support.documents import pdf
from tests.support.foreign import foreign_pgvector_collection

PROVIDERS = ["pgvector", "qdrant"]
PAYLOAD_PROPERTIES = (
    "collection_id",
    "name",
    "model",
    "vectorProvider",
    "embeddingProvider",
    "groups",
    "content",
    "document_id",
)

HANDBOOK = [
    "Vacation policy. Every employee gets twenty five days of paid vacation per year. Unused days carry over.",
    "Sick leave. Call your manager before nine in the morning. A doctor's note is needed after three days.",
    "Expenses. Submit receipts within thirty days. Travel is reimbursed at economy class rates.",
]


def unique_name(prefix: str = "Test") -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


async def create_collection(chonkit: httpx.AsyncClient, provider: str, **extra: Any) -> dict[str, Any]:
    response = await chonkit.post("/collections", json={"name": unique_name(), "vector_provider": provider, **extra})
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


async def upload(chonkit: httpx.AsyncClient, name: str, data: bytes) -> str:
    response = await chonkit.post("/documents", files=[("files", (name, data, "application/octet-stream"))])
    doc_id: str = response.json()["results"][0]["document"]["id"]
    return doc_id


async def embed(
    chonkit: httpx.AsyncClient, worker: EmbeddingWorker, collection_id: str, *doc_ids: str
) -> dict[str, Any]:
    response = await chonkit.post(f"/collections/{collection_id}/documents", json={"document_ids": list(doc_ids)})
    assert response.status_code == 202, response.text
    job_id = response.json()["job"]["id"]
    await drain(worker)
    job: dict[str, Any] = (await chonkit.get(f"/jobs/{job_id}")).json()
    return job


async def test_providers_list_what_collections_can_use(chonkit: httpx.AsyncClient) -> None:
    providers = (await chonkit.get("/providers")).json()
    assert set(providers["vector_providers"]) >= {"pgvector", "qdrant"}
    local = next(m for m in providers["embedding_models"] if m["provider"] == "local")
    assert (local["model"], local["dimension"]) == ("all-MiniLM-L6-v2", 384)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_identity_is_written_read_back_and_valid(chonkit: httpx.AsyncClient, provider: str) -> None:
    created = await create_collection(chonkit, provider, groups=["hr", "legal"])
    assert (created["dimension"], created["model"], created["groups"]) == (384, "all-MiniLM-L6-v2", ["hr", "legal"])
    detail = (await chonkit.get(f"/collections/{created['id']}")).json()
    identity = detail["identity"]["identity"]
    assert identity == {
        "collection_id": created["id"],
        "name": created["name"],
        "model": "all-MiniLM-L6-v2",
        "vectorProvider": provider,
        "embeddingProvider": "local",
        "groups": ["hr", "legal"],
    }
    assert detail["identity"]["valid"] is True
    assert detail["identity"]["matches_database"] is True
    assert jsonschema_rs.validator_for(schemas.load("identity")).is_valid(identity)
    assert detail["vector_count"] == 0


BAD_CREATES = [
    ("lowercase name", {"name": "hr_docs"}, 422, "invalid_collection_name"),
    ("dash in name", {"name": "Hr-docs"}, 422, "invalid_collection_name"),
    ("empty name", {"name": ""}, 422, "invalid_collection_name"),
    ("name of 64 characters", {"name": "A" * 64}, 422, "invalid_collection_name"),
    ("name of 256 characters", {"name": "A" * 256}, 422, "invalid_collection_name"),
    ("unknown vector provider", {"name": "Ok", "vector_provider": "milvus"}, 422, "unknown_vector_provider"),
    ("unknown embedding provider", {"name": "Ok", "embedding_provider": "magic"}, 422, "unknown_embedding_provider"),
    ("unknown model", {"name": "Ok", "model": "gpt-embed-9000"}, 422, "unknown_embedding_model"),
    ("group with spaces", {"name": "Ok", "groups": [" hr"]}, 422, "invalid_group"),
    ("a new version's name", {"name": "Ragu_version_0123456789abcdef0123"}, 422, "collection_name_reserved"),
    ("a version's prefix in other case", {"name": "RAGU_VERSION_x"}, 422, "collection_name_reserved"),
    ("group with a bidi override", {"name": "Ok", "groups": ["\u202ehr"]}, 422, "invalid_group"),
]


@pytest.mark.parametrize(("body", "status", "code"), [b[1:] for b in BAD_CREATES], ids=[b[0] for b in BAD_CREATES])
async def test_bad_creates_are_refused_with_codes(
    chonkit: httpx.AsyncClient, conn: Connection, body: dict[str, Any], status: int, code: str
) -> None:
    response = await chonkit.post("/collections", json={"vector_provider": "qdrant", **body})
    assert response.status_code == status, response.text
    assert response.json()["code"] == code
    assert await conn.fetchval("SELECT count(*) FROM chonkit.collections") == 0


async def test_an_invalid_name_is_refused_with_the_rule_in_words(chonkit: httpx.AsyncClient) -> None:
    body = (await chonkit.post("/collections", json={"name": "Q" * 300, "vector_provider": "qdrant"})).json()

    assert body["code"] == "invalid_collection_name"
    assert "capital ASCII letter" in body["detail"]
    assert "at most 63 characters" in body["detail"]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_the_longest_valid_name_is_valid_in_every_store(chonkit: httpx.AsyncClient, provider: str) -> None:
    name = unique_name("L" + "x" * 53)

    response = await chonkit.post("/collections", json={"name": name, "vector_provider": provider})

    assert (len(name), response.status_code) == (63, 201)


async def test_unknown_provider_error_lists_the_valid_ones(chonkit: httpx.AsyncClient) -> None:
    body = (await chonkit.post("/collections", json={"name": "Ok", "vector_provider": "milvus"})).json()
    assert set(body["valid_providers"]) >= {"pgvector", "qdrant"}
    assert "pgvector" in body["detail"]


async def test_names_are_unique_per_provider(chonkit: httpx.AsyncClient) -> None:
    first = await create_collection(chonkit, "qdrant")
    again = await chonkit.post("/collections", json={"name": first["name"], "vector_provider": "qdrant"})
    assert (again.status_code, again.json()["code"]) == (409, "collection_exists")
    elsewhere = await chonkit.post("/collections", json={"name": first["name"], "vector_provider": "pgvector"})
    assert elsewhere.status_code == 201


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_embed_search_and_payload_contract(
    chonkit: httpx.AsyncClient, worker: EmbeddingWorker, vectors: VectorRegistry, provider: str
) -> None:
    collection = await create_collection(chonkit, provider, groups=["hr"])
    doc_id = await upload(chonkit, "handbook.pdf", pdf(HANDBOOK))
    job = await embed(chonkit, worker, collection["id"], doc_id)
    assert job["status"] == "done", job
    item = job["items"][0]
    assert item["stage"] == "done"
    assert item["chunks"] >= 1
    assert set(item["timings"]) == {"parse_ms", "chunk_ms", "embed_ms", "write_ms"}

    detail = (await chonkit.get(f"/collections/{collection['id']}")).json()
    assert detail["vector_count"] == item["chunks"]
    assert [d["document_id"] for d in detail["documents"]] == [doc_id]

    search = await chonkit.post(
        f"/collections/{collection['id']}/search",
        json={"query": "How many vacation days do I get?", "limit": 3, "mode": "dense"},
    )
    hits = search.json()["hits"]
    assert hits[0]["document_id"] == doc_id
    assert hits[0]["page_start"] == 1
    assert "vacation" in hits[0]["content"].lower()
    assert hits[0]["score"] == pytest.approx(1 - hits[0]["distance"])
    assert hits[0]["document_name"] == "handbook.pdf"

    store = vectors.get(provider)
    payload_validator = jsonschema_rs.validator_for(schemas.load("text-payload"))
    stored = await store.search(
        Search(name=collection["name"], vector=[1.0] + [0.0] * 383, limit=50, properties=PAYLOAD_PROPERTIES)
    )
    assert len(stored) == item["chunks"]
    for hit in stored:
        assert payload_validator.is_valid(hit.payload)
        assert hit.payload["groups"] == ["hr"]
        assert hit.payload["collection_id"] == collection["id"]

    reports = (await chonkit.get(f"/collections/{collection['id']}/reports")).json()
    assert reports[0]["vectors"] == item["chunks"]
    assert reports[0]["model"] == "all-MiniLM-L6-v2"
    assert reports[0]["tokens"] > 0


async def test_unchanged_documents_are_skipped_and_changed_configs_replace_vectors(
    chonkit: httpx.AsyncClient, worker: EmbeddingWorker
) -> None:
    collection = await create_collection(chonkit, "qdrant")
    doc_id = await upload(chonkit, "handbook.pdf", pdf(HANDBOOK))
    first = await embed(chonkit, worker, collection["id"], doc_id)
    again = await embed(chonkit, worker, collection["id"], doc_id)
    assert first["items"][0]["reason"] is None
    assert again["items"][0]["stage"] == "skipped"
    assert again["items"][0]["reason"] == "Already embedded in this collection with the same content and settings."

    small = {"chunk": {"strategy": "fixed", "unit": "characters", "size": 120, "overlap": 0}}
    assert (await chonkit.put(f"/documents/{doc_id}/config", json=small)).status_code == 200
    rechunked = await embed(chonkit, worker, collection["id"], doc_id)
    assert rechunked["items"][0]["stage"] == "done"
    assert rechunked["items"][0]["chunks"] > first["items"][0]["chunks"]
    detail = (await chonkit.get(f"/collections/{collection['id']}")).json()
    assert detail["vector_count"] == rechunked["items"][0]["chunks"]  # replaced, not added


async def test_a_document_embedded_by_an_earlier_pipeline_is_embedded_again_not_skipped(
    chonkit: httpx.AsyncClient, worker: EmbeddingWorker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """#27: documents embedded before a parser or chunker change are cleaned by embedding them again."""
    collection = await create_collection(chonkit, "qdrant")
    doc_id = await upload(chonkit, "handbook.pdf", pdf(HANDBOOK))
    await embed(chonkit, worker, collection["id"], doc_id)
    monkeypatch.setattr(pipeline, "PIPELINE_VERSION", pipeline.PIPELINE_VERSION + 1)
    again = await embed(chonkit, worker, collection["id"], doc_id)
    assert again["items"][0]["stage"] == "done"
    detail = (await chonkit.get(f"/collections/{collection['id']}")).json()
    assert detail["vector_count"] == again["items"][0]["chunks"]  # replaced, not added


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_group_changes_rewrite_identity_and_every_chunk(
    chonkit: httpx.AsyncClient, worker: EmbeddingWorker, vectors: VectorRegistry, provider: str
) -> None:
    collection = await create_collection(chonkit, provider, groups=["hr"])
    await embed(chonkit, worker, collection["id"], await upload(chonkit, "handbook.pdf", pdf(HANDBOOK)))
    store = vectors.get(provider)
    query = [1.0] + [0.0] * 383

    async def readable(groups: set[str]) -> int:
        hits = await store.search(
            Search(
                name=collection["name"],
                vector=query,
                limit=50,
                properties=["content"],
                where=SearchFilter(readable_by=frozenset(groups)),
            )
        )
        return len(hits)

    total = (await chonkit.get(f"/collections/{collection['id']}")).json()["vector_count"]
    assert (await readable({"hr"}), await readable({"legal"})) == (total, 0)

    updated = await chonkit.put(f"/collections/{collection['id']}/groups", json={"groups": ["legal", "exec"]})
    assert updated.json()["groups"] == ["exec", "legal"]
    identity = (await chonkit.get(f"/collections/{collection['id']}")).json()["identity"]["identity"]
    assert identity["groups"] == ["exec", "legal"]
    assert (await readable({"hr"}), await readable({"legal"})) == (0, total)

    await chonkit.put(f"/collections/{collection['id']}/groups", json={"groups": []})
    detail = (await chonkit.get(f"/collections/{collection['id']}")).json()
    assert "groups" not in detail["identity"]["identity"]
    assert detail["identity"]["valid"] is True
    assert await readable(set()) == total
    stored = await store.search(
        Search(name=collection["name"], vector=query, limit=50, properties=["groups", "content"])
    )
    assert all("groups" not in hit.payload for hit in stored)


async def test_deleting_a_document_removes_its_vectors_everywhere(
    chonkit: httpx.AsyncClient, worker: EmbeddingWorker
) -> None:
    one = await create_collection(chonkit, "qdrant")
    two = await create_collection(chonkit, "pgvector")
    keep = await upload(chonkit, "keep.md", b"# Keep\n\nThis document stays in both collections.")
    drop = await upload(chonkit, "drop.pdf", pdf(HANDBOOK))
    for collection in (one, two):
        await embed(chonkit, worker, collection["id"], keep, drop)
    assert (await chonkit.delete(f"/documents/{drop}")).status_code == 204
    for collection in (one, two):
        detail = (await chonkit.get(f"/collections/{collection['id']}")).json()
        assert [d["document_id"] for d in detail["documents"]] == [keep]
        assert detail["vector_count"] == 1


async def test_remove_job_takes_documents_out(chonkit: httpx.AsyncClient, worker: EmbeddingWorker) -> None:
    collection = await create_collection(chonkit, "qdrant")
    doc_id = await upload(chonkit, "handbook.pdf", pdf(HANDBOOK))
    await embed(chonkit, worker, collection["id"], doc_id)
    response = await chonkit.post(f"/collections/{collection['id']}/documents/remove", json={"document_ids": [doc_id]})
    assert response.status_code == 202
    await drain(worker)
    detail = (await chonkit.get(f"/collections/{collection['id']}")).json()
    assert (detail["vector_count"], detail["documents"]) == (0, [])


async def test_failed_document_has_a_reason_and_retry_runs_only_failed(
    chonkit: httpx.AsyncClient, worker: EmbeddingWorker
) -> None:
    collection = await create_collection(chonkit, "qdrant")
    good = await upload(chonkit, "good.md", b"# Fine\n\nShort and sweet.")
    bad = await upload(chonkit, "long.txt", (" ".join(["tokenization"] * 600)).encode())
    huge = {"chunk": {"strategy": "fixed", "unit": "characters", "size": 50_000, "overlap": 0}}
    await chonkit.put(f"/documents/{bad}/config", json=huge)
    job = await embed(chonkit, worker, collection["id"], good, bad)
    assert job["status"] == "failed"
    stages = {i["document_id"]: i for i in job["items"]}
    assert stages[good]["stage"] == "done"
    assert stages[bad]["error_code"] == "chunks_too_long"
    assert "never silently truncated" in stages[bad]["error"]

    await chonkit.put(f"/documents/{bad}/config", json={"chunk": {"strategy": "fixed", "size": 200, "overlap": 20}})
    retried = await chonkit.post(f"/jobs/{job['id']}/retry")
    assert retried.status_code == 200
    assert [i["stage"] for i in retried.json()["items"] if i["document_id"] == bad] == ["queued"]
    processed = await drain(worker)
    assert processed == 1  # only the failed document ran again
    final = (await chonkit.get(f"/jobs/{job['id']}")).json()
    assert final["status"] == "done"
    assert (await chonkit.post(f"/jobs/{job['id']}/retry")).json()["code"] == "nothing_to_retry"


async def test_cancel_stops_queued_documents(chonkit: httpx.AsyncClient, worker: EmbeddingWorker) -> None:
    collection = await create_collection(chonkit, "qdrant")
    ids = [await upload(chonkit, f"d{i}.md", f"# Doc {i}\n\nText {i}.".encode()) for i in range(3)]
    job = (await chonkit.post(f"/collections/{collection['id']}/documents", json={"document_ids": ids})).json()["job"]
    cancelled = (await chonkit.post(f"/jobs/{job['id']}/cancel")).json()
    assert cancelled["status"] == "cancelled"
    assert {i["stage"] for i in cancelled["items"]} == {"cancelled"}
    assert await drain(worker) == 0
    assert (await chonkit.post(f"/jobs/{job['id']}/cancel")).json()["code"] == "job_finished"


async def test_concurrent_embed_requests_make_one_set_of_vectors(
    chonkit: httpx.AsyncClient, worker: EmbeddingWorker
) -> None:
    collection = await create_collection(chonkit, "qdrant")
    doc_id = await upload(chonkit, "handbook.pdf", pdf(HANDBOOK))
    url = f"/collections/{collection['id']}/documents"
    responses = await asyncio.gather(*(chonkit.post(url, json={"document_ids": [doc_id]}) for _ in range(5)))
    jobs = [r.json() for r in responses]
    assert sum(1 for j in jobs if j["job"] is not None) == 1
    assert sum(len(j["already_queued"]) for j in jobs) == 4
    await drain(worker)
    detail = (await chonkit.get(f"/collections/{collection['id']}")).json()
    chunks = detail["documents"][0]["chunk_count"]
    assert detail["vector_count"] == chunks


async def test_unknown_documents_are_refused_and_nothing_is_queued(
    chonkit: httpx.AsyncClient, conn: Connection
) -> None:
    collection = await create_collection(chonkit, "qdrant")
    missing = str(uuid.uuid4())
    response = await chonkit.post(f"/collections/{collection['id']}/documents", json={"document_ids": [missing]})
    assert (response.status_code, response.json()["code"]) == (404, "document_not_found")
    assert await conn.fetchval("SELECT count(*) FROM chonkit.jobs") == 0


async def test_delete_collection_drops_vectors_and_rows(
    chonkit: httpx.AsyncClient, worker: EmbeddingWorker, vectors: VectorRegistry
) -> None:
    collection = await create_collection(chonkit, "pgvector")
    await embed(chonkit, worker, collection["id"], await upload(chonkit, "h.pdf", pdf(HANDBOOK)))
    assert (await chonkit.delete(f"/collections/{collection['id']}")).status_code == 204
    assert not await vectors.get("pgvector").collection_exists(collection["name"])
    assert (await chonkit.get(f"/collections/{collection['id']}")).json()["code"] == "collection_not_found"


async def test_job_events_stream_until_done(chonkit: httpx.AsyncClient, worker: EmbeddingWorker) -> None:
    collection = await create_collection(chonkit, "qdrant")
    doc_id = await upload(chonkit, "handbook.pdf", pdf(HANDBOOK))
    job = (await chonkit.post(f"/collections/{collection['id']}/documents", json={"document_ids": [doc_id]})).json()[
        "job"
    ]
    stop = asyncio.Event()
    running = asyncio.create_task(worker.run(stop, idle_seconds=0.05))
    try:
        response = await chonkit.get(f"/jobs/{job['id']}/events")
    finally:
        stop.set()
        await running
    assert response.headers["content-type"].startswith("text/event-stream")
    events = [
        msgspec.json.decode(line.removeprefix("data: "))
        for line in response.text.splitlines()
        if line.startswith("data: ")
    ]
    assert events[0]["status"] in {"queued", "running"}
    assert events[-1]["status"] == "done"
    assert events[-1]["items"][0]["stage"] == "done"


async def test_reconcile_reports_and_repairs_drift(
    chonkit: httpx.AsyncClient, worker: EmbeddingWorker, vectors: VectorRegistry, db: SingleConnectionDatabase
) -> None:
    collection = await create_collection(chonkit, "qdrant", groups=["hr"])
    doc_id = await upload(chonkit, "handbook.pdf", pdf(HANDBOOK))
    await embed(chonkit, worker, collection["id"], doc_id)
    clean = await reconcile(db, vectors, repair=False)
    assert [d for d in clean.drift if d.collection == collection["name"]] == []

    store = vectors.get("qdrant")
    await store.set_groups(collection["name"], ["everyone_now"])  # tampered identity and chunk copies
    await store.delete_document(collection["name"], doc_id)  # lost vectors
    report = await reconcile(db, vectors, repair=False)
    kinds = {d.kind for d in report.drift if d.collection == collection["name"]}
    assert kinds == {"identity_mismatch", "count_mismatch"}
    assert not report.clean

    repaired = await reconcile(db, vectors, repair=True)
    assert repaired.clean
    await drain(worker)
    after = await reconcile(db, vectors, repair=False)
    assert [d for d in after.drift if d.collection == collection["name"]] == []
    assert (await store.read_identity(collection["name"]) or {}).get("groups") == ["hr"]


async def test_reconcile_finds_chunks_whose_groups_copy_is_not_the_collections_and_repairs_them(
    chonkit: httpx.AsyncClient,
    worker: EmbeddingWorker,
    vectors: VectorRegistry,
    db: SingleConnectionDatabase,
    vector_pool: Pool,
) -> None:
    """A chunk copy naming its group as a string (as another writer might) is readable by nobody; before, with
    the identity intact, reconcile found nothing."""
    collection = await create_collection(chonkit, "pgvector", groups=["hr"])
    await embed(chonkit, worker, collection["id"], await upload(chonkit, "handbook.pdf", pdf(HANDBOOK)))
    table = f'vectors."{collection["name"]}"'
    async with vector_pool.acquire() as conn:
        tampered = await conn.fetchval(f"SELECT id FROM {table} WHERE id <> $1 LIMIT 1", uuid.UUID(int=0))
        await conn.execute(f"""UPDATE {table} SET payload = payload || '{{"groups": "hr"}}' WHERE id = $1""", tampered)

    report = await reconcile(db, vectors, repair=False)
    assert [d.kind for d in report.drift if d.collection == collection["name"]] == ["chunks_misgrouped"]
    assert (await reconcile(db, vectors, repair=True)).clean
    assert [d for d in (await reconcile(db, vectors, repair=False)).drift if d.collection == collection["name"]] == []
    async with vector_pool.acquire() as conn:
        assert await conn.fetchval(f"SELECT payload->'groups' FROM {table} WHERE id = $1", tampered) == ["hr"]


async def test_reconcile_repair_gives_a_pgvector_collection_another_application_wrote_its_lexical_index(
    vectors: VectorRegistry, vector_pool: Pool, db: SingleConnectionDatabase
) -> None:
    """The lexical_index_missing error tells the operator to run ``ragu reconcile --repair``; before, a repair
    left collections chonkit does not own untouched, so it never added their index and keyword searches kept
    failing."""
    identity = Identity(
        collection_id=str(uuid.uuid4()), name=f"Foreign_{uuid.uuid4().hex[:8]}", model="m",
        vectorProvider="pgvector", embeddingProvider="e",
    )  # fmt: skip
    contents = ["the vacation policy grants twenty days", "expenses are filed monthly"]
    vectors_of = await foreign_pgvector_collection(vector_pool, identity, contents, dimension=8)
    store = vectors.get("pgvector")

    def mine(report: ReconcileReport) -> list[tuple[str, bool]]:
        return [(d.kind, d.repaired) for d in report.drift if d.collection == identity.name]

    assert mine(await reconcile(db, vectors, repair=False)) == [("foreign_collection", False)]
    async with vector_pool.acquire() as conn:  # one chunk names its group as a string: readable by nobody
        await conn.execute(
            f'UPDATE vectors."{identity.name}" SET payload = payload || \'{{"groups": "hr"}}\' WHERE id = $1',
            uuid.UUID(int=2),
        )
    repaired = await reconcile(db, vectors, repair=True)
    assert mine(repaired) == [
        ("foreign_collection", False),
        ("chunks_misgrouped", False),  # reported; the collection is its application's to fix
        ("lexical_index_missing", True),
    ]
    assert "1 chunks" in next(d.detail for d in repaired.drift if d.kind == "chunks_misgrouped")
    hits = await store.search(
        Search(
            name=identity.name, vector=vectors_of[1], limit=2, properties=["content"], text="vacation", mode="lexical"
        )
    )
    assert [hit.payload["content"] for hit in hits] == [contents[0]]
    again = await reconcile(db, vectors, repair=True)  # the index once is enough
    assert mine(again) == [("foreign_collection", False), ("chunks_misgrouped", False)]
    assert (await store.read_identity(identity.name)) == identity.to_dict()


async def _make_as_before_lexical_retrieval(store: QdrantStore, name: str) -> tuple[int, int]:
    """Rebuild a Qdrant collection as the adapter made them before lexical retrieval: one unnamed dense vector,
    the same points, no sparse vector. Returns its chunk count and dimension."""
    from qdrant_client import models

    client = store._client
    points, _ = await client.scroll(name, limit=10_000, with_payload=True, with_vectors=[""])
    dense = [p.vector[""] if isinstance(p.vector, dict) else p.vector for p in points]
    dimension = len(dense[0])  # type: ignore[arg-type]
    await client.delete_collection(name)
    config = models.VectorParams(size=dimension, distance=models.Distance.COSINE)
    await client.create_collection(name, vectors_config=config)
    rebuilt = [models.PointStruct(id=p.id, vector=v, payload=p.payload) for p, v in zip(points, dense, strict=True)]  # type: ignore[arg-type]
    await client.upsert(name, rebuilt)
    return len(points) - 1, dimension  # the identity record is no chunk


async def test_a_qdrant_collection_from_before_lexical_retrieval_gets_its_index_from_reconcile_and_the_worker(
    chonkit: httpx.AsyncClient, worker: EmbeddingWorker, vectors: VectorRegistry, db: SingleConnectionDatabase
) -> None:
    collection = await create_collection(chonkit, "qdrant")
    doc_id = await upload(chonkit, "handbook.pdf", pdf(HANDBOOK))
    await embed(chonkit, worker, collection["id"], doc_id)
    name, client = collection["name"], vectors.get("qdrant")._client  # type: ignore[attr-defined]

    def restarted() -> VectorRegistry:
        """A new process: its Qdrant adapter knows nothing of the collection yet."""
        return VectorRegistry({"pgvector": vectors.get("pgvector"), "qdrant": QdrantStore(client)})

    async def lexical_hits(registry: VectorRegistry, dimension: int) -> list[str]:
        query = [1.0] + [0.0] * (dimension - 1)
        hits = await registry.get("qdrant").search(
            Search(name=name, vector=query, limit=3, properties=["content"], text="vacation days", mode="lexical")
        )
        return [hit.payload["content"] for hit in hits]

    chunks, dimension = await _make_as_before_lexical_retrieval(QdrantStore(client), name)
    repaired = await reconcile(db, restarted(), repair=True)
    [drift] = [d for d in repaired.drift if d.collection == name]
    assert (drift.kind, drift.repaired) == ("lexical_index_missing", True)
    assert f"{chunks} chunks" in drift.detail
    assert any("vacation" in content.lower() for content in await lexical_hits(restarted(), dimension))
    assert await upgrade_lexical_indexes(db, restarted()) == 0  # once is enough

    await _make_as_before_lexical_retrieval(QdrantStore(client), name)
    registry, stop = restarted(), asyncio.Event()
    stop.set()  # the worker's first act, before it looks for work
    await EmbeddingWorker(db, worker.blobs, worker.embedders, registry).run(stop)
    assert any("vacation" in content.lower() for content in await lexical_hits(registry, dimension))
