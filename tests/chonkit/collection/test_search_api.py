"""The search test bench through the HTTP API: modes and their legs, metadata filters, grouping by document,
depth, bad values refused with codes, and document metadata following edits onto the chunks."""

from __future__ import annotations

from collections import Counter
from typing import Any

import httpx
import msgspec
import pytest

from chonkit.collection.models import Collection
from chonkit.collection.service import identity_of
from chonkit.embedding.worker import EmbeddingWorker
from common.db.database import Connection
from common.vectors.base import DEFAULT_DENSE_WEIGHT, ChunkPayload, VectorRecord
from common.vectors.registry import VectorRegistry
from tests.chonkit.collection.test_collections_api import PROVIDERS, create_collection, embed, upload
from tests.chonkit.conftest import drain

MODES = ["dense", "lexical", "hybrid"]

HANDBOOK = b"""# Vacation

Every employee gets twenty five vacation days per year. Unused vacation days carry over to March.

# Sick leave

Call your manager before nine in the morning. A doctor's note is needed after three days of sick leave.
"""

MEMO = b"""# Vacation planning

Plan your vacation days with your team before the summer, so that someone covers your work.

# Office hours

The office opens at eight and closes at six.
"""

EXPENSES = b"""# Travel

Travel is reimbursed at economy class rates. Submit receipts within thirty days of the trip.

# Meals

Meals on a business trip are reimbursed up to a daily allowance.
"""


async def two_chunk_upload(chonkit: httpx.AsyncClient, name: str, data: bytes) -> str:
    """One chunk per section: each test document has two."""
    doc_id = await upload(chonkit, name, data)
    sections = await chonkit.put(f"/documents/{doc_id}/config", json={"chunk": {"strategy": "structure"}})
    assert sections.status_code == 200, sections.text
    return doc_id


async def tagged_upload(
    chonkit: httpx.AsyncClient, name: str, data: bytes, *, tags: list[str], label: str | None
) -> str:
    doc_id = await two_chunk_upload(chonkit, name, data)
    response = await chonkit.patch(f"/documents/{doc_id}", json={"tags": tags, "label": label})
    assert response.status_code == 200, response.text
    return doc_id


async def search(chonkit: httpx.AsyncClient, collection_id: str, **body: Any) -> dict[str, Any]:
    response = await chonkit.post(f"/collections/{collection_id}/search", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


@pytest.fixture(params=PROVIDERS)
async def library(
    request: pytest.FixtureRequest, chonkit: httpx.AsyncClient, worker: EmbeddingWorker
) -> dict[str, str]:
    """A collection of three two-chunk documents, tagged and labelled before they were embedded."""
    collection = await create_collection(chonkit, request.param)
    docs = {
        "handbook": await tagged_upload(chonkit, "handbook.md", HANDBOOK, tags=["policy", "hr"], label="Handbook"),
        "memo": await tagged_upload(chonkit, "memo.md", MEMO, tags=["policy"], label="Memo"),
        "expenses": await tagged_upload(chonkit, "expenses.md", EXPENSES, tags=["finance"], label=None),
    }
    job = await embed(chonkit, worker, collection["id"], *docs.values())
    assert job["status"] == "done", job
    return {"collection": collection["id"], **docs}


FILTERS = [
    ("one tag", {"tags": ["hr"]}, {"handbook"}),
    ("any of two tags", {"tags": ["hr", "finance"]}, {"handbook", "expenses"}),
    ("a tag two documents share", {"tags": ["policy"]}, {"handbook", "memo"}),
    ("one label", {"labels": ["Memo"]}, {"memo"}),
    ("any of two labels", {"labels": ["Memo", "Handbook"]}, {"handbook", "memo"}),
    ("tag and label together", {"tags": ["policy"], "labels": ["Handbook"]}, {"handbook"}),
    ("a tag no document has", {"tags": ["legal"]}, set()),
    ("a tag and a document outside it", {"tags": ["finance"], "document_ids": ["handbook"]}, set()),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("where", "expected"), [f[1:] for f in FILTERS], ids=[f[0] for f in FILTERS])
async def test_tag_and_label_filters_keep_exactly_the_documents_they_name(
    chonkit: httpx.AsyncClient, library: dict[str, str], mode: str, where: dict[str, list[str]], expected: set[str]
) -> None:
    names = {doc_id: name for name, doc_id in library.items()}
    if "document_ids" in where:
        where = {**where, "document_ids": [library[name] for name in where["document_ids"]]}

    found = await search(
        chonkit, library["collection"], query="vacation days and travel receipts", limit=20, mode=mode, **where
    )

    assert {names[hit["document_id"]] for hit in found["hits"]} == expected
    unfiltered = await search(
        chonkit, library["collection"], query="vacation days and travel receipts", limit=20, mode=mode
    )
    assert len(found["hits"]) == sum(names[h["document_id"]] in expected for h in unfiltered["hits"])


async def test_hits_show_the_tags_and_label_of_their_document(
    chonkit: httpx.AsyncClient, library: dict[str, str]
) -> None:
    found = await search(chonkit, library["collection"], query="vacation", limit=20, mode="dense")

    shown = {(hit["document_id"], tuple(hit["tags"]), hit["label"]) for hit in found["hits"]}
    assert shown == {
        (library["handbook"], ("policy", "hr"), "Handbook"),
        (library["memo"], ("policy",), "Memo"),
        (library["expenses"], ("finance",), None),
    }


@pytest.mark.parametrize("mode", MODES)
async def test_grouping_gives_each_document_once_with_its_best_chunk_and_count(
    chonkit: httpx.AsyncClient, library: dict[str, str], mode: str
) -> None:
    query = {"query": "vacation days for travel", "limit": 5, "mode": mode}
    chunks = (await search(chonkit, library["collection"], **query))["hits"]
    grouped = await search(chonkit, library["collection"], **query, group_by="document")

    order = list(dict.fromkeys(hit["document_id"] for hit in chunks))
    assert [hit["document_id"] for hit in grouped["hits"]] == order
    assert len(order) < len(chunks)  # some document had two chunks among the five, so grouping did something
    counts = Counter(hit["document_id"] for hit in chunks)
    assert {hit["document_id"]: hit["chunk_count"] for hit in grouped["hits"]} == counts
    best = {doc_id: next(h for h in chunks if h["document_id"] == doc_id) for doc_id in order}
    for hit in grouped["hits"]:
        chunk = best[hit["document_id"]]
        assert (hit["chunk_index"], hit["content"], hit["legs"]) == (
            chunk["chunk_index"],
            chunk["content"],
            chunk["legs"],
        )
        assert (hit["score"], hit["distance"]) == pytest.approx((chunk["score"], chunk["distance"]), abs=1e-6)
    assert chunks[0]["chunk_count"] is None


async def test_dense_hits_are_ranked_by_meaning_with_their_dense_rank(
    chonkit: httpx.AsyncClient, library: dict[str, str]
) -> None:
    found = await search(chonkit, library["collection"], query="time off work", limit=6, mode="dense")

    assert found["mode"] == "dense"
    hits = found["hits"]
    assert len(hits) == 6
    assert [h["legs"] for h in hits] == [
        {"dense_rank": rank, "lexical_rank": None, "lexical_score": None, "fused_score": None} for rank in range(1, 7)
    ]
    assert all(h["score"] == pytest.approx(1 - h["distance"]) for h in hits)
    assert [h["distance"] for h in hits] == sorted(h["distance"] for h in hits)


async def test_lexical_hits_are_ranked_by_bm25_with_their_lexical_rank_and_cosine_distance(
    chonkit: httpx.AsyncClient, library: dict[str, str]
) -> None:
    found = await search(chonkit, library["collection"], query="reimbursed receipts", limit=10, mode="lexical")

    hits = found["hits"]
    assert {h["document_id"] for h in hits} == {library["expenses"]}  # no other document has either word
    assert "receipts" in hits[0]["content"]  # both words beat one
    assert [h["legs"]["lexical_rank"] for h in hits] == list(range(1, len(hits) + 1))
    assert all(h["legs"]["dense_rank"] is None and h["legs"]["fused_score"] is None for h in hits)
    assert all(h["score"] == pytest.approx(h["legs"]["lexical_score"]) for h in hits)
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    dense = await search(chonkit, library["collection"], query="reimbursed receipts", limit=6, mode="dense")
    distance = {(h["document_id"], h["chunk_index"]): h["distance"] for h in dense["hits"]}
    for hit in hits:
        assert hit["distance"] == pytest.approx(distance[(hit["document_id"], hit["chunk_index"])], abs=1e-5)


async def test_a_query_of_stop_words_finds_nothing_lexically_and_hybrid_falls_back_to_dense(
    chonkit: httpx.AsyncClient, library: dict[str, str]
) -> None:
    lexical = await search(chonkit, library["collection"], query="the and of", limit=5, mode="lexical")
    hybrid = await search(chonkit, library["collection"], query="the and of", limit=5, mode="hybrid")
    dense = await search(chonkit, library["collection"], query="the and of", limit=5, mode="dense")

    assert lexical["hits"] == []
    assert [(h["document_id"], h["chunk_index"]) for h in hybrid["hits"]] == [
        (h["document_id"], h["chunk_index"]) for h in dense["hits"]
    ]
    assert all(h["legs"]["lexical_rank"] is None for h in hybrid["hits"])


@pytest.mark.parametrize("dense_weight", [0.0, 0.5, 1.0])
async def test_hybrid_hits_carry_both_legs_and_are_ordered_by_the_fused_score(
    chonkit: httpx.AsyncClient, library: dict[str, str], dense_weight: float
) -> None:
    found = await search(
        chonkit, library["collection"], query="reimbursed vacation", limit=6, mode="hybrid", dense_weight=dense_weight
    )

    hits = found["hits"]
    assert len(hits) == 6
    assert all(h["score"] == pytest.approx(h["legs"]["fused_score"]) for h in hits)
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    assert all(h["legs"]["dense_rank"] is not None or h["legs"]["lexical_rank"] is not None for h in hits)
    assert any(h["legs"]["lexical_rank"] is not None for h in hits)
    leading = "dense_rank" if dense_weight == 1.0 else "lexical_rank" if dense_weight == 0.0 else None
    if leading:  # a weight of 1 or 0 is one leg's order
        ranks = [h["legs"][leading] for h in hits if h["legs"][leading] is not None]
        assert ranks == sorted(ranks)
        assert ranks[0] == 1


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_depth_of_200_is_searched_and_grouped(
    chonkit: httpx.AsyncClient, vectors: VectorRegistry, provider: str
) -> None:
    collection = await create_collection(chonkit, provider)
    detail = (await chonkit.get(f"/collections/{collection['id']}")).json()["collection"]
    await vectors.get(provider).upsert(collection["name"], many_chunks(detail, documents=3, per_document=70))

    for mode in MODES:
        found = await search(chonkit, collection["id"], query="rule about leave", limit=200, mode=mode)
        assert len(found["hits"]) == 200, mode
        grouped = await search(
            chonkit, collection["id"], query="rule about leave", limit=200, mode=mode, group_by="document"
        )
        assert len(grouped["hits"]) == 3
        assert sum(h["chunk_count"] for h in grouped["hits"]) == 200


def many_chunks(collection: dict[str, Any], *, documents: int, per_document: int) -> list[VectorRecord]:
    """Chunks written straight to the store (embedding 210 of them would only slow the test down): every one
    mentions the words searched for, so each mode fills its depth."""
    identity = identity_of(msgspec.convert(collection, Collection))
    records = []
    for d in range(documents):
        for c in range(per_document):
            n = d * per_document + c
            vector = [1.0 if i == n % 384 else 0.01 for i in range(384)]
            payload = ChunkPayload(
                collection_id=identity.collection_id,
                name=identity.name,
                model=identity.model,
                vectorProvider=identity.vectorProvider,
                embeddingProvider=identity.embeddingProvider,
                content=f"Leave rule {n} of document {d}: announce leave {c} days ahead.",
                document_id=f"00000000-0000-4000-8000-{d:012d}",
                document_sha256="ab" * 32,
                token_count=12,
                content_hash=f"{n:064x}",
                chunk_index=c,
            )
            records.append(VectorRecord(id=f"00000000-0000-4000-9000-{n:012d}", vector=vector, payload=payload))
    return records


BAD_SEARCHES = [
    ("a depth of 201", {"limit": 201}, "limit"),
    ("a depth of 0", {"limit": 0}, "limit"),
    ("an unknown mode", {"mode": "semantic"}, "mode"),
    ("a weight above 1", {"dense_weight": 1.5}, "dense_weight"),
    ("a negative weight", {"dense_weight": -0.1}, "dense_weight"),
    ("grouping by page", {"group_by": "page"}, "group_by"),
    ("an empty tag list", {"tags": []}, "tags"),
    ("an empty tag", {"tags": [""]}, "tags"),
    ("labels as a string", {"labels": "Memo"}, "labels"),
    ("an unknown field", {"filter": {"tags": ["hr"]}}, "filter"),
]


@pytest.mark.parametrize(("body", "field"), [b[1:] for b in BAD_SEARCHES], ids=[b[0] for b in BAD_SEARCHES])
async def test_bad_values_are_refused_with_a_code_naming_the_field(
    chonkit: httpx.AsyncClient, body: dict[str, Any], field: str
) -> None:
    collection = await create_collection(chonkit, "qdrant")

    response = await chonkit.post(f"/collections/{collection['id']}/search", json={"query": "vacation", **body})

    assert response.status_code == 400, response.text
    problem = response.json()
    assert problem["code"] == "invalid_request"
    assert field in problem["detail"] + str(problem.get("errors"))


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_tags_and_label_changed_on_a_document_reach_its_chunks(
    chonkit: httpx.AsyncClient, worker: EmbeddingWorker, conn: Connection, provider: str
) -> None:
    collection = await create_collection(chonkit, provider)
    doc_id = await two_chunk_upload(chonkit, "handbook.md", HANDBOOK)
    await embed(chonkit, worker, collection["id"], doc_id)
    policy = {"query": "vacation", "limit": 10, "tags": ["policy"]}
    assert (await search(chonkit, collection["id"], **policy))["hits"] == []

    patched = await chonkit.patch(f"/documents/{doc_id}", json={"tags": ["policy"], "label": "Handbook"})
    assert patched.status_code == 200, patched.text
    assert await conn.fetchval("SELECT count(*) FROM chonkit.pending_document_updates") == 1
    assert (await search(chonkit, collection["id"], **policy))["hits"] == []  # not yet: the worker applies it
    assert await drain(worker) == 1

    hits = (await search(chonkit, collection["id"], **policy))["hits"]
    assert {h["document_id"] for h in hits} == {doc_id}
    assert len(hits) == 2  # every chunk of the document
    assert all((h["tags"], h["label"]) == (["policy"], "Handbook") for h in hits)
    labelled = await search(chonkit, collection["id"], query="vacation", limit=10, labels=["Handbook"])
    assert len(labelled["hits"]) == 2

    await chonkit.patch(f"/documents/{doc_id}", json={"tags": [], "label": None})
    await drain(worker)
    assert (await search(chonkit, collection["id"], **policy))["hits"] == []
    assert await conn.fetchval("SELECT count(*) FROM chonkit.pending_document_updates") == 0


async def test_the_openapi_schema_describes_the_bench_controls_and_the_legs(chonkit: httpx.AsyncClient) -> None:
    """Clients read the stable names and their meaning from the schema, not from our source."""
    schemas = (await chonkit.get("/docs/openapi.json")).json()["components"]["schemas"]

    legs = schemas["HitLegs"]["properties"]
    assert set(legs) == {"dense_rank", "lexical_rank", "lexical_score", "fused_score"}
    assert all(field["description"] for field in legs.values())
    request = schemas["SearchRequest"]["properties"]
    assert request["mode"]["enum"] == ["dense", "lexical", "hybrid"]
    assert (request["mode"]["default"], request["dense_weight"]["default"]) == ("hybrid", DEFAULT_DENSE_WEIGHT)
    assert request["limit"]["maximum"] == 200
    for field in ("mode", "dense_weight", "tags", "labels", "group_by", "limit"):
        assert request[field]["description"], field
    assert schemas["MatchedChunk"]["properties"]["chunk_count"]["description"]
