"""Chunk configs: decoded from client JSON, checked once when saved, every error naming its field."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from chonkit.document.chunking import (
    CharacterCounter,
    ChunkConfig,
    FixedChunking,
    ParentChildChunking,
    StructureChunking,
    chunk,
    default_chunk_config,
    validate_chunk_config,
)
from common.errors import AppError, InvalidInput


def test_default_is_a_valid_sentence_snapping_token_window() -> None:
    config = default_chunk_config()
    assert config == FixedChunking(size=250, overlap=25, unit="tokens", snap_to_sentences=True)
    assert validate_chunk_config(config) is config


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (
            {"strategy": "fixed", "size": 1000, "overlap": 200, "unit": "characters", "snap_to_sentences": False},
            FixedChunking(size=1000, overlap=200, unit="characters", snap_to_sentences=False),
        ),
        ({"strategy": "fixed"}, FixedChunking()),
        ({"strategy": "structure", "size": 300, "overlap": 0}, StructureChunking(size=300, overlap=0)),
        (
            {"strategy": "parent_child", "parent_size": 2000, "child_size": 200, "child_overlap": 20},
            ParentChildChunking(parent_size=2000, child_size=200, child_overlap=20),
        ),
    ],
)
def test_json_decodes_to_the_tagged_variant(payload: dict[str, Any], expected: ChunkConfig) -> None:
    assert validate_chunk_config(payload) == expected
    assert msgspec.json.decode(msgspec.json.encode(payload), type=ChunkConfig) == expected


def test_encoded_config_carries_its_strategy_and_round_trips() -> None:
    config = ParentChildChunking(parent_size=800, child_size=100, child_overlap=10, unit="characters")
    encoded = msgspec.to_builtins(config)
    assert encoded == {
        "strategy": "parent_child",
        "unit": "characters",
        "parent_size": 800,
        "child_size": 100,
        "child_overlap": 10,
    }
    assert validate_chunk_config(encoded) == config


def test_configs_are_frozen() -> None:
    config = FixedChunking()
    with pytest.raises(AttributeError):
        config.size = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    ("payload", "code", "field"),
    [
        ({"strategy": "fixed", "size": 0}, "invalid_chunk_size", "size"),
        ({"strategy": "fixed", "size": -5}, "invalid_chunk_size", "size"),
        ({"strategy": "fixed", "size": 100_001, "overlap": 0}, "invalid_chunk_size", "size"),
        ({"strategy": "fixed", "size": "big"}, "invalid_chunk_size", "size"),
        ({"strategy": "structure", "size": 0}, "invalid_chunk_size", "size"),
        ({"strategy": "parent_child", "parent_size": 0}, "invalid_chunk_size", "parent_size"),
        ({"strategy": "parent_child", "child_size": -1}, "invalid_chunk_size", "child_size"),
        ({"strategy": "fixed", "size": 100, "overlap": 100}, "invalid_overlap", "overlap"),
        ({"strategy": "fixed", "size": 100, "overlap": 150}, "invalid_overlap", "overlap"),
        ({"strategy": "fixed", "size": 100, "overlap": -1}, "invalid_overlap", "overlap"),
        ({"strategy": "structure", "size": 10, "overlap": 10}, "invalid_overlap", "overlap"),
        ({"strategy": "parent_child", "child_size": 50, "child_overlap": 50}, "invalid_overlap", "child_overlap"),
        ({"strategy": "fixed", "overlap": 1.5}, "invalid_overlap", "overlap"),
        ({"strategy": "parent_child", "parent_size": 200, "child_size": 200}, "invalid_chunk_config", "child_size"),
        ({"strategy": "parent_child", "parent_size": 100, "child_size": 300}, "invalid_chunk_config", "child_size"),
        ({"strategy": "fixed", "chunk_size": 100}, "unknown_field", "chunk_size"),
        ({"strategy": "parent_child", "size": 100}, "unknown_field", "size"),
        ({"strategy": "semantic"}, "invalid_chunk_config", "strategy"),
        ({"size": 100}, "invalid_chunk_config", "strategy"),
        ({"strategy": "fixed", "unit": "words"}, "invalid_chunk_config", "unit"),
        ({"strategy": "fixed", "snap_to_sentences": "yes"}, "invalid_chunk_config", "snap_to_sentences"),
    ],
)
def test_invalid_configs_are_refused_with_a_code_naming_the_field(payload: object, code: str, field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        validate_chunk_config(payload)
    assert caught.value.code == code
    assert caught.value.extra == {"field": field}
    assert caught.value.status == 422
    assert field in caught.value.detail


def test_a_config_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(InvalidInput) as caught:
        validate_chunk_config("fixed")
    assert caught.value.code == "invalid_chunk_config"
    assert "Expected `object`, got `str`" in caught.value.detail


def test_limits_are_checked_on_configs_built_in_code_too() -> None:
    with pytest.raises(InvalidInput) as caught:
        validate_chunk_config(FixedChunking(size=10, overlap=10))
    assert caught.value.code == "invalid_overlap"
    assert "overlap" in caught.value.detail


def test_the_chunker_refuses_a_config_that_would_never_finish(make_doc: Any, make_block: Any) -> None:
    doc = make_doc([make_block("Some text.")])
    with pytest.raises(InvalidInput) as caught:
        chunk(doc, FixedChunking(size=0, overlap=0), CharacterCounter(), max_tokens=None)
    assert caught.value.code == "invalid_chunk_size"


def test_the_chunker_refuses_a_non_positive_max_tokens(make_doc: Any, make_block: Any) -> None:
    doc = make_doc([make_block("Some text.")])
    with pytest.raises(InvalidInput) as caught:
        chunk(doc, FixedChunking(), CharacterCounter(), max_tokens=0)
    assert caught.value.code == "invalid_max_tokens"


def test_block_offsets_that_disagree_with_the_text_are_a_parser_bug(make_doc: Any, make_block: Any) -> None:
    doc = make_doc([make_block("First block."), make_block("Second block.")])
    first, second = doc.sections[0].blocks
    broken = msgspec.structs.replace(
        doc,
        sections=(
            msgspec.structs.replace(doc.sections[0], blocks=(first, msgspec.structs.replace(second, char_start=15))),
        ),
    )
    with pytest.raises(AppError) as caught:
        chunk(broken, FixedChunking(), CharacterCounter(), max_tokens=None)
    assert caught.value.code == "invalid_block_offsets"
