"""The search capability (:class:`~common.vectors.Searcher`) every adapter passes, dense mode and filters (the
lexical and hybrid modes: ``test_hybrid_contract``).
"""

from __future__ import annotations

import math

import msgspec
import pytest

from common.errors import NotFound
from common.vectors import (
    Search,
    SearchFilter,
)
from tests.contracts.conftest import Harness
from tests.contracts.shared import (
    DOC_A,
    DOC_B,
    ODD_GROUPS,
    add,
    chunk,
    cid,
    e,
    grouped_collection,
    ids_found,
    new_collection,
    same_hits,
)


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
