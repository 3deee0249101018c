"""Per-document fusion (``Search.fusion = "document"``) in every vector adapter (run once per provider).

A hand-made case whose answer is computed here from first principles (cosine, BM25, weighted RRF of each chunk's
document's best ranks), and randomised collections where each engine's hybrid answer must be
:func:`common.vectors.fusion.fuse` of its own dense and lexical answers: pgvector fuses in SQL, the others in
Python, so all of them fuse alike.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from typing import Any

import numpy as np
import pytest

from common.errors import InvalidInput
from common.vectors.base import Fusion, Search, SearchHit, VectorRecord
from common.vectors.fusion import fuse, leg_depth
from common.vectors.resident import ResidentVectors
from tests.contracts.conftest import Harness
from tests.contracts.shared import DIM, DOC_A, DOC_B, chunk, new_collection
from tests.contracts.test_hybrid_contract import (
    CORPUS,
    QUERY,
    QUERY_TEXT,
    RRF_K,
    bm25,
    dense_order,
    fused_order,
    numbers,
    ranked,
    record,
)

DOCUMENT_OF = {1: DOC_A, 5: DOC_A, 2: DOC_B, 3: DOC_B, 4: DOC_B, 6: DOC_B}
"""Chunk 1 is the dense leg's best, chunk 5 the keyword leg's: both in DOC_A, which per document has both ranks 1."""
WORDS = ["solar", "panel", "wind", "turbine", "grid", "battery", "storage", "voltage", "the", "of"]


def rrf(weight: float, dense: int | None, lexical: int | None) -> float:
    return (weight / (RRF_K + dense) if dense else 0.0) + ((1 - weight) / (RRF_K + lexical) if lexical else 0.0)


def document_fused(
    dense: list[int], keyword: list[int], document_of: dict[int, str], weight: float, *, lead_only: bool = False
) -> tuple[list[int], dict[int, float]]:
    """The reference: each chunk (``lead_only``: each document's best chunk by its own score, the others keeping
    theirs) scored with its document's best rank in each leg; ties by its own score, then id."""
    best: dict[tuple[str, str], int] = {}
    for leg, order in (("dense", dense), ("keyword", keyword)):
        for rank, n in enumerate(order, 1):
            best.setdefault((leg, document_of[n]), rank)
    found = {*dense, *keyword}
    score = {n: rrf(weight, best.get(("dense", document_of[n])), best.get(("keyword", document_of[n]))) for n in found}
    own = {
        n: rrf(weight, dense.index(n) + 1 if n in dense else None, keyword.index(n) + 1 if n in keyword else None)
        for n in found
    }
    if lead_only:
        leads = {document_of[n]: n for n in sorted(found, key=lambda n: (own[n], -n))}  # the last written wins
        score = {n: score[n] if leads[document_of[n]] == n else own[n] for n in found}
    return sorted(found, key=lambda n: (-score[n], -own[n], n)), score


async def hand_made_collection(provider: Harness) -> str:
    identity = await new_collection(provider)
    records = [record(identity, n, vector, text, document_id=DOCUMENT_OF[n]) for n, (vector, text) in CORPUS.items()]
    await provider.store.upsert(identity.name, records)
    return identity.name


def hybrid(name: str, query: list[float], text: str, *, limit: int = 10, **kwargs: Any) -> Search:
    return Search(name=name, vector=query, limit=limit, properties=["content"], text=text, mode="hybrid", **kwargs)


@pytest.mark.parametrize(("fusion", "order"), [("document", [5, 1, 3, 2, 4, 6]), ("document_lead", [5, 3, 2, 4, 6, 1])])
@pytest.mark.parametrize("weight", [0.4, 0.5])
async def test_per_document_fusion_credits_each_chunk_with_its_documents_best_ranks(
    provider: Harness, weight: float, fusion: Fusion, order: list[int]
) -> None:
    name = await hand_made_collection(provider)
    dense = dense_order(CORPUS, QUERY)
    keyword = ranked(bm25({n: text for n, (_, text) in CORPUS.items()}, QUERY_TEXT))
    expected, score = document_fused(dense, keyword, DOCUMENT_OF, weight, lead_only=fusion == "document_lead")

    hits = await provider.store.search(hybrid(name, QUERY, QUERY_TEXT, dense_weight=weight, fusion=fusion))

    assert numbers(hits) == expected == order
    assert expected != fused_order(dense, keyword, weight)[0]  # what fusing per document changes
    assert [hit.score for hit in hits] == pytest.approx([score[n] for n in expected], rel=1e-9)
    for hit in hits:
        n = uuid.UUID(hit.id).int
        assert hit.legs is not None
        assert (hit.legs.dense_rank, hit.legs.lexical_rank) == (
            dense.index(n) + 1,
            keyword.index(n) + 1 if n in keyword else None,
        )  # the chunk's own ranks
        assert hit.legs.fused_score == hit.score
        assert hit.payload == {"content": CORPUS[n][1]}  # document_id was fetched for fusion only


async def test_per_document_fusion_is_the_python_fusion_of_each_engines_own_legs(provider: Harness) -> None:
    """Random chunks (some without a document id), texts, weights and limits: the engine's hybrid answer, in
    :meth:`search` and in :meth:`search_many`, is ``fuse`` of its own dense and lexical answers at the legs' depth."""
    rng, pick = np.random.default_rng(20261207), random.Random(20261207)
    identity = await new_collection(provider)
    documents = [str(uuid.UUID(int=0xD0C + d)) for d in range(5)]
    records: list[VectorRecord] = []
    for n in range(1, 61):
        text = " ".join(pick.choices(WORDS, k=pick.randint(2, 7)))
        written = chunk(
            identity, n, rng.standard_normal(DIM).tolist(), document_id=pick.choice(documents), content=text
        )
        payload = dict(written.payload) if isinstance(written.payload, dict) else {}
        if n % 9 == 0:
            del payload["document_id"]  # another application's chunk: a document of its own
        records.append(VectorRecord(id=written.id, vector=written.vector, payload=payload))
    await provider.store.upsert(identity.name, records)
    if isinstance(provider.store, ResidentVectors):  # its copy must answer per-document fusion as SQL does
        await until_in_memory(provider.store, identity.name)

    searches = [
        hybrid(
            identity.name,
            rng.standard_normal(DIM).tolist(),
            " ".join(pick.choices(WORDS, k=3)),
            limit=pick.choice([1, 4, 12, 60]),
            dense_weight=pick.choice([0.2, 0.4, 0.7]),
            fusion=fusion,
        )
        for _ in range(8)
        for fusion in ("document", "document_lead")
    ]
    many = await provider.store.search_many(searches)
    for search, together in zip(searches, many, strict=True):
        alone = await provider.store.search(search)
        expected = await python_fusion(provider, search)
        assert ranked_legs(alone) == ranked_legs(expected), search
        assert [h.score for h in alone] == pytest.approx([h.score for h in expected], rel=1e-12)
        assert isinstance(together, list)
        assert ranked_legs(together) == ranked_legs(alone)


def ranked_legs(hits: list[SearchHit]) -> list[tuple[str, int | None, int | None, float | None, float | None]]:
    """Each hit's id, ranks and scores; BM25 scores rounded (SQL sums a chunk's postings in the plan's order)."""
    return [
        (
            h.id,
            h.legs.dense_rank,
            h.legs.lexical_rank,
            None if h.legs.lexical_score is None else round(h.legs.lexical_score, 9),
            h.legs.fused_score,
        )
        if h.legs is not None
        else (h.id, None, None, None, None)
        for h in hits
    ]


async def until_in_memory(store: ResidentVectors, name: str) -> None:
    """Search until the in-memory copy serves ``name`` (the first search starts the load)."""
    for _ in range(1000):
        if name in store.status.in_memory():
            return
        await store.search(Search(name=name, vector=[1.0] * DIM, limit=1, properties=()))
        await asyncio.sleep(0.02)
    raise AssertionError(f"{name} was never copied")


async def python_fusion(provider: Harness, search: Search) -> list[SearchHit]:
    legs = [
        Search(
            name=search.name,
            vector=search.vector,
            limit=leg_depth(search.limit),
            properties=["document_id"],
            text=search.text,
            mode=mode,
        )
        for mode in ("dense", "lexical")
    ]
    dense, lexical = [await provider.store.search(leg) for leg in legs]
    return fuse(dense, lexical, dense_weight=search.dense_weight, limit=search.limit, fusion=search.fusion)


async def test_an_unknown_fusion_is_refused(provider: Harness) -> None:
    name = await hand_made_collection(provider)

    with pytest.raises(InvalidInput) as refused:
        await provider.store.search(hybrid(name, QUERY, QUERY_TEXT, fusion="passage"))

    assert refused.value.code == "invalid_fusion"
