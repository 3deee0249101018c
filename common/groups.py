"""Group names: one rule for every place that stores or mints them (collections, agents, ``ragu token``).

A token's groups are compared with a collection's exactly (case-sensitive, no trimming), so a name that could
never be typed the same way twice, such as ``" legal"``, is refused instead of silently never matching.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated

import msgspec

from common.errors import InvalidInput

MAX_GROUP_LENGTH = 255
GroupName = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_GROUP_LENGTH)]
"""A group name in a request body: its length is checked while decoding, the rest by :func:`check_groups`."""

_CONTROL_CHARACTERS = "\r\n\t\0"


def check_groups(groups: Iterable[str]) -> list[str]:
    """The groups sorted and without duplicates.

    Raises:
        InvalidInput: ``invalid_group`` for an empty or over-long name, or one with leading/trailing whitespace or
            control characters.
    """
    cleaned = sorted(set(groups))
    for group in cleaned:
        if not group or len(group) > MAX_GROUP_LENGTH:
            raise InvalidInput(
                f"Group names have 1 to {MAX_GROUP_LENGTH} characters; got {len(group)}.", code="invalid_group"
            )
        if group != group.strip() or any(ch in group for ch in _CONTROL_CHARACTERS):
            raise InvalidInput(
                f"Group {group!r} has leading/trailing whitespace or control characters.", code="invalid_group"
            )
    return cleaned
