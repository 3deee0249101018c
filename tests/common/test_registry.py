"""The one registry behind vector stores, embedders and LLMs: a name nobody registered is the caller's mistake."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from common.errors import InvalidInput
from common.registry import Registry


@dataclass(frozen=True)
class Provider:
    name: str


def test_an_unknown_name_is_invalid_input_listing_the_valid_ones() -> None:
    registry = Registry.of_named([Provider("b"), Provider("a")], kind="widget provider", code="unknown_widget")
    assert registry.get("a") == Provider("a")
    assert registry.names() == ["a", "b"]
    assert "a" in registry
    with pytest.raises(InvalidInput) as caught:
        registry.get("c")
    assert (caught.value.code, caught.value.status) == ("unknown_widget", 422)
    assert caught.value.detail == "unknown widget provider 'c'; valid: a, b"
    assert caught.value.extra == {"provider": "c", "valid_providers": ["a", "b"]}


def test_one_name_twice_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="registered twice"):
        Registry.of_named([Provider("a"), Provider("a")], kind="widget provider", code="unknown_widget")
