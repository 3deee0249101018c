"""The Qdrant adapter's lexical leg and hybrid search, on the client's local mode (no server runs here).

What only Qdrant has: the sparse vector written at upsert (the shared analyser's BM25 tf weights, the IDF left
to Qdrant's modifier), both legs of a hybrid search in one batch request with the same filter, the dense
vector fetched to measure lexical-only hits, and the upgrade of collections created before the lexical leg.
The provider-neutral semantics (fusion, legs, filters in every mode) are the contract suite's
(``tests/contracts/test_hybrid_contract.py``).
"""

from __future__ import annotations

import logging
import math
import uuid
import warnings
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from qdrant_client import AsyncQdrantClient, models

from common.errors import Unavailable
from common.vectors import Search, lexical
from common.vectors.base import IDENTITY_ID, SearchFilter, VectorRecord, identity_vector
from common.vectors.qdrant import LENGTH_FIELD, LEXICAL_VECTOR, QdrantStore, search_filter
from schemas.models import Identity

DIM = 4
TEXTS = {
    1: "The cat sat on the warm mat.",
    2: "A dog chased the cat across the garden, and the cat ran.",
    3: "Stock markets fell sharply today.",
    4: "Markets and cats: an unlikely essay about markets.",
}
VECTORS = {
    1: [1.0, 0.0, 0.0, 0.0],
    2: [0.8, 0.6, 0.0, 0.0],
    3: [0.0, 0.0, 1.0, 0.0],
    4: [0.0, 0.6, 0.0, 0.8],
}


class RecordingClient(AsyncQdrantClient):
    """The real local-mode client, noting the batch queries it is sent."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.batches: list[list[models.QueryRequest]] = []
        self.indexes: list[tuple[str, str]] = []

    async def create_payload_index(self, collection_name: str, field_name: str, *args: Any, **kwargs: Any) -> Any:
        self.indexes.append((collection_name, field_name))
        return await super().create_payload_index(collection_name, field_name, *args, **kwargs)

    async def query_batch_points(self, *args: Any, **kwargs: Any) -> Any:
        requests = kwargs["requests"] if "requests" in kwargs else args[1]
        self.batches.append(list(requests))
        return await super().query_batch_points(*args, **kwargs)


def make_identity(name: str = "Handbook") -> Identity:
    return Identity(
        collection_id=str(uuid.uuid4()),
        name=name,
        model="all-MiniLM-L6-v2",
        vectorProvider="qdrant",
        embeddingProvider="local",
    )


def chunk_id(n: int) -> str:
    return str(uuid.UUID(int=n))


def payload_of(n: int) -> dict[str, Any]:
    return {"content": TEXTS[n], "document_id": f"doc-{n}", "chunk_index": 0}


def chunk(n: int, *, groups: list[str] | None = None, tags: list[str] | None = None) -> VectorRecord:
    payload = payload_of(n)
    if groups:
        payload["groups"] = groups
    if tags is not None:
        payload["tags"] = tags
    return VectorRecord(id=chunk_id(n), vector=VECTORS[n], payload=payload)


def bm25(query: str, texts: Sequence[str]) -> list[float]:
    """BM25 of each text for ``query`` by the formula in :mod:`common.vectors.lexical`, from scratch."""
    analysed = [lexical.analyse(text) for text in texts]
    avgdl = sum(map(len, analysed)) / len(analysed)
    scores = []
    for terms in analysed:
        score = 0.0
        for term in lexical.analyse(query):  # repeats weigh again, as in bm25s
            tf = terms.count(term)
            df = sum(term in other for other in analysed)
            if tf:
                norm = lexical.K1 * (1 - lexical.B + lexical.B * len(terms) / avgdl)
                score += math.log(1 + (len(texts) - df + 0.5) / (df + 0.5)) * tf / (tf + norm)
        scores.append(score)
    return scores


@pytest.fixture
async def client() -> AsyncIterator[RecordingClient]:
    client = RecordingClient(location=":memory:")
    yield client
    await client.close()


@pytest.fixture
def store(client: RecordingClient) -> QdrantStore:
    return QdrantStore(client)


async def filled(store: QdrantStore, numbers: Sequence[int] = (1, 2, 3, 4)) -> None:
    await store.create_collection(make_identity(), DIM)
    await store.upsert("Handbook", [chunk(n) for n in numbers])


async def create_as_before_the_lexical_leg(client: AsyncQdrantClient, numbers: Sequence[int]) -> None:
    """A collection exactly as the adapter made them before the lexical leg: one unnamed vector, keyword indexes
    on ``document_id`` and ``groups``, the identity and chunks without sparse vectors or lengths."""
    await client.create_collection(
        "Handbook", vectors_config=models.VectorParams(size=DIM, distance=models.Distance.COSINE)
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # local mode: "payload indexes have no effect"
        for field in ("document_id", "groups"):
            await client.create_payload_index("Handbook", field, models.PayloadSchemaType.KEYWORD)
    identity = models.PointStruct(id=IDENTITY_ID, vector=identity_vector(DIM), payload=make_identity().to_dict())
    points = [models.PointStruct(id=chunk_id(n), vector=VECTORS[n], payload=payload_of(n)) for n in numbers]
    await client.upsert("Handbook", points=[identity, *points])


# --- what an upsert writes ------------------------------------------------------------------------------------


async def test_upsert_writes_the_analysers_terms_with_bm25_tf_weights_and_each_chunks_length(
    store: QdrantStore, client: RecordingClient
) -> None:
    await filled(store, (1, 2))

    terms = [lexical.document_terms(TEXTS[n]) for n in (1, 2)]
    avgdl = sum(t.length for t in terms) / 2
    records = {
        str(r.id): r for r in await client.retrieve("Handbook", ids=[chunk_id(1), chunk_id(2)], with_vectors=True)
    }
    for n, expected in zip((1, 2), terms, strict=True):
        stored = records[chunk_id(n)]
        assert isinstance(stored.vector, dict)
        sparse = stored.vector[LEXICAL_VECTOR]
        assert isinstance(sparse, models.SparseVector)
        assert sparse.indices == expected.ids
        assert sparse.values == pytest.approx(lexical.bm25_weights(expected.tfs, expected.length, avgdl))
        assert stored.payload is not None
        assert stored.payload[LENGTH_FIELD] == expected.length
    [identity] = await client.retrieve("Handbook", ids=[IDENTITY_ID], with_vectors=True)
    assert identity.vector == identity_vector(DIM)  # no sparse vector: outside BM25's statistics, never a hit
    assert identity.payload is not None
    assert LENGTH_FIELD not in identity.payload


async def test_a_later_batch_is_weighted_by_the_mean_length_with_it_counted_in(
    store: QdrantStore, client: RecordingClient
) -> None:
    await filled(store, (1,))
    await store.upsert("Handbook", [chunk(2)])

    lengths = [lexical.document_terms(TEXTS[n]).length for n in (1, 2)]
    second = lexical.document_terms(TEXTS[2])
    [stored] = await client.retrieve("Handbook", ids=[chunk_id(2)], with_vectors=[LEXICAL_VECTOR])
    assert isinstance(stored.vector, dict)
    sparse = stored.vector[LEXICAL_VECTOR]
    assert isinstance(sparse, models.SparseVector)
    assert sparse.values == pytest.approx(lexical.bm25_weights(second.tfs, second.length, sum(lengths) / 2))


async def test_a_chunk_without_content_gets_an_empty_sparse_vector_and_counts_in_bm25s_n(
    store: QdrantStore, client: RecordingClient
) -> None:
    await filled(store, (1, 2, 3))
    await store.upsert("Handbook", [VectorRecord(id=chunk_id(9), vector=VECTORS[3], payload={"title": "foreign"})])

    [stored] = await client.retrieve("Handbook", ids=[chunk_id(9)], with_vectors=[LEXICAL_VECTOR])
    assert isinstance(stored.vector, dict)
    assert stored.vector[LEXICAL_VECTOR] == models.SparseVector(indices=[], values=[])
    hits = await store.search(
        Search(name="Handbook", vector=VECTORS[1], limit=5, properties=[], text="markets", mode="lexical")
    )
    # N = 4 chunks (the identity is not one), df("market") = 1; chunk 3 was weighted with its batch's mean
    idf = math.log(1 + (4 - 1 + 0.5) / (1 + 0.5))  # BM25's (Lucene's) IDF, which Qdrant's modifier applies
    assert [hit.id for hit in hits] == [chunk_id(3)]
    assert hits[0].score == pytest.approx(idf * _weight_of(TEXTS[3], "markets", [TEXTS[n] for n in (1, 2, 3)]))


def _weight_of(text: str, word: str, corpus: Sequence[str]) -> float:
    terms = lexical.document_terms(text)
    avgdl = sum(lexical.document_terms(t).length for t in corpus) / len(corpus)
    index = terms.ids.index(lexical.term_id(lexical.analyse(word)[0]))
    return lexical.bm25_weights(terms.tfs, terms.length, avgdl)[index]


# --- searching ------------------------------------------------------------------------------------------------


async def test_lexical_scores_are_bm25_of_the_shared_analyser_with_qdrants_idf(store: QdrantStore) -> None:
    await filled(store)
    query = "cats in the markets, markets"

    hits = await store.search(
        Search(name="Handbook", vector=VECTORS[1], limit=10, properties=["content"], text=query, mode="lexical")
    )

    expected = bm25(query, [TEXTS[n] for n in (1, 2, 3, 4)])
    ranked = sorted(range(4), key=lambda i: (-expected[i], chunk_id(i + 1)))
    assert [hit.id for hit in hits] == [chunk_id(i + 1) for i in ranked if expected[i] > 0]
    for hit in hits:
        assert hit.score == pytest.approx(expected[int(uuid.UUID(hit.id)) - 1], rel=1e-5)
        assert hit.legs is not None
        assert hit.legs.lexical_score == hit.score
        assert hit.payload == {"content": TEXTS[int(uuid.UUID(hit.id))]}


async def test_a_lexical_hit_carries_the_cosine_distance_of_its_stored_vector(store: QdrantStore) -> None:
    await filled(store)
    query_vector = [0.0, 0.0, 2.0, 0.0]  # unnormalised on purpose; chunk 3's direction

    hits = await store.search(
        Search(name="Handbook", vector=query_vector, limit=10, properties=[], text="markets", mode="lexical")
    )

    distances = {hit.id: hit.distance for hit in hits}
    assert distances == {chunk_id(3): pytest.approx(0.0, abs=1e-6), chunk_id(4): pytest.approx(1.0, abs=1e-6)}


async def test_hybrid_sends_both_legs_in_one_batch_with_the_same_filter(
    store: QdrantStore, client: RecordingClient
) -> None:
    await filled(store)
    where = SearchFilter(readable_by=frozenset({"hr"}), tags=frozenset({"policy"}))
    client.batches.clear()

    await store.search(
        Search(name="Handbook", vector=VECTORS[1], limit=3, properties=[], text="cat", mode="hybrid", where=where)
    )

    batch = client.batches[0]
    assert [request.using for request in batch] == [None, LEXICAL_VECTOR]
    assert all(request.filter == search_filter(where) for request in batch)
    assert batch[1].with_vector is False  # no vector travels: the engine measures the lexical hits' distances


async def test_the_engine_measures_a_lexical_hits_distance_with_the_dense_query_on_its_id(
    store: QdrantStore, client: RecordingClient
) -> None:
    await filled(store)
    client.batches.clear()

    hits = await store.search(
        Search(name="Handbook", vector=VECTORS[3], limit=10, properties=[], text="markets", mode="lexical")
    )

    [_, [measuring]] = client.batches
    assert measuring.query == VECTORS[3]
    assert measuring.filter == models.Filter(must=[models.HasIdCondition(has_id=[hit.id for hit in hits])])
    assert (measuring.with_payload, measuring.with_vector) == (False, False)


async def test_the_access_filter_holds_in_each_leg(store: QdrantStore) -> None:
    await store.create_collection(make_identity(), DIM)
    # chunk 1 is the dense leg's best, chunk 2 the lexical leg's best for "cat": both are hr's alone
    await store.upsert("Handbook", [chunk(1, groups=["hr"]), chunk(2, groups=["hr"]), chunk(3), chunk(4)])
    sales = SearchFilter(readable_by=frozenset({"sales"}))

    for mode in ("lexical", "hybrid"):
        hits = await store.search(
            Search(name="Handbook", vector=VECTORS[1], limit=10, properties=[], text="cat", mode=mode, where=sales)
        )
        assert chunk_id(1) not in {hit.id for hit in hits}
        assert chunk_id(2) not in {hit.id for hit in hits}
    hybrid = await store.search(
        Search(name="Handbook", vector=VECTORS[1], limit=10, properties=[], text="cat", mode="hybrid", where=sales)
    )
    assert {hit.id: hit.legs.lexical_rank if hit.legs else -1 for hit in hybrid} == {
        chunk_id(4): 1,  # "cats": the only readable chunk with the term, first in its leg despite chunk 2
        chunk_id(3): None,
    }


async def test_tags_and_labels_filter_every_mode(store: QdrantStore) -> None:
    await store.create_collection(make_identity(), DIM)
    await store.upsert("Handbook", [chunk(1, tags=["policy"]), chunk(2, tags=["memo"]), chunk(4, tags=[])])
    await store.update_document("Handbook", "doc-2", document_name="memo.pdf", tags=["memo"], label="internal")

    for mode in ("dense", "lexical", "hybrid"):
        tagged = SearchFilter(tags=frozenset({"policy", "other"}))
        hits = await store.search(
            Search(name="Handbook", vector=VECTORS[2], limit=10, properties=[], text="cat", mode=mode, where=tagged)
        )
        assert [hit.id for hit in hits] == [chunk_id(1)], mode
        labelled = SearchFilter(labels=frozenset({"internal"}))
        hits = await store.search(
            Search(name="Handbook", vector=VECTORS[1], limit=10, properties=[], text="cat", mode=mode, where=labelled)
        )
        assert [hit.id for hit in hits] == [chunk_id(2)], mode
        none = SearchFilter(tags=frozenset())
        assert (
            await store.search(
                Search(name="Handbook", vector=VECTORS[1], limit=10, properties=[], text="cat", mode=mode, where=none)
            )
            == []
        )


async def test_ties_in_the_lexical_leg_are_broken_by_id_across_its_depth(store: QdrantStore) -> None:
    # Identical texts score alike; local mode returns equal scores in reverse insertion order.
    await store.create_collection(make_identity(), DIM)
    same = [
        VectorRecord(id=chunk_id(n), vector=VECTORS[1], payload={"content": "cat", "document_id": "d"})
        for n in (9, 3, 7, 5, 1)
    ]
    await store.upsert("Handbook", same)

    hits = await store.search(
        Search(name="Handbook", vector=VECTORS[1], limit=3, properties=[], text="cat", mode="lexical")
    )

    assert [hit.id for hit in hits] == [chunk_id(1), chunk_id(3), chunk_id(5)]


async def test_text_without_an_indexable_term_finds_nothing_lexically_and_the_dense_order_in_hybrid(
    store: QdrantStore, client: RecordingClient
) -> None:
    await filled(store)
    client.batches.clear()

    assert (
        await store.search(
            Search(name="Handbook", vector=VECTORS[1], limit=3, properties=[], text="the of, a!", mode="lexical")
        )
        == []
    )
    hybrid = await store.search(
        Search(name="Handbook", vector=VECTORS[1], limit=3, properties=[], text="the of, a!", mode="hybrid")
    )

    assert [hit.id for hit in hybrid] == [chunk_id(1), chunk_id(2), chunk_id(3)]  # 3 and 4 tie: by id
    assert all(hit.legs is not None and hit.legs.lexical_rank is None for hit in hybrid)
    assert [[request.using for request in batch] for batch in client.batches] == [[None]]  # no lexical request


async def test_update_document_sets_name_tags_and_label_on_that_documents_chunks_only(
    store: QdrantStore, client: RecordingClient
) -> None:
    await filled(store, (1, 2))

    for _ in range(2):  # idempotent
        await store.update_document("Handbook", "doc-1", document_name="cats.pdf", tags=["pets", "x"], label="animals")

    stored = {str(r.id): r.payload for r in (await client.scroll("Handbook", with_payload=True))[0]}
    assert {k: stored[chunk_id(1)][k] for k in ("document_name", "tags", "label")} == {  # type: ignore[index]
        "document_name": "cats.pdf",
        "tags": ["pets", "x"],
        "label": "animals",
    }
    assert not {"document_name", "tags", "label"} & set(stored[chunk_id(2)] or {})
    assert stored[IDENTITY_ID] == make_identity().to_dict() | {"collection_id": stored[IDENTITY_ID]["collection_id"]}  # type: ignore[index]
    await store.update_document("Handbook", "doc-1", document_name="cats.pdf", tags=[], label=None)
    [record] = await client.retrieve("Handbook", ids=[chunk_id(1)])
    assert record.payload is not None
    assert (record.payload["tags"], record.payload.get("label")) == ([], None)  # local mode drops a null


# --- collections from before the lexical leg -----------------------------------------------------------------


async def test_before_its_upgrade_an_old_collection_answers_hybrid_densely_and_refuses_lexical(
    store: QdrantStore, client: RecordingClient, caplog: pytest.LogCaptureFixture
) -> None:
    await create_as_before_the_lexical_leg(client, (1, 2, 3, 4))
    dense = await store.search(Search(name="Handbook", vector=VECTORS[1], limit=3, properties=[]))

    with caplog.at_level(logging.WARNING, logger="common.vectors.qdrant"):
        for _ in range(2):
            hybrid = await store.search(
                Search(name="Handbook", vector=VECTORS[1], limit=3, properties=[], text="cat", mode="hybrid")
            )
            assert [hit.id for hit in hybrid] == [hit.id for hit in dense]
            assert all(hit.legs is not None and hit.legs.lexical_rank is None for hit in hybrid)
    [logged] = [r for r in caplog.records if "no lexical index" in r.getMessage()]  # once per collection
    assert "Handbook" in logged.getMessage()
    with pytest.raises(Unavailable) as raised:
        await store.search(
            Search(name="Handbook", vector=VECTORS[1], limit=3, properties=[], text="cat", mode="lexical")
        )
    assert raised.value.code == "lexical_index_missing"


async def test_upgrading_an_old_collection_gives_the_same_lexical_answers_as_a_new_one(
    store: QdrantStore, client: RecordingClient
) -> None:
    await create_as_before_the_lexical_leg(client, (1, 2, 3, 4))

    assert await store.upgrade_lexical("Handbook") == 4
    assert await store.upgrade_lexical("Handbook") == 0  # idempotent

    fresh = QdrantStore(AsyncQdrantClient(location=":memory:"))
    try:
        await filled(fresh)
        for query in ("cat", "markets markets cat", "garden dog"):
            upgraded = await store.search(
                Search(name="Handbook", vector=VECTORS[1], limit=4, properties=[], text=query, mode="hybrid")
            )
            new = await fresh.search(
                Search(name="Handbook", vector=VECTORS[1], limit=4, properties=[], text=query, mode="hybrid")
            )
            assert [(h.id, h.legs) for h in upgraded] == [(h.id, h.legs) for h in new]
    finally:
        await fresh.aclose()
    info = await client.get_collection("Handbook")
    assert info.config.params.sparse_vectors == {
        LEXICAL_VECTOR: models.SparseVectorParams(modifier=models.Modifier.IDF)
    }
    assert {"tags", "label", LENGTH_FIELD} <= {
        field for collection, field in client.indexes if collection == "Handbook"
    }


async def test_the_first_write_to_an_old_collection_upgrades_it(store: QdrantStore, client: RecordingClient) -> None:
    await create_as_before_the_lexical_leg(client, (1, 2))

    await store.upsert("Handbook", [chunk(3), chunk(4)])

    hits = await store.search(
        Search(name="Handbook", vector=VECTORS[1], limit=5, properties=[], text="cat markets", mode="lexical")
    )
    assert {hit.id for hit in hits} == {chunk_id(1), chunk_id(2), chunk_id(4), chunk_id(3)}


async def test_an_upgrade_fills_only_chunks_still_without_the_lexical_vector(
    store: QdrantStore, client: RecordingClient
) -> None:
    await create_as_before_the_lexical_leg(client, (1, 2))
    await store.upgrade_lexical("Handbook")
    # Another process still on the old code writes a chunk without the sparse vector.
    await client.upsert(
        "Handbook", points=[models.PointStruct(id=chunk_id(3), vector=VECTORS[3], payload=payload_of(3))]
    )

    assert await store.upgrade_lexical("Handbook") == 1
    hits = await store.search(
        Search(name="Handbook", vector=VECTORS[1], limit=5, properties=[], text="markets", mode="lexical")
    )
    assert [hit.id for hit in hits] == [chunk_id(3)]


async def test_an_upgrade_persists_in_path_mode(tmp_path: Path) -> None:
    client = AsyncQdrantClient(path=str(tmp_path))
    await create_as_before_the_lexical_leg(client, (1, 2, 3, 4))
    first = QdrantStore(client)
    await first.upgrade_lexical("Handbook")
    expected = await first.search(
        Search(name="Handbook", vector=VECTORS[1], limit=4, properties=[], text="cat", mode="lexical")
    )
    await first.aclose()

    second = QdrantStore(AsyncQdrantClient(path=str(tmp_path)))
    try:
        hits = await second.search(
            Search(name="Handbook", vector=VECTORS[1], limit=4, properties=[], text="cat", mode="lexical")
        )
        assert [(h.id, h.score) for h in hits] == [(h.id, h.score) for h in expected]
        assert len(hits) == 3
    finally:
        await second.aclose()
