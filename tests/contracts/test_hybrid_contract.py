"""The lexical and hybrid contract every vector adapter passes (run once per provider through ``provider``).

Hand-made chunks whose keyword order and vector order differ, so that fusion is provably applied: the expected
answers are computed here from first principles — cosine distances of the hand-made vectors, BM25 (Lucene's
variant, k1 0.9, b 0.4) over the shared analyser's terms, weighted reciprocal-rank fusion with k = 60 — not
from the code under test. Scores of engines are float32: compared to 1e-4 relative.
"""

from __future__ import annotations

import math
import uuid
from collections import Counter
from typing import Any

import pytest

from common.errors import InvalidInput
from common.vectors import lexical
from common.vectors.base import RETRIEVAL_MODES, Legs, RetrievalMode, Search, SearchFilter, SearchHit, VectorRecord
from schemas.models import Identity
from tests.contracts.conftest import Harness
from tests.contracts.shared import DIM, DOC_A, DOC_B, chunk, cid, new_collection

RRF_K = 60
QUERY_TEXT = "solar panel efficiency"


def vec(x: float, y: float) -> list[float]:
    """A vector in the plane of ``e(1)`` and ``e(2)``; the query is ``e(1)``, the identity sits at ``e(0)``."""
    vector = [0.0] * DIM
    vector[1], vector[2] = x, y
    return vector


QUERY = vec(1.0, 0.0)
CORPUS: dict[int, tuple[list[float], str]] = {
    # dense order is 1..6 (the angle to e(1) grows); the keyword order is 5, 3, 4, 2, 6 (1 has no query term)
    1: (vec(1.0, 0.1), "weather report for tuesday morning"),
    2: (vec(1.0, 0.4), "panel discussion about the budget"),
    3: (vec(1.0, 0.8), "solar panel efficiency gains measured"),
    4: (vec(1.0, 1.6), "solar efficiency in winter months"),
    5: (vec(0.3, 1.0), "solar panel efficiency: solar panel efficiency"),
    6: (vec(0.1, 1.0), "solar farms"),
}


def cosine_distance(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return 1.0 - dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def bm25(contents: dict[int, str], query: str) -> dict[int, float]:
    """Reference BM25 scores of the chunks holding a query term (Lucene's IDF; a repeated query word counts twice)."""
    terms = {n: lexical.analyse(text) for n, text in contents.items()}
    chunks, avgdl = len(terms), sum(map(len, terms.values())) / len(terms)
    df = Counter(term for found in terms.values() for term in set(found))
    scores = {}
    for n, found in terms.items():
        tf, score = Counter(found), 0.0
        for term, repeats in Counter(lexical.analyse(query)).items():
            if tf[term]:
                idf = math.log(1 + (chunks - df[term] + 0.5) / (df[term] + 0.5))
                score += (
                    repeats
                    * idf
                    * tf[term]
                    / (tf[term] + lexical.K1 * (1 - lexical.B + lexical.B * len(found) / avgdl))
                )
        if score > 0:
            scores[n] = score
    return scores


def ranked(scores: dict[int, float]) -> list[int]:
    return sorted(scores, key=lambda n: (-scores[n], n))


def dense_order(corpus: dict[int, tuple[list[float], str]], query: list[float]) -> list[int]:
    return sorted(corpus, key=lambda n: (cosine_distance(corpus[n][0], query), n))


def fused_order(dense: list[int], keyword: list[int], weight: float) -> tuple[list[int], dict[int, float]]:
    fused = {
        n: (weight / (RRF_K + dense.index(n) + 1) if n in dense else 0.0)
        + ((1 - weight) / (RRF_K + keyword.index(n) + 1) if n in keyword else 0.0)
        for n in {*dense, *keyword}
    }
    return sorted(fused, key=lambda n: (-fused[n], n)), fused


def numbers(hits: list[SearchHit]) -> list[int]:
    return [uuid.UUID(hit.id).int for hit in hits]


def record(
    identity: Identity,
    n: int,
    vector: list[float],
    content: str,
    *,
    document_id: str = DOC_A,
    groups: list[str] | None = None,
    tags: list[str] | None = None,
    label: str | None = None,
) -> VectorRecord:
    written = chunk(identity, n, vector, document_id=document_id, groups=groups, content=content)
    payload: dict[str, Any] = dict(written.payload) if isinstance(written.payload, dict) else {}
    payload |= {"tags": tags or [], "label": label, "document_name": f"doc-{document_id[-1]}.pdf"}
    return VectorRecord(id=written.id, vector=vector, payload=payload)


async def corpus_collection(provider: Harness) -> str:
    identity = await new_collection(provider)
    await provider.store.upsert(
        identity.name, [record(identity, n, vector, text) for n, (vector, text) in CORPUS.items()]
    )
    return identity.name


async def search(
    provider: Harness,
    name: str,
    mode: RetrievalMode,
    *,
    text: str = QUERY_TEXT,
    query: list[float] = QUERY,
    limit: int = 10,
    **kwargs: Any,
) -> list[SearchHit]:
    return await provider.store.search(
        Search(
            name=name, vector=query, limit=limit, properties=["content", "document_id"], text=text, mode=mode, **kwargs
        )
    )


# ----- the legs and their fusion -----


async def test_dense_mode_is_todays_search_and_carries_no_legs(provider: Harness) -> None:
    name = await corpus_collection(provider)

    hits = await search(provider, name, "dense")

    assert numbers(hits) == dense_order(CORPUS, QUERY)
    assert all(hit.legs is None for hit in hits)
    assert [hit.score for hit in hits] == pytest.approx([1 - hit.distance for hit in hits], abs=1e-6)


async def test_lexical_mode_ranks_by_bm25_with_its_scores_and_legs(provider: Harness) -> None:
    name = await corpus_collection(provider)
    expected = bm25({n: text for n, (_, text) in CORPUS.items()}, QUERY_TEXT)

    hits = await search(provider, name, "lexical")

    assert numbers(hits) == ranked(expected) == [5, 3, 4, 2, 6]
    assert [hit.score for hit in hits] == pytest.approx([expected[n] for n in numbers(hits)], rel=1e-4)
    assert [hit.legs for hit in hits] == [
        Legs(dense_rank=None, lexical_rank=rank, lexical_score=hit.score, fused_score=None)
        for rank, hit in enumerate(hits, 1)
    ]
    assert hits[0].payload == {"content": CORPUS[5][1], "document_id": DOC_A}


async def test_a_rare_term_outranks_a_common_one_idf_matters(provider: Harness) -> None:
    """Every chunk is two words long and holds one query word: only IDF tells them apart (ts_rank ties them)."""
    identity = await new_collection(provider)
    contents = {1: "protein zone", 2: "protein field", 3: "aardvark area", 4: "protein site", 5: "protein place"}
    await provider.store.upsert(identity.name, [record(identity, n, vec(1.0, n), t) for n, t in contents.items()])

    hits = await search(provider, identity.name, "lexical", text="protein aardvark")

    assert numbers(hits) == [3, 1, 2, 4, 5]  # the rare word first; equal scores by id
    expected = bm25(contents, "protein aardvark")
    assert hits[0].score == pytest.approx(expected[3], rel=1e-4)
    assert hits[0].score > 2 * hits[1].score
    assert hits[1].score == pytest.approx(hits[4].score, rel=1e-6)


@pytest.mark.parametrize("weight", [0.5, 0.7])
async def test_hybrid_is_the_weighted_rrf_of_both_legs_and_differs_from_each(provider: Harness, weight: float) -> None:
    name = await corpus_collection(provider)
    dense = dense_order(CORPUS, QUERY)
    keyword = ranked(bm25({n: text for n, (_, text) in CORPUS.items()}, QUERY_TEXT))
    expected, fused = fused_order(dense, keyword, weight)

    hits = await search(provider, name, "hybrid", dense_weight=weight)

    assert numbers(hits) == expected
    assert expected not in (dense, keyword)  # fusion is provably applied
    assert [hit.score for hit in hits] == pytest.approx([fused[n] for n in expected], rel=1e-9)
    for hit in hits:
        n = uuid.UUID(hit.id).int
        assert hit.legs is not None
        assert hit.legs.dense_rank == dense.index(n) + 1
        assert hit.legs.lexical_rank == (keyword.index(n) + 1 if n in keyword else None)
        assert hit.legs.fused_score == hit.score
        assert (hit.legs.lexical_score is None) == (n not in keyword)


async def test_hybrid_weight_one_is_the_dense_order_and_zero_puts_the_keyword_order_first(provider: Harness) -> None:
    name = await corpus_collection(provider)

    assert numbers(await search(provider, name, "hybrid", dense_weight=1.0)) == dense_order(CORPUS, QUERY)
    assert numbers(await search(provider, name, "hybrid", dense_weight=0.0)) == [5, 3, 4, 2, 6, 1]


async def test_hybrid_limit_cuts_the_fused_order(provider: Harness) -> None:
    name = await corpus_collection(provider)

    assert numbers(await search(provider, name, "hybrid", limit=2)) == [3, 5]
    assert numbers(await search(provider, name, "lexical", limit=2)) == [5, 3]


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
async def test_distance_is_the_cosine_distance_to_the_query_vector_in_every_mode(
    provider: Harness, mode: RetrievalMode
) -> None:
    name = await corpus_collection(provider)

    hits = await search(provider, name, mode)

    assert hits
    for hit in hits:
        assert hit.distance == pytest.approx(cosine_distance(CORPUS[uuid.UUID(hit.id).int][0], QUERY), abs=1e-6)


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
async def test_max_distance_drops_far_hits_from_the_answer(provider: Harness, mode: RetrievalMode) -> None:
    name = await corpus_collection(provider)
    cut = cosine_distance(CORPUS[4][0], QUERY) + 1e-4  # keeps 1..4

    hits = await search(provider, name, mode, max_distance=cut)
    unfiltered = await search(provider, name, mode)

    assert numbers(hits) == [n for n in numbers(unfiltered) if n <= 4]
    assert all(hit.distance <= cut for hit in hits)


async def test_text_of_stop_words_only_finds_nothing_lexically_and_the_dense_order_in_hybrid(
    provider: Harness,
) -> None:
    name = await corpus_collection(provider)

    assert await search(provider, name, "lexical", text="the and of, to!") == []
    hits = await search(provider, name, "hybrid", text="the and of, to!")
    assert numbers(hits) == dense_order(CORPUS, QUERY)
    assert all(hit.legs is not None and hit.legs.lexical_rank is None for hit in hits)


async def test_words_no_chunk_holds_find_nothing_lexically(provider: Harness) -> None:
    name = await corpus_collection(provider)

    assert await search(provider, name, "lexical", text="xylophone quasar") == []


async def test_the_identity_record_is_never_a_hit_in_any_mode(provider: Harness) -> None:
    identity = await new_collection(provider)
    await provider.store.upsert(identity.name, [record(identity, 1, vec(1.0, 1.0), "MiniLM model notes")])
    at_identity = [1.0] + [0.0] * (DIM - 1)
    words = f"{identity.name} {identity.model} {identity.embeddingProvider} {identity.vectorProvider} MiniLM"

    for mode in RETRIEVAL_MODES:
        hits = await search(provider, identity.name, mode, text=words, query=at_identity)
        assert numbers(hits) == [1], mode


async def test_term_statistics_follow_every_write(provider: Harness) -> None:
    """Document frequencies and the chunk count are the live chunks' after inserts, overwrites, deletes and group
    rewrites: which query word is rarer flips, and the order with it. Every chunk is two words long, so the
    mean length never moves and the scores are exact BM25 at every step."""
    identity = await new_collection(provider)
    store, name, query = provider.store, identity.name, "protein aardvark"
    contents = {1: "protein zone", 2: "aardvark field", 3: "aardvark area", 4: "aardvark site", 5: "protein place"}

    async def write(changes: dict[int, str], document_id: str = DOC_A) -> None:
        await store.upsert(
            name, [record(identity, n, vec(1.0, n), t, document_id=document_id) for n, t in changes.items()]
        )

    async def check(expected_order: list[int]) -> None:
        expected = bm25(contents, query)
        hits = await search(provider, name, "lexical", text=query)
        assert numbers(hits) == ranked(expected) == expected_order
        assert [hit.score for hit in hits] == pytest.approx([expected[n] for n in numbers(hits)], rel=1e-4)

    await write(contents)
    await check([1, 5, 2, 3, 4])  # protein is rarer
    await write({6: "protein field", 7: "protein area"}, DOC_B)
    contents |= {6: "protein field", 7: "protein area"}
    await check([2, 3, 4, 1, 5, 6, 7])  # now aardvark is
    await store.delete_document(name, DOC_B)
    del contents[6], contents[7]
    await check([1, 5, 2, 3, 4])
    await store.delete_ids(name, [cid(5)])
    del contents[5]
    await check([1, 2, 3, 4])
    await write({1: "aardvark zone"})  # an overwrite: protein is gone
    contents[1] = "aardvark zone"
    await check([1, 2, 3, 4])
    await store.set_groups(name, ["hr"])
    await store.update_document(name, DOC_A, document_name="renamed.pdf", tags=["x"], label="y")
    await check([1, 2, 3, 4])


async def test_search_many_answers_every_mode_as_search_does(provider: Harness) -> None:
    name = await corpus_collection(provider)
    searches = [
        Search(name=name, vector=QUERY, limit=4, properties=["content", "document_id"], text=QUERY_TEXT, mode=mode)
        for mode in (*RETRIEVAL_MODES, "dense")
    ]

    results = await provider.store.search_many(searches)

    for found, asked in zip(results, searches, strict=True):
        assert isinstance(found, list)
        alone = await search(provider, name, asked.mode, limit=4)
        # the same hits and ranks; scores to rounding (an in-memory copy and PostgreSQL may sum a chunk's postings
        # in another order, one loaded between the two calls)
        assert [(h.id, _ranks(h)) for h in found] == [(h.id, _ranks(h)) for h in alone]
        assert [x for h in found for x in _scores(h)] == pytest.approx([x for h in alone for x in _scores(h)], rel=1e-9)
        assert [h.score for h in found] == pytest.approx([h.score for h in alone], rel=1e-6)


def _ranks(hit: SearchHit) -> tuple[int | None, int | None] | None:
    return None if hit.legs is None else (hit.legs.dense_rank, hit.legs.lexical_rank)


def _scores(hit: SearchHit) -> tuple[float, float]:
    """A hit's leg scores, 0 where a leg has none (``approx`` compares numbers only)."""
    if hit.legs is None:
        return (0.0, 0.0)
    return (hit.legs.lexical_score or 0.0, hit.legs.fused_score or 0.0)


async def test_an_unknown_mode_or_weight_is_refused(provider: Harness) -> None:
    name = await corpus_collection(provider)

    with pytest.raises(InvalidInput) as mode:
        await search(provider, name, "semantic")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput) as weight:
        await search(provider, name, "hybrid", dense_weight=1.5)

    assert (mode.value.code, weight.value.code) == ("invalid_retrieval_mode", "invalid_dense_weight")


# ----- filters apply in every leg -----
# The chunk both legs rank first is filtered out. Had the filter run after fusion (or after one leg), the best
# allowed chunk would not have rank 1 in both legs.

FILTERED = {
    # n: (vector, content, document, groups, tags, label); 10 is the best match in both legs
    10: (vec(1.0, 0.0), "solar panel efficiency efficiency", DOC_B, ["legal"], ["secret"], "draft"),
    11: (vec(1.0, 0.3), "solar panel efficiency notes", DOC_A, ["hr"], ["policy"], "final"),
    12: (vec(1.0, 0.6), "solar notes", DOC_A, None, ["policy", "hr"], "final"),
    13: (vec(1.0, 0.9), "weather notes", DOC_A, None, [], None),
}


async def filtered_collection(provider: Harness) -> str:
    identity = await new_collection(provider)
    await provider.store.upsert(
        identity.name,
        [
            record(identity, n, v, text, document_id=doc, groups=groups, tags=tags, label=label)
            for n, (v, text, doc, groups, tags, label) in FILTERED.items()
        ],
    )
    return identity.name


@pytest.mark.parametrize(
    ("where", "allowed"),
    [
        (SearchFilter(readable_by=frozenset({"hr"})), [11, 12, 13]),
        (SearchFilter(document_ids=frozenset({DOC_A})), [11, 12, 13]),
        (SearchFilter(tags=frozenset({"policy"})), [11, 12]),
        (SearchFilter(labels=frozenset({"final"})), [11, 12]),
    ],
    ids=["groups", "document_ids", "tags", "labels"],
)
@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
async def test_every_filter_applies_in_every_leg(
    provider: Harness, where: SearchFilter, allowed: list[int], mode: RetrievalMode
) -> None:
    name = await filtered_collection(provider)
    unfiltered = await search(provider, name, mode)
    assert numbers(unfiltered)[0] == 10

    hits = await search(provider, name, mode, where=where)

    # 13 holds no query word: only the dense leg finds it
    assert numbers(hits) == (allowed if mode == "hybrid" else [n for n in allowed if n != 13])
    best = hits[0].legs
    assert best is not None
    assert best.lexical_rank == 1
    assert best.dense_rank == (1 if mode == "hybrid" else None)


async def test_filters_combine_and_an_empty_set_finds_nothing(provider: Harness) -> None:
    name = await filtered_collection(provider)
    both = SearchFilter(tags=frozenset({"policy"}), readable_by=frozenset())

    assert numbers(await search(provider, name, "hybrid", where=both)) == [12]
    for empty in (SearchFilter(tags=frozenset()), SearchFilter(labels=frozenset())):
        for mode in RETRIEVAL_MODES:
            assert await search(provider, name, mode, where=empty) == [], (empty, mode)


async def test_dense_mode_filters_on_tags_and_labels_too(provider: Harness) -> None:
    name = await filtered_collection(provider)

    assert numbers(await search(provider, name, "dense", where=SearchFilter(tags=frozenset({"hr"})))) == [12]
    assert numbers(await search(provider, name, "dense", where=SearchFilter(labels=frozenset({"draft"})))) == [10]


# ----- document metadata on chunks -----


async def test_update_document_sets_name_tags_and_label_on_that_documents_chunks_only(provider: Harness) -> None:
    name = await filtered_collection(provider)
    store = provider.store
    properties = ["document_name", "tags", "label"]

    await store.update_document(name, DOC_A, document_name="Policy 2026.pdf", tags=["new"], label="approved")
    await store.update_document(name, DOC_A, document_name="Policy 2026.pdf", tags=["new"], label="approved")

    tagged = await store.search(
        Search(name=name, vector=QUERY, limit=10, properties=properties, where=SearchFilter(tags=frozenset({"new"})))
    )
    assert numbers(tagged) == [11, 12, 13]
    assert all(
        hit.payload == {"document_name": "Policy 2026.pdf", "tags": ["new"], "label": "approved"} for hit in tagged
    )
    labelled = await search(provider, name, "hybrid", where=SearchFilter(labels=frozenset({"approved"})))
    assert numbers(labelled) == [11, 12, 13]
    assert await search(provider, name, "lexical", where=SearchFilter(tags=frozenset({"policy"}))) == []
    other = await store.search(Search(name=name, vector=QUERY, limit=1, properties=properties))
    assert other[0].payload == {"document_name": "doc-b.pdf", "tags": ["secret"], "label": "draft"}

    await store.update_document(name, DOC_A, document_name="Policy 2026.pdf", tags=[], label=None)
    in_a = SearchFilter(document_ids=frozenset({DOC_A}))
    cleared = await store.search(Search(name=name, vector=QUERY, limit=10, properties=properties, where=in_a))
    assert [(hit.payload.get("tags", []), hit.payload.get("label")) for hit in cleared] == [([], None)] * 3
