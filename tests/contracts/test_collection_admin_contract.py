"""The collection-admin capability (:class:`~common.vectors.CollectionAdmin`) every adapter passes: identity records,
groups, listing and dropping collections.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import pytest

from common.errors import Conflict, InvalidInput, NotFound
from common.vectors import (
    Search,
    SearchFilter,
)
from schemas import validate
from schemas.models import parse_identity
from tests.contracts.conftest import Harness
from tests.contracts.shared import (
    ALL_PROPERTIES,
    DIM,
    DOC_A,
    IDENTITY_RS,
    UncheckedIdentity,
    chunk,
    cid,
    e,
    grouped_collection,
    ids_found,
    make_identity,
    new_collection,
)


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
