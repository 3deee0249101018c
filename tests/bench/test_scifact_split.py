"""SciFact's dev/test split: a fixed rule on the query id, so every run and reader splits the queries alike."""

from __future__ import annotations

import hashlib

from bench.scifact_bench import SPLITS, split_of, split_qrels


def test_a_query_is_dev_when_the_first_byte_of_its_ids_sha256_is_even() -> None:
    assert hashlib.sha256(b"3").digest()[0] == 78
    assert hashlib.sha256(b"1").digest()[0] == 107
    assert (split_of("3"), split_of("36"), split_of("1"), split_of("5")) == ("dev", "dev", "test", "test")


def test_the_splits_part_the_qrels() -> None:
    qrels = {str(n): {f"d{n}": 1} for n in range(200)}

    parts = [split_qrels(qrels, split) for split in SPLITS]

    assert sorted(k for part in parts for k in part) == sorted(qrels)
    assert all(60 < len(part) < 140 for part in parts)  # about half each
