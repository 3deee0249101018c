"""Who may read a collection, decided per question — the first of two independent checks.

The rule (from the shared contract): a collection with no ``groups`` is readable by everyone;
otherwise the user must be in at least one of its groups. Groups compare exactly (case-sensitive,
no trimming). The second check is the vector store's payload filter on each chunk's own copy of
``groups`` (``SearchFilter.readable_by``), applied to every query, so a leak needs both to fail.
Admins get no bypass here: chat access is about groups, not roles.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Literal

import msgspec

from schemas.models import Identity

Reason = Literal[
    "public",
    "member",
    "not_a_member",
    "identity_missing",
    "identity_invalid",
    "provider_unavailable",
    "provider_mismatch",
    "collection_replaced",
]


def collection_groups(identity: Identity) -> frozenset[str]:
    return frozenset(identity.groups) if isinstance(identity.groups, list) else frozenset()


def readable(identity: Identity, user_groups: Iterable[str]) -> bool:
    groups = collection_groups(identity)
    return not groups or not groups.isdisjoint(user_groups)


def agent_visible(agent_groups: Iterable[str], user_groups: Iterable[str]) -> bool:
    """The same rule for agents: no groups = everyone."""
    groups = frozenset(agent_groups)
    return not groups or not groups.isdisjoint(user_groups)


def searches_nothing(reasons: Collection[Reason]) -> bool:
    """Whether an agent can search nothing for a user: it has collections, and every one is restricted to groups
    the user is not in (each assigned collection's reason, as the retriever decides it per question). An agent with
    no collections is a plain assistant, not one that searches nothing; a collection that is missing or unreachable
    is nobody's to search, which is not a matter of the user's groups, so it does not count."""
    return bool(reasons) and all(reason == "not_a_member" for reason in reasons)


class Verdict(msgspec.Struct, frozen=True, kw_only=True):
    vector_provider: str
    collection: str
    searchable: bool
    reason: Reason
    detail: str
    matched_groups: list[str] = msgspec.field(default_factory=list)
    collection_groups: list[str] | None = None
