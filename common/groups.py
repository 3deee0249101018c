"""Group names: one rule for every place that stores or mints them (collections, agents, ``ragu token``).

A token's groups are compared with a collection's exactly (case-sensitive, no trimming), so a name that could
never be typed the same way twice, such as ``" legal"``, is refused instead of silently never matching. So is a
name holding an invisible character (Unicode's control and format categories: bidirectional overrides such as
U+202E, zero-width spaces and joiners): ``"\u202ehr"`` shows as ``hr`` on an admin's screen while matching no
token that says ``hr``.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from typing import Annotated

import msgspec

from common.errors import InvalidInput

MAX_GROUP_LENGTH = 255
GroupName = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_GROUP_LENGTH)]
"""A group name in a request body: its length is checked while decoding, the rest by :func:`check_groups`."""

_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs"})
"""Control, format (bidirectional controls, zero-width characters) and lone surrogates."""


def check_groups(groups: Iterable[str]) -> list[str]:
    """The groups sorted and without duplicates.

    Raises:
        InvalidInput: ``invalid_group`` for an empty or over-long name, or one with leading/trailing whitespace or
            invisible (control or format) characters.
    """
    cleaned = sorted(set(groups))
    for group in cleaned:
        if not group or len(group) > MAX_GROUP_LENGTH:
            raise InvalidInput(
                f"Group names have 1 to {MAX_GROUP_LENGTH} characters; got {len(group)}.", code="invalid_group"
            )
        if group != group.strip() or any(unicodedata.category(ch) in _INVISIBLE_CATEGORIES for ch in group):
            raise InvalidInput(
                f"Group {group!r} has leading/trailing whitespace or invisible (control or format) characters.",
                code="invalid_group",
            )
    return cleaned
