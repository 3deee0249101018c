"""The Weaviate adapter: one Weaviate collection (class) per Ragu collection, self-provided vectors.

**Unverified against a live server.** No Weaviate server can run where this was written, so the I/O
methods of :class:`WeaviateStore` are correct by construction only: they follow weaviate-client 4.x's
documented async API, and everything that can be separated from I/O is a pure function below, unit-tested
in ``tests/common/vectors/test_weaviate_mapping.py`` against the client's own config and filter objects
(their REST/gRPC serialisations): the collection schema, the search filter, object UUIDs, the property
mapping both ways and the ranking of hits. Run the shared contract suite against a real server before
relying on it.

Choices that follow from Weaviate's model:

- Ragu collection names (``^[A-Z][a-zA-Z0-9_]*$``, at most 63 characters) are valid class names as they are;
  a name that breaks that rule is refused with ``invalid_collection_name`` before any request.
- One named vector, :data:`VECTOR_NAME`, with no vectorizer, an HNSW index and cosine distance. Weaviate's
  cosine distance is already ``1 - cosine similarity``, so distances pass through and ``score = 1 - distance``.
- Every property is declared up front (auto-schema would guess types and tokenise ids into words).
  ``document_id`` and ``groups`` are filterable with ``FIELD`` tokenization so ids and group names match
  whole and exactly (word tokenization would let group ``team-a`` match ``team-b`` via ``team``);
  ``content`` is the only BM25-searchable property. The inverted index records null state so
  "chunk has no groups" is a filter (``is_none``).
- Weaviate cannot hold a null and does not return empty arrays reliably, so writes drop ``None`` values and
  empty lists, and hits put them back for the chunk extras declared as nullable or list-valued.
- The identity object is excluded from every query by an id filter; Weaviate has no bulk property
  update, so :meth:`WeaviateStore.set_groups` rewrites chunks in batches (a batch insert with an existing
  UUID replaces that object).
"""

from __future__ import annotations

import contextlib
import functools
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import msgspec
from weaviate import WeaviateAsyncClient
from weaviate.classes.config import (
    Configure,
    DataType,
    InvertedIndexConfigCreate,
    Property,
    Tokenization,
    VectorConfigCreate,
    VectorDistances,
)
from weaviate.classes.data import DataObject
from weaviate.classes.query import Filter, MetadataQuery
from weaviate.collections.classes.filters import FilterReturn
from weaviate.collections.classes.internal import Object, _Object
from weaviate.collections.collection.async_ import CollectionAsync
from weaviate.exceptions import (
    UnexpectedStatusCodeError,
    WeaviateBaseError,
    WeaviateClosedClientError,
    WeaviateConnectionError,
    WeaviateGRPCUnavailableError,
    WeaviateStartUpError,
)

from common.errors import AppError, InvalidInput, NotFound, Unavailable
from common.vectors.base import (
    CHUNK_EXTRAS,
    FILTERABLE,
    IDENTITY_ID,
    IDENTITY_PROPERTIES,
    TEXT_PROPERTIES,
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

PROVIDER = "weaviate"
VECTOR_NAME = "default"
"""The collection's one named vector (the client's own default name, spelled out)."""
WRITE_BATCH = 256
"""Objects per ``insert_many`` call (upserts and the ``set_groups`` rewrite)."""
SCAN_PAGE = 1000

_TEXT, _TEXT_ARRAY, _INT = DataType.TEXT, DataType.TEXT_ARRAY, DataType.INT
_PROPERTY_TYPES: dict[str, DataType] = {
    # identity properties, carried by every chunk too
    "collection_id": _TEXT,
    "name": _TEXT,
    "model": _TEXT,
    "vectorProvider": _TEXT,
    "embeddingProvider": _TEXT,
    "groups": _TEXT_ARRAY,
    # text payload
    "content": _TEXT,
    "document_id": _TEXT,
    # CHUNK_EXTRAS
    "chunk_index": _INT,
    "char_start": _INT,
    "char_end": _INT,
    "page_start": _INT,
    "page_end": _INT,
    "heading_path": _TEXT_ARRAY,
    "token_count": _INT,
    "content_hash": _TEXT,
    "document_sha256": _TEXT,
    "document_name": _TEXT,
    "parent_index": _INT,
    "parent_content": _TEXT,
    "tags": _TEXT_ARRAY,
    "label": _TEXT,
}
_PORT_PROPERTIES = (*IDENTITY_PROPERTIES, *TEXT_PROPERTIES, *CHUNK_EXTRAS)
_SEARCHABLE = frozenset({"content"})
_ABSENT_MEANS_NONE = frozenset({"page_start", "page_end", "parent_index", "parent_content"})
_ABSENT_MEANS_EMPTY_LIST = frozenset({"heading_path"})
_DISTANCE_SLACK = 1e-6
"""Widens the server-side distance cut a little; the exact ``distance <= max_distance`` test is ours."""
_NOT_IDENTITY = Filter.by_id().not_equal(IDENTITY_ID)
_NO_GROUPS = Filter.by_property("groups").is_none(True)
_WITH_DISTANCE = MetadataQuery(distance=True)
_CONNECTION_ERRORS = (
    WeaviateConnectionError,
    WeaviateGRPCUnavailableError,
    WeaviateClosedClientError,
    WeaviateStartUpError,
)


class CollectionSpec(NamedTuple):
    """Keyword arguments for ``client.collections.create(name, **spec._asdict())``."""

    properties: list[Property]
    vector_config: VectorConfigCreate
    inverted_index_config: InvertedIndexConfigCreate


def collection_spec() -> CollectionSpec:
    """The schema of every Ragu collection in Weaviate (see the module docstring for the reasons)."""
    return CollectionSpec(
        # In the port's order; a property the port adds without a type here fails loudly (KeyError).
        properties=[_property(name, _PROPERTY_TYPES[name]) for name in _PORT_PROPERTIES],
        vector_config=Configure.Vectors.self_provided(
            name=VECTOR_NAME,
            vector_index_config=Configure.VectorIndex.hnsw(distance_metric=VectorDistances.COSINE),
        ),
        inverted_index_config=Configure.inverted_index(index_null_state=True),
    )


def _property(name: str, data_type: DataType) -> Property:
    if data_type == DataType.INT:
        return Property(name=name, data_type=data_type, index_filterable=name in FILTERABLE, index_range_filters=False)
    searchable = name in _SEARCHABLE
    return Property(
        name=name,
        data_type=data_type,
        tokenization=Tokenization.WORD if searchable else Tokenization.FIELD,
        index_filterable=name in FILTERABLE,
        index_searchable=searchable,
    )


@functools.lru_cache(maxsize=1024)
def search_filter(where: SearchFilter | None) -> FilterReturn:
    """Never the identity object; plus the access rule and the document restriction when given.

    An empty ``document_ids`` set matches nothing and Weaviate refuses an empty ``contains_any``, so
    callers answer that case without a query. Cached (~30 µs to build, few distinct group sets); the
    client only reads filters when it encodes a request.
    """
    if where is None:
        return _NOT_IDENTITY
    parts = [_NOT_IDENTITY]
    if where.readable_by is not None:
        if where.readable_by:
            in_group = Filter.by_property("groups").contains_any(sorted(where.readable_by))
            parts.append(Filter.any_of([_NO_GROUPS, in_group]))
        else:
            parts.append(_NO_GROUPS)
    if where.document_ids:
        parts.append(Filter.by_property("document_id").contains_any(sorted(where.document_ids)))
    return Filter.all_of(parts) if len(parts) > 1 else _NOT_IDENTITY


def stored_properties(payload: Mapping[str, Any]) -> dict[str, Any]:
    """What Weaviate is sent for a payload: ``None`` values and empty lists left out (it cannot keep them)."""
    return {key: value for key, value in payload.items() if value is not None and value != []}


def returned_payload(properties: Mapping[str, Any], requested: Sequence[str]) -> dict[str, Any]:
    """A hit's payload: the requested properties the object has, plus the chunk extras Weaviate could not
    store (absent nullable ones as ``None``, an absent ``heading_path`` as ``[]``)."""
    payload: dict[str, Any] = {}
    for key in requested:
        value = properties.get(key)
        if value is not None:
            payload[key] = value
        elif key in _ABSENT_MEANS_NONE:
            payload[key] = None
        elif key in _ABSENT_MEANS_EMPTY_LIST:
            payload[key] = []
    return payload


def identity_properties(stored: Mapping[str, Any]) -> dict[str, Any]:
    """The identity object's properties as stored, without the ``None``s Weaviate reports for unset ones."""
    return {key: value for key, value in stored.items() if value is not None}


def chunk_object(record: VectorRecord) -> DataObject[dict[str, Any], None]:
    """The batch object for a chunk: its own UUID, storable properties, the vector under :data:`VECTOR_NAME`."""
    return DataObject(
        properties=stored_properties(payload_dict(record.payload)),
        uuid=chunk_uuid(record.id),
        vector={VECTOR_NAME: as_floats(record.vector)},
    )


def identity_object(payload: dict[str, Any], vector: list[float]) -> DataObject[dict[str, Any], None]:
    """The batch object for the identity record (``payload`` already validated)."""
    return DataObject(properties=payload, uuid=uuid.UUID(IDENTITY_ID), vector={VECTOR_NAME: vector})


def ranked_hits(
    objects: Iterable[Object[Any, Any]], *, limit: int, requested: Sequence[str], max_distance: float | None
) -> list[SearchHit]:
    """Closest first, equal distances by id ascending, at most ``limit``, none beyond ``max_distance``."""
    ranked = sorted(((_distance(obj), str(obj.uuid), obj) for obj in objects), key=lambda row: row[:2])
    hits = []
    for distance, object_id, obj in ranked[:limit]:
        if max_distance is not None and distance > max_distance:
            break
        payload = returned_payload(obj.properties, requested)
        hits.append(SearchHit(id=object_id, score=1.0 - distance, distance=distance, payload=payload))
    return hits


def _distance(obj: Object[Any, Any]) -> float:
    distance = obj.metadata.distance
    if distance is None:
        raise Unavailable("Weaviate returned a hit without its distance", code="vector_store_unavailable")
    return max(distance, 0.0)  # float rounding can put an identical vector just below 0


def ties_cross_the_cut(objects: Sequence[Object[Any, Any]], *, limit: int, fetched: int) -> bool:
    """Whether objects tied with the ``limit``-th one may lie beyond the ``fetched`` a query returned
    (it asked for more than ``limit``, so a tie at the end means the tie may go on)."""
    return len(objects) == fetched and objects[-1].metadata.distance == objects[limit - 1].metadata.distance


class WeaviateStore:
    """:class:`~common.vectors.base.VectorStore` over Weaviate (unverified: see the module docstring).

    Takes a connected ``WeaviateAsyncClient`` and closes it in :meth:`close`.
    """

    def __init__(self, client: WeaviateAsyncClient) -> None:
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
            collection = await self._client.collections.create(name, **collection_spec()._asdict())
        except WeaviateBaseError as exc:
            if await self.collection_exists(name):  # another writer won the race
                raise collection_already_exists(name) from exc
            raise await self._translated(exc, name) from exc
        try:
            await _insert(collection, [identity_object(payload, identity_vector(dimension))])
        except (WeaviateBaseError, AppError) as exc:
            error = None if isinstance(exc, AppError) else await self._translated(exc, name)
            # A collection without its identity would be listed as foreign forever: leave nothing behind.
            with contextlib.suppress(WeaviateBaseError):
                await self._client.collections.delete(name)
            if error is None:
                raise
            raise error from exc

    async def collection_exists(self, name: str) -> bool:
        if not is_collection_name(name):
            return False
        try:
            return await self._client.collections.exists(name)
        except WeaviateBaseError as exc:
            raise _unavailable(exc) from exc

    async def read_identity(self, name: str) -> dict[str, Any] | None:
        if not is_collection_name(name):
            return None
        try:
            found: _Object[Any, Any, Any] | None = await self._client.collections.use(name).query.fetch_object_by_id(
                IDENTITY_ID
            )
        except WeaviateBaseError as exc:
            error = await self._translated(exc, name)
            if isinstance(error, NotFound):
                return None
            raise error from exc
        return None if found is None else identity_properties(found.properties)

    async def write_identity(self, identity: Identity) -> None:
        payload = checked_identity_payload(identity)
        name = checked_name(identity.name)
        await self._require(name)
        collection = self._client.collections.use(name)
        try:
            vector = await self._identity_vector(collection, name)
            await _insert(collection, [identity_object(payload, vector)])
        except WeaviateBaseError as exc:
            raise await self._translated(exc, name) from exc

    async def set_groups(self, name: str, groups: Sequence[str]) -> None:
        """Identity first, then every chunk re-inserted with its vector (no bulk update exists)."""
        checked_name(name)
        current = await self._stored_identity(name)
        groups = list(groups)
        await self.write_identity(msgspec.structs.replace(current, groups=groups or msgspec.UNSET))

        def regrouped(properties: Mapping[str, Any]) -> dict[str, Any]:
            changed = stored_properties(properties)
            changed.pop("groups", None)
            return {**changed, "groups": groups} if groups else changed

        await self._rewrite_chunks(name, regrouped)

    async def upsert(self, name: str, records: Sequence[VectorRecord]) -> None:
        checked_name(name)
        objects = [chunk_object(record) for record in records]
        if not objects:
            return
        # With auto-schema on, inserting into a missing collection would create it without an identity.
        await self._require(name)
        collection = self._client.collections.use(name)
        try:
            for start in range(0, len(objects), WRITE_BATCH):
                await _insert(collection, objects[start : start + WRITE_BATCH])
        except WeaviateBaseError as exc:
            raise await self._translated(exc, name) from exc

    async def delete_document(self, name: str, document_id: str) -> None:
        checked_name(name)
        await self._delete_where(name, Filter.by_property("document_id").equal(document_id) & _NOT_IDENTITY)

    async def rename_document(self, name: str, document_id: str, document_name: str) -> None:
        """The document's chunks re-inserted with their vectors and the new name (no bulk update exists; the
        scan covers the whole collection, as :meth:`document_ids` does — renames are rare)."""
        checked_name(name)
        await self._require(name)

        def renamed(properties: Mapping[str, Any]) -> dict[str, Any] | None:
            if properties.get("document_id") != document_id or properties.get("document_name") == document_name:
                return None
            return {**stored_properties(properties), "document_name": document_name}

        await self._rewrite_chunks(name, renamed)

    async def _rewrite_chunks(self, name: str, rewrite: Callable[[Mapping[str, Any]], dict[str, Any] | None]) -> None:
        """Every chunk ``rewrite`` gives new properties (``None``: leave it) re-inserted, in batches, with its
        vector; never the identity."""
        collection = self._client.collections.use(name)
        batch: list[DataObject[dict[str, Any], None]] = []
        try:
            async for obj in collection.iterator(include_vector=True, cache_size=WRITE_BATCH):
                if obj.uuid.int == 0 or (properties := rewrite(obj.properties)) is None:
                    continue
                batch.append(DataObject(properties=properties, uuid=obj.uuid, vector=obj.vector))
                if len(batch) == WRITE_BATCH:
                    await _insert(collection, batch)
                    batch = []
            await _insert(collection, batch)
        except WeaviateBaseError as exc:
            raise await self._translated(exc, name) from exc

    async def delete_ids(self, name: str, ids: Sequence[str]) -> None:
        checked_name(name)
        uuids = [chunk_uuid(id_) for id_ in ids]
        if uuids:
            await self._delete_where(name, Filter.by_id().contains_any(uuids))

    async def count(self, name: str, *, document_id: str | None = None) -> int:
        checked_name(name)
        where = _NOT_IDENTITY
        if document_id is not None:
            where = Filter.by_property("document_id").equal(document_id) & _NOT_IDENTITY
        try:
            result = await self._client.collections.use(name).aggregate.over_all(filters=where, total_count=True)
        except WeaviateBaseError as exc:
            raise await self._translated(exc, name) from exc
        if not result.total_count:
            await self._require(name)
        return result.total_count or 0

    async def document_ids(self, name: str) -> dict[str, int]:
        checked_name(name)
        counts: dict[str, int] = {}
        collection = self._client.collections.use(name)
        try:
            async for obj in collection.iterator(return_properties=["document_id"], cache_size=SCAN_PAGE):
                document_id = obj.properties.get("document_id")
                if obj.uuid.int != 0 and isinstance(document_id, str):
                    counts[document_id] = counts.get(document_id, 0) + 1
        except WeaviateBaseError as exc:
            raise await self._translated(exc, name) from exc
        if not counts:
            await self._require(name)
        return counts

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
        """One ``near_vector`` query per search; another only when equal distances straddle ``limit``, or an
        existence check when nothing matched (to tell an empty result from a missing collection)."""
        checked_name(name)
        if limit < 0:
            raise InvalidInput(f"limit must not be negative, got {limit}", code="invalid_limit")
        if limit == 0 or (where is not None and where.document_ids is not None and not where.document_ids):
            return []
        query = self._client.collections.use(name, skip_argument_validation=True).query
        near = as_floats(vector)
        filters = search_filter(where)
        # Weaviate refuses unknown property names; properties it does not declare are simply absent.
        requested = [key for key in properties if key in _PROPERTY_TYPES]
        cutoff = None if max_distance is None else max_distance + _DISTANCE_SLACK
        fetch = limit + 1  # one more than asked shows whether ties continue past the cut
        try:
            while True:
                result = await query.near_vector(
                    near,
                    limit=fetch,
                    distance=cutoff,
                    filters=filters,
                    target_vector=VECTOR_NAME,
                    return_properties=requested,
                    return_metadata=_WITH_DISTANCE,
                )
                if not ties_cross_the_cut(result.objects, limit=limit, fetched=fetch):
                    break
                fetch *= 4
        except WeaviateBaseError as exc:
            raise await self._translated(exc, name) from exc
        if not result.objects:
            await self._require(name)  # in case a missing collection answers with nothing rather than an error
        return ranked_hits(result.objects, limit=limit, requested=requested, max_distance=max_distance)

    async def drop_collection(self, name: str) -> None:
        if not is_collection_name(name):
            return
        try:
            await self._client.collections.delete(name)
        except WeaviateBaseError as exc:
            error = await self._translated(exc, name)
            if not isinstance(error, NotFound):
                raise error from exc

    async def list_identities(self) -> list[Identity]:
        try:
            names = sorted(await self._client.collections.list_all(simple=True))
        except WeaviateBaseError as exc:
            raise await self._translated(exc, None) from exc
        identities = []
        for name in names:
            identity = valid_identity(name, await self.read_identity(name))
            if identity is not None:
                identities.append(identity)
        return identities

    async def aclose(self) -> None:
        await self._client.close()

    async def _require(self, name: str) -> None:
        if not await self.collection_exists(name):
            raise collection_not_found(name)

    async def _stored_identity(self, name: str) -> Identity:
        stored = await self.read_identity(name)
        identity = valid_identity(name, stored)
        if identity is not None:
            return identity
        await self._require(name)
        raise identity_not_found(name)

    async def _identity_vector(self, collection: CollectionAsync[Any, Any], name: str) -> list[float]:
        """Weaviate keeps no dimension for self-provided vectors: reuse the stored identity's vector, or
        size a new one after any chunk's."""
        # The stubs promise an object; at run time a missing id gives None.
        found: _Object[Any, Any, Any] | None = await collection.query.fetch_object_by_id(
            IDENTITY_ID, include_vector=True
        )
        if found is None:
            page = await collection.query.fetch_objects(limit=1, include_vector=True)
            found = page.objects[0] if page.objects else None
        vector = None if found is None else found.vector.get(VECTOR_NAME)
        if not vector:
            raise NotFound(
                f"collection {name!r} holds neither an identity nor a chunk to size its vectors by",
                code="identity_not_found",
            )
        return identity_vector(len(vector))

    async def _delete_where(self, name: str, where: FilterReturn) -> None:
        """``delete_many`` removes at most the server's query limit per call, so repeat until none match."""
        collection = self._client.collections.use(name)
        try:
            while True:
                result = await collection.data.delete_many(where=where)
                if result.matches == 0:
                    return
                if result.successful == 0:
                    raise InvalidInput(
                        f"Weaviate matched {result.matches} objects in {name!r} but deleted none",
                        code="vector_store_rejected",
                    )
        except WeaviateBaseError as exc:
            raise await self._translated(exc, name) from exc

    async def _translated(self, exc: WeaviateBaseError, name: str | None) -> AppError:
        """Our error for a client exception; asks whether the collection exists when the error cannot say."""
        if isinstance(exc, _CONNECTION_ERRORS):
            return _unavailable(exc)
        if isinstance(exc, UnexpectedStatusCodeError) and exc.status_code >= 500:
            return _unavailable(exc)
        if name is not None and not await self.collection_exists(name):
            return collection_not_found(name)
        return InvalidInput(f"Weaviate refused the request: {exc}", code="vector_store_rejected")


async def _insert(collection: CollectionAsync[Any, Any], objects: Sequence[DataObject[Any, Any]]) -> None:
    if not objects:
        return
    result = await collection.data.insert_many(objects)
    if result.has_errors:
        first = next(iter(result.errors.values()))
        raise InvalidInput(
            f"Weaviate refused {len(result.errors)} of {len(objects)} objects: {first.message}",
            code="vector_store_rejected",
        )


def _unavailable(exc: Exception) -> Unavailable:
    return Unavailable(f"Weaviate is unavailable: {exc}", code="vector_store_unavailable", extra={"provider": PROVIDER})
