"""The Qdrant adapter: one Qdrant collection per Ragu collection, cosine distance, one unnamed vector.

It takes an ``AsyncQdrantClient`` built by the caller, so the same code serves a Qdrant server (``url=``,
REST or gRPC) and the client's local mode (``location=":memory:"`` or ``path=``) used by tests and
single-machine installs. The identity record is the point at :data:`~common.vectors.base.IDENTITY_ID`;
every read, count and search excludes it with a ``must_not`` ``has_id`` condition, so nothing else has to
remember it exists.

Qdrant speaks cosine *similarity* (``score``, higher is closer) and normalises vectors on write; the port
speaks cosine distance, so thresholds are converted at the boundary (``score >= 1 - max_distance``).

Local mode is exact brute force in numpy, but it evaluates payload conditions in Python for every point and
runs synchronously on the event loop: at 10k points a search takes ~80 ms with only the identity exclusion
and ~400 ms with an access filter. Fine for tests, the CLI and small collections; serve kappi from a server.

Errors are translated at the boundary: unknown collection → ``NotFound("collection_not_found")``, server
unreachable → ``Unavailable("vector_store_unavailable")``, input the engine refuses →
``InvalidInput("vector_store_rejected")``. A name that breaks the collection-name rule every store shares is
refused with ``InvalidInput("invalid_collection_name")`` before any request (Qdrant itself takes 255 characters).
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from collections.abc import Sequence
from typing import Any

import grpc  # type: ignore[import-untyped]
import msgspec
from qdrant_client import AsyncQdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from common.errors import AppError, InvalidInput, NotFound, Unavailable
from common.vectors.base import (
    FILTERABLE,
    IDENTITY_ID,
    Search,
    SearchFilter,
    SearchHit,
    SearchResult,
    Vector,
    VectorRecord,
    identity_vector,
)
from common.vectors.records import (
    as_floats,
    checked_identity_payload,
    checked_name,
    chunk_uuid,
    collection_already_exists,
    collection_not_found,
    identity_not_found,
    is_collection_name,
    payload_dict,
    search_each,
    valid_identity,
)
from schemas.models import Identity

PROVIDER = "qdrant"
UPSERT_BATCH = 256
"""Points per upsert request: keeps request bodies small (a 256 x 1024-d batch is about 2 MB of JSON)."""
SCROLL_PAGE = 1024

_NOT_IDENTITY = models.HasIdCondition(has_id=[IDENTITY_ID])
_CHUNKS_ONLY = models.Filter(must_not=[_NOT_IDENTITY])
_NO_GROUPS = models.IsEmptyCondition(is_empty=models.PayloadField(key="groups"))
# Local mode keeps only matches whose score is strictly above the threshold and scores in float32; loosen it
# a little and apply the exact ``distance <= max_distance`` test on our side.
_THRESHOLD_SLACK = 1e-6
_VENDOR_ERRORS = (UnexpectedResponse, ResponseHandlingException, grpc.RpcError, ValueError)
_LOCAL_INDEX_WARNING = "Payload indexes have no effect in the local Qdrant"


class QdrantStore:
    """:class:`~common.vectors.base.VectorStore` over Qdrant; owns (and closes) the client it is given."""

    def __init__(self, client: AsyncQdrantClient) -> None:
        self._client = client

    @property
    def provider(self) -> str:
        return PROVIDER

    async def create_collection(self, identity: Identity, dimension: int) -> None:
        payload = checked_identity_payload(identity)
        if dimension < 1:
            raise InvalidInput(f"vector dimension must be positive, got {dimension}", code="invalid_dimension")
        name = checked_name(identity.name)
        if await self.collection_exists(name):
            raise collection_already_exists(name)
        try:
            await self._client.create_collection(
                name, vectors_config=models.VectorParams(size=dimension, distance=models.Distance.COSINE)
            )
        except _VENDOR_ERRORS as exc:
            if await self.collection_exists(name):  # another writer won the race
                raise collection_already_exists(name) from exc
            raise await self._translated(exc, name) from exc
        try:
            for field in FILTERABLE:
                await self._create_keyword_index(name, field)
            await self._put_identity(name, payload, dimension)
        except _VENDOR_ERRORS as exc:
            error = await self._translated(exc, name)
            # A collection without its identity would be listed as foreign forever: leave nothing behind.
            with contextlib.suppress(*_VENDOR_ERRORS):
                await self._client.delete_collection(name)
            raise error from exc

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
        checked_name(name)
        ids: list[models.ExtendedPointId] = [str(chunk_uuid(record.id)) for record in records]
        try:
            for start in range(0, len(records), UPSERT_BATCH):
                batch = records[start : start + UPSERT_BATCH]
                points = models.Batch(
                    ids=ids[start : start + UPSERT_BATCH],
                    vectors=[as_floats(record.vector) for record in batch],
                    payloads=[payload_dict(record.payload) for record in batch],
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

    async def rename_document(self, name: str, document_id: str, document_name: str) -> None:
        checked_name(name)
        payload = {"document_name": document_name}
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

    async def search_many(self, searches: Sequence[Search]) -> list[SearchResult]:
        return await search_each(self, searches)

    async def search(
        self,
        name: str,
        vector: Vector,
        *,
        limit: int,
        properties: Sequence[str],
        max_distance: float | None = None,
        where: SearchFilter | None = None,
    ) -> list[SearchHit]:
        """One ``query_points`` call per search; a second one only when equal scores straddle ``limit``."""
        checked_name(name)
        if limit < 0:
            raise InvalidInput(f"limit must not be negative, got {limit}", code="invalid_limit")
        if limit == 0 or (where is not None and where.document_ids is not None and not where.document_ids):
            return []
        query = as_floats(vector)
        query_filter = search_filter(where)
        with_payload: list[str] | bool = list(properties) or False
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
                if len(points) < fetch or points[-1].score != points[limit - 1].score:
                    break
                fetch *= 4
        except _VENDOR_ERRORS as exc:
            raise await self._translated(exc, name) from exc
        return ranked_hits(points, limit=limit, max_distance=max_distance)

    async def drop_collection(self, name: str) -> None:
        if not is_collection_name(name):
            return
        try:
            await self._client.delete_collection(name)
        except _VENDOR_ERRORS as exc:
            error = await self._translated(exc, name)
            if not isinstance(error, NotFound):
                raise error from exc

    async def list_identities(self) -> list[Identity]:
        try:
            response = await self._client.get_collections()
        except _VENDOR_ERRORS as exc:
            raise await self._translated(exc, None) from exc
        identities = []
        for name in sorted(collection.name for collection in response.collections):
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
        point = models.PointStruct(id=IDENTITY_ID, vector=identity_vector(dimension), payload=payload)
        await self._client.upsert(name, points=[point], wait=True)

    async def _create_keyword_index(self, name: str, field: str) -> None:
        with warnings.catch_warnings():
            # Local mode warns that it filters without indexes; we request them for the server's sake.
            warnings.filterwarnings("ignore", message=_LOCAL_INDEX_WARNING, category=UserWarning)
            await self._client.create_payload_index(
                name, field_name=field, field_schema=models.PayloadSchemaType.KEYWORD, wait=True
            )

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


@functools.lru_cache(maxsize=1024)
def search_filter(where: SearchFilter | None) -> models.Filter:
    """The Qdrant filter for a search: never the identity, plus the access and document conditions.

    Cached: building the pydantic models costs ~35 µs a search, and kappi asks with few distinct group sets.
    Sharing is safe because the client never changes a filter it is given (local mode copies first).
    """
    if where is None:
        return _CHUNKS_ONLY
    must: list[models.Condition] = []
    if where.readable_by is not None:
        must.append(_readable_by(where.readable_by))
    if where.document_ids is not None:
        must.append(models.FieldCondition(key="document_id", match=models.MatchAny(any=sorted(where.document_ids))))
    return models.Filter(must=must, must_not=[_NOT_IDENTITY]) if must else _CHUNKS_ONLY


def ranked_hits(points: Sequence[models.ScoredPoint], *, limit: int, max_distance: float | None) -> list[SearchHit]:
    """Closest first, equal scores by id ascending, at most ``limit``, none beyond ``max_distance``."""
    hits = []
    for point in sorted(points, key=lambda point: (-point.score, str(point.id))):
        score = min(point.score, 1.0)  # float rounding can push an identical vector just past 1
        distance = 1.0 - score
        if max_distance is not None and distance > max_distance:
            break
        hits.append(SearchHit(id=str(point.id), score=score, distance=distance, payload=point.payload or {}))
        if len(hits) == limit:
            break
    return hits


def _readable_by(groups: frozenset[str]) -> models.Condition:
    if not groups:
        return _NO_GROUPS
    has_group = models.FieldCondition(key="groups", match=models.MatchAny(any=sorted(groups)))
    return models.Filter(should=[_NO_GROUPS, has_group])


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
