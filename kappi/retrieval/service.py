"""Retrieval for one question: which collections may be searched, and the passages found in them.

Both access checks happen here, independently: (1) only collections whose live identity allows the
user's groups are searched; (2) every search carries a payload filter on the chunks' own ``groups``, which the
store applies to every leg of a lexical or hybrid search as to a dense one. The two switches exist so tests can
prove that each check alone holds; production never turns either off.

Each assignment says how its collection is searched (mode, hybrid weight, tag and label filters); the passages
of all collections are merged by score, best first — when the searches ranked in different modes, whose scores
do not compare (a cosine, a BM25 score, a fused score), by their rank within their own collection instead. An
agent's reranker, if it names one, then reorders the merged passages; if it cannot be reached the answer goes
on in retrieval's order (``Retrieval.reranked`` False, and no passage carries a ``rerank_score``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Iterable, Sequence
from typing import NamedTuple, TypeVar

import msgspec
import numpy as np

from common.embedders.base import EmbedderRegistry
from common.errors import AppError, InvalidInput, NotFound, Unavailable
from common.rerankers.base import RerankerRegistry
from common.telemetry import observe_retrieval, span
from common.vectors.base import ChunkFields, Search, SearchFilter, SearchHit, read_chunk
from common.vectors.registry import VectorRegistry
from kappi.access.identities import IdentityReader, IdentityStatus
from kappi.access.policy import Reason, Verdict, collection_groups
from kappi.agent.models import AgentVersion, Assignment
from kappi.retrieval.models import FoundPassage
from schemas.models import Identity

T = TypeVar("T")
log = logging.getLogger(__name__)

PASSAGE_PROPERTIES = (
    "content",
    "document_id",
    "document_name",
    "page_start",
    "page_end",
    "chunk_index",
    "char_start",
    "char_end",
    "parent_content",
    "ocr",
    "model",
    "embeddingProvider",
)
"""What :func:`_chunk` reads, and the model each hit was embedded with (:func:`_of_model`); a search returns only
these, and every one more costs each hit."""


class Searchable(msgspec.Struct, frozen=True, kw_only=True):
    assignment: Assignment
    identity: Identity


class RetrievedChunk(FoundPassage, frozen=True, kw_only=True):
    """A passage as answering reads it: the fields it is cited with, and what the LLM and neighbour joining need."""

    instruction: str
    """Its collection's note to the LLM (the assignment's)."""
    context: str
    """What the LLM reads: the parent chunk for parent/child documents, else the chunk itself."""
    distance: float
    """Cosine distance to the question, in every mode: always known for a passage just found."""
    char_start: int | None = None
    char_end: int | None = None
    """Where the chunk is in its document (``None`` for another application's chunks): neighbours are joined."""


class Retrieval(msgspec.Struct, frozen=True, kw_only=True):
    chunks: list[RetrievedChunk]
    collections_searched: int
    embed_ms: float
    search_ms: float
    rerank_ms: float = 0.0
    reranked: bool | None = None
    """``None``: no reranker asked for; ``True``: the passages are in its order; ``False``: it was unavailable,
    so they are in retrieval's order."""
    embedding_models: dict[tuple[str, str], str] = msgspec.field(default_factory=dict)
    """Each searched collection's embedding model by (vector provider, collection name), from the identities this
    retrieval decided on: what comes after (the relevance floor) needs no second read."""


class RerankChoice(msgspec.Struct, frozen=True, kw_only=True):
    provider: str
    model: str


def rerank_choice(config: AgentVersion) -> RerankChoice | None:
    """The reranker an agent's configuration names, if any."""
    if config.reranker is None or config.rerank_model is None:
        return None
    return RerankChoice(provider=config.reranker, model=config.rerank_model)


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
        rerankers: RerankerRegistry | None = None,
    ) -> None:
        self.identities = identities
        self.vectors = vectors
        self.query_vectors = query_vectors
        self.check_identity_groups = check_identity_groups
        self.filter_chunks = filter_chunks
        self.rerankers = rerankers or RerankerRegistry([])

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
        self,
        assignments: Sequence[Assignment],
        user_groups: frozenset[str],
        question: str,
        *,
        rerank: RerankChoice | None = None,
    ) -> Retrieval:
        """The passages ``question`` finds in the collections of ``assignments`` that ``user_groups`` may read, best
        first; reordered by ``rerank`` when given.

        Every hit must come from the version of its collection whose identity was read (its chunks carry the
        identity's ``model``). When a collection answers from another — its model changed between the read and the
        search (a migration's swap) — or fails, its identity is read again and the question asked once more, so it is
        answered from one version whole; a hit of another model is never kept."""
        retrieval, stale = await self._retrieve(assignments, user_groups, question, refresh=[])
        if stale:
            retrieval, _ = await self._retrieve(assignments, user_groups, question, refresh=stale)
        if rerank is None or not retrieval.chunks:
            return retrieval
        return await self._reranked(retrieval, rerank, question)

    async def _retrieve(
        self,
        assignments: Sequence[Assignment],
        user_groups: frozenset[str],
        question: str,
        *,
        refresh: Sequence[tuple[str, str]],
    ) -> tuple[Retrieval, list[tuple[str, str]]]:
        """One attempt of :meth:`retrieve`, reading the identities of ``refresh`` anew; with the collections whose
        search answered from another version than their identity's, or failed."""
        with span("kappi.access", {"ragu.collections_assigned": len(assignments)}):
            self.identities.expire(refresh)
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
            answers = await _all(self._search(p, group, vectors, where, question) for p, group in providers.items())
        searched = time.perf_counter()
        observe_retrieval(embedded - started, searched - embedded)
        found = [answer.chunks for answer in answers]
        stale = [key for answer in answers for key in answer.stale]
        reached = [hits for hits in found if hits is not None]
        if not reached and (len(found) > 0 or any(s.problem == "provider_unavailable" for s in statuses)):
            # No store could be read: an answer from no sources would read like "the documents do not say".
            # A partial outage still answers from the stores that are up.
            raise Unavailable("the vector store is unavailable; try again shortly", code="vector_store_unavailable")
        if len({t.assignment.mode for t in targets}) > 1:
            chunks = _merged_by_rank(reached)
        else:
            # Equal fused scores are common across collections (each one's first hit scores the same): the
            # closer passage goes first, so hybrid merges as dense does when ranks tie.
            chunks = sorted((c for hits in reached for c in hits), key=lambda c: (-c.score, c.distance, c.document_id))
        retrieval = Retrieval(
            chunks=_dedupe(chunks),
            collections_searched=len(targets),
            embedding_models={(t.assignment.vector_provider, t.assignment.name): t.identity.model for t in targets},
            embed_ms=round((embedded - started) * 1000, 3),
            search_ms=round((searched - embedded) * 1000, 3),
        )
        return retrieval, stale

    async def _reranked(self, retrieval: Retrieval, choice: RerankChoice, question: str) -> Retrieval:
        """The passages in the reranker's order, each with its score; in retrieval's order if it is unavailable
        (an outage of a reranker should not cost an answer)."""
        chunks = retrieval.chunks
        started = time.perf_counter()
        try:
            with span("kappi.rerank", {"ragu.reranker": choice.provider, "ragu.passages": len(chunks)}):
                reranker = self.rerankers.get(choice.provider, choice.model)
                ranked = await reranker.rerank(question, [c.text for c in chunks], len(chunks))
        except (Unavailable, InvalidInput) as error:  # InvalidInput: the reranker is no longer configured here
            log.warning("answering unreranked: %s (%s)", error.detail, error.code)
            return msgspec.structs.replace(retrieval, reranked=False, rerank_ms=_ms_since(started))
        placed = {i for i, _ in ranked}
        reordered = [msgspec.structs.replace(chunks[i], rerank_score=score) for i, score in ranked]
        reordered += [c for i, c in enumerate(chunks) if i not in placed]  # any it left out, after, as they were
        return msgspec.structs.replace(retrieval, chunks=reordered, reranked=True, rerank_ms=_ms_since(started))

    async def _search(
        self,
        provider: str,
        targets: Sequence[Searchable],
        vectors: dict[tuple[str, str], np.ndarray],
        where: SearchFilter | None,
        question: str,
    ) -> _Searched:
        """One provider's collections in one call (pgvector: one statement); no chunks when the store is down."""
        searches = [
            Search(
                name=t.assignment.name,
                vector=vectors[(t.identity.embeddingProvider, t.identity.model)],
                limit=t.assignment.top_k,
                properties=PASSAGE_PROPERTIES,
                max_distance=t.assignment.max_distance,
                where=_filtered(where, t),
                text=question,
                mode=t.assignment.mode,
                dense_weight=t.assignment.dense_weight,
            )
            for t in targets
        ]
        try:
            results = await self.vectors.get(provider).search_many(searches)
        except Unavailable as exc:  # its collections contribute nothing; other providers still answer
            log.warning(
                "vector store %s is down; its collections answer nothing: %s (%s)", provider, exc.detail, exc.code
            )
            return _Searched(None)
        except AppError as exc:
            log.warning("vector store %s refused a search; nothing from it: %s (%s)", provider, exc.detail, exc.code)
            return _Searched([])
        if all(isinstance(hits, Unavailable) for hits in results):
            log.warning("vector store %s is down; no collection of it answered (%s)", provider, _codes(results))
            return _Searched(None)
        # A collection that vanished mid-question (an error as its result) contributes nothing either; nor does one
        # whose chunks are of another model than its identity said (another version: see retrieve).
        chunks: list[RetrievedChunk] = []
        stale: list[tuple[str, str]] = []
        for target, hits in zip(targets, results, strict=True):
            if isinstance(hits, AppError):
                log.info(
                    "collection %s/%s answered nothing: %s (%s)",
                    provider,
                    target.assignment.name,
                    hits.detail,
                    hits.code,
                )
            passages = None if isinstance(hits, AppError) else _of_model(target, hits)
            if passages is not None:
                chunks += passages
            elif not isinstance(hits, NotFound | Unavailable):  # refused (the query's dimension, say), or stale
                stale.append((provider, target.assignment.name))
        return _Searched(chunks, stale)


def _codes(results: Sequence[object]) -> str:
    return ", ".join(sorted({r.code for r in results if isinstance(r, AppError)}))


class _Searched(NamedTuple):
    chunks: list[RetrievedChunk] | None
    """``None``: the store is down."""
    stale: list[tuple[str, str]] = []
    """Collections whose search was refused (not for a missing collection) or answered from another version than
    their identity's."""


def _of_model(target: Searchable, hits: Sequence[SearchHit]) -> list[RetrievedChunk] | None:
    """The hits as passages; ``None`` unless every one comes from the version of its collection the identity
    describes. A chunk without ``model`` (written by another application; an odd value reads as absent) is taken as
    it is. The model is read from the payload typed once, with the passage (one conversion per hit)."""
    identity, assignment = target.identity, target.assignment
    passages = []
    for hit in hits:
        found = read_chunk(hit.payload)
        if (found.model is not None and found.model != identity.model) or (
            found.embeddingProvider is not None and found.embeddingProvider != identity.embeddingProvider
        ):
            return None
        passages.append(_chunk(assignment, hit, found))
    return passages


async def _all(awaitables: Iterable[Awaitable[T]]) -> list[T]:
    """``asyncio.gather``, minus its task when there is only one (one model, one provider: the usual question)."""
    pending = list(awaitables)
    if len(pending) == 1:
        return [await pending[0]]
    return list(await asyncio.gather(*pending))


def narrowed(
    assignments: Sequence[Assignment],
    *,
    tags: Sequence[str] | None = None,
    labels: Sequence[str] | None = None,
    depth: int | None = None,
) -> list[Assignment]:
    """The assignments as one request searches them: a request's tags and labels narrow each assignment's own
    (to the values both name: never wider than the admin set), and ``depth`` searches each collection at least
    that deep. Access is not touched: both checks still happen in :meth:`Retriever.retrieve`."""
    if tags is None and labels is None and depth is None:
        return list(assignments)
    return [
        msgspec.structs.replace(
            a,
            tags=_narrower(a.tags, tags),
            labels=_narrower(a.labels, labels),
            top_k=a.top_k if depth is None else max(a.top_k, depth),
        )
        for a in assignments
    ]


def _narrower(own: list[str] | None, asked: Sequence[str] | None) -> list[str] | None:
    if asked is None:
        return own
    if own is None:
        return sorted(set(asked))
    return sorted(set(own).intersection(asked))  # empty: this collection can match nothing


def by_document(chunks: Sequence[RetrievedChunk]) -> list[tuple[RetrievedChunk, int]]:
    """The best passage of each document (``chunks`` are best first) with how many of ``chunks`` it had."""
    best: dict[str, RetrievedChunk] = {}
    counts: dict[str, int] = {}
    for chunk in chunks:
        best.setdefault(chunk.document_id, chunk)
        counts[chunk.document_id] = counts.get(chunk.document_id, 0) + 1
    return [(chunk, counts[document]) for document, chunk in best.items()]


def _ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


def _filtered(where: SearchFilter | None, target: Searchable) -> SearchFilter | None:
    """The question's access filter plus the assignment's own metadata filters (usually none: then the one
    shared filter, built once per question). In a collection whose identity has groups, a chunk without its
    copy of them is readable by nobody."""
    assignment = target.assignment
    ungrouped = not target.identity.groups
    if assignment.tags is None and assignment.labels is None and (where is None or ungrouped):
        return where
    return SearchFilter(
        readable_by=None if where is None else where.readable_by,
        ungrouped_readable=ungrouped,
        tags=None if assignment.tags is None else frozenset(assignment.tags),
        labels=None if assignment.labels is None else frozenset(assignment.labels),
    )


def _merged_by_rank(found: Sequence[Sequence[RetrievedChunk]]) -> list[RetrievedChunk]:
    """Passages of searches ranked in different modes, whose scores do not compare: each collection's first, then
    each one's second, …; within a rank, the collections in the order they were searched. (Each provider's list
    holds its collections' hits in order, collection after collection.)"""
    ranked: list[tuple[int, int, RetrievedChunk]] = []
    collections: dict[tuple[str, str], int] = {}
    ranks: dict[tuple[str, str], int] = {}
    for hits in found:
        for chunk in hits:
            key = (chunk.vector_provider, chunk.collection)
            order = collections.setdefault(key, len(collections))
            ranks[key] = rank = ranks.get(key, 0) + 1
            ranked.append((rank, order, chunk))
    ranked.sort(key=lambda r: r[:2])
    return [chunk for _, _, chunk in ranked]


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


def _chunk(assignment: Assignment, hit: SearchHit, found: ChunkFields) -> RetrievedChunk:
    """A hit as a passage; ``found``: its payload, read typed (:func:`read_chunk`)."""
    return RetrievedChunk(
        vector_provider=assignment.vector_provider,
        collection=assignment.name,
        instruction=assignment.instruction,
        document_id=found.document_id,
        document_name=found.document_name,
        page_start=found.page_start,
        page_end=found.page_end,
        chunk_index=found.chunk_index,
        char_start=found.char_start,
        char_end=found.char_end,
        text=found.content,
        context=found.parent_content or found.content,
        score=hit.score,
        distance=hit.distance,
        legs=hit.legs,
        ocr=found.ocr,
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
