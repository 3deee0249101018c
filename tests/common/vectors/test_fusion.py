"""Weighted reciprocal-rank fusion, per chunk and per document: scores by hand, ties, legs filled, cut and limit."""

from __future__ import annotations

import pytest

from common.errors import InvalidInput
from common.vectors.base import FUSIONS, Legs, SearchHit
from common.vectors.fusion import RRF_K, answered, document_key, fuse, leg_depth, leg_properties, lexical_only


def hit(id_: str, score: float, distance: float) -> SearchHit:
    return SearchHit(id=id_, score=score, distance=distance, payload={"content": id_})


DENSE = [hit("a", 0.9, 0.1), hit("b", 0.8, 0.2), hit("c", 0.7, 0.3)]
LEXICAL = [hit("c", 7.0, 0.3), hit("d", 5.0, 0.6), hit("a", 1.0, 0.1)]


def rrf(weight: float, dense: int | None, lexical: int | None) -> float:
    return (weight / (RRF_K + dense) if dense else 0.0) + ((1 - weight) / (RRF_K + lexical) if lexical else 0.0)


def test_fused_scores_are_weighted_rrf_and_legs_say_where_each_hit_came_from() -> None:
    fused = fuse(DENSE, LEXICAL, dense_weight=0.5, limit=10)
    expected = {"a": rrf(0.5, 1, 3), "b": rrf(0.5, 2, None), "c": rrf(0.5, 3, 1), "d": rrf(0.5, None, 2)}
    assert [h.id for h in fused] == sorted(expected, key=lambda i: -expected[i])
    for h in fused:
        assert h.score == pytest.approx(expected[h.id])
        assert h.legs is not None
        assert h.legs.fused_score == h.score
    by_id = {h.id: h for h in fused}
    assert by_id["a"].legs == Legs(dense_rank=1, lexical_rank=3, lexical_score=1.0, fused_score=by_id["a"].score)
    assert by_id["d"].legs is not None
    assert by_id["d"].legs.dense_rank is None
    assert by_id["b"].legs is not None
    assert by_id["b"].legs.lexical_score is None
    assert by_id["d"].distance == 0.6
    assert by_id["d"].payload == {"content": "d"}


def test_weight_one_is_the_dense_order_and_zero_the_lexical_order() -> None:
    assert [h.id for h in fuse(DENSE, LEXICAL, dense_weight=1.0, limit=3)] == ["a", "b", "c"]
    assert [h.id for h in fuse(DENSE, LEXICAL, dense_weight=0.0, limit=3)] == ["c", "d", "a"]


def test_no_lexical_hits_leave_the_dense_order() -> None:
    fused = fuse(DENSE, [], dense_weight=0.5, limit=10)
    assert [h.id for h in fused] == ["a", "b", "c"]
    assert all(h.legs is not None and h.legs.lexical_rank is None for h in fused)


def test_equal_fused_scores_are_ordered_by_id() -> None:
    fused = fuse([hit("z", 0.9, 0.1)], [hit("y", 3.0, 0.5)], dense_weight=0.5, limit=10)
    assert [h.id for h in fused] == ["y", "z"]


def test_max_distance_drops_far_hits_from_the_limited_answer() -> None:
    assert [h.id for h in fuse(DENSE, LEXICAL, dense_weight=0.5, limit=3)] == ["a", "c", "b"]
    fused = fuse(DENSE, LEXICAL, dense_weight=0.5, limit=3, max_distance=0.25)
    assert [h.id for h in fused] == ["a", "b"]  # d is not promoted into the answer
    assert fuse(DENSE, LEXICAL, dense_weight=0.5, limit=0) == []


def test_lexical_only_keeps_bm25_scores_and_ranks() -> None:
    hits = lexical_only(LEXICAL, limit=3, max_distance=0.5)
    assert [(h.id, h.score) for h in hits] == [("c", 7.0), ("a", 1.0)]
    assert hits[1].legs == Legs(dense_rank=None, lexical_rank=3, lexical_score=1.0, fused_score=None)
    assert [h.id for h in lexical_only(LEXICAL, limit=2)] == ["c", "d"]
    assert lexical_only(LEXICAL, limit=0) == []


def test_legs_go_deeper_than_the_limit() -> None:
    assert leg_depth(10) > 10
    assert leg_depth(1000) == 1000


# ----- per document: each chunk credited with its document's best rank in each leg -----


def chunk_of(id_: str, document: object, distance: float = 0.2) -> SearchHit:
    payload = {"content": id_} if document is None else {"content": id_, "document_id": document}
    return SearchHit(id=id_, score=1 - distance, distance=distance, payload=payload)


# Document X: its best dense chunk is x1 (rank 1), its best keyword chunk x2 (rank 2). Document Y: y1 dense rank 2,
# y2 keyword rank 1. Per chunk, no chunk has both legs' best ranks; per document, X has (1, 2) and Y (2, 1).
X1, X2, Y1, Y2 = (chunk_of(i, i[0].upper()) for i in ("x1", "x2", "y1", "y2"))
DENSE_XY = [X1, Y1, X2]
LEXICAL_XY = [Y2, X2]


def test_per_document_each_chunk_gets_its_documents_best_rank_in_each_leg() -> None:
    fused = fuse(DENSE_XY, LEXICAL_XY, dense_weight=0.4, limit=10, fusion="document")

    x, y = rrf(0.4, 1, 2), rrf(0.4, 2, 1)  # y > x: the keyword leg weighs more
    # Y first; within a document, by the chunk's own fused score: y2 (own: lexical 1) before y1 (own: dense 2),
    # x2 (own: dense 3 and lexical 2) before x1 (own: dense 1)
    assert [(h.id, h.score) for h in fused] == [("y2", y), ("y1", y), ("x2", x), ("x1", x)]
    assert [h.legs for h in fused] == [
        Legs(dense_rank=None, lexical_rank=1, lexical_score=Y2.score, fused_score=y),
        Legs(dense_rank=2, lexical_rank=None, lexical_score=None, fused_score=y),
        Legs(dense_rank=3, lexical_rank=2, lexical_score=X2.score, fused_score=x),
        Legs(dense_rank=1, lexical_rank=None, lexical_score=None, fused_score=x),
    ]
    per_chunk = fuse(DENSE_XY, LEXICAL_XY, dense_weight=0.4, limit=10)
    assert [h.id for h in per_chunk] == ["x2", "y2", "x1", "y1"]  # what per-document fusion changes


def test_per_document_ties_go_to_the_chunks_own_score_then_id() -> None:
    fused = fuse(DENSE_XY, LEXICAL_XY, dense_weight=0.5, limit=10, fusion="document")

    # at 0.5 both documents score 0.5/61 + 0.5/62: one tie across them, ordered by each chunk's own score (x2's
    # is highest; x1's and y2's are both 0.5/61, so by id), not document by document
    assert {h.score for h in fused} == {rrf(0.5, 1, 2)} == {rrf(0.5, 2, 1)}
    assert [h.id for h in fused] == ["x2", "x1", "y2", "y1"]


def test_per_document_limit_and_max_distance_cut_the_fused_order() -> None:
    far_y2 = chunk_of("y2", "Y", distance=0.9)

    assert [h.id for h in fuse(DENSE_XY, LEXICAL_XY, dense_weight=0.4, limit=2, fusion="document")] == ["y2", "y1"]
    fused = fuse(DENSE_XY, [far_y2, X2], dense_weight=0.4, limit=2, max_distance=0.5, fusion="document")
    assert [h.id for h in fused] == ["y1"]  # y2 is cut after the limit; x2 is not promoted into the answer


def test_per_document_lead_credits_only_each_documents_best_chunk() -> None:
    fused = fuse(DENSE_XY, LEXICAL_XY, dense_weight=0.4, limit=10, fusion="document_lead")

    # the leads: x2 (own: dense 3 and lexical 2) and y2 (own: lexical 1) carry their documents' scores; x1 and y1
    # keep their own, so a document's weaker chunks do not ride on its best one into an agent's few passages
    x, y = rrf(0.4, 1, 2), rrf(0.4, 2, 1)
    assert [(h.id, h.score) for h in fused] == [
        ("y2", y),
        ("x2", x),
        ("x1", rrf(0.4, 1, None)),
        ("y1", rrf(0.4, 2, None)),
    ]
    assert [(h.legs.dense_rank, h.legs.lexical_rank, h.legs.fused_score) for h in fused if h.legs] == [
        (None, 1, y),
        (3, 2, x),
        (1, None, rrf(0.4, 1, None)),
        (2, None, rrf(0.4, 2, None)),
    ]


def test_per_document_lead_ties_within_a_document_go_to_the_smaller_id() -> None:
    # a and b of one document, each first in one leg: equal own scores at 0.5, so a leads
    fused = fuse([chunk_of("a", "D")], [chunk_of("b", "D")], dense_weight=0.5, limit=10, fusion="document_lead")

    assert [(h.id, h.score) for h in fused] == [("a", rrf(0.5, 1, 1)), ("b", rrf(0.5, None, 1))]


def test_chunks_without_a_string_document_id_are_documents_of_their_own() -> None:
    # a and b: no document_id; c and d: the same number, not a string (another application's chunks)
    dense = [chunk_of("a", None), chunk_of("c", 7)]
    lexical = [chunk_of("b", None), chunk_of("d", 7)]

    per_chunk = [(h.id, h.score) for h in fuse(dense, lexical, dense_weight=0.4, limit=10)]

    for fusion in FUSIONS:
        assert [(h.id, h.score) for h in fuse(dense, lexical, dense_weight=0.4, limit=10, fusion=fusion)] == per_chunk
    assert document_key(chunk_of("x", "7")) != document_key(chunk_of("y", 7))


def test_per_document_with_one_leg_ranks_documents_by_their_best_chunk() -> None:
    dense = [chunk_of("p1", "P"), chunk_of("q1", "Q"), chunk_of("p2", "P")]

    fused = fuse(dense, [], dense_weight=0.4, limit=10, fusion="document")

    assert [(h.id, h.score) for h in fused] == [
        ("p1", rrf(0.4, 1, None)),
        ("p2", rrf(0.4, 1, None)),
        ("q1", rrf(0.4, 2, None)),
    ]


def test_an_unknown_fusion_is_refused() -> None:
    with pytest.raises(InvalidInput) as refused:
        fuse(DENSE_XY, LEXICAL_XY, dense_weight=0.4, limit=10, fusion="passage")  # type: ignore[arg-type]
    assert refused.value.code == "invalid_fusion"


def test_the_legs_fetch_document_id_for_per_document_fusion_and_the_answer_drops_it_unless_asked() -> None:
    assert leg_properties(["content"], "document") == ["content", "document_id"]
    assert leg_properties(["content", "document_id"], "document") == ["content", "document_id"]
    assert leg_properties(["content"], "chunk") == ["content"]
    hits = fuse(DENSE_XY, LEXICAL_XY, dense_weight=0.4, limit=2, fusion="document")
    assert [h.payload for h in answered(hits, ["content"])] == [{"content": "y2"}, {"content": "y1"}]
    assert answered(hits, ["content", "document_id"]) == hits
