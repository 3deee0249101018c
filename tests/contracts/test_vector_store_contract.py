"""The contract every vector adapter passes (run once per provider through the ``store`` fixture).

Vectors are 8-d and hand-made so that every distance is known exactly: ``e(i)`` is the i-th unit vector,
and the identity record sits at ``e(0)``. Chunk ids are small-integer UUIDs, so id order is plain to see.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import jsonschema_rs
import msgspec
import pytest

from common.errors import Conflict, InvalidInput, NotFound
from common.vectors import (
    CHUNK_EXTRAS,
    IDENTITY_ID,
    IDENTITY_PROPERTIES,
    TEXT_PROPERTIES,
    ChunkPayload,
    Search,
    SearchFilter,
    SearchHit,
    VectorRecord,
    VectorStore,
    identity_vector,
    read_chunk,
)
from schemas import load, validate
from schemas.models import Identity, parse_identity
from tests.contracts.conftest import Harness

DIM = 8
ALL_PROPERTIES = (*IDENTITY_PROPERTIES, *TEXT_PROPERTIES, *CHUNK_EXTRAS)
DOC_A = "5a1ad9f0-0000-4000-8000-00000000000a"
DOC_B = "5a1ad9f0-0000-4000-8000-00000000000b"

IDENTITY_RS = jsonschema_rs.Draft202012Validator(load("identity"))
TEXT_PAYLOAD_RS = jsonschema_rs.Draft202012Validator(load("text-payload"))


class UncheckedIdentity(Identity, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """An Identity that skips its own checks, standing in for one built by code that bypasses them."""

    def __post_init__(self) -> None:
        pass


def e(i: int, scale: float = 1.0) -> list[float]:
    vector = [0.0] * DIM
    vector[i] = scale
    return vector


def add(*vectors: list[float]) -> list[float]:
    return [sum(components) for components in zip(*vectors, strict=True)]


def same_hits(found: object, expected: list[SearchHit]) -> bool:
    """The same chunks in the same order with the same payloads; distances equal to float32 precision (an
    in-memory copy and PostgreSQL sum the same products in different orders)."""
    return (
        isinstance(found, list)
        and [(h.id, h.payload) for h in found] == [(h.id, h.payload) for h in expected]
        and all(math.isclose(a.distance, b.distance, abs_tol=1e-6) for a, b in zip(found, expected, strict=True))
    )


def cid(n: int) -> str:
    return str(uuid.UUID(int=n))


def make_identity(store: VectorStore, name: str, groups: list[str] | None = None) -> Identity:
    return Identity(
        collection_id=str(uuid.uuid5(uuid.NAMESPACE_URL, name)),
        name=name,
        model="all-MiniLM-L6-v2",
        vectorProvider=store.provider,
        embeddingProvider="local",
        groups=groups if groups is not None else msgspec.UNSET,
    )


def chunk(
    identity: Identity,
    n: int,
    vector: list[float],
    *,
    document_id: str = DOC_A,
    groups: list[str] | None = None,
    content: str | None = None,
) -> VectorRecord:
    """A chunk as chonkit writes it: identity properties, text payload, our extras."""
    payload: dict[str, Any] = {
        **{key: value for key, value in identity.to_dict().items() if key != "groups"},
        "content": content if content is not None else f"chunk {n}",
        "document_id": document_id,
        "chunk_index": n,
        "char_start": 10 * n,
        "char_end": 10 * n + 9,
        "page_start": None,
        "page_end": None,
        "heading_path": ["Intro", f"Part {n}"],
        "token_count": 3,
        "content_hash": f"{n:064x}",
        "document_sha256": "ab" * 32,
        "parent_index": None,
        "parent_content": None,
    }
    if groups is not None:
        payload["groups"] = groups
    return VectorRecord(id=cid(n), vector=vector, payload=payload)


async def new_collection(provider: Harness, groups: list[str] | None = None) -> Identity:
    identity = make_identity(provider.store, provider.new_name(), groups)
    await provider.store.create_collection(identity, DIM)
    return identity


async def ids_found(store: VectorStore, name: str, query: list[float], **kwargs: Any) -> list[str]:
    hits = await store.search(
        Search(name=name, vector=query, limit=kwargs.pop("limit", 50), properties=["document_id"], **kwargs)
    )
    return [hit.id for hit in hits]


# ----- identity -----


@pytest.mark.parametrize("groups", [None, ["hr", "legal"]])
async def test_created_identity_reads_back_as_written_and_validates_everywhere(
    provider: Harness, groups: list[str] | None
) -> None:
    identity = await new_collection(provider, groups)

    stored = await provider.store.read_identity(identity.name)

    assert stored == identity.to_dict()
    assert parse_identity(stored) == identity
    validate("identity", stored)
    IDENTITY_RS.validate(stored)
    assert await provider.store.collection_exists(identity.name)


async def test_creating_an_existing_collection_conflicts(provider: Harness) -> None:
    identity = await new_collection(provider)

    with pytest.raises(Conflict) as raised:
        await provider.store.create_collection(identity, DIM)

    assert raised.value.code == "collection_exists"
    assert await provider.store.read_identity(identity.name) == identity.to_dict()


async def test_write_identity_replaces_the_stored_one(provider: Harness) -> None:
    identity = await new_collection(provider)
    changed = msgspec.structs.replace(identity, model="bge-small-en", groups=["ops"])

    await provider.store.write_identity(changed)

    assert await provider.store.read_identity(identity.name) == changed.to_dict()


@pytest.mark.parametrize("invalid", [{"groups": []}, {"name": "bad"}])
async def test_write_identity_refuses_an_invalid_identity_and_keeps_the_stored_one(
    provider: Harness, invalid: dict[str, Any]
) -> None:
    identity = await new_collection(provider)
    fields = {**identity.to_dict(), **invalid}

    with pytest.raises(InvalidInput) as raised:
        await provider.store.write_identity(UncheckedIdentity(**fields))

    assert raised.value.code == "invalid_identity"
    assert await provider.store.read_identity(identity.name) == identity.to_dict()


# ----- writing and counting chunks -----


async def test_upsert_then_count_per_collection_and_document(provider: Harness) -> None:
    identity = await new_collection(provider)
    records = [chunk(identity, n, e(1 + n % 7), document_id=DOC_A if n <= 3 else DOC_B) for n in range(1, 6)]

    await provider.store.upsert(identity.name, records)

    assert await provider.store.count(identity.name) == 5
    assert await provider.store.count(identity.name, document_id=DOC_A) == 3
    assert await provider.store.count(identity.name, document_id="no-such-document") == 0
    assert await provider.store.document_ids(identity.name) == {DOC_A: 3, DOC_B: 2}


async def test_chunk_payloads_read_back_whole_and_valid_as_text_payloads(provider: Harness) -> None:
    identity = await new_collection(provider, groups=["hr"])
    records = [chunk(identity, n, e(n), groups=["hr"], content=f"Ünïcode \N{SNOWMAN} {n}") for n in range(1, 4)]
    await provider.store.upsert(identity.name, records)

    hits = await provider.store.search(Search(name=identity.name, vector=e(1), limit=10, properties=ALL_PROPERTIES))

    assert {hit.id: hit.payload for hit in hits} == {record.id: record.payload for record in records}
    for hit in hits:
        TEXT_PAYLOAD_RS.validate(hit.payload)
        validate("text-payload", hit.payload)
        validate("chunk", hit.payload)  # what Ragu writes is what it asks other writers for


@pytest.mark.parametrize("groups", [["hr"], None], ids=["groups", "public"])
async def test_a_chunk_payload_struct_is_stored_as_the_object_of_its_fields(
    provider: Harness, groups: list[str] | None
) -> None:
    """The worker writes a ``ChunkPayload``: it comes back under the keys a dict of the same fields is stored
    under (so collections written before it read the same), and a typed read gives the fields written."""
    identity = await new_collection(provider, groups=groups)
    typed = ChunkPayload(
        **{**identity.to_dict(), **chunk(identity, 1, e(1)).payload, "groups": identity.groups},
        document_name="handbook.pdf",
    )
    as_dict = msgspec.to_builtins(typed)
    await provider.store.upsert(
        identity.name,
        [VectorRecord(id=cid(1), vector=e(1), payload=typed), VectorRecord(id=cid(2), vector=e(1), payload=as_dict)],
    )

    hits = await provider.store.search(Search(name=identity.name, vector=e(1), limit=2, properties=ALL_PROPERTIES))

    assert [hit.payload for hit in hits] == [as_dict, as_dict]
    assert ("groups" in as_dict) == (groups is not None)
    found = read_chunk(hits[0].payload)
    assert (found.content, found.document_name, found.heading_path) == ("chunk 1", "handbook.pdf", ["Intro", "Part 1"])


async def test_upserting_the_same_ids_again_overwrites_without_duplicates(provider: Harness) -> None:
    identity = await new_collection(provider)
    await provider.store.upsert(identity.name, [chunk(identity, n, e(n)) for n in (1, 2, 3)])

    await provider.store.upsert(
        identity.name, [chunk(identity, n, e(4), content=f"rewritten {n}", document_id=DOC_B) for n in (1, 2)]
    )

    assert await provider.store.count(identity.name) == 3
    assert await provider.store.document_ids(identity.name) == {DOC_A: 1, DOC_B: 2}
    hits = await provider.store.search(Search(name=identity.name, vector=e(4), limit=2, properties=["content"]))
    assert [(hit.id, hit.payload["content"]) for hit in hits] == [(cid(1), "rewritten 1"), (cid(2), "rewritten 2")]
    assert [hit.distance for hit in hits] == pytest.approx([0.0, 0.0], abs=1e-6)


async def test_upsert_accepts_any_float_sequence(provider: Harness) -> None:
    identity = await new_collection(provider)

    await provider.store.upsert(
        identity.name, [VectorRecord(id=cid(1), vector=tuple(e(2)), payload={"content": "t", "document_id": DOC_A})]
    )

    assert await ids_found(provider.store, identity.name, e(2)) == [cid(1)]


async def test_upsert_refuses_the_identity_id(provider: Harness) -> None:
    identity = await new_collection(provider)

    with pytest.raises(InvalidInput):
        await provider.store.upsert(identity.name, [chunk(identity, 0, e(1))])

    assert await provider.store.read_identity(identity.name) == identity.to_dict()
    assert await provider.store.count(identity.name) == 0


async def test_delete_document_removes_only_its_chunks_and_is_idempotent(provider: Harness) -> None:
    identity = await new_collection(provider)
    records = [chunk(identity, n, e(n), document_id=DOC_A if n % 2 else DOC_B) for n in range(1, 7)]
    await provider.store.upsert(identity.name, records)

    await provider.store.delete_document(identity.name, DOC_A)
    await provider.store.delete_document(identity.name, DOC_A)

    assert await provider.store.document_ids(identity.name) == {DOC_B: 3}
    assert await provider.store.count(identity.name) == 3
    assert await provider.store.read_identity(identity.name) == identity.to_dict()


async def test_delete_ids_removes_those_chunks_and_is_idempotent(provider: Harness) -> None:
    identity = await new_collection(provider)
    await provider.store.upsert(identity.name, [chunk(identity, n, e(n)) for n in range(1, 5)])

    await provider.store.delete_ids(identity.name, [cid(1), cid(3)])
    await provider.store.delete_ids(identity.name, [cid(1), cid(99)])
    await provider.store.delete_ids(identity.name, [])

    assert sorted(await ids_found(provider.store, identity.name, e(2))) == [cid(2), cid(4)]
    assert await provider.store.count(identity.name) == 2


@pytest.mark.parametrize("nil", [IDENTITY_ID, IDENTITY_ID.replace("-", ""), "{" + IDENTITY_ID + "}"])
async def test_delete_ids_refuses_the_identity_id(provider: Harness, nil: str) -> None:
    identity = await new_collection(provider)
    await provider.store.upsert(identity.name, [chunk(identity, 1, e(1))])

    with pytest.raises(InvalidInput) as raised:
        await provider.store.delete_ids(identity.name, [cid(1), nil])

    assert raised.value.code == "identity_id_reserved"
    assert await provider.store.read_identity(identity.name) == identity.to_dict()
    assert await provider.store.count(identity.name) == 1


async def test_update_document_sets_name_tags_and_label_on_that_documents_chunks_only(provider: Harness) -> None:
    identity = await new_collection(provider)
    store, name = provider.store, identity.name
    records = [chunk(identity, n, e(n), document_id=DOC_A if n <= 2 else DOC_B) for n in range(1, 5)]
    named = [VectorRecord(id=r.id, vector=r.vector, payload={**r.payload, "document_name": "old.pdf"}) for r in records]
    await store.upsert(name, named)
    await ids_found(store, name, e(1))  # an in-memory copy, where there is one, is made from the old names

    for _ in range(2):  # idempotent
        await store.update_document(name, DOC_A, document_name="Handbook 2025.pdf", tags=["policy"], label="HR")

    asked = ["document_id", "document_name", "content", "tags", "label"]
    hits = await store.search(Search(name=name, vector=e(1), limit=10, properties=asked))
    assert {hit.id: hit.payload["document_name"] for hit in hits} == {
        cid(1): "Handbook 2025.pdf",
        cid(2): "Handbook 2025.pdf",
        cid(3): "old.pdf",
        cid(4): "old.pdf",
    }
    assert {hit.id for hit in hits if hit.payload.get("tags") == ["policy"] and hit.payload.get("label") == "HR"} == {
        cid(1),
        cid(2),
    }
    assert sorted(await ids_found(store, name, e(1), where=SearchFilter(tags=frozenset({"policy"})))) == [
        cid(1),
        cid(2),
    ]
    assert {hit.id: hit.payload["content"] for hit in hits} == {r.id: r.payload["content"] for r in records}
    assert await store.count(name) == 4
    assert await store.read_identity(name) == identity.to_dict()


# ----- the identity record stays out of every chunk query -----


async def test_identity_is_never_searched_counted_or_listed(provider: Harness) -> None:
    identity = await new_collection(provider)
    store, name = provider.store, identity.name

    assert await ids_found(store, name, identity_vector(DIM)) == []
    assert await store.count(name) == 0
    assert await store.document_ids(name) == {}

    await store.upsert(name, [chunk(identity, n, e(n)) for n in (1, 2)])
    hits = await store.search(
        Search(name=name, vector=identity_vector(DIM), limit=10, properties=["name"], max_distance=2.0)
    )
    assert sorted(hit.id for hit in hits) == [cid(1), cid(2)]
    assert await store.count(name) == 2
    assert await store.document_ids(name) == {DOC_A: 2}


# ----- search -----


async def test_search_ranks_by_cosine_distance_with_similarity_scores(provider: Harness) -> None:
    identity = await new_collection(provider)
    records = [
        chunk(identity, 1, e(2)),  # distance 0
        chunk(identity, 2, add(e(2), e(3))),  # 45 degrees: 1 - 1/sqrt(2)
        chunk(identity, 3, add(e(2, 0.5), e(3, math.sqrt(3) / 2))),  # 60 degrees: 0.5
        chunk(identity, 4, e(3)),  # orthogonal: 1
        chunk(identity, 5, e(2, -3.0)),  # opposite: 2
    ]
    await provider.store.upsert(identity.name, records)

    hits = await provider.store.search(Search(name=identity.name, vector=e(2, 7.0), limit=5, properties=[]))

    assert [hit.id for hit in hits] == [cid(1), cid(2), cid(3), cid(4), cid(5)]
    expected = [0.0, 1 - 1 / math.sqrt(2), 0.5, 1.0, 2.0]
    assert [hit.distance for hit in hits] == pytest.approx(expected, abs=1e-5)
    assert [hit.score for hit in hits] == pytest.approx([1 - d for d in expected], abs=1e-5)
    for hit in hits:
        assert hit.score + hit.distance == pytest.approx(1.0)
    top2 = await provider.store.search(Search(name=identity.name, vector=e(2, 7.0), limit=2, properties=[]))
    assert [hit.id for hit in top2] == [cid(1), cid(2)]


async def test_equal_distances_are_ordered_by_id_even_across_the_limit(provider: Harness) -> None:
    identity = await new_collection(provider)
    # Written in reverse so that insertion order cannot pass for id order.
    await provider.store.upsert(identity.name, [chunk(identity, n, e(5, float(n))) for n in range(12, 0, -1)])
    await provider.store.upsert(identity.name, [chunk(identity, 20, add(e(5), e(6)))])

    assert await ids_found(provider.store, identity.name, e(5), limit=3) == [cid(1), cid(2), cid(3)]
    assert await ids_found(provider.store, identity.name, e(5), limit=13) == [*map(cid, range(1, 13)), cid(20)]


async def test_max_distance_keeps_only_hits_that_close(provider: Harness) -> None:
    identity = await new_collection(provider)
    await provider.store.upsert(
        identity.name,
        [chunk(identity, 1, e(2)), chunk(identity, 2, add(e(2), e(3))), chunk(identity, 3, e(3))],
    )

    assert await ids_found(provider.store, identity.name, e(2), max_distance=0.5) == [cid(1), cid(2)]
    assert await ids_found(provider.store, identity.name, e(2), max_distance=0.0) == [cid(1)]
    assert await ids_found(provider.store, identity.name, e(2), max_distance=1.0) == [cid(1), cid(2), cid(3)]
    assert await ids_found(provider.store, identity.name, e(4, -1.0), max_distance=0.9) == []


async def test_search_returns_only_the_requested_properties(provider: Harness) -> None:
    identity = await new_collection(provider)
    await provider.store.upsert(identity.name, [chunk(identity, 1, e(1))])

    [hit] = await provider.store.search(
        Search(name=identity.name, vector=e(1), limit=1, properties=["content", "page_start", "not_stored"])
    )
    [bare] = await provider.store.search(Search(name=identity.name, vector=e(1), limit=1, properties=[]))

    assert hit.payload == {"content": "chunk 1", "page_start": None}
    assert bare.payload == {}


async def test_search_with_limit_zero_finds_nothing(provider: Harness) -> None:
    identity = await new_collection(provider)
    await provider.store.upsert(identity.name, [chunk(identity, 1, e(1))])

    assert await provider.store.search(Search(name=identity.name, vector=e(1), limit=0, properties=[])) == []


async def test_search_many_answers_each_search_as_search_does(provider: Harness) -> None:
    """Ties across the limit, a distance cut, filters, a zero limit, a large limit and a missing collection,
    in one call: each result equals its single search; the missing one is an error, not the call's."""
    store = provider.store
    ties, grouped = await new_collection(provider), await grouped_collection(provider)
    await store.upsert(ties.name, [chunk(ties, n, e(5, float(n))) for n in range(12, 0, -1)])
    await store.upsert(ties.name, [chunk(ties, 20, add(e(5), e(6)))])
    searches = [
        Search(name=ties.name, vector=e(5), limit=3, properties=["chunk_index"]),
        Search(
            name=grouped.name,
            vector=e(1),
            limit=10,
            properties=["content"],
            where=SearchFilter(readable_by=frozenset({"hr"})),
        ),
        Search(name=provider.new_name("Missing"), vector=e(1), limit=3, properties=[]),
        Search(name=ties.name, vector=e(6), limit=2, properties=[], max_distance=0.5),
        Search(name=grouped.name, vector=e(1), limit=0, properties=[]),
        Search(name=ties.name, vector=e(5), limit=30, properties=["content"]),
        Search(name=grouped.name, vector=e(1), limit=5, properties=[], where=SearchFilter(document_ids=frozenset())),
    ]

    results = await store.search_many(searches)

    assert isinstance(results[2], NotFound)
    for search, result in zip(searches, results, strict=True):
        if search is searches[2]:
            continue
        alone = await store.search(
            Search(
                name=search.name,
                vector=search.vector,
                limit=search.limit,
                properties=search.properties,
                max_distance=search.max_distance,
                where=search.where,
            )
        )
        assert same_hits(result, alone)
    assert [hit.id for hit in results[0]] == [cid(1), cid(2), cid(3)]  # type: ignore[union-attr]
    assert len(results[5]) == 13  # type: ignore[arg-type]
    assert results[1]
    assert results[3]


# ----- filters -----


async def grouped_collection(provider: Harness) -> Identity:
    """Chunks 1-2 public, 3 for hr, 4 for legal, 5 for hr+legal, 6 for ops; 1, 3, 5 in DOC_A."""
    identity = await new_collection(provider)
    groups: dict[int, list[str] | None] = {1: None, 2: None, 3: ["hr"], 4: ["legal"], 5: ["hr", "legal"], 6: ["ops"]}
    records = [
        chunk(identity, n, add(e(1), e(2, 0.1 * n)), groups=g, document_id=DOC_A if n % 2 else DOC_B)
        for n, g in groups.items()
    ]
    await provider.store.upsert(identity.name, records)
    return identity


@pytest.mark.parametrize(
    ("readable_by", "expected"),
    [
        ({"hr"}, [1, 2, 3, 5]),
        ({"legal", "ops"}, [1, 2, 4, 5, 6]),
        ({"finance"}, [1, 2]),
        (set(), [1, 2]),
    ],
)
async def test_readable_by_keeps_public_chunks_and_those_of_a_shared_group(
    provider: Harness, readable_by: set[str], expected: list[int]
) -> None:
    identity = await grouped_collection(provider)

    found = await ids_found(provider.store, identity.name, e(1), where=SearchFilter(readable_by=frozenset(readable_by)))

    assert found == [cid(n) for n in expected]


ODD_GROUPS: dict[int, object] = {2: ["hr"], 3: [], 4: None, 5: "hr", 6: ["eng"]}
"""Chunk 1 has no ``groups``; the others carry these copies, as another application might write them."""


@pytest.mark.parametrize("mode", ["dense", "lexical", "hybrid"])
@pytest.mark.parametrize(
    ("readable_by", "ungrouped_readable", "expected"),
    [
        ({"hr"}, True, [1, 2]),
        ({"hr"}, False, [2]),
        ({"eng", "hr"}, False, [2, 6]),
        (set(), True, [1]),
        (set(), False, []),
    ],
)
async def test_a_groups_copy_that_is_no_list_of_groups_is_readable_by_nobody(
    provider: Harness, mode: str, readable_by: set[str], ungrouped_readable: bool, expected: list[int]
) -> None:
    """An empty list, null or a string names no group, in every adapter and every mode; a chunk without the copy
    is readable only where the filter says chunks without groups are (kappi: a collection without groups)."""
    identity = await new_collection(provider)
    records = [chunk(identity, 1, add(e(1), e(2, 0.1)))]
    for n, groups in ODD_GROUPS.items():
        record = chunk(identity, n, add(e(1), e(2, 0.1 * n)))
        records.append(msgspec.structs.replace(record, payload={**record.payload, "groups": groups}))
    await provider.store.upsert(identity.name, records)
    where = SearchFilter(readable_by=frozenset(readable_by), ungrouped_readable=ungrouped_readable)

    found = await ids_found(provider.store, identity.name, e(1), where=where, mode=mode, text="chunk")

    assert sorted(found) == [cid(n) for n in expected]


async def test_chunks_whose_groups_copy_is_not_the_identitys_are_counted(provider: Harness) -> None:
    """What ``ragu reconcile`` reports and :meth:`set_groups` rewrites: copies another application wrote oddly,
    or a write that stopped halfway. Weaviate keeps no empty list or null (such a copy reads as none)."""
    identity = await new_collection(provider, ["hr"])
    records = [chunk(identity, 1, e(1))]  # no copy
    for n, groups in ODD_GROUPS.items():
        record = chunk(identity, n, e(1))
        records.append(msgspec.structs.replace(record, payload={**record.payload, "groups": groups}))
    await provider.store.upsert(identity.name, records)
    empty_kept = provider.store.provider != "weaviate"

    assert await provider.store.count_misgrouped(identity.name, ["hr"]) == 5  # all but chunk 2
    assert await provider.store.count_misgrouped(identity.name, []) == (5 if empty_kept else 3)  # all but chunk 1
    await provider.store.set_groups(identity.name, ["hr"])
    assert await provider.store.count_misgrouped(identity.name, ["hr"]) == 0
    await provider.store.set_groups(identity.name, [])
    assert await provider.store.count_misgrouped(identity.name, []) == 0


async def test_no_filter_or_empty_filter_keeps_everything(provider: Harness) -> None:
    identity = await grouped_collection(provider)
    everything = [cid(n) for n in range(1, 7)]

    assert await ids_found(provider.store, identity.name, e(1)) == everything
    assert await ids_found(provider.store, identity.name, e(1), where=SearchFilter()) == everything


async def test_document_ids_filter_keeps_those_documents(provider: Harness) -> None:
    identity = await grouped_collection(provider)

    def only(*documents: str) -> SearchFilter:
        return SearchFilter(document_ids=frozenset(documents))

    assert await ids_found(provider.store, identity.name, e(1), where=only(DOC_A)) == [cid(1), cid(3), cid(5)]
    assert await ids_found(provider.store, identity.name, e(1), where=only(DOC_A, DOC_B)) == [
        cid(n) for n in range(1, 7)
    ]
    assert await ids_found(provider.store, identity.name, e(1), where=only("elsewhere")) == []
    assert await ids_found(provider.store, identity.name, e(1), where=only()) == []


async def test_readable_by_and_document_ids_combine(provider: Harness) -> None:
    identity = await grouped_collection(provider)
    where = SearchFilter(readable_by=frozenset({"legal"}), document_ids=frozenset({DOC_B}))

    assert await ids_found(provider.store, identity.name, e(1), where=where) == [cid(2), cid(4)]


# ----- groups -----


async def test_set_groups_rewrites_the_identity_and_every_chunk(provider: Harness) -> None:
    identity = await grouped_collection(provider)
    store, name = provider.store, identity.name

    await store.set_groups(name, ["finance", "ops"])

    stored = await store.read_identity(name)
    assert stored == {**identity.to_dict(), "groups": ["finance", "ops"]}
    IDENTITY_RS.validate(stored)
    hits = await store.search(Search(name=name, vector=e(1), limit=10, properties=["groups"]))
    assert [hit.payload for hit in hits] == [{"groups": ["finance", "ops"]}] * 6
    assert await ids_found(store, name, e(1), where=SearchFilter(readable_by=frozenset({"hr"}))) == []
    assert len(await ids_found(store, name, e(1), where=SearchFilter(readable_by=frozenset({"ops"})))) == 6


async def test_set_groups_with_no_groups_removes_the_property_everywhere(provider: Harness) -> None:
    identity = await new_collection(provider, groups=["hr"])
    store, name = provider.store, identity.name
    await store.upsert(name, [chunk(identity, n, e(n), groups=["hr"]) for n in (1, 2)])

    await store.set_groups(name, [])

    stored = await store.read_identity(name)
    assert stored is not None
    assert "groups" not in stored
    IDENTITY_RS.validate(stored)
    validate("identity", stored)
    hits = await store.search(Search(name=name, vector=e(1), limit=10, properties=ALL_PROPERTIES))
    assert len(hits) == 2
    assert all("groups" not in hit.payload for hit in hits)
    assert len(await ids_found(store, name, e(1), where=SearchFilter(readable_by=frozenset()))) == 2


# ----- listing and dropping collections -----


async def test_list_identities_lists_ours_and_skips_foreign_collections(provider: Harness) -> None:
    ours = [await new_collection(provider), await new_collection(provider, groups=["hr"])]
    foreign = provider.new_name("Foreign")
    await provider.make_foreign_collection(foreign)

    listed = await provider.store.list_identities()

    names = [identity.name for identity in listed]
    assert [identity for identity in listed if identity.name in {i.name for i in ours}] == sorted(
        ours, key=lambda identity: identity.name
    )
    assert foreign not in names
    assert await provider.store.collection_exists(foreign)


async def test_drop_collection_removes_it_and_is_idempotent(provider: Harness) -> None:
    identity = await new_collection(provider)
    await provider.store.upsert(identity.name, [chunk(identity, 1, e(1))])

    await provider.store.drop_collection(identity.name)
    await provider.store.drop_collection(identity.name)

    assert not await provider.store.collection_exists(identity.name)
    assert await provider.store.read_identity(identity.name) is None
    assert identity.name not in [i.name for i in await provider.store.list_identities()]


async def test_a_missing_collection_is_not_found(provider: Harness) -> None:
    store = provider.store
    name = provider.new_name("Missing")
    identity = make_identity(store, name)

    assert not await store.collection_exists(name)
    assert await store.read_identity(name) is None
    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: store.search(Search(name=name, vector=e(1), limit=3, properties=["content"])),
        lambda: store.count(name),
        lambda: store.document_ids(name),
        lambda: store.upsert(name, [chunk(identity, 1, e(1))]),
        lambda: store.set_groups(name, ["hr"]),
        lambda: store.write_identity(identity),
        lambda: store.update_document(name, DOC_A, document_name="new.pdf", tags=[], label=None),
    ]
    for call in calls:
        with pytest.raises(NotFound) as raised:
            await call()
        assert raised.value.code == "collection_not_found"


@pytest.mark.parametrize(
    "name", ["L" + "x" * 63, "Q" + "x" * 255, "lowercase", "Dash-ed", "Ünïcode"], ids=["64", "256", "lc", "dash", "uni"]
)
async def test_a_name_that_breaks_the_rule_is_invalid_not_missing(provider: Harness, name: str) -> None:
    """One rule in every store (pgvector cannot hold more than 63 characters): a name that breaks it is refused
    as invalid, never reported as a missing collection."""
    store = provider.store
    identity = make_identity(store, provider.new_name())

    assert not await store.collection_exists(name)
    assert await store.read_identity(name) is None
    await store.drop_collection(name)
    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: store.search(Search(name=name, vector=e(1), limit=3, properties=["content"])),
        lambda: store.count(name),
        lambda: store.document_ids(name),
        lambda: store.upsert(name, [chunk(identity, 1, e(1))]),
        lambda: store.delete_document(name, DOC_A),
        lambda: store.delete_ids(name, [cid(1)]),
        lambda: store.set_groups(name, ["hr"]),
        lambda: store.update_document(name, DOC_A, document_name="new.pdf", tags=[], label=None),
    ]
    for call in calls:
        with pytest.raises(InvalidInput) as raised:
            await call()
        assert raised.value.code == "invalid_collection_name"
        assert "at most 63 characters" in raised.value.detail
    [result] = await store.search_many([Search(name=name, vector=e(1), limit=3, properties=[])])
    assert isinstance(result, InvalidInput)
    assert result.code == "invalid_collection_name"


async def test_a_valid_identity_with_too_long_a_name_is_refused_everywhere(provider: Harness) -> None:
    long = make_identity(provider.store, "L" + "x" * 63)  # the identity schema sets no length; pgvector's 63 holds

    for call in (provider.store.create_collection(long, DIM), provider.store.write_identity(long)):
        with pytest.raises(InvalidInput) as raised:
            await call
        assert raised.value.code == "invalid_collection_name"
    assert not await provider.store.collection_exists(long.name)
    longest = make_identity(provider.store, provider.new_name("L" + "x" * 53))
    await provider.store.create_collection(longest, DIM)
    assert len(longest.name) == 63
    assert await provider.store.read_identity(longest.name) == longest.to_dict()
