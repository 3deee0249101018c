"""Retrieval for one question: which collections may be searched, and the passages found in them.

Both access checks happen here, independently: (1) only collections whose live identity allows the
user's groups are searched; (2) every search carries a payload filter on the chunks' own ``groups``.
The two switches exist so tests can prove that each check alone holds; production never turns
either off.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Iterable, Sequence
from typing import TypeVar

import msgspec
import numpy as np

from common.embedders.base import EmbedderRegistry
from common.errors import AppError, Unavailable
from common.telemetry import observe_retrieval, span
from common.vectors.base import Search, SearchFilter, SearchHit, read_chunk
from common.vectors.registry import VectorRegistry
from kappi.access.identities import IdentityReader, IdentityStatus
from kappi.access.policy import Reason, Verdict, collection_groups
from kappi.agent.models import Assignment
from schemas.models import Identity

T = TypeVar("T")

PASSAGE_PROPERTIES = ("content", "document_id", "document_name", "page_start", "page_end", "parent_content")
"""What :func:`_chunk` reads (a search returns only these; every one more costs each hit)."""


class Searchable(msgspec.Struct, frozen=True, kw_only=True):
    assignment: Assignment
    identity: Identity


class RetrievedChunk(msgspec.Struct, frozen=True, kw_only=True):
    vector_provider: str
    collection: str
    instruction: str
    document_id: str
    document_name: str | None
    page_start: int | None
    page_end: int | None
    text: str
    """The matching chunk, as cited."""
    context: str
    """What the LLM reads: the parent chunk for parent/child documents, else the chunk itself."""
    score: float
    distance: float


class Retrieval(msgspec.Struct, frozen=True, kw_only=True):
    chunks: list[RetrievedChunk]
    collections_searched: int
    embed_ms: float
    search_ms: float


class QueryVectors:
    """An LRU cache of query embeddings: a repeated question skips the embedding model."""

    def __init__(self, embedders: EmbedderRegistry, *, size: int = 2048) -> None:
        self.embedders = embedders
        self.size = size
        self._cache: OrderedDict[tuple[str, str, str], np.ndarray] = OrderedDict()

    async def get(self, provider: str, model: str, text: str) -> np.ndarray:
        key = (provider, model, text)
        vector = self._cache.get(key)
        if vector is not None:
            self._cache.move_to_end(key)
            return vector
        vector = await self.embedders.get(provider, model).embed_query(text)
        self._cache[key] = vector
        if len(self._cache) > self.size:
            self._cache.popitem(last=False)
        return vector


class Retriever:
    def __init__(
        self,
        identities: IdentityReader,
        vectors: VectorRegistry,
        query_vectors: QueryVectors,
        *,
        check_identity_groups: bool = True,
        filter_chunks: bool = True,
    ) -> None:
        self.identities = identities
        self.vectors = vectors
        self.query_vectors = query_vectors
        self.check_identity_groups = check_identity_groups
        self.filter_chunks = filter_chunks

    async def verdicts(
        self, assignments: Sequence[Assignment], user_groups: frozenset[str]
    ) -> list[tuple[Verdict, Searchable | None]]:
        """For each assigned collection: may these groups search it, and why (or why not) — the decision
        :meth:`retrieve` makes, with its explanation, from identities as they are this instant."""
        statuses = await self.identities.read_live([(a.vector_provider, a.name) for a in assignments])
        return [
            (_explain(assignment, status, reason, user_groups), _searchable(assignment, status))
            for assignment, status in zip(assignments, statuses, strict=True)
            for reason in (decide(assignment, status, user_groups),)
        ]

    async def retrieve(
        self, assignments: Sequence[Assignment], user_groups: frozenset[str], question: str
    ) -> Retrieval:
        with span("kappi.access", {"ragu.collections_assigned": len(assignments)}):
            statuses = await self.identities.read_many([(a.vector_provider, a.name) for a in assignments])
            searchable = SEARCHABLE if self.check_identity_groups else SEARCHABLE_UNCHECKED
            targets = [
                Searchable(assignment=assignment, identity=status.identity)
                for assignment, status in zip(assignments, statuses, strict=True)
                if status.identity is not None and decide(assignment, status, user_groups) in searchable
            ]
        started = time.perf_counter()
        with span("kappi.embed"):
            models = {(t.identity.embeddingProvider, t.identity.model) for t in targets}
            vectors = dict(
                zip(models, await _all(self.query_vectors.get(p, m, question) for p, m in models), strict=True)
            )
        embedded = time.perf_counter()
        where = SearchFilter(readable_by=_storable(user_groups)) if self.filter_chunks else None
        providers: dict[str, list[Searchable]] = {}
        for target in targets:
            providers.setdefault(target.assignment.vector_provider, []).append(target)
        with span("kappi.search", {"ragu.collections_searched": len(targets)}):
            found = await _all(self._search(p, group, vectors, where) for p, group in providers.items())
        searched = time.perf_counter()
        observe_retrieval(embedded - started, searched - embedded)
        reached = [hits for hits in found if hits is not None]
        if not reached and (len(found) > 0 or any(s.problem == "provider_unavailable" for s in statuses)):
            # No store could be read: an answer from no sources would read like "the documents do not say".
            # A partial outage still answers from the stores that are up.
            raise Unavailable("the vector store is unavailable; try again shortly", code="vector_store_unavailable")
        chunks = sorted((c for hits in reached for c in hits), key=lambda c: (-c.score, c.document_id))
        return Retrieval(
            chunks=_dedupe(chunks),
            collections_searched=len(targets),
            embed_ms=round((embedded - started) * 1000, 3),
            search_ms=round((searched - embedded) * 1000, 3),
        )

    async def _search(
        self,
        provider: str,
        targets: Sequence[Searchable],
        vectors: dict[tuple[str, str], np.ndarray],
        where: SearchFilter | None,
    ) -> list[RetrievedChunk] | None:
        """One provider's collections in one call (pgvector: one statement); ``None`` when the store is down."""
        searches = [
            Search(
                name=t.assignment.name,
                vector=vectors[(t.identity.embeddingProvider, t.identity.model)],
                limit=t.assignment.top_k,
                properties=PASSAGE_PROPERTIES,
                max_distance=t.assignment.max_distance,
                where=where,
            )
            for t in targets
        ]
        try:
            results = await self.vectors.get(provider).search_many(searches)
        except Unavailable:
            return None  # the store is down: its collections contribute nothing; other providers still answer
        except AppError:
            return []  # the store refused this search: nothing from it
        if all(isinstance(hits, Unavailable) for hits in results):
            return None
        # A collection that vanished mid-question (an error as its result) contributes nothing either.
        return [
            _chunk(target.assignment, hit)
            for target, hits in zip(targets, results, strict=True)
            if not isinstance(hits, AppError)
            for hit in hits
        ]


async def _all(awaitables: Iterable[Awaitable[T]]) -> list[T]:
    """``asyncio.gather``, minus its task when there is only one (one model, one provider: the usual question)."""
    pending = list(awaitables)
    if len(pending) == 1:
        return [await pending[0]]
    return list(await asyncio.gather(*pending))


def _storable(groups: frozenset[str]) -> frozenset[str]:
    """The groups a collection can carry. Chonkit refuses NUL in group names (PostgreSQL text cannot hold it),
    so such a group matches nothing; left in, it makes pgvector reject the whole search."""
    return frozenset(g for g in groups if "\0" not in g)


def _same_collection(assignment: Assignment, identity: Identity) -> bool:
    """The name still holds the collection that was assigned, not a new one made under the same name."""
    return identity.collection_id == assignment.collection_id


SEARCHABLE = frozenset({"public", "member"})
SEARCHABLE_UNCHECKED = SEARCHABLE | {"not_a_member"}
"""With the identity check switched off (tests only): the payload filter alone must hold."""


def decide(assignment: Assignment, status: IdentityStatus, user_groups: frozenset[str]) -> Reason:
    """The one access decision per assigned collection: only ``public`` and ``member`` may be searched."""
    identity = status.identity
    if identity is None:
        return status.problem or "identity_missing"
    if not _same_collection(assignment, identity):
        return "collection_replaced"
    groups = collection_groups(identity)
    if not groups:
        return "public"
    return "not_a_member" if groups.isdisjoint(user_groups) else "member"


def _searchable(assignment: Assignment, status: IdentityStatus) -> Searchable | None:
    identity = status.identity
    if identity is None or not _same_collection(assignment, identity):
        return None
    return Searchable(assignment=assignment, identity=identity)


def _explain(assignment: Assignment, status: IdentityStatus, reason: Reason, user_groups: frozenset[str]) -> Verdict:
    """Why :func:`decide` decided so, in words an admin reads (the access endpoint; never per question)."""
    groups = sorted(collection_groups(status.identity)) if status.identity is not None else None
    matched = sorted(user_groups.intersection(groups or ()))
    details: dict[Reason, str] = {
        "collection_replaced": "a different collection now has this name; reassign it to search it",
        "not_a_member": "the collection is restricted to groups these groups do not include",
        "member": "member of " + ", ".join(matched),
        "public": "the collection has no groups",
    }
    replaced = reason == "collection_replaced"
    return Verdict(
        vector_provider=assignment.vector_provider,
        collection=assignment.name,
        searchable=reason in SEARCHABLE,
        reason=reason,
        detail=details.get(reason, status.detail or ""),
        matched_groups=matched if reason == "member" else [],
        collection_groups=None if replaced else groups,
    )


def _chunk(assignment: Assignment, hit: SearchHit) -> RetrievedChunk:
    found = read_chunk(hit.payload)
    return RetrievedChunk(
        vector_provider=assignment.vector_provider,
        collection=assignment.name,
        instruction=assignment.instruction,
        document_id=found.document_id,
        document_name=found.document_name,
        page_start=found.page_start,
        page_end=found.page_end,
        text=found.content,
        context=found.parent_content or found.content,
        score=hit.score,
        distance=hit.distance,
    )


def _dedupe(chunks: list[RetrievedChunk]) -> list[RetrievedChunk]:
    """Keep the best of passages that would show the same text twice: several children of one parent, or one
    document's chunk found through two collections (a document added to both)."""
    seen: set[tuple[str, str]] = set()
    kept = []
    for chunk in chunks:
        key = (chunk.document_id, chunk.context)
        if key not in seen:
            seen.add(key)
            kept.append(chunk)
    return kept
