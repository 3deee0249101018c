"""Weighted reciprocal-rank fusion: scores by hand, ties by id, legs filled, cut and limit."""

from __future__ import annotations

import pytest

from common.vectors.base import Legs, SearchHit
from common.vectors.fusion import RRF_K, fuse, leg_depth, lexical_only


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
