"""The chunk capabilities (:class:`~common.vectors.ChunkWriter`, :class:`~common.vectors.ChunkCounter`) every adapter
passes: writing, removing and counting chunks; the identity record stays out of them.
"""

from __future__ import annotations

import msgspec
import pytest

from common.errors import InvalidInput
from common.vectors import (
    IDENTITY_ID,
    ChunkPayload,
    Search,
    SearchFilter,
    VectorRecord,
    identity_vector,
    read_chunk,
)
from schemas import validate
from tests.contracts.conftest import Harness
from tests.contracts.shared import (
    ALL_PROPERTIES,
    DIM,
    DOC_A,
    DOC_B,
    ODD_GROUPS,
    TEXT_PAYLOAD_RS,
    chunk,
    cid,
    e,
    ids_found,
    new_collection,
)


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
