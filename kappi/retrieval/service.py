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
from common.vectors.base import Search, SearchFilter, SearchHit
from common.vectors.registry import VectorRegistry
from kappi.access.identities import IdentityReader
from kappi.access.policy import Reason, Verdict, collection_groups, readable
from kappi.agent.models import Assignment
from schemas.models import Identity

T = TypeVar("T")

PASSAGE_PROPERTIES = (
    "content",
    "document_id",
    "document_name",
    "page_start",
    "page_end",
    "chunk_index",
    "parent_index",
    "parent_content",
)


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
        """For each assigned collection: may these groups search it, and why (or why not)."""
        statuses = await self.identities.read_many([(a.vector_provider, a.name) for a in assignments])
        results: list[tuple[Verdict, Searchable | None]] = []
        for assignment, status in zip(assignments, statuses, strict=True):
            identity = status.identity
            if identity is None:
                verdict = _verdict(assignment, status.problem or "identity_missing", status.detail or "")
                results.append((verdict, None))
            elif not _same_collection(assignment, identity):
                detail = "a different collection now has this name; reassign it to search it"
                results.append((_verdict(assignment, "collection_replaced", detail), None))
            else:
                groups = sorted(collection_groups(identity))
                searchable = Searchable(assignment=assignment, identity=identity)
                if not readable(identity, user_groups):
                    detail = "the collection is restricted to groups these groups do not include"
                    results.append((_verdict(assignment, "not_a_member", detail, groups=groups), searchable))
                elif groups:
                    matched = sorted(user_groups.intersection(groups))
                    verdict = _verdict(
                        assignment, "member", "member of " + ", ".join(matched), groups=groups, matched=matched
                    )
                    results.append((verdict, searchable))
                else:
                    results.append(
                        (_verdict(assignment, "public", "the collection has no groups", groups=[]), searchable)
                    )
        return results

    async def retrieve(
        self, assignments: Sequence[Assignment], user_groups: frozenset[str], question: str
    ) -> Retrieval:
        # What :meth:`verdicts` decides, without the explanations: this runs for every question.
        statuses = await self.identities.read_many([(a.vector_provider, a.name) for a in assignments])
        targets = [
            Searchable(assignment=assignment, identity=identity)
            for assignment, status in zip(assignments, statuses, strict=True)
            if (identity := status.identity) is not None
            and _same_collection(assignment, identity)
            and (readable(identity, user_groups) or not self.check_identity_groups)
        ]
        started = time.perf_counter()
        models = {(t.identity.embeddingProvider, t.identity.model) for t in targets}
        vectors = dict(zip(models, await _all(self.query_vectors.get(p, m, question) for p, m in models), strict=True))
        embedded = time.perf_counter()
        where = SearchFilter(readable_by=_storable(user_groups)) if self.filter_chunks else None
        providers: dict[str, list[Searchable]] = {}
        for target in targets:
            providers.setdefault(target.assignment.vector_provider, []).append(target)
        found = await _all(self._search(p, group, vectors, where) for p, group in providers.items())
        searched = time.perf_counter()
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


def _verdict(
    assignment: Assignment,
    reason: Reason,
    detail: str,
    *,
    groups: list[str] | None = None,
    matched: list[str] | None = None,
) -> Verdict:
    return Verdict(
        vector_provider=assignment.vector_provider,
        collection=assignment.name,
        searchable=reason in ("member", "public"),
        reason=reason,
        detail=detail,
        matched_groups=matched or [],
        collection_groups=groups,
    )


def _chunk(assignment: Assignment, hit: SearchHit) -> RetrievedChunk:
    payload = hit.payload
    content = str(payload.get("content", ""))
    return RetrievedChunk(
        vector_provider=assignment.vector_provider,
        collection=assignment.name,
        instruction=assignment.instruction,
        document_id=str(payload.get("document_id", "")),
        document_name=payload.get("document_name"),
        page_start=payload.get("page_start"),
        page_end=payload.get("page_end"),
        text=content,
        context=payload.get("parent_content") or content,
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
