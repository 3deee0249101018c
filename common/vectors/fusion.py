"""Weighted reciprocal-rank fusion of a dense and a lexical leg: one copy, so every engine fuses alike.

A hit's fused score is ``w / (RRF_K + dense_rank) + (1 - w) / (RRF_K + lexical_rank)``, a leg that did not find
it adding nothing (``w`` = ``dense_weight``). Ranks, not scores, because a cosine similarity and a BM25 score
share no scale; ``RRF_K`` = 60 as in the RRF paper and the issue's reference measurement. Each leg fetches
:func:`leg_depth` candidates, after every ``where`` condition.

Fused per document (``fusion="document"``), a chunk's ranks in that formula are its document's: the best rank of
any of the document's chunks in each leg. A document whose abstract the dense leg finds and whose methods section
the keyword leg finds then gets both legs' credit, where per chunk each of its chunks gets one. Its chunks share
that score and are ordered among themselves by their own fused score (the best-matching passage of the document
first); their ``legs`` stay their own ranks, so users see which leg found which chunk.

``fusion="document_lead"`` credits only the document's lead chunk (its best by its own fused score) with those
ranks; its other chunks keep their own score. Documents are then ranked as per document (a document's best chunk
scores what ``document`` gives all of them), but a document's weaker chunks do not ride on its best one into the
few passages an agent reads: with every chunk credited, a long document's weak chunks crowded the gold passage
of another document out of an agent's top 9 (the answer suite's dev split, ``docs/benchmarks.md``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from common.errors import InvalidInput
from common.vectors.base import FUSIONS, Fusion, Legs, SearchHit

RRF_K = 60
DOCUMENT_ID = "document_id"
LEG_DEPTH = 50
"""Candidates per leg at the least. On SciFact (whole abstracts, MiniLM, pgvector) nDCG@10 of hybrid was 0.712 at
40, 0.716-0.718 at 50 and 0.718 at 100 (the issue's reference fused each leg's top 100), while each candidate
past HNSW's ``ef_search`` (40) costs the dense leg an iterative scan: 50 keeps the quality at less cost."""


def leg_depth(limit: int) -> int:
    """How many candidates each leg of a hybrid search fetches for ``limit`` hits."""
    return max(limit, LEG_DEPTH)


def fuse(
    dense_hits: Sequence[SearchHit],
    lexical_hits: Sequence[SearchHit],
    *,
    dense_weight: float,
    limit: int,
    max_distance: float | None = None,
    fusion: Fusion = "chunk",
) -> list[SearchHit]:
    """The hybrid answer from both legs, each ranked best first (dense by distance, lexical by BM25 score, ties
    by id): fused score descending, ties by the chunk's own fused score then id, the first ``limit``; of those,
    hits further than ``max_distance`` dropped (a post-filter, as in a dense search).

    ``lexical_hits`` carry their BM25 score as ``score``; both legs carry the cosine ``distance`` to the query.
    ``fusion="document"`` scores each chunk with its document's best rank in each leg (:func:`document_key`: the
    legs' payloads carry ``document_id``), so a document found by both legs through different chunks gets both
    legs' credit; its chunks keep their own ranks in ``legs`` and their own fused score as the tie-break.
    """
    if limit < 1:
        return []
    dense_rank = {hit.id: rank for rank, hit in enumerate(dense_hits, 1)}
    lexical_rank = {hit.id: rank for rank, hit in enumerate(lexical_hits, 1)}
    lexical_score = {hit.id: hit.score for hit in lexical_hits}
    found = {hit.id: hit for hit in lexical_hits} | {hit.id: hit for hit in dense_hits}
    own = {id_: rrf_score(dense_weight, dense_rank.get(id_), lexical_rank.get(id_)) for id_ in found}
    score = own
    if by_document(fusion):
        score = _per_document(found, dense_rank, lexical_rank, own, dense_weight=dense_weight, fusion=fusion)
    hits: list[SearchHit] = []
    for id_ in sorted(found, key=lambda i: (-score[i], -own[i], i))[:limit]:
        hit = found[id_]
        if max_distance is not None and hit.distance > max_distance:
            continue
        legs = Legs(
            dense_rank=dense_rank.get(id_),
            lexical_rank=lexical_rank.get(id_),
            lexical_score=lexical_score.get(id_),
            fused_score=score[id_],
        )
        hits.append(SearchHit(id=id_, score=score[id_], distance=hit.distance, payload=hit.payload, legs=legs))
    return hits


def rrf_score(dense_weight: float, dense_rank: int | None, lexical_rank: int | None) -> float:
    """Weighted RRF of one pair of ranks (``None``: that leg did not find it): the float operations every engine
    repeats in the same order, so that they agree to the last bit."""
    return (dense_weight / (RRF_K + dense_rank) if dense_rank is not None else 0.0) + (
        (1.0 - dense_weight) / (RRF_K + lexical_rank) if lexical_rank is not None else 0.0
    )


def by_document(fusion: object) -> bool:
    """Whether ``fusion`` asks for per-document fusion; ``InvalidInput`` for a fusion no adapter knows."""
    if fusion not in FUSIONS:
        raise InvalidInput(
            f"fusion is one of {', '.join(FUSIONS)}, got {fusion!r}",
            code="invalid_fusion",
            extra={"fusions": list(FUSIONS)},
        )
    return fusion != "chunk"


def document_key(hit: SearchHit) -> str:
    """What a chunk's document is for per-document fusion: its ``document_id`` when that is a string, else the chunk
    alone (another application's chunk), as pgvector's statement says it in SQL."""
    document = hit.payload.get(DOCUMENT_ID)
    return f"d:{document}" if isinstance(document, str) else f"c:{hit.id}"


def _per_document(
    found: Mapping[str, SearchHit],
    dense_rank: Mapping[str, int],
    lexical_rank: Mapping[str, int],
    own: Mapping[str, float],
    *,
    dense_weight: float,
    fusion: Fusion,
) -> dict[str, float]:
    """Each chunk's fused score from its document's best rank in each leg (``document_lead``: the document's lead
    chunk's only, the others keeping their own)."""
    key = {id_: document_key(hit) for id_, hit in found.items()}
    best_dense: dict[str, int] = {}
    best_lexical: dict[str, int] = {}
    for ranks, best in ((dense_rank, best_dense), (lexical_rank, best_lexical)):
        for id_, rank in ranks.items():
            best[key[id_]] = min(rank, best.get(key[id_], rank))
    score = {id_: rrf_score(dense_weight, best_dense.get(key[id_]), best_lexical.get(key[id_])) for id_ in found}
    if fusion != "document_lead":
        return score
    leads: dict[str, str] = {}
    for id_ in sorted(found, key=lambda i: (-own[i], i)):
        leads.setdefault(key[id_], id_)
    led = set(leads.values())
    return {id_: score[id_] if id_ in led else own[id_] for id_ in found}


def leg_properties(properties: Sequence[str], fusion: Fusion) -> list[str]:
    """The payload properties a hybrid search's legs fetch: those asked for, and ``document_id`` when fusing per
    document (:func:`answered` takes it off again when it was not asked for)."""
    wanted = list(properties)
    return [*wanted, DOCUMENT_ID] if fusion != "chunk" and DOCUMENT_ID not in wanted else wanted


def answered(hits: list[SearchHit], properties: Sequence[str]) -> list[SearchHit]:
    """``hits`` with ``document_id`` taken off the payloads when it was fetched only for fusion."""
    if DOCUMENT_ID in properties:
        return hits
    return [
        msgspec.structs.replace(hit, payload={k: v for k, v in hit.payload.items() if k != DOCUMENT_ID})
        if DOCUMENT_ID in hit.payload
        else hit
        for hit in hits
    ]


def lexical_only(
    lexical_hits: Sequence[SearchHit], *, limit: int, max_distance: float | None = None
) -> list[SearchHit]:
    """A lexical search's answer from its leg (ranked best first, BM25 ``score``): the first ``limit``, legs
    filled; of those, hits further than ``max_distance`` dropped."""
    hits: list[SearchHit] = []
    for rank, hit in enumerate(lexical_hits[: max(limit, 0)], 1):
        if max_distance is not None and hit.distance > max_distance:
            continue
        legs = Legs(dense_rank=None, lexical_rank=rank, lexical_score=hit.score, fused_score=None)
        hits.append(SearchHit(id=hit.id, score=hit.score, distance=hit.distance, payload=hit.payload, legs=legs))
    return hits
