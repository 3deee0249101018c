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

Lexical and hybrid retrieval are Weaviate's own: ``bm25`` on ``content`` (BM25 k1 and b set to
:mod:`common.vectors.lexical`'s on the collection; Weaviate tokenises words itself, without stemming, so its
keyword ranking is close to, not identical with, the other engines') and native ``hybrid`` with ``alpha`` =
``dense_weight`` and ranked fusion. Each leg of a hybrid search runs ``leg_depth(limit)`` deep, which is
:func:`common.vectors.fusion.leg_depth`; the store asks for that many fused hits and reads each hit's rank in
each leg from ``explain_score`` (Weaviate adds ``weight / (60 + position)`` per leg, position 0-based), so that
``score`` is recomputed by :mod:`common.vectors.fusion`'s formula and ``legs`` say which leg found a hit (its
BM25 score is not reported by a hybrid search: ``lexical_score`` is ``None`` there). ``distance`` is measured
here, from the hit's vector, in every mode. Collections made before the lexical leg get the ``tags`` and
``label`` properties and the BM25 parameters on their first write or filtered search (:meth:`WeaviateStore.
_ensure_schema`): their ``content`` was always BM25-indexed, so nothing else needs rebuilding.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import msgspec
import numpy as np
import numpy.typing as npt
from weaviate import WeaviateAsyncClient
from weaviate.classes.config import (
    Configure,
    DataType,
    InvertedIndexConfigCreate,
    Property,
    Reconfigure,
    Tokenization,
    VectorConfigCreate,
    VectorDistances,
)
from weaviate.classes.data import DataObject
from weaviate.classes.query import Filter, HybridFusion, MetadataQuery
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
    WeaviateUnsupportedFeatureError,
)

from common.errors import AppError, InvalidInput, NotFound, Unavailable
from common.vectors import lexical
from common.vectors.base import (
    CHUNK_EXTRAS,
    FILTERABLE,
    IDENTITY_ID,
    IDENTITY_PROPERTIES,
    TEXT_PROPERTIES,
    Legs,
    Search,
    SearchFilter,
    SearchHit,
    SearchResult,
    VectorRecord,
    identity_vector,
)
from common.vectors.fusion import RRF_K, answered, by_document, fuse, leg_depth, leg_properties, lexical_only
from common.vectors.records import (
    as_floats,
    check_retrieval,
    checked_identity_payload,
    checked_name,
    chunk_uuid,
    collection_already_exists,
    collection_not_found,
    identity_not_found,
    is_collection_name,
    matches_nothing,
    misgrouped,
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

_TEXT, _TEXT_ARRAY, _INT, _BOOL = DataType.TEXT, DataType.TEXT_ARRAY, DataType.INT, DataType.BOOL
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
    "ocr": _BOOL,
}
_PORT_PROPERTIES = (*IDENTITY_PROPERTIES, *TEXT_PROPERTIES, *CHUNK_EXTRAS)
_SEARCHABLE = frozenset({"content"})
_ABSENT_MEANS_NONE = frozenset({"page_start", "page_end", "parent_index", "parent_content", "label"})
_ABSENT_MEANS_EMPTY_LIST = frozenset({"heading_path", "tags"})
_DISTANCE_SLACK = 1e-6
"""Widens the server-side distance cut a little; the exact ``distance <= max_distance`` test is ours."""
_NOT_IDENTITY = Filter.by_id().not_equal(IDENTITY_ID)
_NO_GROUPS = Filter.by_property("groups").is_none(True)
_WITH_DISTANCE = MetadataQuery(distance=True)
_WITH_SCORE = MetadataQuery(score=True)
_WITH_EXPLANATION = MetadataQuery(score=True, explain_score=True)
_WEAVIATE_RANK_OFFSET = 60
"""Weaviate's ranked fusion adds ``weight / (60 + position)`` for a hit at 0-based ``position`` in a leg."""
_CONTRIBUTION = re.compile(r"\(Result Set (vector|keyword),[^)]*\) Document \S+ contributed ([0-9.eE+-]+) to the score")
_CONNECTION_ERRORS = (
    WeaviateConnectionError,
    WeaviateGRPCUnavailableError,
    WeaviateClosedClientError,
    WeaviateStartUpError,
    WeaviateUnsupportedFeatureError,
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
        inverted_index_config=Configure.inverted_index(index_null_state=True, bm25_k1=lexical.K1, bm25_b=lexical.B),
    )


def missing_properties(existing: Iterable[str]) -> list[Property]:
    """The port's properties a collection lacks (one made before ``tags`` and ``label``), declared as
    :func:`collection_spec` declares them."""
    have = set(existing)
    return [_property(name, _PROPERTY_TYPES[name]) for name in _PORT_PROPERTIES if name not in have]


def _property(name: str, data_type: DataType) -> Property:
    if data_type in (DataType.INT, DataType.BOOL):
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
    """Never the identity object; plus the access rule and the document, tag and label restrictions when given
    (the same filter in every leg of a hybrid search: Weaviate applies it to both).

    An empty ``document_ids``, ``tags`` or ``labels`` set matches nothing and Weaviate refuses an empty
    ``contains_any``, so callers answer that case without a query (:func:`matches_nothing`). Cached (~30 µs
    to build, few distinct group sets); the client only reads filters when it encodes a request.
    """
    if where is None:
        return _NOT_IDENTITY
    parts = [_NOT_IDENTITY]
    if where.readable_by is not None:
        if where.readable_by:
            in_group = Filter.by_property("groups").contains_any(sorted(where.readable_by))
            parts.append(Filter.any_of([_NO_GROUPS, in_group]) if where.ungrouped_readable else in_group)
        else:
            parts.append(_NO_GROUPS)  # an empty set with ungrouped chunks unreadable never gets here
    for key, values in (("document_id", where.document_ids), ("tags", where.tags), ("label", where.labels)):
        if values:
            parts.append(Filter.by_property(key).contains_any(sorted(values)))
    return Filter.all_of(parts) if len(parts) > 1 else _NOT_IDENTITY


def hybrid_arguments(
    text: str, vector: list[float], *, dense_weight: float, depth: int, filters: FilterReturn, requested: list[str]
) -> dict[str, Any]:
    """Keyword arguments of ``query.hybrid`` for a hybrid search: both legs ``depth`` deep (Weaviate runs each
    ``leg_depth(limit)`` deep), ranked fusion, BM25 on ``content``, each hit's vector (for its distance) and
    the explanation that holds its ranks."""
    return {
        "query": text,
        "vector": vector,
        "alpha": dense_weight,
        "fusion_type": HybridFusion.RANKED,
        "query_properties": sorted(_SEARCHABLE),
        "limit": depth,
        "filters": filters,
        "target_vector": VECTOR_NAME,
        "include_vector": [VECTOR_NAME],
        "return_properties": requested,
        "return_metadata": _WITH_EXPLANATION,
    }


def leg_ranks(explanation: str | None, *, dense_weight: float) -> tuple[int | None, int | None]:
    """A hybrid hit's 1-based rank in the dense and in the keyword leg, from Weaviate's ``explain_score``
    (``None``: that leg did not find it)."""
    ranks: dict[str, int] = {}
    weights = {"vector": dense_weight, "keyword": 1.0 - dense_weight}
    for leg, contributed in _CONTRIBUTION.findall(explanation or ""):
        value = float(contributed)
        if value > 0 and weights[leg] > 0:
            ranks[leg] = round(weights[leg] / value) - _WEAVIATE_RANK_OFFSET + 1
    return ranks.get("vector"), ranks.get("keyword")


def hybrid_hits(
    objects: Iterable[Object[Any, Any]],
    query: list[float],
    *,
    dense_weight: float,
    limit: int,
    requested: Sequence[str],
    max_distance: float | None,
) -> list[SearchHit]:
    """A hybrid answer from Weaviate's fused hits: each hit's ranks read from its explanation and its score
    recomputed by :mod:`common.vectors.fusion`'s formula (so that it means the same in every engine), fused
    score descending, ties by id, the first ``limit``; of those, hits further than ``max_distance`` dropped."""
    unit = _unit(query)
    scored = []
    for obj in objects:
        dense_rank, lexical_rank = leg_ranks(obj.metadata.explain_score, dense_weight=dense_weight)
        score = (dense_weight / (RRF_K + dense_rank) if dense_rank else 0.0) + (
            (1.0 - dense_weight) / (RRF_K + lexical_rank) if lexical_rank else 0.0
        )
        legs = Legs(dense_rank=dense_rank, lexical_rank=lexical_rank, lexical_score=None, fused_score=score)
        scored.append((-score, str(obj.uuid), legs, obj))
    scored.sort(key=lambda row: row[:2])
    hits = []
    for negative, object_id, legs, obj in scored[:limit]:
        distance = cosine_distance(unit, obj.vector.get(VECTOR_NAME))
        if max_distance is None or distance <= max_distance:
            payload = returned_payload(obj.properties, requested)
            hits.append(SearchHit(id=object_id, score=-negative, distance=distance, payload=payload, legs=legs))
    return hits


def keyword_hits(
    objects: Iterable[Object[Any, Any]], query: list[float], *, requested: Sequence[str]
) -> list[SearchHit]:
    """A ``bm25`` query's objects as the lexical leg: BM25 score descending, ties by id, distance measured."""
    unit = _unit(query)
    ranked = sorted(objects, key=lambda obj: (-_score(obj), str(obj.uuid)))
    return [
        SearchHit(
            id=str(obj.uuid),
            score=_score(obj),
            distance=cosine_distance(unit, obj.vector.get(VECTOR_NAME)),
            payload=returned_payload(obj.properties, requested),
        )
        for obj in ranked
    ]


def _score(obj: Object[Any, Any]) -> float:
    score = obj.metadata.score
    if score is None:
        raise Unavailable("Weaviate returned a keyword hit without its score", code="vector_store_unavailable")
    return score


def scores_tie_across_the_cut(objects: Sequence[Object[Any, Any]], *, limit: int, fetched: int) -> bool:
    """:func:`ties_cross_the_cut` for a keyword query, whose objects carry scores rather than distances."""
    return len(objects) == fetched > limit and objects[-1].metadata.score == objects[limit - 1].metadata.score


def _unit(vector: Sequence[float]) -> npt.NDArray[np.float64]:
    array = np.asarray(vector, dtype=np.float64)
    norm = float(np.linalg.norm(array))
    return array / norm if norm > 0 else array


def cosine_distance(unit_query: npt.NDArray[np.float64], stored: object) -> float:
    """``1 - cosine similarity`` of a hit's vector to the unit query; a hit that came back without its vector
    cannot be measured, which is the store's failure, not a perfect match."""
    if not isinstance(stored, list) or not stored:
        raise Unavailable("Weaviate returned a hit without its vector", code="vector_store_unavailable")
    similarity = float(np.dot(unit_query, _unit(stored)))
    return min(max(1.0 - similarity, 0.0), 2.0)


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


def updated_properties(
    properties: Mapping[str, Any], *, document_id: str, fields: Mapping[str, Any]
) -> dict[str, Any] | None:
    """A chunk's new properties when it belongs to ``document_id`` and ``fields`` change it, else ``None``
    (leave it). A ``None`` label or empty tags are left out, as Weaviate stores them (absent)."""
    if properties.get("document_id") != document_id:
        return None
    changed = stored_properties({**properties, **fields})
    current = stored_properties(properties)
    if changed == current:
        return None
    return changed


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
        self._schema_checked: set[str] = set()
        """Collections :meth:`_ensure_schema` found current (or made so) in this process."""

    @property
    def provider(self) -> str:
        return PROVIDER

    async def create_collection(self, identity: Identity, dimension: int) -> None:
        await self._create(identity.name, identity, dimension)

    async def _create(self, name: str, identity: Identity, dimension: int) -> None:
        payload = checked_identity_payload(identity)
        if dimension < 1:
            raise InvalidInput(f"vector dimension must be positive, got {dimension}", code="invalid_dimension")
        checked_name(name)
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
        # With auto-schema on, inserting into a missing collection would create it without an identity, and
        # a chunk's tags into one from before them would get word tokenisation.
        await self._require(name)
        await self._ensure_schema(name)
        collection = self._client.collections.use(name)
        try:
            for start in range(0, len(objects), WRITE_BATCH):
                await _insert(collection, objects[start : start + WRITE_BATCH])
        except WeaviateBaseError as exc:
            raise await self._translated(exc, name) from exc

    async def delete_document(self, name: str, document_id: str) -> None:
        checked_name(name)
        await self._delete_where(name, Filter.by_property("document_id").equal(document_id) & _NOT_IDENTITY)

    async def update_document(
        self, name: str, document_id: str, *, document_name: str, tags: Sequence[str], label: str | None
    ) -> None:
        """The document's chunks re-inserted with their vectors and the new metadata (no bulk update exists;
        chunks that already carry it are left alone)."""
        checked_name(name)
        await self._require(name)
        await self._ensure_schema(name)
        fields = {"document_name": document_name, "tags": list(tags), "label": label}
        await self._rewrite_chunks(name, functools.partial(updated_properties, document_id=document_id, fields=fields))

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

    async def count_misgrouped(self, name: str, groups: Sequence[str]) -> int:
        """Weaviate keeps no empty list or null: such a copy reads as none."""
        checked_name(name)
        await self._require(name)
        count = 0
        collection = self._client.collections.use(name)
        try:
            async for obj in collection.iterator(return_properties=["groups"], cache_size=SCAN_PAGE):
                count += obj.uuid.int != 0 and misgrouped(stored_properties(obj.properties), groups)
        except WeaviateBaseError as exc:
            raise await self._translated(exc, name) from exc
        return count

    async def search_many(self, searches: Sequence[Search]) -> list[SearchResult]:
        return await search_each(self, searches)

    async def search(self, search: Search) -> list[SearchHit]:
        """Dense: one ``near_vector`` query; lexical: one ``bm25`` query; hybrid: one native ``hybrid`` query
        (module docstring). Another query only when equal scores straddle ``limit``, or an existence check when
        nothing matched (to tell an empty result from a missing collection)."""
        name, limit, where, max_distance = search.name, search.limit, search.where, search.max_distance
        text, mode, dense_weight = search.text, search.mode, search.dense_weight
        checked_name(name)
        if limit < 0:
            raise InvalidInput(f"limit must not be negative, got {limit}", code="invalid_limit")
        check_retrieval(mode, dense_weight)
        if limit == 0 or matches_nothing(where):
            return []
        near = as_floats(search.vector)
        # Weaviate refuses unknown property names; properties it does not declare are simply absent.
        requested = [key for key in search.properties if key in _PROPERTY_TYPES]
        if where is not None and (where.tags is not None or where.labels is not None):
            await self._ensure_schema(name)  # a collection from before tags and labels cannot filter on them
        if mode == "dense":
            return await self._dense(
                name, near, limit=limit, requested=requested, max_distance=max_distance, where=where
            )
        terms = lexical.query_terms(text)
        if mode == "lexical":
            if not terms.ids:
                return []
            hits = await self._keyword(name, text, near, limit=limit, requested=requested, where=where)
            return lexical_only(hits, limit=limit, max_distance=max_distance)
        if not terms.ids or by_document(search.fusion):
            return await self._fused_here(search, near, requested, keyword=bool(terms.ids))
        arguments = hybrid_arguments(
            text,
            near,
            dense_weight=dense_weight,
            depth=leg_depth(limit),
            filters=search_filter(where),
            requested=requested,
        )
        query = self._client.collections.use(name, skip_argument_validation=True).query
        try:
            result = await query.hybrid(**arguments)
        except WeaviateBaseError as exc:
            raise await self._translated(exc, name) from exc
        if not result.objects:
            await self._require(name)
        return hybrid_hits(
            result.objects, near, dense_weight=dense_weight, limit=limit, requested=requested, max_distance=max_distance
        )

    async def _fused_here(
        self, search: Search, near: list[float], requested: list[str], *, keyword: bool
    ) -> list[SearchHit]:
        """A hybrid search whose legs run as queries of their own (at once), fused by
        :func:`common.vectors.fusion.fuse`: with no keyword leg (no indexable term: the dense order, legs saying so),
        or fused per document, which needs every candidate of both legs (the native ``hybrid`` query returns only
        the best ``depth`` of them by its own chunk fusion, so a document's best rank in a leg could be missing)."""
        depth, fetched = leg_depth(search.limit), leg_properties(requested, search.fusion)
        dense_leg = self._dense(
            search.name, near, limit=depth, requested=fetched, max_distance=None, where=search.where
        )
        lexical_hits: list[SearchHit] = []
        if keyword:
            keyword_leg = self._keyword(
                search.name, search.text, near, limit=depth, requested=fetched, where=search.where
            )
            dense, lexical_hits = await asyncio.gather(dense_leg, keyword_leg)
        else:
            dense = await dense_leg
        fused = fuse(
            dense,
            lexical_hits,
            dense_weight=search.dense_weight,
            limit=search.limit,
            max_distance=search.max_distance,
            fusion=search.fusion,
        )
        return answered(fused, requested)

    async def _dense(
        self,
        name: str,
        near: list[float],
        *,
        limit: int,
        requested: list[str],
        max_distance: float | None,
        where: SearchFilter | None,
    ) -> list[SearchHit]:
        query = self._client.collections.use(name, skip_argument_validation=True).query
        filters = search_filter(where)
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

    async def _keyword(
        self, name: str, text: str, near: list[float], *, limit: int, requested: list[str], where: SearchFilter | None
    ) -> list[SearchHit]:
        """The ``limit`` best chunks by Weaviate's BM25 on ``content``, ties by id over every tied chunk."""
        await self._ensure_schema(name)  # BM25's k1 and b on a collection from before the lexical leg
        query = self._client.collections.use(name, skip_argument_validation=True).query
        filters = search_filter(where)
        fetch = limit + 1
        try:
            while True:
                result = await query.bm25(
                    text,
                    query_properties=sorted(_SEARCHABLE),
                    limit=fetch,
                    filters=filters,
                    include_vector=[VECTOR_NAME],
                    return_properties=requested,
                    return_metadata=_WITH_SCORE,
                )
                if not scores_tie_across_the_cut(result.objects, limit=limit, fetched=fetch):
                    break
                fetch *= 4
        except WeaviateBaseError as exc:
            raise await self._translated(exc, name) from exc
        if not result.objects:
            await self._require(name)
        return keyword_hits(result.objects, near, requested=requested)[:limit]

    async def _ensure_schema(self, name: str) -> None:
        """Once per collection and process: add the port's properties a collection lacks (``tags``, ``label``
        on one made before them) and set BM25's k1 and b; a collection created by this code has both."""
        if name in self._schema_checked:
            return
        collection = self._client.collections.use(name)
        try:
            config = await collection.config.get()
            for prop in missing_properties(prop.name for prop in config.properties):
                await collection.config.add_property(prop)
            bm25 = config.inverted_index_config.bm25
            if (bm25.k1, bm25.b) != (lexical.K1, lexical.B):
                await collection.config.update(
                    inverted_index_config=Reconfigure.inverted_index(bm25_k1=lexical.K1, bm25_b=lexical.B)
                )
        except WeaviateBaseError as exc:
            raise await self._translated(exc, name) from exc
        self._schema_checked.add(name)

    async def upgrade_lexical(self, name: str) -> int:
        """Weaviate's BM25 index covers ``content`` from the start; an older collection lacks only the ``tags`` and
        ``label`` properties and our k1/b, which :meth:`_ensure_schema` adds (no chunk is rewritten)."""
        await self._require(name)
        await self._ensure_schema(name)
        return 0

    async def drop_collection(self, name: str) -> None:
        """A migrated collection is an alias of its current version (:meth:`swap_version`): both go."""
        if not is_collection_name(name):
            return
        try:
            target = (await self._aliases()).get(name)
            if target is not None:
                await self._client.alias.delete(alias_name=name)
                await self._client.collections.delete(target)
            await self._client.collections.delete(name)
        except WeaviateBaseError as exc:
            error = await self._translated(exc, name)
            if not isinstance(error, NotFound):
                raise error from exc

    async def create_version(self, identity: Identity, dimension: int, version: str) -> None:
        """A collection of its own, made as a collection is; an alias makes it the collection at the swap."""
        await self._create(version, identity, dimension)

    async def swap_version(self, name: str, version: str) -> None:
        """Weaviate's aliases (1.32+), as Qdrant's: an alias already named ``name`` is moved to ``version`` in one
        update, then the old version is deleted; a collection made under its own name is deleted and the alias
        created right after (a server answers ``collection_not_found`` in between, once per collection). Verified
        against a stand-in of the alias API only: no Weaviate runs here."""
        checked_name(name)
        try:
            if not await self._client.collections.exists(checked_name(version)):
                raise collection_not_found(version)
            previous = (await self._aliases()).get(name)
            if previous is not None:
                await self._client.alias.update(alias_name=name, new_target_collection=version)
                await self._client.collections.delete(previous)
            else:
                await self._client.collections.delete(name)
                await self._client.alias.create(alias_name=name, target_collection=version)
        except WeaviateBaseError as exc:
            raise await self._translated(exc, version) from exc

    async def _aliases(self) -> dict[str, str]:
        """Alias → the collection it names; none on a server from before aliases (no collection was swapped there)."""
        try:
            found = await self._client.alias.list_all()
        except WeaviateUnsupportedFeatureError:
            return {}
        except UnexpectedStatusCodeError as exc:
            if exc.status_code == 404:
                return {}
            raise
        return {alias: target.collection for alias, target in found.items()}

    async def list_identities(self) -> list[Identity]:
        try:
            collections = set(await self._client.collections.list_all(simple=True))
            aliases = await self._aliases()
        except WeaviateBaseError as exc:
            raise await self._translated(exc, None) from exc
        names = sorted((collections - set(aliases.values())) | set(aliases))  # a version under its alias
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
