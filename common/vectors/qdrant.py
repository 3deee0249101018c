"""The Qdrant adapter: one Qdrant collection per Ragu collection, cosine distance, one unnamed vector.

It takes the client built by the caller, so the same code serves a Qdrant server (``AsyncQdrantClient(url=)``,
REST or gRPC), the embedded Qdrant of single-machine installs (:class:`~common.vectors.qdrant_edge.EdgeClient`:
Qdrant's own engine in the process) and the client's local mode (``location=":memory:"``), which tests use. The
identity record is the point at :data:`~common.vectors.base.IDENTITY_ID`;
every read, count and search excludes it with a ``must_not`` ``has_id`` condition, so nothing else has to
remember it exists.

Qdrant speaks cosine *similarity* (``score``, higher is closer) and normalises vectors on write; the port
speaks cosine distance, so thresholds are converted at the boundary (``score >= 1 - max_distance``).

Local mode is exact brute force in numpy, but it evaluates payload conditions in Python for every point and
runs synchronously on the event loop, and its lexical leg scores every chunk's sparse vector in Python: fine for
tests. The embedded Qdrant and a server answer from Qdrant's own indexes (docs/benchmarks.md compares them).

Errors are translated at the boundary: unknown collection → ``NotFound("collection_not_found")``, server
unreachable → ``Unavailable("vector_store_unavailable")``, input the engine refuses →
``InvalidInput("vector_store_rejected")``. A name that breaks the collection-name rule every store shares is
refused with ``InvalidInput("invalid_collection_name")`` before any request (Qdrant itself takes 255 characters).

**Lexical leg.** Every chunk also carries a named sparse vector, :data:`LEXICAL_VECTOR`, computed by the shared
analyser (:mod:`common.vectors.lexical`) from its ``content`` at upsert: the term ids with BM25's saturated tf
weights. The sparse vector's ``Modifier.IDF`` has Qdrant apply the IDF at query time from exact document
frequencies (local mode too, with the same Lucene formula), so a lexical score is BM25 exactly as pgvector
computes it. The tf weights need the collection's mean chunk length: each chunk keeps its length in terms
(:data:`LENGTH_FIELD`, integer-indexed) and a facet over it gives the mean without a stats table to keep in
step. A chunk without terms still gets an empty sparse vector, so that it counts in BM25's N as in every engine.

Hybrid searches send both legs in one ``query_batch_points`` call and fuse them with
:func:`common.vectors.fusion.fuse` (not Qdrant's own RRF, which reports neither leg's rank), so results
and legs agree with the other engines. ``distance`` is the cosine distance in every mode: the lexical leg's hits
are measured by the engine, with the dense query restricted to their ids (one more query; no vector travels).

**Collections from before the lexical leg** (no sparse vector) are upgraded by :meth:`QdrantStore.upgrade_lexical`:
``create_vector_name`` adds the sparse vector (server and local mode), then every chunk without it is analysed and
filled with ``update_vectors`` (resumable: it picks up the chunks still lacking it). The first write to such a
collection upgrades it first. Until then a hybrid search answers with the dense leg alone (logged once per
collection) and a lexical search fails with ``Unavailable("lexical_index_missing")``: the question still gets an
answer, and nothing pretends keyword results exist.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import grpc  # type: ignore[import-untyped]
import msgspec
from qdrant_client import AsyncQdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from common.errors import AppError, InvalidInput, NotFound, Unavailable
from common.vectors import lexical
from common.vectors.base import (
    FILTERABLE,
    IDENTITY_ID,
    Search,
    SearchFilter,
    SearchHit,
    SearchResult,
    VectorRecord,
    identity_vector,
)
from common.vectors.fusion import answered, fuse, leg_depth, leg_properties, lexical_only
from common.vectors.records import (
    as_floats,
    check_retrieval,
    checked_identity_payload,
    checked_name,
    chunk_content,
    chunk_uuid,
    collection_already_exists,
    collection_not_found,
    identity_not_found,
    is_collection_name,
    lexical_index_missing,
    matches_nothing,
    misgrouped,
    payload_dict,
    readable_chunk,
    search_each,
    valid_identity,
)
from schemas.models import Identity

if TYPE_CHECKING:
    from common.vectors.qdrant_edge import EdgeClient

_log = logging.getLogger(__name__)

PROVIDER = "qdrant"
UPSERT_BATCH = 256
"""Points per upsert request: keeps request bodies small (a 256 x 1024-d batch is about 2 MB of JSON)."""
SCROLL_PAGE = 1024
LEXICAL_VECTOR = "lexical"
"""The named sparse vector of the lexical leg (BM25 tf weights; Qdrant applies the IDF)."""
LENGTH_FIELD = "lexical_length"
"""Payload field: the chunk's length in analysed terms, for BM25's mean chunk length."""
DENSE_VECTOR = ""
"""The unnamed dense vector's name in requests that name vectors."""
FACET_LIMIT = 100_000
"""Distinct chunk lengths a facet may report: far more than any chunker produces."""
UPGRADE_PAGE = 256

_NOT_IDENTITY = models.HasIdCondition(has_id=[IDENTITY_ID])
_CHUNKS_ONLY = models.Filter(must_not=[_NOT_IDENTITY])
_NO_GROUPS = models.IsEmptyCondition(is_empty=models.PayloadField(key="groups"))
_WITHOUT_LEXICAL = models.Filter(must_not=[_NOT_IDENTITY, models.HasVectorCondition(has_vector=LEXICAL_VECTOR)])
_LEXICAL_PARAMS = models.SparseVectorParams(modifier=models.Modifier.IDF)
LENGTH_INDEX = models.IntegerIndexParams(type=models.IntegerIndexType.INTEGER, lookup=True, range=False)
"""The index on :data:`LENGTH_FIELD`: exact values for the facet, no ranges."""
# Local mode keeps only matches whose score is strictly above the threshold and scores in float32; loosen it
# a little and apply the exact ``distance <= max_distance`` test on our side.
_THRESHOLD_SLACK = 1e-6
_VENDOR_ERRORS = (UnexpectedResponse, ResponseHandlingException, grpc.RpcError, ValueError)
_LOCAL_INDEX_WARNING = "Payload indexes have no effect in the local Qdrant"


class ScoredPoint(Protocol):
    """A point a search returns, as the adapter reads it: the client's ``models.ScoredPoint``, or Qdrant Edge's own
    (:class:`~common.vectors.qdrant_edge.EdgeClient` passes them on unconverted: building a hundred pydantic models
    per leg cost more than Edge's search)."""

    @property
    def id(self) -> object: ...
    @property
    def score(self) -> float: ...
    @property
    def payload(self) -> dict[str, Any] | None: ...


class _Answer(Protocol):
    """A query's answer: the client's ``QueryResponse`` or :class:`~common.vectors.qdrant_edge.EdgeAnswer`."""

    @property
    def points(self) -> Sequence[ScoredPoint]: ...


class QdrantStore:
    """:class:`~common.vectors.base.VectorStore` over Qdrant; owns (and closes) the client it is given."""

    def __init__(self, client: AsyncQdrantClient | EdgeClient) -> None:
        self._client = client
        self._lexical_ready: set[str] = set()
        """Collections known to have the sparse vector (never forgotten but on drop: none loses it)."""
        self._warned_unindexed: set[str] = set()

    @property
    def provider(self) -> str:
        return PROVIDER

    async def create_collection(self, identity: Identity, dimension: int) -> None:
        await self._create(identity.name, identity, dimension)

    async def create_version(self, identity: Identity, dimension: int, version: str) -> None:
        """A collection of its own, made as a collection is; an alias makes it the collection at the swap."""
        await self._create(version, identity, dimension)

    async def swap_version(self, name: str, version: str) -> None:
        """Qdrant has no rename: ``name`` becomes an alias of ``version``. When ``name`` is already an alias (a
        collection migrated before), one ``update_collection_aliases`` call moves it, which Qdrant applies atomically;
        then the old version is deleted. A collection made under its own name is deleted first and the alias made at
        once after: in local mode nothing runs between the two (neither call yields to the event loop); a Qdrant
        server and the embedded Qdrant answer ``collection_not_found`` in between, once per collection (their later
        swaps are atomic)."""
        checked_name(name)
        try:
            if not await self._client.collection_exists(checked_name(version)):
                raise collection_not_found(version)
            previous = (await self._aliases()).get(name)
            moved = models.CreateAliasOperation(
                create_alias=models.CreateAlias(collection_name=version, alias_name=name)
            )
            if previous is not None:
                unlinked = models.DeleteAliasOperation(delete_alias=models.DeleteAlias(alias_name=name))
                await self._client.update_collection_aliases(change_aliases_operations=[unlinked, moved])
                await self._client.delete_collection(previous)
            else:
                await self._client.delete_collection(name)
                await self._client.update_collection_aliases(change_aliases_operations=[moved])
        except _VENDOR_ERRORS as exc:
            raise await self._translated(exc, version) from exc
        self._lexical_ready.discard(name)

    async def _aliases(self) -> dict[str, str]:
        """Alias → the collection it names."""
        response = await self._client.get_aliases()
        return {alias.alias_name: alias.collection_name for alias in response.aliases}

    async def _create(self, name: str, identity: Identity, dimension: int) -> None:
        payload = checked_identity_payload(identity)
        if dimension < 1:
            raise InvalidInput(f"vector dimension must be positive, got {dimension}", code="invalid_dimension")
        checked_name(name)
        if await self.collection_exists(name):
            raise collection_already_exists(name)
        try:
            await self._client.create_collection(
                name,
                vectors_config=models.VectorParams(size=dimension, distance=models.Distance.COSINE),
                sparse_vectors_config={LEXICAL_VECTOR: _LEXICAL_PARAMS},
            )
        except _VENDOR_ERRORS as exc:
            if await self.collection_exists(name):  # another writer won the race
                raise collection_already_exists(name) from exc
            raise await self._translated(exc, name) from exc
        try:
            await self._create_indexes(name)
            await self._put_identity(name, payload, dimension)
        except _VENDOR_ERRORS as exc:
            error = await self._translated(exc, name)
            # A collection without its identity would be listed as foreign forever: leave nothing behind.
            with contextlib.suppress(*_VENDOR_ERRORS):
                await self._client.delete_collection(name)
            raise error from exc
        self._lexical_ready.add(name)

    async def collection_exists(self, name: str) -> bool:
        if not is_collection_name(name):
            return False
        try:
            return await self._client.collection_exists(name)
        except _VENDOR_ERRORS as exc:
            raise await self._translated(exc, name) from exc

    async def read_identity(self, name: str) -> dict[str, Any] | None:
        if not is_collection_name(name):
            return None
        try:
            records = await self._client.retrieve(name, ids=[IDENTITY_ID], with_payload=True, with_vectors=False)
        except _VENDOR_ERRORS as exc:
            error = await self._translated(exc, name)
            if isinstance(error, NotFound):
                return None
            raise error from exc
        if not records:
            return None
        return dict(records[0].payload or {})

    async def write_identity(self, identity: Identity) -> None:
        payload = checked_identity_payload(identity)
        name = checked_name(identity.name)
        try:
            info = await self._client.get_collection(name)
            await self._put_identity(name, payload, _dimension(name, info))
        except _VENDOR_ERRORS as exc:
            raise await self._translated(exc, name) from exc

    async def set_groups(self, name: str, groups: Sequence[str]) -> None:
        checked_name(name)
        current = await self._stored_identity(name)
        groups = list(groups)
        await self.write_identity(msgspec.structs.replace(current, groups=groups or msgspec.UNSET))
        try:
            if groups:
                await self._client.set_payload(name, payload={"groups": groups}, points=_CHUNKS_ONLY, wait=True)
            else:
                await self._client.delete_payload(name, keys=["groups"], points=_CHUNKS_ONLY, wait=True)
        except _VENDOR_ERRORS as exc:
            raise await self._translated(exc, name) from exc

    async def upsert(self, name: str, records: Sequence[VectorRecord]) -> None:
        """Chunks with their lexical sparse vectors; a collection from before the lexical leg is upgraded first.

        The tf weights use the mean chunk length of the collection as it will be with this batch (its lengths
        counted once more if the batch overwrites chunks: a rewrite does not move the mean much)."""
        checked_name(name)
        latest = {str(chunk_uuid(record.id)): record for record in records}  # a repeated id: its last record
        if not latest:
            return
        await self._ensure_lexical(name)
        ids: list[models.ExtendedPointId] = list(latest)
        records = list(latest.values())
        payloads = [payload_dict(record.payload) for record in records]
        analysed = await asyncio.to_thread(_analysed, payloads)  # CPU work off the event loop
        try:
            chunks, total = await self._lengths(name)
            avgdl = (total + sum(terms.length for terms in analysed)) / (chunks + len(analysed))
            for start in range(0, len(records), UPSERT_BATCH):
                end = start + UPSERT_BATCH
                points = models.Batch(
                    ids=ids[start:end],
                    vectors={
                        DENSE_VECTOR: [as_floats(record.vector) for record in records[start:end]],
                        LEXICAL_VECTOR: [_sparse(terms, avgdl) for terms in analysed[start:end]],
                    },
                    payloads=[
                        {**payload, LENGTH_FIELD: terms.length}
                        for payload, terms in zip(payloads[start:end], analysed[start:end], strict=True)
                    ],
                )
                await self._client.upsert(name, points=points, wait=True)
        except _VENDOR_ERRORS as exc:
            raise await self._translated(exc, name) from exc

    async def delete_document(self, name: str, document_id: str) -> None:
        checked_name(name)
        selector = models.FilterSelector(filter=_chunks_where(document_id=document_id))
        try:
            await self._client.delete(name, points_selector=selector, wait=True)
        except _VENDOR_ERRORS as exc:
            raise await self._translated(exc, name) from exc

    async def update_document(
        self, name: str, document_id: str, *, document_name: str, tags: Sequence[str], label: str | None
    ) -> None:
        checked_name(name)
        await self._set_on_document(
            name, document_id, {"document_name": document_name, "tags": list(tags), "label": label}
        )

    async def _set_on_document(self, name: str, document_id: str, payload: dict[str, Any]) -> None:
        try:
            await self._client.set_payload(
                name, payload=payload, points=_chunks_where(document_id=document_id), wait=True
            )
        except _VENDOR_ERRORS as exc:
            raise await self._translated(exc, name) from exc

    async def delete_ids(self, name: str, ids: Sequence[str]) -> None:
        checked_name(name)
        point_ids: list[models.ExtendedPointId] = [str(chunk_uuid(id_)) for id_ in ids]
        if not point_ids:
            return
        try:
            await self._client.delete(name, points_selector=models.PointIdsList(points=point_ids), wait=True)
        except _VENDOR_ERRORS as exc:
            raise await self._translated(exc, name) from exc

    async def count(self, name: str, *, document_id: str | None = None) -> int:
        checked_name(name)
        try:
            result = await self._client.count(name, count_filter=_chunks_where(document_id=document_id), exact=True)
        except _VENDOR_ERRORS as exc:
            raise await self._translated(exc, name) from exc
        return result.count

    async def document_ids(self, name: str) -> dict[str, int]:
        checked_name(name)
        counts: dict[str, int] = {}
        offset: models.ExtendedPointId | None = None
        try:
            while True:
                records, offset = await self._client.scroll(
                    name,
                    scroll_filter=_CHUNKS_ONLY,
                    limit=SCROLL_PAGE,
                    offset=offset,
                    with_payload=["document_id"],
                    with_vectors=False,
                )
                for record in records:
                    document_id = (record.payload or {}).get("document_id")
                    if isinstance(document_id, str):
                        counts[document_id] = counts.get(document_id, 0) + 1
                if offset is None:
                    return counts
        except _VENDOR_ERRORS as exc:
            raise await self._translated(exc, name) from exc

    async def count_misgrouped(self, name: str, groups: Sequence[str]) -> int:
        checked_name(name)
        count = 0
        offset: models.ExtendedPointId | None = None
        try:
            while True:
                records, offset = await self._client.scroll(
                    name, scroll_filter=_CHUNKS_ONLY, limit=SCROLL_PAGE, offset=offset, with_payload=["groups"]
                )
                count += sum(misgrouped(record.payload or {}, groups) for record in records)
                if offset is None:
                    return count
        except _VENDOR_ERRORS as exc:
            raise await self._translated(exc, name) from exc

    async def search_many(self, searches: Sequence[Search]) -> list[SearchResult]:
        return await search_each(self, searches)

    async def search(self, search: Search) -> list[SearchHit]:
        """Dense: one ``query_points`` call (a second one only when equal scores straddle ``limit``). Lexical
        and hybrid: see the module docstring."""
        checked_name(search.name)
        if search.limit < 0:
            raise InvalidInput(f"limit must not be negative, got {search.limit}", code="invalid_limit")
        check_retrieval(search.mode, search.dense_weight)
        where = search.where
        if search.limit == 0 or matches_nothing(where):
            return []
        asked = leg_properties(search.properties, search.fusion) if search.mode == "hybrid" else search.properties
        guarded = where is not None and where.readable_by is not None and "groups" not in asked
        with_payload = [*asked, "groups"] if guarded else (list(asked) or False)
        hits = await self._search(search, as_floats(search.vector), with_payload)
        return answered(access_checked(hits, where, drop_groups=guarded), search.properties)

    async def _search(self, search: Search, query: list[float], with_payload: list[str] | bool) -> list[SearchHit]:
        """:meth:`search` once its arguments are checked."""
        name, limit, max_distance, where = search.name, search.limit, search.max_distance, search.where
        if search.mode == "dense":
            return await self._dense(
                name, query, limit=limit, with_payload=with_payload, max_distance=max_distance, where=where
            )
        terms = lexical.query_terms(search.text)
        if search.mode == "lexical":
            if not terms.ids:
                return []
            if not await self._has_lexical(name):
                raise lexical_index_missing(name, PROVIDER)
            leg = _Leg(name, query, search_filter(where), with_payload, depth=limit, terms=terms)
            [hits] = await self._legs([leg])
            return lexical_only(hits, limit=limit, max_distance=max_distance)
        depth = leg_depth(limit)
        legs = [_Leg(name, query, search_filter(where), with_payload, depth=depth)]
        if terms.ids and await self._has_lexical(name, warn=True):
            legs.append(_Leg(name, query, search_filter(where), with_payload, depth=depth, terms=terms))
        dense, *lexical_hits = await self._legs(legs)
        merged = lexical_hits[0] if lexical_hits else []
        return fuse(
            dense,
            merged,
            dense_weight=search.dense_weight,
            limit=limit,
            max_distance=max_distance,
            fusion=search.fusion,
        )

    async def _dense(
        self,
        name: str,
        query: list[float],
        *,
        limit: int,
        with_payload: list[str] | bool,
        max_distance: float | None,
        where: SearchFilter | None,
    ) -> list[SearchHit]:
        """The dense mode, kappi's hot path: the engine cuts at ``max_distance`` and builds no legs."""
        query_filter = search_filter(where)
        threshold = None if max_distance is None else 1.0 - max_distance - _THRESHOLD_SLACK
        fetch = limit + 1  # one more than asked shows whether ties continue past the cut
        try:
            while True:
                response = await self._client.query_points(
                    name,
                    query=query,
                    query_filter=query_filter,
                    limit=fetch,
                    with_payload=with_payload,
                    with_vectors=False,
                    score_threshold=threshold,
                )
                points = response.points
                if not ties_continue(points, limit=limit, fetched=fetch):
                    break
                fetch *= 4
        except _VENDOR_ERRORS as exc:
            raise await self._translated(exc, name) from exc
        return ranked_hits(points, limit=limit, max_distance=max_distance)

    async def _legs(self, legs: Sequence[_Leg]) -> list[list[SearchHit]]:
        """Each leg's ``depth`` best hits, ties by id, all legs in one batch request; a leg whose equal scores
        straddle its depth is asked again, deeper, on its own."""
        name = legs[0].name
        fetches = [leg.depth + 1 for leg in legs]
        try:
            responses: Sequence[_Answer] = await self._client.query_batch_points(
                name, requests=[leg.request(fetch) for leg, fetch in zip(legs, fetches, strict=True)]
            )
            return [
                await self._hits(leg, await self._complete(leg, response.points, fetch))
                for leg, fetch, response in zip(legs, fetches, responses, strict=True)
            ]
        except _VENDOR_ERRORS as exc:
            raise await self._translated(exc, name) from exc

    async def _hits(self, leg: _Leg, points: Sequence[ScoredPoint]) -> list[SearchHit]:
        """A leg's hits; a lexical leg's with their cosine distances, measured by the engine in one more query."""
        ranked = leg.ranked(points)
        if leg.terms is None:
            return [_dense_hit(point) for point in ranked]
        if not ranked:
            return []
        [answer] = await self._client.query_batch_points(leg.name, requests=[leg.measuring(ranked)])
        similarity = {str(point.id): min(point.score, 1.0) for point in answer.points}
        return [
            SearchHit(
                id=str(point.id),
                score=point.score,
                distance=_distance(similarity.get(str(point.id))),
                payload=point.payload or {},
            )
            for point in ranked
        ]

    async def _complete(self, leg: _Leg, points: Sequence[ScoredPoint], fetch: int) -> Sequence[ScoredPoint]:
        """A leg's points, asked again deeper while equal scores may continue past its depth."""
        while ties_continue(points, limit=leg.depth, fetched=fetch):
            fetch *= 4
            [response] = await self._client.query_batch_points(leg.name, requests=[leg.request(fetch)])
            points = response.points
        return points

    async def _has_lexical(self, name: str, *, warn: bool = False) -> bool:
        """Whether the collection has the lexical sparse vector (asked once per collection until it has)."""
        if name in self._lexical_ready:
            return True
        try:
            info = await self._client.get_collection(name)
        except _VENDOR_ERRORS as exc:
            raise await self._translated(exc, name) from exc
        if LEXICAL_VECTOR in (info.config.params.sparse_vectors or {}):
            self._lexical_ready.add(name)
            return True
        if warn and name not in self._warned_unindexed:
            self._warned_unindexed.add(name)
            _log.warning(
                "Qdrant collection %r has no lexical index yet (created before hybrid retrieval): hybrid searches "
                "answer with the dense leg alone until it is upgraded (its next write, or upgrade_lexical)",
                name,
            )
        return False

    async def _ensure_lexical(self, name: str) -> None:
        if not await self._has_lexical(name):
            await self.upgrade_lexical(name)

    async def upgrade_lexical(self, name: str) -> int:
        """Give a collection from before the lexical leg its sparse vector and fill it on every chunk lacking it
        (idempotent and resumable); returns how many chunks were filled. ``ragu`` runs it on a collection's
        first write; an operator may run it ahead (it reads every chunk once to measure, once to fill)."""
        checked_name(name)
        try:
            info = await self._client.get_collection(name)
            if LEXICAL_VECTOR not in (info.config.params.sparse_vectors or {}):
                config = models.SparseVectorNameConfig(sparse=models.SparseVectorConfig(modifier=models.Modifier.IDF))
                await self._client.create_vector_name(name, vector_name=LEXICAL_VECTOR, vector_name_config=config)
            await self._create_indexes(name)
            await self._backfill_lengths(name)
            chunks, total = await self._lengths(name)
            filled = await self._backfill_vectors(name, total / chunks if chunks else 0.0)
        except _VENDOR_ERRORS as exc:
            raise await self._translated(exc, name) from exc
        self._lexical_ready.add(name)
        if filled:
            _log.info("Qdrant collection %r: lexical index added to %d chunks", name, filled)
        return filled

    async def _backfill_lengths(self, name: str) -> None:
        """Pass one of an upgrade: every chunk still without its sparse vector gets its length in terms."""
        async for page in self._pages_without_lexical(name):
            analysed = await asyncio.to_thread(_analysed, [record.payload or {} for record in page])
            operations: list[models.UpdateOperation] = [
                models.SetPayloadOperation(
                    set_payload=models.SetPayload(payload={LENGTH_FIELD: terms.length}, points=[record.id])
                )
                for record, terms in zip(page, analysed, strict=True)
            ]
            await self._client.batch_update_points(name, update_operations=operations, wait=True)

    async def _backfill_vectors(self, name: str, avgdl: float) -> int:
        """Pass two: the sparse vectors, weighted with the collection's mean length (now known)."""
        filled = 0
        async for page in self._pages_without_lexical(name):
            analysed = await asyncio.to_thread(_analysed, [record.payload or {} for record in page])
            vectors = [
                models.PointVectors(id=record.id, vector={LEXICAL_VECTOR: _sparse(terms, avgdl)})
                for record, terms in zip(page, analysed, strict=True)
            ]
            await self._client.update_vectors(name, points=vectors, wait=True)
            filled += len(vectors)
        return filled

    async def _pages_without_lexical(self, name: str) -> Any:
        """Pages of chunks (with ``content``) that have no sparse vector yet, in id order."""
        offset: models.ExtendedPointId | None = None
        while True:
            records, offset = await self._client.scroll(
                name,
                scroll_filter=_WITHOUT_LEXICAL,
                limit=UPGRADE_PAGE,
                offset=offset,
                with_payload=["content"],
                with_vectors=False,
            )
            if records:
                yield records
            if offset is None:
                return

    async def _lengths(self, name: str) -> tuple[int, int]:
        """How many chunks have a length and their total length in terms (a facet: no stats table to keep)."""
        response = await self._client.facet(
            name, key=LENGTH_FIELD, facet_filter=_CHUNKS_ONLY, limit=FACET_LIMIT, exact=True
        )
        chunks = total = 0
        for hit in response.hits:
            if isinstance(hit.value, int) and not isinstance(hit.value, bool):
                chunks += hit.count
                total += hit.value * hit.count
        return chunks, total

    async def drop_collection(self, name: str) -> None:
        """A migrated collection is an alias of its current version (:meth:`swap_version`): both go."""
        if not is_collection_name(name):
            return
        self._lexical_ready.discard(name)
        try:
            target = (await self._aliases()).get(name)
            if target is not None:
                await self._client.delete_collection(target)  # its aliases go with it
            await self._client.delete_collection(name)
        except _VENDOR_ERRORS as exc:
            error = await self._translated(exc, name)
            if not isinstance(error, NotFound):
                raise error from exc

    async def list_identities(self) -> list[Identity]:
        try:
            response = await self._client.get_collections()
            aliases = await self._aliases()
        except _VENDOR_ERRORS as exc:
            raise await self._translated(exc, None) from exc
        versions = set(aliases.values())  # listed under the alias that names them
        names = {collection.name for collection in response.collections if collection.name not in versions}
        identities = []
        for name in sorted(names | set(aliases)):
            stored = await self.read_identity(name)
            identity = valid_identity(name, stored)
            if identity is not None:
                identities.append(identity)
        return identities

    async def aclose(self) -> None:
        await self._client.close()

    async def _stored_identity(self, name: str) -> Identity:
        stored = await self.read_identity(name)
        identity = valid_identity(name, stored)
        if identity is not None:
            return identity
        if stored is None and not await self.collection_exists(name):
            raise collection_not_found(name)
        raise identity_not_found(name)

    async def _put_identity(self, name: str, payload: dict[str, Any], dimension: int) -> None:
        # The identity has no sparse vector: it is outside BM25's statistics and never a lexical hit.
        point = models.PointStruct(id=IDENTITY_ID, vector=identity_vector(dimension), payload=payload)
        await self._client.upsert(name, points=[point], wait=True)

    async def _create_indexes(self, name: str) -> None:
        """Keyword indexes on :data:`FILTERABLE`, an integer one (facets) on :data:`LENGTH_FIELD`."""
        with warnings.catch_warnings():
            # Local mode warns that it filters without indexes; we request them for the server's sake.
            warnings.filterwarnings("ignore", message=_LOCAL_INDEX_WARNING, category=UserWarning)
            for field in FILTERABLE:
                await self._client.create_payload_index(
                    name, field_name=field, field_schema=models.PayloadSchemaType.KEYWORD, wait=True
                )
            await self._client.create_payload_index(name, field_name=LENGTH_FIELD, field_schema=LENGTH_INDEX, wait=True)

    async def _translated(self, exc: Exception, name: str | None) -> AppError:
        """Our error for a client exception; asks the store only when the exception cannot say."""
        if isinstance(exc, ResponseHandlingException):
            return _unavailable(exc)
        if isinstance(exc, UnexpectedResponse):
            return _translated_http(exc, name)
        if isinstance(exc, grpc.RpcError):
            return _translated_grpc(exc, name)
        # Local mode reports everything as ValueError; a missing collection is the one we must tell apart.
        if name is not None and not await self._client.collection_exists(name):
            return collection_not_found(name)
        return _rejected(exc)


class _Leg:
    """One leg of a lexical or hybrid search: the request to send and how to read its points."""

    def __init__(
        self,
        name: str,
        query: list[float],
        query_filter: models.Filter,
        with_payload: list[str] | bool,
        *,
        depth: int,
        terms: lexical.DocumentTerms | None = None,
    ) -> None:
        self.name = name
        self.query = query
        self.filter = query_filter
        self.with_payload = with_payload
        self.depth = depth
        self.terms = terms
        """``None``: the dense leg."""

    def request(self, fetch: int) -> models.QueryRequest:
        if self.terms is None:
            return models.QueryRequest(
                query=self.query, filter=self.filter, limit=fetch, with_payload=self.with_payload, with_vector=False
            )
        # Query tfs as values: a term said twice weighs twice; the IDF modifier multiplies each by its IDF.
        sparse = models.SparseVector(indices=self.terms.ids, values=[float(tf) for tf in self.terms.tfs])
        return models.QueryRequest(
            query=sparse,
            using=LEXICAL_VECTOR,
            filter=self.filter,
            limit=fetch,
            with_payload=self.with_payload,
            with_vector=False,
        )

    def ranked(self, points: Sequence[ScoredPoint]) -> list[ScoredPoint]:
        """The leg's ``depth`` best, ties by id (scored by similarity in the dense leg, by BM25 in the lexical)."""
        return sorted(points, key=lambda point: (-point.score, str(point.id)))[: self.depth]

    def measuring(self, ranked: Sequence[ScoredPoint]) -> models.QueryRequest:
        """The dense query restricted to a lexical leg's hits: the engine measures their cosine similarity, so no
        vector travels (a hundred 384-d vectors cost more to carry and convert than the search)."""
        ids: list[models.ExtendedPointId] = [str(point.id) for point in ranked]
        return models.QueryRequest(
            query=self.query,
            filter=models.Filter(must=[models.HasIdCondition(has_id=ids)]),
            limit=len(ids),
            with_payload=False,
            with_vector=False,
        )


def _dense_hit(point: ScoredPoint) -> SearchHit:
    score = min(point.score, 1.0)  # float rounding can push an identical vector just past 1
    return SearchHit(id=str(point.id), score=score, distance=1.0 - score, payload=point.payload or {})


def _analysed(payloads: Sequence[dict[str, Any]]) -> list[lexical.DocumentTerms]:
    """Each payload's ``content`` as the index stores it (none: no terms, still a chunk of the collection)."""
    return [lexical.document_terms(chunk_content(payload)) for payload in payloads]


def _sparse(terms: lexical.DocumentTerms, avgdl: float) -> models.SparseVector:
    return models.SparseVector(indices=terms.ids, values=lexical.bm25_weights(terms.tfs, terms.length, avgdl))


def _distance(similarity: float | None) -> float:
    """``1 - cosine similarity``, in ``[0, 2]``; a hit the engine did not measure (deleted meanwhile) is as far as
    can be."""
    return 2.0 if similarity is None else min(max(1.0 - similarity, 0.0), 2.0)


def ties_continue(points: Sequence[ScoredPoint], *, limit: int, fetched: int) -> bool:
    """Whether a full page ends in a tie with the ``limit``-th point, so more equal scores may follow."""
    return len(points) >= fetched > limit and points[-1].score == points[limit - 1].score


@functools.lru_cache(maxsize=1024)
def search_filter(where: SearchFilter | None) -> models.Filter:
    """The Qdrant filter for a search (every leg): never the identity, plus the access, document, tag and label
    conditions.

    Cached: building the pydantic models costs ~35 µs a search, and kappi asks with few distinct group sets.
    Sharing is safe because the client never changes a filter it is given (local mode copies first).
    """
    if where is None:
        return _CHUNKS_ONLY
    must: list[models.Condition] = []
    if where.readable_by is not None:
        must.append(_readable_by(where.readable_by, ungrouped=where.ungrouped_readable))
    for key, values in (("document_id", where.document_ids), ("tags", where.tags), ("label", where.labels)):
        if values is not None:
            must.append(models.FieldCondition(key=key, match=models.MatchAny(any=sorted(values))))
    return models.Filter(must=must, must_not=[_NOT_IDENTITY]) if must else _CHUNKS_ONLY


def ranked_hits(points: Sequence[ScoredPoint], *, limit: int, max_distance: float | None) -> list[SearchHit]:
    """Closest first, equal scores by id ascending, at most ``limit``, none beyond ``max_distance``."""
    hits = []
    for point in sorted(points, key=lambda point: (-point.score, str(point.id))):
        hit = _dense_hit(point)
        if max_distance is not None and hit.distance > max_distance:
            break
        hits.append(hit)
        if len(hits) == limit:
            break
    return hits


def _readable_by(groups: frozenset[str], *, ungrouped: bool) -> models.Condition:
    """Qdrant's part of the access rule: a chunk with no groups (where those are readable) or one of ``groups``.
    Its ``is_empty`` also takes ``[]`` and null for no groups, and a match takes a string for a list of one:
    :func:`access_checked` drops those chunks after the search."""
    if not groups:
        return _NO_GROUPS  # an empty set with ungrouped chunks unreadable never gets here: matches_nothing
    has_group = models.FieldCondition(key="groups", match=models.MatchAny(any=sorted(groups)))
    return models.Filter(should=[_NO_GROUPS, has_group]) if ungrouped else has_group


def access_checked(hits: list[SearchHit], where: SearchFilter | None, *, drop_groups: bool) -> list[SearchHit]:
    """``hits`` without the chunks whose ``groups`` copy the filter could not judge (:func:`readable_chunk`);
    with ``drop_groups``, the ``groups`` fetched only for this check are taken out of each payload again."""
    if where is None or where.readable_by is None:
        return hits
    kept = [hit for hit in hits if readable_chunk(hit.payload, where)]
    if not drop_groups:
        return kept
    return [
        msgspec.structs.replace(hit, payload={k: v for k, v in hit.payload.items() if k != "groups"})
        if "groups" in hit.payload
        else hit
        for hit in kept
    ]


def _chunks_where(*, document_id: str | None) -> models.Filter:
    if document_id is None:
        return _CHUNKS_ONLY
    of_document = models.FieldCondition(key="document_id", match=models.MatchValue(value=document_id))
    return models.Filter(must=[of_document], must_not=[_NOT_IDENTITY])


def _dimension(name: str, info: models.CollectionInfo) -> int:
    vectors = info.config.params.vectors
    if isinstance(vectors, models.VectorParams):
        return vectors.size
    raise InvalidInput(
        f"collection {name!r} does not have the single unnamed vector a Ragu collection has",
        code="collection_incompatible",
    )


def _translated_http(exc: UnexpectedResponse, name: str | None) -> AppError:
    status = exc.status_code or 500
    if status == 404 and name is not None:
        return collection_not_found(name)
    if status == 409 and name is not None:
        return collection_already_exists(name)
    if 400 <= status < 500:
        return _rejected(exc)
    return _unavailable(exc)


def _translated_grpc(exc: Any, name: str | None) -> AppError:
    code = exc.code()
    if code == grpc.StatusCode.NOT_FOUND and name is not None:
        return collection_not_found(name)
    if code == grpc.StatusCode.ALREADY_EXISTS and name is not None:
        return collection_already_exists(name)
    if code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION):
        return _rejected(exc)
    return _unavailable(exc)


def _unavailable(exc: Exception) -> Unavailable:
    return Unavailable(f"Qdrant is unavailable: {exc}", code="vector_store_unavailable", extra={"provider": PROVIDER})


def _rejected(exc: Exception) -> InvalidInput:
    return InvalidInput(f"Qdrant refused the request: {exc}", code="vector_store_rejected")
