"""Qdrant-specific behaviour of :class:`QdrantStore`, on the client's local mode (no server runs here).

The provider-neutral behaviour is the shared contract suite's job (``tests/contracts``); these tests
cover what only Qdrant has: payload indexes, path-mode persistence, request batching, local mode's
own quirks (reverse-id ties, a strict score threshold, ``ValueError`` for everything) and the
translation of transport errors.
"""

from __future__ import annotations

import asyncio
import json
import socket
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from http import HTTPStatus
from pathlib import Path
from typing import Any

import msgspec
import pytest
from qdrant_client import AsyncQdrantClient, models

from common.errors import Conflict, InvalidInput, NotFound, Unavailable
from common.vectors import Search
from common.vectors.base import IDENTITY_ID, SearchFilter, VectorRecord, identity_vector
from common.vectors.qdrant import LENGTH_FIELD, LEXICAL_VECTOR, UPSERT_BATCH, QdrantStore
from schemas.models import Identity

DIM = 4
LENGTH_INDEX = models.IntegerIndexParams(type=models.IntegerIndexType.INTEGER, lookup=True, range=False)
HANDBOOK_INDEXES = [
    ("Handbook", "document_id", models.PayloadSchemaType.KEYWORD),
    ("Handbook", "groups", models.PayloadSchemaType.KEYWORD),
    ("Handbook", "tags", models.PayloadSchemaType.KEYWORD),
    ("Handbook", "label", models.PayloadSchemaType.KEYWORD),
    ("Handbook", LENGTH_FIELD, LENGTH_INDEX),
]


class RecordingClient(AsyncQdrantClient):
    """The real local-mode client, noting the index and upsert requests it is sent."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.indexes: list[tuple[str, str, Any]] = []
        self.upsert_sizes: list[int] = []

    async def create_payload_index(self, *args: Any, **kwargs: Any) -> Any:
        call = dict(zip(("collection_name", "field_name", "field_schema"), args, strict=False)) | kwargs
        self.indexes.append((call["collection_name"], call["field_name"], call.get("field_schema")))
        return await super().create_payload_index(*args, **kwargs)

    async def upsert(self, *args: Any, **kwargs: Any) -> Any:
        points = args[1] if len(args) > 1 else kwargs["points"]
        self.upsert_sizes.append(len(points.ids) if isinstance(points, models.Batch) else len(points))
        return await super().upsert(*args, **kwargs)


def make_identity(name: str = "Handbook", groups: list[str] | None = None) -> Identity:
    return Identity(
        collection_id=str(uuid.uuid4()),
        name=name,
        model="all-MiniLM-L6-v2",
        vectorProvider="qdrant",
        embeddingProvider="local",
        **({"groups": groups} if groups else {}),
    )


def chunk_id(n: int) -> str:
    return str(uuid.UUID(int=n))


def chunk(
    n: int, vector: Sequence[float], *, document_id: str = "doc-1", groups: list[str] | None = None
) -> VectorRecord:
    payload: dict[str, Any] = {"content": f"chunk {n}", "document_id": document_id, "chunk_index": n}
    if groups:
        payload["groups"] = groups
    return VectorRecord(id=chunk_id(n), vector=vector, payload=payload)


@pytest.fixture
async def client() -> AsyncIterator[RecordingClient]:
    client = RecordingClient(location=":memory:")
    yield client
    await client.close()


@pytest.fixture
def store(client: RecordingClient) -> QdrantStore:
    return QdrantStore(client)


async def test_create_collection_requests_keyword_indexes_on_filterable_fields(
    store: QdrantStore, client: RecordingClient
) -> None:
    await store.create_collection(make_identity(), DIM)

    assert client.indexes == HANDBOOK_INDEXES
    params = (await client.get_collection("Handbook")).config.params
    assert isinstance(params.vectors, models.VectorParams)
    assert (params.vectors.size, params.vectors.distance) == (DIM, models.Distance.COSINE)
    assert params.sparse_vectors == {LEXICAL_VECTOR: models.SparseVectorParams(modifier=models.Modifier.IDF)}


async def test_identity_point_is_the_nil_uuid_with_the_unit_vector(store: QdrantStore, client: RecordingClient) -> None:
    identity = make_identity(groups=["hr"])
    await store.create_collection(identity, DIM)

    [point] = await client.retrieve("Handbook", ids=[IDENTITY_ID], with_vectors=True)
    assert point.payload == identity.to_dict()
    assert point.vector == identity_vector(DIM)


async def test_upserts_are_split_into_requests_of_at_most_256_points(
    store: QdrantStore, client: RecordingClient
) -> None:
    await store.create_collection(make_identity(), DIM)
    client.upsert_sizes.clear()

    await store.upsert("Handbook", [chunk(n, [1.0, float(n), 0.0, 0.0]) for n in range(1, 601)])

    assert client.upsert_sizes == [UPSERT_BATCH, UPSERT_BATCH, 600 - 2 * UPSERT_BATCH]
    assert await store.count("Handbook") == 600


async def test_path_mode_keeps_everything_across_client_restarts(tmp_path: Path) -> None:
    identity = make_identity(groups=["hr"])
    first = QdrantStore(AsyncQdrantClient(path=str(tmp_path)))
    await first.create_collection(identity, DIM)
    await first.upsert(
        "Handbook", [chunk(1, [1.0, 0.0, 0.0, 0.0]), chunk(2, [0.0, 1.0, 0.0, 0.0], document_id="doc-2")]
    )
    await first.aclose()

    second = QdrantStore(AsyncQdrantClient(path=str(tmp_path)))
    try:
        assert await second.list_identities() == [identity]
        assert await second.document_ids("Handbook") == {"doc-1": 1, "doc-2": 1}
        [hit] = await second.search(
            Search(name="Handbook", vector=[0.0, 1.0, 0.0, 0.0], limit=1, properties=["document_id"])
        )
        assert (hit.id, hit.payload) == (chunk_id(2), {"document_id": "doc-2"})
    finally:
        await second.aclose()


async def test_foreign_collections_are_not_listed_and_left_untouched(
    store: QdrantStore, client: RecordingClient
) -> None:
    await store.create_collection(make_identity(), DIM)
    vectors = models.VectorParams(size=DIM, distance=models.Distance.DOT)
    foreign_points = [models.PointStruct(id=7, vector=[0.5] * DIM, payload={"title": "someone else's"})]
    await client.create_collection("Foreign", vectors_config=vectors)
    await client.upsert("Foreign", points=foreign_points)
    # A nil-id point that is not a Ragu identity (unknown property) must not make the collection ours.
    await client.create_collection("Lookalike", vectors_config=vectors)
    lookalike = models.PointStruct(id=IDENTITY_ID, vector=[0.5] * DIM, payload={"name": "Lookalike", "owner": "x"})
    await client.upsert("Lookalike", points=[lookalike])

    assert [identity.name for identity in await store.list_identities()] == ["Handbook"]
    assert await client.retrieve("Foreign", ids=[7], with_vectors=True) == [
        models.Record(id=7, payload={"title": "someone else's"}, vector=[0.5] * DIM)
    ]
    assert (await client.retrieve("Lookalike", ids=[IDENTITY_ID]))[0].payload == lookalike.payload
    assert client.indexes == HANDBOOK_INDEXES


async def test_an_identity_filed_under_another_name_is_not_listed(store: QdrantStore, client: RecordingClient) -> None:
    await store.create_collection(make_identity("Original"), DIM)
    await client.create_collection(
        "Copy", vectors_config=models.VectorParams(size=DIM, distance=models.Distance.COSINE)
    )
    copied = (await client.retrieve("Original", ids=[IDENTITY_ID]))[0].payload
    await client.upsert(
        "Copy", points=[models.PointStruct(id=IDENTITY_ID, vector=identity_vector(DIM), payload=copied)]
    )

    assert [identity.name for identity in await store.list_identities()] == ["Original"]


async def test_equal_scores_come_back_by_id_ascending_even_across_the_limit(store: QdrantStore) -> None:
    # Local mode returns equal scores in reverse insertion order; the adapter must not.
    await store.create_collection(make_identity(), DIM)
    same = [0.0, 1.0, 0.0, 0.0]
    await store.upsert("Handbook", [chunk(n, same) for n in (9, 3, 7, 5, 1)] + [chunk(20, [0.0, 0.0, 1.0, 0.0])])

    hits = await store.search(Search(name="Handbook", vector=same, limit=3, properties=[]))

    assert [hit.id for hit in hits] == [chunk_id(1), chunk_id(3), chunk_id(5)]
    assert [hit.score for hit in hits] == [1.0, 1.0, 1.0]
    assert [hit.payload for hit in hits] == [{}, {}, {}]


async def test_max_distance_keeps_a_hit_exactly_on_the_boundary(store: QdrantStore) -> None:
    # Local mode drops scores equal to score_threshold; a distance of exactly max_distance must stay.
    await store.create_collection(make_identity(), DIM)
    await store.upsert("Handbook", [chunk(1, [1.0, 0.0, 0.0, 0.0]), chunk(2, [0.0, 1.0, 0.0, 0.0])])

    async def ids(max_distance: float) -> list[str]:
        hits = await store.search(
            Search(name="Handbook", vector=[1.0, 0.0, 0.0, 0.0], limit=5, properties=[], max_distance=max_distance)
        )
        return [hit.id for hit in hits]

    assert await ids(1.0) == [chunk_id(1), chunk_id(2)]
    assert await ids(0.999) == [chunk_id(1)]
    assert await ids(0.0) == [chunk_id(1)]


async def test_the_identity_never_matches_even_a_query_equal_to_its_vector(store: QdrantStore) -> None:
    await store.create_collection(make_identity(groups=["hr"]), DIM)
    await store.upsert("Handbook", [chunk(1, [0.0, 1.0, 0.0, 0.0])])

    hits = await store.search(
        Search(name="Handbook", vector=identity_vector(DIM), limit=5, properties=["name", "content"])
    )
    assert [(hit.id, hit.payload) for hit in hits] == [(chunk_id(1), {"content": "chunk 1"})]


async def test_readable_by_and_document_filters_combine(store: QdrantStore) -> None:
    await store.create_collection(make_identity(), DIM)
    v = [1.0, 0.0, 0.0, 0.0]
    await store.upsert(
        "Handbook",
        [
            chunk(1, v),
            chunk(2, v, groups=["hr"]),
            chunk(3, v, groups=["sales", "ops"]),
            chunk(4, v, groups=["hr"], document_id="doc-2"),
        ],
    )

    async def ids(where: SearchFilter) -> list[str]:
        return [
            hit.id
            for hit in await store.search(Search(name="Handbook", vector=v, limit=10, properties=[], where=where))
        ]

    assert await ids(SearchFilter(readable_by=frozenset({"ops"}))) == [chunk_id(1), chunk_id(3)]
    assert await ids(SearchFilter(readable_by=frozenset())) == [chunk_id(1)]
    assert await ids(SearchFilter(readable_by=frozenset({"hr"}), document_ids=frozenset({"doc-2"}))) == [chunk_id(4)]
    assert await ids(SearchFilter(document_ids=frozenset())) == []


async def test_set_groups_rewrites_identity_and_chunks_and_an_empty_list_removes_them(
    store: QdrantStore, client: RecordingClient
) -> None:
    await store.create_collection(make_identity(groups=["hr"]), DIM)
    await store.upsert("Handbook", [chunk(1, [1.0, 0.0, 0.0, 0.0], groups=["hr"]), chunk(2, [0.0, 1.0, 0.0, 0.0])])

    await store.set_groups("Handbook", ["sales", "ops"])
    stored = {str(p.id): p.payload for p in (await client.scroll("Handbook", with_payload=["groups"]))[0]}
    assert stored == {
        IDENTITY_ID: {"groups": ["sales", "ops"]},
        chunk_id(1): {"groups": ["sales", "ops"]},
        chunk_id(2): {"groups": ["sales", "ops"]},
    }

    await store.set_groups("Handbook", [])
    stored = {str(p.id): p.payload for p in (await client.scroll("Handbook", with_payload=["groups"]))[0]}
    assert stored == {IDENTITY_ID: {}, chunk_id(1): {}, chunk_id(2): {}}
    [listed] = await store.list_identities()
    assert listed.groups is msgspec.UNSET


async def test_unknown_collections_are_not_found_in_local_mode(store: QdrantStore) -> None:
    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: store.count("Missing"),
        lambda: store.document_ids("Missing"),
        lambda: store.search(Search(name="Missing", vector=[1.0, 0.0, 0.0, 0.0], limit=1, properties=[])),
        lambda: store.upsert("Missing", [chunk(1, [1.0, 0.0, 0.0, 0.0])]),
        lambda: store.delete_document("Missing", "doc-1"),
        lambda: store.set_groups("Missing", ["hr"]),
        lambda: store.write_identity(make_identity("Missing")),
    ]
    for call in calls:
        with pytest.raises(NotFound) as raised:
            await call()
        assert raised.value.code == "collection_not_found"
    assert await store.read_identity("Missing") is None
    await store.drop_collection("Missing")


async def test_a_wrong_vector_dimension_is_invalid_input(store: QdrantStore) -> None:
    await store.create_collection(make_identity(), DIM)
    with pytest.raises(InvalidInput) as raised:
        await store.search(Search(name="Handbook", vector=[1.0, 0.0], limit=1, properties=[]))
    assert raised.value.code == "vector_store_rejected"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("prefer_grpc", [False, True], ids=["rest", "grpc"])
async def test_an_unreachable_server_is_unavailable(prefer_grpc: bool) -> None:
    port = _closed_port()
    client = AsyncQdrantClient(
        url=f"http://127.0.0.1:{port}", grpc_port=port, prefer_grpc=prefer_grpc, timeout=2, check_compatibility=False
    )
    store = QdrantStore(client)
    try:
        calls: list[Callable[[], Awaitable[object]]] = [
            lambda: store.collection_exists("Handbook"),
            lambda: store.count("Handbook"),
            store.list_identities,
        ]
        for call in calls:
            with pytest.raises(Unavailable) as raised:
                await call()
            assert raised.value.code == "vector_store_unavailable"
    finally:
        await store.aclose()


Reply = tuple[int, dict[str, Any]]


def qdrant_error(status: int, message: str) -> Reply:
    return status, {"status": {"error": message}, "time": 0.0}


@asynccontextmanager
async def qdrant_rest_standin(reply: Callable[[str, str], Reply]) -> AsyncIterator[str]:
    """A stand-in for a Qdrant server (none can run here) speaking its REST wire format: ``reply`` maps
    (method, path) to a status and Qdrant's JSON body, so the real client raises what it raises for real."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode()
        method, path = head.split(" ")[:2]
        lengths = [line.split(":")[1] for line in head.lower().split("\r\n") if line.startswith("content-length")]
        await reader.readexactly(int(lengths[0]) if lengths else 0)
        status, payload = reply(method, path)
        body = json.dumps(payload).encode()
        writer.write(
            f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()
        await server.wait_closed()


@pytest.mark.parametrize(
    ("reply", "expected", "code"),
    [
        (qdrant_error(404, "Not found: Collection `Handbook` doesn't exist!"), NotFound, "collection_not_found"),
        (
            qdrant_error(400, "Wrong input: Vector dimension error: expected dim: 4, got 2"),
            InvalidInput,
            "vector_store_rejected",
        ),
        (qdrant_error(503, "Service Unavailable"), Unavailable, "vector_store_unavailable"),
    ],
)
async def test_server_errors_through_a_standin_speaking_qdrant_rest(
    reply: Reply, expected: type[Exception], code: str
) -> None:
    async with qdrant_rest_standin(lambda method, path: reply) as url:
        store = QdrantStore(AsyncQdrantClient(url=url, timeout=2, check_compatibility=False))
        try:
            with pytest.raises(expected) as raised:
                await store.search(Search(name="Handbook", vector=[1.0, 0.0], limit=1, properties=["content"]))
            assert getattr(raised.value, "code", None) == code
        finally:
            await store.aclose()


async def test_losing_a_create_race_through_a_standin_speaking_qdrant_rest_is_collection_exists() -> None:
    def reply(method: str, path: str) -> Reply:
        if path.endswith("/exists"):  # the store's pre-check: not there yet
            return 200, {"result": {"exists": False}, "status": "ok", "time": 0.0}
        return qdrant_error(409, "Wrong input: Collection `Handbook` already exists!")

    async with qdrant_rest_standin(reply) as url:
        store = QdrantStore(AsyncQdrantClient(url=url, timeout=2, check_compatibility=False))
        try:
            with pytest.raises(Conflict) as raised:
                await store.create_collection(make_identity(), DIM)
            assert raised.value.code == "collection_exists"
        finally:
            await store.aclose()
