"""The Weaviate adapter's mapping code, checked without a server (none can run here).

Everything is asserted on weaviate-client's own objects and their wire forms: the collection config as
the REST body the client would send, filters as both their REST (``where``) and gRPC encodings, batch
objects as the client's ``DataObject``. The store's I/O paths are unverified here; the tests at the
bottom only cover what :class:`WeaviateStore` decides before it talks to the server.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import numpy as np
import pytest
import weaviate
from weaviate.classes.data import DataObject
from weaviate.collections.classes.config import _CollectionConfigCreate
from weaviate.collections.classes.internal import MetadataReturn, Object
from weaviate.collections.filters import _FilterToGRPC, _FilterToREST
from weaviate.proto.v1 import base_pb2, base_search_pb2, properties_pb2, search_get_pb2
from weaviate.util import _ServerVersion

from common.errors import InvalidInput, Unavailable
from common.vectors import Search, lexical
from common.vectors.base import (
    CHUNK_EXTRAS,
    FILTERABLE,
    IDENTITY_ID,
    IDENTITY_PROPERTIES,
    TEXT_PROPERTIES,
    ChunkPayload,
    Legs,
    SearchFilter,
    SearchHit,
    VectorRecord,
)
from common.vectors.fusion import RRF_K, leg_depth
from common.vectors.records import checked_identity_payload, matches_nothing
from common.vectors.weaviate import (
    VECTOR_NAME,
    WeaviateStore,
    chunk_object,
    collection_spec,
    hybrid_hits,
    identity_object,
    identity_properties,
    keyword_hits,
    leg_ranks,
    missing_properties,
    ranked_hits,
    returned_payload,
    search_filter,
    stored_properties,
    ties_cross_the_cut,
    updated_properties,
)
from schemas.models import Identity

NOT_IDENTITY = {"operator": "NotEqual", "path": ["_id"], "valueText": IDENTITY_ID}
NO_GROUPS = {"operator": "IsNull", "path": ["groups"], "valueBoolean": True}


def make_identity(**changes: Any) -> Identity:
    fields: dict[str, Any] = {
        "collection_id": "0b5a3f0e-8c1d-4a3e-9f57-1f2d3c4b5a69",
        "name": "Handbook",
        "model": "all-MiniLM-L6-v2",
        "vectorProvider": "weaviate",
        "embeddingProvider": "local",
    }
    return Identity(**(fields | changes))


def wire_config() -> dict[str, Any]:
    """The collection body weaviate-client would POST for a Ragu collection named ``Handbook``."""
    body: dict[str, Any] = _CollectionConfigCreate(name="Handbook", **collection_spec()._asdict())._to_dict()
    return body


def wire_properties() -> dict[str, dict[str, Any]]:
    return {prop["name"]: prop for prop in wire_config()["properties"]}


def hit_object(object_id: int, distance: float | None, properties: dict[str, Any] | None = None) -> Object[Any, Any]:
    return Object(
        uuid=uuid.UUID(int=object_id),
        metadata=MetadataReturn(distance=distance),
        properties=properties or {},
        references=None,
        vector={},
        collection="Handbook",
    )


# --- the collection ---------------------------------------------------------------------------------


def test_the_collection_uses_self_provided_vectors_in_a_cosine_hnsw_index() -> None:
    config = wire_config()

    assert config["class"] == "Handbook"
    assert config["vectorConfig"] == {
        VECTOR_NAME: {
            "vectorizer": {"none": {}},
            "vectorIndexType": "hnsw",
            "vectorIndexConfig": {"distance": "cosine"},
        }
    }
    assert "vectorizer" not in config  # no module may embed anything on its own


def test_the_inverted_index_records_null_state_so_missing_groups_can_be_filtered() -> None:
    assert wire_config()["invertedIndexConfig"]["indexNullState"] is True


def test_every_property_of_the_port_is_declared_once() -> None:
    names = [prop["name"] for prop in wire_config()["properties"]]

    assert names == [*IDENTITY_PROPERTIES, *TEXT_PROPERTIES, *CHUNK_EXTRAS]


def test_property_types() -> None:
    types = {name: prop["dataType"] for name, prop in wire_properties().items()}

    lists = {"groups", "heading_path", "tags"}
    assert {name for name, data_type in types.items() if data_type == ["text[]"]} == lists
    ints = {"chunk_index", "char_start", "char_end", "page_start", "page_end", "token_count", "parent_index"}
    assert {name for name, data_type in types.items() if data_type == ["int"]} == ints
    assert {name for name, data_type in types.items() if data_type == ["boolean"]} == {"ocr"}
    assert {name for name, data_type in types.items() if data_type == ["text"]} == set(types) - ints - lists - {"ocr"}


def test_bm25_on_content_uses_the_lexical_parameters_every_engine_uses() -> None:
    bm25 = wire_config()["invertedIndexConfig"]["bm25"]

    assert (bm25["k1"], bm25["b"]) == (lexical.K1, lexical.B)


def test_a_collection_from_before_tags_and_labels_gets_just_those_properties_declared_alike() -> None:
    before = [name for name in wire_properties() if name not in ("tags", "label")]

    added = {prop.name: prop._to_dict() for prop in missing_properties(before)}

    assert added == {"tags": wire_properties()["tags"], "label": wire_properties()["label"]}
    assert added["tags"]["tokenization"] == "field"
    assert missing_properties(wire_properties()) == []


def test_only_the_filterable_fields_are_filterable_and_they_match_whole_values() -> None:
    properties = wire_properties()

    assert {name for name, prop in properties.items() if prop["indexFilterable"]} == set(FILTERABLE)
    for name in FILTERABLE:
        assert properties[name]["tokenization"] == "field", name


def test_only_content_is_searchable_and_only_content_is_split_into_words() -> None:
    properties = wire_properties()

    assert {name for name, prop in properties.items() if prop.get("indexSearchable")} == {"content"}
    tokenized = {name: prop["tokenization"] for name, prop in properties.items() if "tokenization" in prop}
    assert {name for name, tokenization in tokenized.items() if tokenization != "field"} == {"content"}
    assert tokenized["content"] == "word"


# --- filters ------------------------------------------------------------------------------------------


def test_without_conditions_the_filter_only_excludes_the_identity() -> None:
    assert _FilterToREST.convert(search_filter(None)) == NOT_IDENTITY
    assert _FilterToREST.convert(search_filter(SearchFilter())) == NOT_IDENTITY


def test_readable_by_keeps_chunks_without_groups_or_sharing_one() -> None:
    where = search_filter(SearchFilter(readable_by=frozenset({"sales", "hr"})))

    assert _FilterToREST.convert(where) == {
        "operator": "And",
        "operands": [
            NOT_IDENTITY,
            {
                "operator": "Or",
                "operands": [
                    NO_GROUPS,
                    {"operator": "ContainsAny", "path": ["groups"], "valueTextArray": ["hr", "sales"]},
                ],
            },
        ],
    }


def test_readable_by_an_empty_set_keeps_only_chunks_without_groups() -> None:
    where = search_filter(SearchFilter(readable_by=frozenset()))

    assert _FilterToREST.convert(where) == {"operator": "And", "operands": [NOT_IDENTITY, NO_GROUPS]}


def test_where_chunks_without_groups_are_no_ones_only_a_shared_group_reads_and_no_group_reads_nothing() -> None:
    where = search_filter(SearchFilter(readable_by=frozenset({"hr"}), ungrouped_readable=False))

    assert _FilterToREST.convert(where) == {
        "operator": "And",
        "operands": [NOT_IDENTITY, {"operator": "ContainsAny", "path": ["groups"], "valueTextArray": ["hr"]}],
    }
    assert matches_nothing(SearchFilter(readable_by=frozenset(), ungrouped_readable=False))
    assert not matches_nothing(SearchFilter(readable_by=frozenset()))


def test_document_ids_and_access_combine_and_serialise_for_grpc() -> None:
    where = search_filter(SearchFilter(readable_by=frozenset({"hr"}), document_ids=frozenset({"d2", "d1"})))

    rest = _FilterToREST.convert(where)
    assert rest["operator"] == "And"
    assert rest["operands"][2] == {"operator": "ContainsAny", "path": ["document_id"], "valueTextArray": ["d1", "d2"]}
    grpc = _FilterToGRPC.convert(where)
    assert grpc.operator == base_pb2.Filters.OPERATOR_AND
    assert [f.operator for f in grpc.filters] == [
        base_pb2.Filters.OPERATOR_NOT_EQUAL,
        base_pb2.Filters.OPERATOR_OR,
        base_pb2.Filters.OPERATOR_CONTAINS_ANY,
    ]
    assert grpc.filters[0].target.property == "_id"
    assert grpc.filters[0].value_text == IDENTITY_ID
    assert list(grpc.filters[2].value_text_array.values) == ["d1", "d2"]


# --- ids and properties -------------------------------------------------------------------------------


def test_chunk_objects_carry_the_named_vector_and_only_storable_properties() -> None:
    record = VectorRecord(
        id=str(uuid.UUID(int=5)),
        vector=np.array([0.25, 0.5], dtype=np.float32),  # what embedders return
        payload={"content": "text", "document_id": "d1", "page_start": None, "heading_path": [], "chunk_index": 0},
    )

    assert chunk_object(record) == DataObject(
        properties={"content": "text", "document_id": "d1", "chunk_index": 0},
        uuid=uuid.UUID(int=5),
        vector={VECTOR_NAME: [0.25, 0.5]},
    )


def test_a_chunk_payload_struct_becomes_the_properties_of_its_dict() -> None:
    identity = make_identity(groups=["hr"])
    typed = ChunkPayload(
        **identity.to_dict(),
        content="text",
        document_id="d1",
        document_sha256="ab" * 32,
        token_count=1,
        content_hash="cd" * 32,
        chunk_index=0,
    )
    as_dict = VectorRecord(id=str(uuid.UUID(int=5)), vector=[1.0, 0.0], payload=msgspec.to_builtins(typed))

    assert chunk_object(VectorRecord(id=as_dict.id, vector=as_dict.vector, payload=typed)) == chunk_object(as_dict)
    assert chunk_object(as_dict).properties["groups"] == ["hr"]


def test_the_identity_object_sits_at_the_nil_uuid() -> None:
    payload = checked_identity_payload(make_identity(groups=["hr"]))

    assert identity_object(payload, [1.0, 0.0]) == DataObject(
        properties=payload, uuid=uuid.UUID(IDENTITY_ID), vector={VECTOR_NAME: [1.0, 0.0]}
    )


def test_stored_properties_drop_what_weaviate_cannot_keep() -> None:
    payload = {"content": "", "page_start": None, "heading_path": [], "token_count": 0, "groups": ["hr"]}

    assert stored_properties(payload) == {"content": "", "token_count": 0, "groups": ["hr"]}


def test_returned_payload_restores_nullable_extras_and_omits_other_missing_properties() -> None:
    properties = {"content": "text", "document_id": "d1", "page_start": None, "chunk_index": 3}
    requested = ["content", "page_start", "page_end", "heading_path", "parent_content", "groups", "chunk_index"]

    assert returned_payload(properties, requested) == {
        "content": "text",
        "page_start": None,
        "page_end": None,
        "heading_path": [],
        "parent_content": None,
        "chunk_index": 3,
    }
    assert returned_payload(properties, []) == {}


def test_identity_properties_drop_the_nones_weaviate_reports_for_unset_properties() -> None:
    stored = make_identity().to_dict() | {"groups": None, "content": None}

    assert identity_properties(stored) == make_identity().to_dict()
    assert msgspec.convert(identity_properties(stored), Identity) == make_identity()


# --- ranking --------------------------------------------------------------------------------------------


def test_hits_are_closest_first_with_ties_by_id_and_score_is_one_minus_distance() -> None:
    objects = [hit_object(9, 0.25), hit_object(3, 0.25), hit_object(4, 0.5, {"content": "c"}), hit_object(1, 0.75)]

    hits = ranked_hits(objects, limit=3, requested=["content"], max_distance=None)

    assert hits == [
        SearchHit(id=str(uuid.UUID(int=3)), score=0.75, distance=0.25, payload={}),
        SearchHit(id=str(uuid.UUID(int=9)), score=0.75, distance=0.25, payload={}),
        SearchHit(id=str(uuid.UUID(int=4)), score=0.5, distance=0.5, payload={"content": "c"}),
    ]


def test_hits_beyond_max_distance_are_dropped_and_rounding_below_zero_is_clamped() -> None:
    objects = [hit_object(1, -1e-7), hit_object(2, 0.5), hit_object(3, 0.5000001)]

    hits = ranked_hits(objects, limit=10, requested=[], max_distance=0.5)

    assert [(hit.id, hit.distance, hit.score) for hit in hits] == [
        (str(uuid.UUID(int=1)), 0.0, 1.0),
        (str(uuid.UUID(int=2)), 0.5, 0.5),
    ]


def test_a_hit_without_distance_is_an_unavailable_store_not_a_perfect_match() -> None:
    with pytest.raises(Unavailable):
        ranked_hits([hit_object(1, None)], limit=1, requested=[], max_distance=None)


def test_a_tie_at_the_end_of_a_full_page_means_more_may_follow() -> None:
    tie_at_end = [hit_object(1, 0.1), hit_object(2, 0.2), hit_object(3, 0.2)]
    no_tie = [hit_object(1, 0.1), hit_object(2, 0.2), hit_object(3, 0.3)]

    assert ties_cross_the_cut(tie_at_end, limit=2, fetched=3)
    assert not ties_cross_the_cut(no_tie, limit=2, fetched=3)
    assert not ties_cross_the_cut(tie_at_end[:2], limit=2, fetched=3)  # a short page is everything there is


# --- the store, up to the first request ----------------------------------------------------------------------


@pytest.fixture
async def unconnected_store() -> AsyncIterator[WeaviateStore]:
    """A store on a client that was never connected: any request would fail, so these tests prove the
    store decides before it asks."""
    store = WeaviateStore(weaviate.use_async_with_local(skip_init_checks=True))
    yield store
    await store.aclose()


async def test_the_store_refuses_bad_input_before_any_request(unconnected_store: WeaviateStore) -> None:
    store = unconnected_store
    nil_record = VectorRecord(id=IDENTITY_ID, vector=[1.0, 0.0], payload={"content": "x", "document_id": "d"})

    assert store.provider == "weaviate"
    with pytest.raises(InvalidInput) as upsert:
        await store.upsert("Handbook", [nil_record])
    assert upsert.value.code == "identity_id_reserved"
    with pytest.raises(InvalidInput) as delete:
        await store.delete_ids("Handbook", [str(uuid.UUID(int=1)), IDENTITY_ID])
    assert delete.value.code == "identity_id_reserved"
    with pytest.raises(InvalidInput) as create:
        await store.create_collection(make_identity(groups=[7]), 2)
    assert create.value.code == "invalid_identity"
    with pytest.raises(InvalidInput) as dimension:
        await store.create_collection(make_identity(), 0)
    assert dimension.value.code == "invalid_dimension"


async def test_searches_that_cannot_match_need_no_request(unconnected_store: WeaviateStore) -> None:
    store = unconnected_store

    assert await store.search(Search(name="Handbook", vector=[1.0, 0.0], limit=0, properties=["content"])) == []
    nothing = SearchFilter(document_ids=frozenset())
    assert (
        await store.search(Search(name="Handbook", vector=[1.0, 0.0], limit=5, properties=["content"], where=nothing))
        == []
    )
    await store.upsert("Handbook", [])
    await store.delete_ids("Handbook", [])


@pytest.mark.parametrize("name", ["W" + "x" * 63, "W" + "x" * 255, "lowercase"], ids=["64", "256", "lc"])
async def test_a_name_that_breaks_the_rule_is_invalid_before_any_request(
    unconnected_store: WeaviateStore, name: str
) -> None:
    store = unconnected_store
    record = VectorRecord(id=str(uuid.UUID(int=1)), vector=[1.0, 0.0], payload={"content": "x", "document_id": "d"})

    assert not await store.collection_exists(name)
    assert await store.read_identity(name) is None
    await store.drop_collection(name)
    for call in (
        store.search(Search(name=name, vector=[1.0, 0.0], limit=3, properties=["content"])),
        store.count(name),
        store.document_ids(name),
        store.upsert(name, [record]),
        store.delete_document(name, "d"),
        store.set_groups(name, ["hr"]),
        store.update_document(name, "d", document_name="new.pdf", tags=[], label=None),
    ):
        with pytest.raises(InvalidInput) as raised:
            await call
        assert raised.value.code == "invalid_collection_name"
    if name != "lowercase":  # a valid identity as far as the schema goes, refused for its length
        with pytest.raises(InvalidInput) as create:
            await store.create_collection(make_identity(name=name), 2)
        assert create.value.code == "invalid_collection_name"


# --- lexical and hybrid ----------------------------------------------------------------------------------


def test_tags_and_labels_filter_with_contains_any_beside_access() -> None:
    where = search_filter(
        SearchFilter(readable_by=frozenset({"hr"}), tags=frozenset({"policy", "hr"}), labels=frozenset({"final"}))
    )

    operands = _FilterToREST.convert(where)["operands"]
    assert operands[2:] == [
        {"operator": "ContainsAny", "path": ["tags"], "valueTextArray": ["hr", "policy"]},
        {"operator": "ContainsAny", "path": ["label"], "valueTextArray": ["final"]},
    ]
    assert [f.operator for f in _FilterToGRPC.convert(where).filters][2:] == [
        base_pb2.Filters.OPERATOR_CONTAINS_ANY
    ] * 2
    assert matches_nothing(SearchFilter(tags=frozenset()))
    assert matches_nothing(SearchFilter(labels=frozenset(), tags=frozenset({"x"})))
    assert not matches_nothing(SearchFilter(tags=frozenset({"x"})))


def explanation(object_id: int, *contributions: tuple[str, float]) -> str:
    """``explain_score`` as Weaviate's ranked fusion writes it: one line per leg that found the object."""
    lines = [
        f"Hybrid (Result Set {'vector,hybridVector' if leg == 'vector' else 'keyword,bm25'}) "
        f"Document {uuid.UUID(int=object_id)} contributed {value} to the score"
        for leg, value in contributions
    ]
    return "\n" + "\n".join(lines)


def weaviate_contribution(weight: float, rank: int) -> float:
    """What Weaviate adds for a hit at 1-based ``rank`` of a leg: ``weight / (60 + position)``, float32."""
    return float(np.float32(weight / (60 + rank - 1)))


def test_leg_ranks_are_read_back_from_weaviates_explanation() -> None:
    both = explanation(7, ("vector", weaviate_contribution(0.7, 3)), ("keyword", weaviate_contribution(0.3, 12)))

    assert leg_ranks(both, dense_weight=0.7) == (3, 12)
    assert leg_ranks(explanation(7, ("keyword", weaviate_contribution(0.5, 1))), dense_weight=0.5) == (None, 1)
    assert leg_ranks(explanation(7, ("vector", weaviate_contribution(1.0, 100))), dense_weight=1.0) == (100, None)
    assert leg_ranks(None, dense_weight=0.5) == (None, None)
    assert leg_ranks("BM25F_solar_frequency:2", dense_weight=0.5) == (None, None)


def hybrid_object(object_id: int, vector: list[float], explain: str, content: str = "") -> Object[Any, Any]:
    return Object(
        uuid=uuid.UUID(int=object_id),
        metadata=MetadataReturn(score=0.0, explain_score=explain),
        properties={"content": content},
        references=None,
        vector={VECTOR_NAME: vector},
        collection="Handbook",
    )


def test_hybrid_hits_are_fused_by_the_shared_formula_with_legs_and_measured_distances() -> None:
    w = 0.6
    objects = [
        hybrid_object(3, [1.0, 0.0], explanation(3, ("vector", weaviate_contribution(w, 1))), "three"),
        hybrid_object(2, [0.0, 1.0], explanation(2, ("keyword", weaviate_contribution(1 - w, 1))), "two"),
        hybrid_object(
            1,
            [0.6, 0.8],
            explanation(1, ("vector", weaviate_contribution(w, 2)), ("keyword", weaviate_contribution(1 - w, 2))),
        ),
    ]

    hits = hybrid_hits(objects, [2.0, 0.0], dense_weight=w, limit=3, requested=["content"], max_distance=None)

    expected = {
        1: w / (RRF_K + 2) + (1 - w) / (RRF_K + 2),
        3: w / (RRF_K + 1),
        2: (1 - w) / (RRF_K + 1),
    }
    assert [int(uuid.UUID(hit.id)) for hit in hits] == sorted(expected, key=lambda n: -expected[n])
    by_id = {int(uuid.UUID(hit.id)): hit for hit in hits}
    assert by_id[1].legs == Legs(dense_rank=2, lexical_rank=2, lexical_score=None, fused_score=expected[1])
    assert by_id[2].legs == Legs(dense_rank=None, lexical_rank=1, lexical_score=None, fused_score=expected[2])
    assert all(hit.score == pytest.approx(expected[n]) for n, hit in by_id.items())
    assert [by_id[n].distance for n in (3, 1, 2)] == pytest.approx([0.0, 0.4, 1.0])
    assert by_id[3].payload == {"content": "three"}
    # limit first, then the distance post-filter (as fusion.fuse does)
    cut = hybrid_hits(objects, [1.0, 0.0], dense_weight=w, limit=2, requested=[], max_distance=0.5)
    assert [int(uuid.UUID(hit.id)) for hit in cut] == [1, 3]
    assert hybrid_hits(objects, [1.0, 0.0], dense_weight=w, limit=1, requested=[], max_distance=0.1) == []


def test_keyword_hits_rank_by_bm25_then_id_and_measure_the_distance() -> None:
    def scored(object_id: int, score: float, vector: list[float]) -> Object[Any, Any]:
        return Object(
            uuid=uuid.UUID(int=object_id),
            metadata=MetadataReturn(score=score),
            properties={},
            references=None,
            vector={VECTOR_NAME: vector},
            collection="Handbook",
        )

    hits = keyword_hits(
        [scored(5, 1.0, [1.0, 0.0]), scored(4, 2.5, [0.0, 1.0]), scored(2, 1.0, [1.0, 1.0])], [1.0, 0.0], requested=[]
    )

    assert [(int(uuid.UUID(h.id)), h.score) for h in hits] == [(4, 2.5), (2, 1.0), (5, 1.0)]
    assert [h.distance for h in hits] == pytest.approx([1.0, 1 - 1 / np.sqrt(2), 0.0])
    with pytest.raises(Unavailable):
        keyword_hits([scored(1, 1.0, [])], [1.0, 0.0], requested=[])


def test_update_document_rewrites_only_that_documents_chunks_and_only_when_something_changes() -> None:
    fields = {"document_name": "new.pdf", "tags": ["policy"], "label": None}
    chunk = {"content": "x", "document_id": "d1", "document_name": "old.pdf", "label": "draft", "tags": None}

    assert updated_properties(chunk, document_id="d1", fields=fields) == {
        "content": "x",
        "document_id": "d1",
        "document_name": "new.pdf",
        "tags": ["policy"],
    }
    assert updated_properties(chunk, document_id="d2", fields=fields) is None
    done = {"content": "x", "document_id": "d1", "document_name": "new.pdf", "tags": ["policy"], "label": None}
    assert updated_properties(done, document_id="d1", fields=fields) is None
    assert returned_payload({"content": "x"}, ["tags", "label"]) == {"tags": [], "label": None}


@pytest.fixture
async def grpc_standin_store() -> AsyncIterator[tuple[WeaviateStore, list[search_get_pb2.SearchRequest]]]:
    """A store whose client sends its gRPC searches to a stand-in: the client's own request encoding (as for a
    1.32 server) is recorded and answered with a ``SearchReply`` built as a server builds one."""
    client = weaviate.use_async_with_local(skip_init_checks=True)
    client._connection._weaviate_version = _ServerVersion.from_string("1.32.0")
    requests: list[search_get_pb2.SearchRequest] = []
    w = 0.25

    async def grpc_search(request: search_get_pb2.SearchRequest) -> search_get_pb2.SearchReply:
        requests.append(request)
        results = [
            search_get_pb2.SearchResult(
                metadata=search_get_pb2.MetadataResult(
                    id_as_bytes=uuid.UUID(int=n).bytes,
                    score=0.01,
                    score_present=True,
                    distance=1.0 - vector[0],
                    distance_present=True,
                    explain_score=explain,
                    explain_score_present=True,
                    vectors=[
                        base_pb2.Vectors(
                            name=VECTOR_NAME,
                            vector_bytes=np.asarray(vector, dtype="<f4").tobytes(),
                            type=base_pb2.Vectors.VECTOR_TYPE_SINGLE_FP32,
                        )
                    ],
                ),
                properties=search_get_pb2.PropertiesResult(
                    non_ref_props=properties_pb2.Properties(fields={"content": properties_pb2.Value(text_value=text)})
                ),
            )
            for n, vector, text, explain in (
                (1, [1.0, 0.0], "solar", explanation(1, ("vector", weaviate_contribution(w, 1)))),
                (2, [0.0, 1.0], "solar panel", explanation(2, ("keyword", weaviate_contribution(1 - w, 1)))),
            )
        ]
        return search_get_pb2.SearchReply(results=results)

    client._connection.grpc_search = grpc_search  # type: ignore[method-assign]
    store = WeaviateStore(client)
    yield store, requests
    await store.aclose()


async def test_a_hybrid_search_is_one_native_ranked_hybrid_query_through_a_grpc_standin(
    grpc_standin_store: tuple[WeaviateStore, list[search_get_pb2.SearchRequest]],
) -> None:
    store, requests = grpc_standin_store
    where = SearchFilter(readable_by=frozenset({"hr"}))

    hits = await store.search(
        Search(
            name="Handbook",
            vector=[1.0, 0.0],
            limit=5,
            properties=["content", "nope"],
            where=where,
            text="solar panels",
            mode="hybrid",
            dense_weight=0.25,
        )
    )

    [request] = requests
    hybrid = request.hybrid_search
    assert (hybrid.query, hybrid.alpha, list(hybrid.properties)) == ("solar panels", 0.25, ["content"])
    assert hybrid.fusion_type == base_search_pb2.Hybrid.FUSION_TYPE_RANKED
    assert request.limit == leg_depth(5)  # each leg of Weaviate's hybrid runs as deep as fusion's legs elsewhere
    assert request.filters == _FilterToGRPC.convert(search_filter(where))  # one filter: both legs
    assert list(request.metadata.vectors) == [VECTOR_NAME]
    assert request.metadata.explain_score
    assert list(request.properties.non_ref_properties) == ["content"]
    assert [(h.id, h.payload, h.legs) for h in hits] == [
        (
            str(uuid.UUID(int=2)),
            {"content": "solar panel"},
            Legs(dense_rank=None, lexical_rank=1, lexical_score=None, fused_score=0.75 / 61),
        ),
        (
            str(uuid.UUID(int=1)),
            {"content": "solar"},
            Legs(dense_rank=1, lexical_rank=None, lexical_score=None, fused_score=0.25 / 61),
        ),
    ]
    assert [h.distance for h in hits] == pytest.approx([1.0, 0.0])


async def test_hybrid_text_without_an_indexable_term_is_the_dense_order_through_a_grpc_standin(
    grpc_standin_store: tuple[WeaviateStore, list[search_get_pb2.SearchRequest]],
) -> None:
    store, requests = grpc_standin_store

    assert (
        await store.search(
            Search(name="Handbook", vector=[1.0, 0.0], limit=5, properties=[], text="the of!", mode="lexical")
        )
        == []
    )
    await store.search(
        Search(name="Handbook", vector=[1.0, 0.0], limit=5, properties=[], text="the of!", mode="hybrid")
    )

    [request] = requests  # the lexical search asked nothing
    assert request.HasField("near_vector")
    assert not request.HasField("hybrid_search")
