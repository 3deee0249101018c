"""Parse config validation: what the API reports when a config is saved, with stable codes."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from chonkit.document.parsing import PageRange, ParseConfig, validate_parse_config
from chonkit.document.parsing.config import MAX_LINE_FILTERS, MAX_PATTERN_LENGTH
from common.errors import InvalidInput


def _code(obj: Any) -> str:
    with pytest.raises(InvalidInput) as caught:
        validate_parse_config(obj)
    return caught.value.code


def test_a_json_body_becomes_a_validated_config() -> None:
    body = msgspec.json.decode(
        b'{"page_range": {"start": 2, "end": 9}, "line_filters": ["^Page \\\\d+$"], '
        b'"sections": [{"start": 2, "end": 4}, {"start": 5, "end": 9}]}'
    )

    config = validate_parse_config(body)

    assert config == ParseConfig(
        page_range=PageRange(start=2, end=9),
        line_filters=[r"^Page \d+$"],
        sections=[PageRange(start=2, end=4), PageRange(start=5, end=9)],
    )
    assert msgspec.convert(msgspec.to_builtins(config), ParseConfig) == config


def test_an_empty_body_means_defaults() -> None:
    assert validate_parse_config({}) == ParseConfig()


def test_an_existing_config_is_checked_too() -> None:
    with pytest.raises(InvalidInput):
        validate_parse_config(ParseConfig(line_filters=["("]))


@pytest.mark.parametrize(
    "body", [{"pages": [1, 2]}, {"page_range": {"start": 1, "end": 2, "step": 1}}, {"sections": [{"from": 1}]}]
)
def test_unknown_fields_are_rejected_at_any_depth(body: dict[str, Any]) -> None:
    assert _code(body) == "unknown_field"


@pytest.mark.parametrize(
    "body", [{"line_filters": "abc"}, {"page_range": {"start": "1", "end": 2}}, {"page_range": {}}]
)
def test_wrong_types_are_an_invalid_config(body: dict[str, Any]) -> None:
    assert _code(body) == "invalid_parse_config"


@pytest.mark.parametrize(("start", "end"), [(0, 3), (-1, 2), (5, 4)])
def test_impossible_page_ranges_are_rejected_without_a_document(start: int, end: int) -> None:
    assert _code({"page_range": {"start": start, "end": end}}) == "invalid_page_range"
    assert _code({"sections": [{"start": start, "end": end}]}) == "invalid_page_range"


def test_a_single_page_range_is_fine() -> None:
    assert validate_parse_config({"page_range": {"start": 3, "end": 3}}).page_range == PageRange(start=3, end=3)


def test_overlapping_sections_are_rejected_in_any_order() -> None:
    assert _code({"sections": [{"start": 5, "end": 8}, {"start": 1, "end": 5}]}) == "overlapping_sections"


def test_sections_must_lie_inside_the_page_range() -> None:
    body = {"page_range": {"start": 1, "end": 5}, "sections": [{"start": 4, "end": 6}]}
    assert _code(body) == "invalid_page_range"


def test_section_mode_needs_a_range() -> None:
    assert _code({"sections": []}) == "invalid_page_range"


def test_an_invalid_regex_is_named_in_the_error() -> None:
    with pytest.raises(InvalidInput) as caught:
        validate_parse_config({"line_filters": ["^ok$", "unbalanced (paren"]})

    assert caught.value.code == "invalid_regex"
    assert "unbalanced (paren" in caught.value.detail
    assert caught.value.extra["pattern"] == "unbalanced (paren"


@pytest.mark.parametrize("pattern", ["", "a" * (MAX_PATTERN_LENGTH + 1)])
def test_empty_or_overlong_patterns_are_rejected(pattern: str) -> None:
    assert _code({"line_filters": [pattern]}) == "invalid_regex"


def test_the_number_of_line_filters_is_bounded() -> None:
    assert _code({"line_filters": ["x"] * (MAX_LINE_FILTERS + 1)}) == "too_many_line_filters"


def test_configs_are_immutable() -> None:
    config = ParseConfig()
    with pytest.raises(AttributeError):
        config.page_range = PageRange(start=1, end=2)  # type: ignore[misc]
