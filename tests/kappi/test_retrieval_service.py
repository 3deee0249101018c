"""Kappi's retrieval layer alone: the access decision per assigned collection, its explanation, and how the hits
of several collections and stores become one list of passages (merged by score, de-duplicated, limited per
assignment), an outage told apart from an empty answer. Real stores (Qdrant local mode, pgvector) and the real
query embedder; scores are known in advance (:class:`~tests.kappi.conftest.Shelf`)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from common.embedders.base import EmbedderRegistry
from common.errors import Unavailable
from common.rerankers import RerankerRegistry, default_rerankers
from common.vectors.base import IDENTITY_ID, Search, SearchFilter, SearchHit, SearchResult
from common.vectors.pgvector import PgVectorStore, table_of
from common.vectors.registry import VectorRegistry
from kappi.access.identities import IdentityReader, IdentityStatus
from kappi.access.policy import Reason
from kappi.agent.models import Assignment
from kappi.retrieval.service import (
    QueryVectors,
    RerankChoice,
    RetrievedChunk,
    Retriever,
    Searchable,
    _merged_by_rank,
    _of_model,
    by_document,
    decide,
    narrowed,
)
from schemas.models import Identity
from tests.common.rerankers.standin import running_rerank_standin, standin_order, standin_relevance
from tests.kappi.conftest import EMBEDDER, QUESTION, Placed, Shelf, assignment
from tests.support.cohere_standin import CohereStandIn


def _retriever(vectors: VectorRegistry, embedders: EmbedderRegistry, *, ttl: float = 0) -> Retriever:
    return Retriever(IdentityReader(vectors, ttl_seconds=ttl), vectors, QueryVectors(embedders))


def _found(chunks: Sequence[RetrievedChunk]) -> list[tuple[str, str, float]]:
    return [(c.collection, c.text, round(c.score, 4)) for c in chunks]


def _pgvector(vectors: VectorRegistry) -> PgVectorStore:
    store = vectors.get("pgvector")
    assert isinstance(store, PgVectorStore)
    return store


# decide() and verdicts()


def _identity(groups: Sequence[str] = (), *, collection_id: str = "c-1") -> Identity:
    return Identity(
        collection_id=collection_id,
        name="Handbook",
        model=EMBEDDER[1],
        vectorProvider="qdrant",
        embeddingProvider=EMBEDDER[0],
        groups=list(groups) or msgspec.UNSET,
    )


ASSIGNED = Assignment(
    vector_provider="qdrant",
    name="Handbook",
    collection_id="c-1",
    top_k=5,
    max_distance=None,
    instruction="",
    created_at=datetime(2025, 1, 1, tzinfo=UTC),
)


@pytest.mark.parametrize(
    ("status", "user_groups", "reason"),
    [
        pytest.param(IdentityStatus(identity=_identity()), {"hr"}, "public", id="public"),
        pytest.param(IdentityStatus(identity=_identity(["hr", "legal"])), {"legal", "eng"}, "member", id="member"),
        pytest.param(IdentityStatus(identity=_identity(["hr"])), {"HR"}, "not_a_member", id="not_a_member-exact-case"),
        pytest.param(IdentityStatus(identity=_identity(["hr"])), set(), "not_a_member", id="not_a_member-no-groups"),
        pytest.param(
            IdentityStatus(identity=None, problem="identity_missing"), {"hr"}, "identity_missing", id="identity_missing"
        ),
        pytest.param(IdentityStatus(identity=None), {"hr"}, "identity_missing", id="identity_missing-unexplained"),
        pytest.param(
            IdentityStatus(identity=None, problem="identity_invalid"), {"hr"}, "identity_invalid", id="identity_invalid"
        ),
        pytest.param(
            IdentityStatus(identity=None, problem="provider_mismatch"), {"hr"}, "provider_mismatch", id="mismatch"
        ),
        pytest.param(
            IdentityStatus(identity=None, problem="provider_unavailable"), {"hr"}, "provider_unavailable", id="down"
        ),
        pytest.param(
            IdentityStatus(identity=_identity(["hr"], collection_id="c-2")),
            {"hr"},
            "collection_replaced",
            id="collection_replaced-even-for-a-member",
        ),
        pytest.param(
            IdentityStatus(identity=_identity(collection_id="c-2")),
            set(),
            "collection_replaced",
            id="collection_replaced-even-when-public",
        ),
    ],
)
def test_decide_gives_the_reason_for_each_kind_of_collection(
    status: IdentityStatus, user_groups: set[str], reason: Reason
) -> None:
    assert decide(ASSIGNED, status, frozenset(user_groups)) == reason


async def test_verdicts_explain_each_reason_in_words_and_match_decide_and_retrieve(
    shelf: Shelf, vectors: VectorRegistry, embedders: EmbedderRegistry
) -> None:
    groups = frozenset({"hr", "eng"})
    public = await shelf.collection(chunks=[Placed(score=0.9, content="public")])
    member = await shelf.collection(groups=["hr", "legal"], chunks=[Placed(score=0.8, content="member")])
    outsider = await shelf.collection(groups=["finance"], chunks=[Placed(score=0.7, content="outsider")])
    replaced = await shelf.collection()
    await vectors.get("qdrant").drop_collection(replaced.name)
    await shelf.collection(name=replaced.name, chunks=[Placed(score=0.6, content="a new collection")])
    invalid = await shelf.collection("pgvector")
    async with _pgvector(vectors).pool.acquire() as conn:
        await conn.execute(
            f"UPDATE {table_of(invalid.name)} SET payload = payload || jsonb_build_object('model', 7) WHERE id = $1",
            uuid.UUID(IDENTITY_ID),
        )
    mismatched = msgspec.structs.replace(public, name=f"Other_{uuid.uuid4().hex[:8]}", vectorProvider="pgvector")
    await vectors.get("qdrant").create_collection(mismatched, 384)
    identities = [public, member, outsider, replaced, invalid]
    assignments = [
        *(assignment(i) for i in identities),
        msgspec.structs.replace(assignment(mismatched), vector_provider="qdrant"),
        msgspec.structs.replace(assignment(public), name="Nowhere"),
        msgspec.structs.replace(assignment(public), vector_provider="weaviate"),  # not configured here
    ]
    retriever = _retriever(vectors, embedders)

    verdicts = await retriever.verdicts(assignments, groups)

    explained = [(v.reason, v.searchable, v.detail, v.matched_groups, v.collection_groups) for v, _ in verdicts]
    assert explained[:4] == [
        ("public", True, "the collection has no groups", [], []),
        ("member", True, "member of hr", ["hr"], ["hr", "legal"]),
        ("not_a_member", False, "the collection is restricted to groups these groups do not include", [], ["finance"]),
        ("collection_replaced", False, "a different collection now has this name; reassign it to search it", [], None),
    ]
    assert [(reason, searchable, matched, shown) for reason, searchable, _, matched, shown in explained[4:]] == [
        ("identity_invalid", False, [], None),
        ("provider_mismatch", False, [], None),
        ("identity_missing", False, [], None),
        ("provider_unavailable", False, [], None),
    ]
    details = [detail for _, _, detail, _, _ in explained[4:]]
    assert "/model" in details[0]
    assert details[1:3] == ["identity names vectorProvider 'pgvector'", "no identity record"]
    assert "weaviate" in details[3]
    assert [(v.vector_provider, v.collection) for v, _ in verdicts] == [
        (a.vector_provider, a.name) for a in assignments
    ]
    assert [s is not None for _, s in verdicts] == [True, True, True, False, False, False, False, False]

    statuses = await IdentityReader(vectors).read_live([(a.vector_provider, a.name) for a in assignments])
    decided = [decide(a, s, groups) for a, s in zip(assignments, statuses, strict=True)]
    assert [v.reason for v, _ in verdicts] == decided
    retrieval = await retriever.retrieve(assignments, groups, QUESTION)
    assert [c.text for c in retrieval.chunks] == ["public", "member"]
    assert retrieval.collections_searched == 2


# retrieve()


async def test_hits_of_collections_in_several_stores_are_merged_by_score(
    shelf: Shelf, vectors: VectorRegistry, embedders: EmbedderRegistry
) -> None:
    handbook = await shelf.collection(chunks=[Placed(score=0.9, content="a-high"), Placed(score=0.5, content="a-low")])
    policies = await shelf.collection(
        "pgvector", groups=["hr"], chunks=[Placed(score=0.7, content="b-high"), Placed(score=0.3, content="b-low")]
    )

    retrieval = await _retriever(vectors, embedders).retrieve(
        [assignment(handbook), assignment(policies)], frozenset({"hr"}), QUESTION
    )

    assert _found(retrieval.chunks) == [
        (handbook.name, "a-high", 0.9),
        (policies.name, "b-high", 0.7),
        (handbook.name, "a-low", 0.5),
        (policies.name, "b-low", 0.3),
    ]
    assert [c.vector_provider for c in retrieval.chunks] == ["qdrant", "pgvector", "qdrant", "pgvector"]
    assert [c.instruction for c in retrieval.chunks[:2]] == [f"{handbook.name} notes", f"{policies.name} notes"]
    assert [c.distance for c in retrieval.chunks] == pytest.approx([0.1, 0.3, 0.5, 0.7], abs=1e-4)
    assert retrieval.collections_searched == 2


async def test_a_document_found_through_two_collections_is_one_passage_at_its_best_score(
    shelf: Shelf, vectors: VectorRegistry, embedders: EmbedderRegistry
) -> None:
    shared = str(uuid.uuid4())
    first = await shelf.collection(
        chunks=[
            Placed(score=0.6, content="Garage B is for everyone.", document_id=shared),
            Placed(score=0.7, content="Bicycles go in the courtyard."),
        ]
    )
    second = await shelf.collection(chunks=[Placed(score=0.8, content="Garage B is for everyone.", document_id=shared)])

    retrieval = await _retriever(vectors, embedders).retrieve(
        [assignment(first), assignment(second)], frozenset(), QUESTION
    )

    assert _found(retrieval.chunks) == [
        (second.name, "Garage B is for everyone.", 0.8),
        (first.name, "Bicycles go in the courtyard.", 0.7),
    ]


async def test_children_of_one_parent_are_one_passage_that_reads_the_parent(
    shelf: Shelf, vectors: VectorRegistry, embedders: EmbedderRegistry
) -> None:
    document = str(uuid.uuid4())
    handbook = await shelf.collection(
        chunks=[
            Placed(score=0.8, content="child one", document_id=document, parent_content="Parent one."),
            Placed(score=0.6, content="child two", document_id=document, parent_content="Parent one."),
            Placed(score=0.7, content="child three", document_id=document, parent_content="Parent two."),
            Placed(score=0.5, content="a plain chunk", document_id=document),
        ]
    )

    retrieval = await _retriever(vectors, embedders).retrieve([assignment(handbook)], frozenset(), QUESTION)

    assert [(c.text, c.context, round(c.score, 4)) for c in retrieval.chunks] == [
        ("child one", "Parent one.", 0.8),
        ("child three", "Parent two.", 0.7),
        ("a plain chunk", "a plain chunk", 0.5),
    ]


async def test_top_k_and_max_distance_apply_to_each_assignment_alone(
    shelf: Shelf, vectors: VectorRegistry, embedders: EmbedderRegistry
) -> None:
    few = await shelf.collection(chunks=[Placed(score=s, content=f"few {s}") for s in (0.9, 0.8, 0.7)])
    near = await shelf.collection(chunks=[Placed(score=s, content=f"near {s}") for s in (0.85, 0.75, 0.5)])

    retrieval = await _retriever(vectors, embedders).retrieve(
        [assignment(few, top_k=1), assignment(near, top_k=5, max_distance=0.3)], frozenset(), QUESTION
    )

    assert _found(retrieval.chunks) == [
        (few.name, "few 0.9", 0.9),
        (near.name, "near 0.85", 0.85),
        (near.name, "near 0.75", 0.75),
    ]


async def test_nothing_the_user_may_search_is_an_empty_retrieval_not_an_outage(
    shelf: Shelf, vectors: VectorRegistry, embedders: EmbedderRegistry
) -> None:
    restricted = await shelf.collection(groups=["finance"], chunks=[Placed(score=0.9, content="salaries")])
    missing = msgspec.structs.replace(assignment(restricted), name="Nowhere")

    retrieval = await _retriever(vectors, embedders).retrieve(
        [assignment(restricted), missing], frozenset({"hr"}), QUESTION
    )

    assert (retrieval.chunks, retrieval.collections_searched) == ([], 0)


async def test_a_collection_dropped_mid_question_contributes_nothing_and_fails_nothing(
    shelf: Shelf, vectors: VectorRegistry, embedders: EmbedderRegistry
) -> None:
    """Its identity was read (and cached) just before it went: its search fails alone."""
    kept = await shelf.collection(chunks=[Placed(score=0.9, content="kept")])
    dropped = await shelf.collection(chunks=[Placed(score=0.95, content="dropped")])
    retriever = _retriever(vectors, embedders, ttl=60)
    await retriever.identities.read_many([("qdrant", kept.name), ("qdrant", dropped.name)])
    await vectors.get("qdrant").drop_collection(dropped.name)

    retrieval = await retriever.retrieve([assignment(kept), assignment(dropped)], frozenset(), QUESTION)

    assert _found(retrieval.chunks) == [(kept.name, "kept", 0.9)]
    assert retrieval.collections_searched == 2


def _down() -> Unavailable:
    return Unavailable("PostgreSQL is unreachable", code="vector_store_unavailable")


class PgVectorUnreachable(PgVectorStore):
    """The real pgvector adapter with PostgreSQL out of reach: it raises what the adapter raises then. No remote
    service is imitated, only the failure."""

    async def read_identity(self, name: str) -> dict[str, Any] | None:
        raise _down()

    async def search_many(self, searches: Sequence[Search]) -> list[SearchResult]:
        raise _down()


class PgVectorSearchesDown(PgVectorStore):
    """The real pgvector adapter whose database went away after the identities were read."""

    async def search_many(self, searches: Sequence[Search]) -> list[SearchResult]:
        raise _down()


class PgVectorEachSearchUnavailable(PgVectorStore):
    """The real pgvector adapter answering each search of the batch with Unavailable (each one-by-one search lost
    its connection)."""

    async def search_many(self, searches: Sequence[Search]) -> list[SearchResult]:
        return [_down() for _ in searches]


OUTAGES = ["unknown-provider", "identity-reads-down", "searches-down", "each-search-unavailable"]


async def _down_store(outage: str, shelf: Shelf, vectors: VectorRegistry) -> tuple[VectorRegistry, Assignment]:
    """The registry with one store down in the way named, and an assignment of a public collection in it."""
    identity = await shelf.collection("pgvector", chunks=[Placed(score=0.95, content="unreachable")])
    broken = {
        "identity-reads-down": PgVectorUnreachable,
        "searches-down": PgVectorSearchesDown,
        "each-search-unavailable": PgVectorEachSearchUnavailable,
    }
    if outage == "unknown-provider":
        return vectors, msgspec.structs.replace(assignment(identity), vector_provider="weaviate")
    return vectors.replacing("pgvector", broken[outage](_pgvector(vectors).pool)), assignment(identity)


@pytest.mark.parametrize("outage", OUTAGES)
async def test_a_question_no_store_can_answer_is_vector_store_unavailable(
    outage: str, shelf: Shelf, vectors: VectorRegistry, embedders: EmbedderRegistry
) -> None:
    """An answer from no sources would read like "the documents do not say": it is an error instead."""
    registry, down = await _down_store(outage, shelf, vectors)

    with pytest.raises(Unavailable) as raised:
        await _retriever(registry, embedders).retrieve([down], frozenset(), QUESTION)

    assert raised.value.code == "vector_store_unavailable"


@pytest.mark.parametrize("outage", OUTAGES)
async def test_a_partial_outage_answers_from_the_stores_that_are_up(
    outage: str, shelf: Shelf, vectors: VectorRegistry, embedders: EmbedderRegistry
) -> None:
    registry, down = await _down_store(outage, shelf, vectors)
    up = await shelf.collection(chunks=[Placed(score=0.9, content="reachable")])

    retrieval = await _retriever(registry, embedders).retrieve([down, assignment(up)], frozenset(), QUESTION)

    assert _found(retrieval.chunks) == [(up.name, "reachable", 0.9)]


@pytest.mark.parametrize("outage", OUTAGES[1:])
async def test_a_store_that_fails_a_question_says_so_in_the_log_with_its_code(
    outage: str, shelf: Shelf, vectors: VectorRegistry, embedders: EmbedderRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    """The question is still answered from the stores that are up; the operator learns why one gave nothing."""
    registry, down = await _down_store(outage, shelf, vectors)
    up = await shelf.collection(chunks=[Placed(score=0.9, content="reachable")])

    with caplog.at_level(logging.INFO, logger="kappi"):
        await _retriever(registry, embedders).retrieve([down, assignment(up)], frozenset(), QUESTION)

    said = [r.getMessage() for r in caplog.records if r.name.startswith("kappi.")]
    assert any("pgvector" in line and "vector_store_unavailable" in line for line in said), said


# retrieval modes, filters, merging across modes, reranking


class RecordingPgVector(PgVectorStore):
    """The real pgvector adapter, noting every search it is asked for."""

    seen: list[Search]

    async def search_many(self, searches: Sequence[Search]) -> list[SearchResult]:
        self.seen.extend(searches)
        return await super().search_many(searches)


async def test_each_search_carries_the_question_its_assignments_mode_weight_and_filters_and_the_access_filter(
    shelf: Shelf, vectors: VectorRegistry, embedders: EmbedderRegistry
) -> None:
    recording = RecordingPgVector(_pgvector(vectors).pool)
    recording.seen = []
    registry = vectors.replacing("pgvector", recording)
    plain = await shelf.collection("pgvector", chunks=[Placed(score=0.9, content="plain")])
    tagged = await shelf.collection("pgvector", groups=["hr"], chunks=[Placed(score=0.8, content="tagged")])
    assignments = [
        assignment(plain),
        msgspec.structs.replace(
            assignment(tagged), mode="hybrid", dense_weight=0.7, tags=["policy"], labels=["final", "draft"]
        ),
    ]

    await _retriever(registry, embedders).retrieve(assignments, frozenset({"hr", "eng"}), QUESTION)

    searched = {s.name: s for s in recording.seen}
    assert (searched[plain.name].mode, searched[plain.name].text) == ("dense", QUESTION)
    assert searched[plain.name].where == SearchFilter(readable_by=frozenset({"hr", "eng"}))
    hybrid = searched[tagged.name]
    assert (hybrid.mode, hybrid.dense_weight, hybrid.text) == ("hybrid", 0.7, QUESTION)
    assert hybrid.where == SearchFilter(
        readable_by=frozenset({"hr", "eng"}),
        ungrouped_readable=False,  # its identity has groups: a chunk without their copy is no one's
        tags=frozenset({"policy"}),
        labels=frozenset({"final", "draft"}),
    )


@pytest.mark.parametrize("provider", ["qdrant", "pgvector"])
async def test_an_assignments_tags_and_labels_keep_only_the_documents_they_name(
    provider: str, shelf: Shelf, vectors: VectorRegistry, embedders: EmbedderRegistry
) -> None:
    handbook = await shelf.collection(
        provider,
        chunks=[
            Placed(score=0.9, content="untagged"),
            Placed(score=0.8, content="policy final", tags=["policy", "hr"], label="final"),
            Placed(score=0.7, content="policy draft", tags=["policy"], label="draft"),
            Placed(score=0.6, content="faq final", tags=["faq"], label="final"),
        ],
    )
    retriever = _retriever(vectors, embedders)

    async def found(**filters: Any) -> list[str]:
        retrieval = await retriever.retrieve(
            [msgspec.structs.replace(assignment(handbook), **filters)], frozenset(), QUESTION
        )
        return [c.text for c in retrieval.chunks]

    assert await found() == ["untagged", "policy final", "policy draft", "faq final"]
    assert await found(tags=["policy"]) == ["policy final", "policy draft"]
    assert await found(tags=["policy", "faq"], labels=["final"]) == ["policy final", "faq final"]
    assert await found(labels=["draft"], mode="hybrid") == ["policy draft"]
    assert await found(tags=[]) == []  # a request's filters narrowed to nothing in common


@pytest.mark.parametrize("provider", ["qdrant", "pgvector"])
async def test_hybrid_finds_by_its_words_what_dense_ranks_low_and_says_which_leg_found_what(
    provider: str, shelf: Shelf, vectors: VectorRegistry, embedders: EmbedderRegistry
) -> None:
    handbook = await shelf.collection(
        provider,
        chunks=[
            Placed(score=0.9, content="The cafeteria opens at eight."),
            Placed(score=0.5, content="Parking is free on weekends."),
            Placed(score=0.2, content="Employees get thirty vacation days."),
        ],
    )
    retriever = _retriever(vectors, embedders)

    async def retrieved(mode: str) -> list[RetrievedChunk]:
        searched = msgspec.structs.replace(assignment(handbook), mode=mode, dense_weight=0.5)
        return (await retriever.retrieve([searched], frozenset(), QUESTION)).chunks

    dense, lexical, hybrid = await retrieved("dense"), await retrieved("lexical"), await retrieved("hybrid")

    assert [c.text for c in dense] == [
        "The cafeteria opens at eight.",
        "Parking is free on weekends.",
        "Employees get thirty vacation days.",
    ]
    assert all(c.legs is None for c in dense)  # the hot path builds nothing extra
    assert [c.text for c in lexical] == ["Employees get thirty vacation days."]
    assert lexical[0].distance == pytest.approx(0.8, abs=1e-4)  # a cosine distance in every mode
    assert hybrid[0].text == "Employees get thirty vacation days."
    legs = {c.text: c.legs for c in hybrid}
    words = legs["Employees get thirty vacation days."]
    assert words is not None
    assert (words.dense_rank, words.lexical_rank) == (3, 1)
    assert words.fused_score == pytest.approx(hybrid[0].score)
    cafeteria = legs["The cafeteria opens at eight."]
    assert cafeteria is not None
    assert (cafeteria.dense_rank, cafeteria.lexical_rank) == (1, None)


def _chunk_of(collection: str, score: float, text: str) -> RetrievedChunk:
    return RetrievedChunk(
        vector_provider="qdrant",
        collection=collection,
        instruction="",
        document_id=text,
        document_name=None,
        page_start=None,
        page_end=None,
        text=text,
        context=text,
        score=score,
        distance=0.5,
    )


def test_passages_of_searches_in_different_modes_merge_by_their_rank_in_their_collection() -> None:
    """A BM25 score of 7 is not better than a cosine of 0.9: scores of different modes do not compare."""
    lexical = [_chunk_of("Words", 7.0, "w1"), _chunk_of("Words", 3.0, "w2"), _chunk_of("Words", 2.0, "w3")]
    dense = [_chunk_of("Meaning", 0.9, "m1"), _chunk_of("Meaning", 0.8, "m2")]

    merged = _merged_by_rank([[*lexical, *dense]])

    assert [c.text for c in merged] == ["w1", "m1", "w2", "m2", "w3"]


async def test_mixed_modes_are_merged_by_rank_through_retrieve(
    shelf: Shelf, vectors: VectorRegistry, embedders: EmbedderRegistry
) -> None:
    words = await shelf.collection(
        chunks=[Placed(score=0.1, content="vacation days"), Placed(score=0.1, content="employees vacation")]
    )
    meaning = await shelf.collection(chunks=[Placed(score=0.9, content="m-high"), Placed(score=0.8, content="m-low")])
    assignments = [msgspec.structs.replace(assignment(words), mode="lexical"), assignment(meaning)]

    retrieval = await _retriever(vectors, embedders).retrieve(assignments, frozenset(), QUESTION)

    assert [c.collection for c in retrieval.chunks] == [words.name, meaning.name, words.name, meaning.name]


def test_a_requests_filters_narrow_an_assignments_never_widen_them() -> None:
    own = msgspec.structs.replace(ASSIGNED, tags=["policy", "hr"], labels=None, top_k=5)
    free = msgspec.structs.replace(ASSIGNED, tags=None, labels=["final"], top_k=20)

    kept, opened = narrowed([own, free], tags=["hr", "faq"], labels=["final", "draft"], depth=10)

    assert (kept.tags, kept.labels, kept.top_k) == (["hr"], ["draft", "final"], 10)
    assert (opened.tags, opened.labels, opened.top_k) == (["faq", "hr"], ["final"], 20)
    (disjoint,) = narrowed([own], tags=["faq"])
    assert disjoint.tags == []  # nothing in common: the collection matches nothing
    assert narrowed([own, free]) == [own, free]


def test_by_document_keeps_each_documents_best_passage_with_its_count() -> None:
    chunks = [_chunk_of("C", 0.9, "a"), _chunk_of("C", 0.8, "b"), _chunk_of("C", 0.7, "c")]
    chunks[2] = msgspec.structs.replace(chunks[2], document_id="a")

    grouped = by_document(chunks)

    assert [(c.text, n) for c, n in grouped] == [("a", 2), ("b", 1)]


def _hit(text: str, **payload: Any) -> SearchHit:
    return SearchHit(id=text, score=0.9, distance=0.1, payload={"content": text, "document_id": "d1", **payload})


@pytest.mark.parametrize(
    ("payload", "taken"),
    [
        pytest.param({"model": EMBEDDER[1], "embeddingProvider": EMBEDDER[0]}, True, id="the-identitys-model"),
        pytest.param({}, True, id="no-model-another-applications-chunk"),
        pytest.param({"model": 7, "embeddingProvider": ["x"]}, True, id="odd-values-read-as-absent"),
        pytest.param({"model": None}, True, id="null-reads-as-absent"),
        pytest.param({"model": "all-mpnet-base-v2"}, False, id="another-model"),
        pytest.param({"model": EMBEDDER[1], "embeddingProvider": "openai"}, False, id="another-provider"),
        pytest.param({"model": ""}, False, id="an-empty-model-is-a-model"),
    ],
)
def test_a_collections_hits_are_its_identitys_version_unless_one_names_another_model(
    payload: dict[str, Any], taken: bool
) -> None:
    """Re-embedding: hits of another model than the identity read (a migration's swap between the read and the
    search) make the whole collection's answer stale (``None``), which retrieve asks again; the model is read
    typed, as every other property of the hit."""
    searched = Searchable(assignment=ASSIGNED, identity=_identity())

    found = _of_model(searched, [_hit("Leave is 25 days.", model=EMBEDDER[1]), _hit("Carry over 5.", **payload)])

    if taken:
        assert found is not None
        assert [(c.collection, c.text, c.document_id) for c in found] == [
            ("Handbook", "Leave is 25 days.", "d1"),
            ("Handbook", "Carry over 5.", "d1"),
        ]
    else:
        assert found is None


RERANK_KEY = "retrieval-rerank-key"


@pytest.fixture
def rerank_standin() -> Iterator[CohereStandIn]:
    with running_rerank_standin(api_key=RERANK_KEY) as standin:
        yield standin


@pytest.fixture
async def rerankers(rerank_standin: CohereStandIn) -> AsyncIterator[RerankerRegistry]:
    registry = default_rerankers(cohere_api_key=RERANK_KEY, cohere_base_url=rerank_standin.base_url)
    yield registry
    await registry.aclose()


async def _reranking(
    shelf: Shelf, vectors: VectorRegistry, embedders: EmbedderRegistry, rerankers: RerankerRegistry
) -> tuple[Retriever, list[Assignment], list[str]]:
    texts = ["The cafeteria opens at eight.", "vacation days", "How many vacation days do employees get? Thirty."]
    handbook = await shelf.collection(
        chunks=[Placed(score=s, content=t) for s, t in zip((0.9, 0.8, 0.7), texts, strict=True)]
    )
    retriever = Retriever(
        IdentityReader(vectors, ttl_seconds=0),
        vectors,
        QueryVectors(embedders),
        rerankers=rerankers,
    )
    return retriever, [assignment(handbook)], texts


async def test_the_agents_reranker_reorders_the_merged_passages_standin(
    rerank_standin: CohereStandIn,
    rerankers: RerankerRegistry,
    shelf: Shelf,
    vectors: VectorRegistry,
    embedders: EmbedderRegistry,
) -> None:
    retriever, assignments, texts = await _reranking(shelf, vectors, embedders, rerankers)

    retrieval = await retriever.retrieve(assignments, frozenset(), QUESTION, rerank=RERANK)

    order = standin_order(QUESTION, texts)
    assert order != [0, 1, 2]
    assert [c.text for c in retrieval.chunks] == [texts[i] for i in order]
    assert [c.rerank_score for c in retrieval.chunks] == [standin_relevance(QUESTION, texts[i]) for i in order]
    assert [round(c.score, 4) for c in retrieval.chunks] == [(0.9, 0.8, 0.7)[i] for i in order]  # retrieval's own
    assert retrieval.reranked is True
    (sent,) = rerank_standin.requests
    assert (sent.body["query"], sent.body["documents"], sent.body["model"]) == (QUESTION, texts, "rerank-v3.5")


async def test_a_reranker_that_is_down_leaves_retrievals_order_and_says_so_standin(
    rerank_standin: CohereStandIn,
    rerankers: RerankerRegistry,
    shelf: Shelf,
    vectors: VectorRegistry,
    embedders: EmbedderRegistry,
) -> None:
    retriever, assignments, texts = await _reranking(shelf, vectors, embedders, rerankers)
    rerank_standin.fail_next(503)

    retrieval = await retriever.retrieve(assignments, frozenset(), QUESTION, rerank=RERANK)

    assert [c.text for c in retrieval.chunks] == texts
    assert [c.rerank_score for c in retrieval.chunks] == [None, None, None]
    assert retrieval.reranked is False
    no_reranker = await retriever.retrieve(assignments, frozenset(), QUESTION)
    assert no_reranker.reranked is None
    gone = await retriever.retrieve(
        assignments, frozenset(), QUESTION, rerank=RerankChoice(provider="jina", model="m")
    )  # named when the agent was saved, not configured here any more
    assert ([c.text for c in gone.chunks], gone.reranked) == (texts, False)


RERANK = RerankChoice(provider="cohere", model="rerank-v3.5")
