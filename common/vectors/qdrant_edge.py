"""The embedded Qdrant on Qdrant's own engine: Qdrant Edge (``qdrant-edge-py``) behind the client calls the Qdrant
adapter makes.

:class:`~common.vectors.qdrant.QdrantStore` talks to ``AsyncQdrantClient``; :class:`EdgeClient` answers the same
calls (the subset the adapter uses, with ``qdrant_client.models`` in and out) from Edge shards in one folder, so
the adapter's search, fusion, identity and upgrade code is the one a Qdrant server gets. Edge is Qdrant's engine in
the process: its sparse index answers the lexical leg (``Modifier.IDF`` applied at query time, as a server does)
where the client's local mode scores every sparse vector in Python; its payload conditions and ``is_empty``
rules are the server's (docs/benchmarks.md has the comparison).

Edge has one shard per folder and no collections, so this layer keeps what a server's collection list does:

- ``<path>/edge/collections/<name>/``: one Edge shard per collection (its own write-ahead log and segments);
- ``<path>/edge/aliases.json``: alias → collection, replaced whole (written to a temporary file, then renamed), so
  a swap is atomic on disk as ``update_collection_aliases`` is on a server;
- ``<path>/.lock``: held (``flock``) while the client is open, the lock local mode takes on the same folder (so
  ``ragu``'s start-up check, ``ragu.bootstrap``, reads it unchanged). Edge refuses a second open of a shard, but a
  refused open can damage the open one's payload indexes (seen with 0.9.0), so a second process must never get
  that far: it gets ``RuntimeError`` here, as local mode gives it.

Calls run in a worker thread (Edge releases the GIL), so a search never blocks the event loop. A shard's writes
go through its write-ahead log before they return; its segments are brute force (no optimizer runs, no HNSW),
exact as local mode was. Edge raises plain ``Exception``; it is re-raised as ``ValueError`` (local mode's type),
which the adapter translates.

**Local-mode data.** :func:`open_edge_client` migrates a folder local mode wrote (``<path>/meta.json``): every
collection and alias is copied point by point (vectors, sparse vectors and payload), the adapter's payload indexes
made, and ``meta.json`` renamed ``meta.json.migrated`` so it happens once; local mode's own files stay as they
were, a backup. A collection already present in Edge is not copied again, so an interrupted migration resumes.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import re
import shutil
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeVar

import qdrant_edge as qe
from qdrant_client import QdrantClient, models

_log = logging.getLogger(__name__)
T = TypeVar("T")

EDGE_FOLDER = "edge"
COLLECTIONS_FOLDER = "collections"
ALIASES_FILE = "aliases.json"
LOCAL_META = "meta.json"
LOCAL_MIGRATED = "meta.json.migrated"
MIGRATE_PAGE = 256
_FOLDER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,255}$")
"""Names that are safe folder names: every Ragu name is one (``NAME_RULE``)."""
_DISTANCES = {
    models.Distance.COSINE: qe.Distance.Cosine,
    models.Distance.DOT: qe.Distance.Dot,
    models.Distance.EUCLID: qe.Distance.Euclid,
    models.Distance.MANHATTAN: qe.Distance.Manhattan,
}
_LIVE_IDF = qe.SearchParams(idf=qe.IdfParams(corpus=qe.Filter()))
"""IDF over the points that exist now. Qdrant's own IDF reads posting lists that a delete leaves as they were
(qdrant/qdrant#6735, by design until a segment is vacuumed), so after a delete its N and document frequencies
still count the deleted chunks; an IDF corpus counts only live points (those with the sparse vector), which is
BM25 exactly as the other engines compute it (``test_term_statistics_follow_every_write``)."""
_DISTANCE_NAMES = {"Cosine": models.Distance.COSINE, "Dot": models.Distance.DOT, "Euclid": models.Distance.EUCLID}


@dataclass(frozen=True, slots=True)
class EdgeAnswer:
    """A query's answer, shaped as the client's ``QueryResponse``: Edge's own points, which the adapter reads as they
    are (:class:`~common.vectors.qdrant.ScoredPoint`; their ids are ``uuid.UUID``, the adapter reads them as text)."""

    points: list[qe.ScoredPoint]


class EdgeClient:
    """The ``AsyncQdrantClient`` calls :class:`~common.vectors.qdrant.QdrantStore` makes, over Edge shards in
    ``<path>/edge``. Made by :func:`open_edge_client`, which gives it the folder's lock; it holds it until
    :meth:`close`."""

    def __init__(self, path: str | Path) -> None:
        self._root = Path(path) / EDGE_FOLDER
        (self._root / COLLECTIONS_FOLDER).mkdir(parents=True, exist_ok=True)
        self._lock: IO[str] | None = None
        self._opening = asyncio.Lock()
        """Held while a shard is opened, made or deleted: a second open of a shard fails, and can damage the first."""
        self._shards: dict[str, qe.EdgeShard] = {}
        self._aliases: dict[str, str] = _read_json(self._root / ALIASES_FILE)

    # --- collections and aliases --------------------------------------------------------------------------------

    async def collection_exists(self, collection_name: str) -> bool:
        return self._resolved(collection_name) in self._collections()

    async def get_collections(self) -> models.CollectionsResponse:
        return models.CollectionsResponse(
            collections=[models.CollectionDescription(name=name) for name in sorted(self._collections())]
        )

    async def get_collection(self, collection_name: str) -> models.CollectionInfo:
        shard = await self._shard(collection_name)
        config = _read_json(self._folder(self._resolved(collection_name)) / "edge_config.json")
        params = models.CollectionParams.model_construct(
            vectors=_vectors_config(config.get("vectors", {})),
            sparse_vectors={name: models.SparseVectorParams() for name in config.get("sparse_vectors", {})},
        )
        info = await _run(shard.info)
        return models.CollectionInfo.model_construct(
            status=models.CollectionStatus.GREEN,
            points_count=info.points_count,
            segments_count=info.segments_count,
            config=models.CollectionConfig.model_construct(params=params),
            payload_schema={},
        )

    async def create_collection(
        self,
        collection_name: str,
        vectors_config: models.VectorParams,
        sparse_vectors_config: Mapping[str, models.SparseVectorParams] | None = None,
    ) -> bool:
        folder = self._folder(collection_name)
        if collection_name in self._collections() or collection_name in self._aliases:
            raise ValueError(f"Collection {collection_name} already exists")
        sparse = {
            name: qe.EdgeSparseVectorParams(
                modifier=qe.Modifier.Idf if params.modifier == models.Modifier.IDF else None
            )
            for name, params in (sparse_vectors_config or {}).items()
        }
        config = qe.EdgeConfig(
            vectors=qe.EdgeVectorParams(size=vectors_config.size, distance=_DISTANCES[vectors_config.distance]),
            sparse_vectors=sparse,
        )
        async with self._opening:
            if collection_name in self._collections():
                raise ValueError(f"Collection {collection_name} already exists")
            self._shards[collection_name] = await _run(qe.EdgeShard.create, str(folder), config)
        return True

    async def delete_collection(self, collection_name: str) -> bool:
        """As local mode: a collection's folder and the aliases naming it go; an alias's name deletes nothing."""
        if not _FOLDER_NAME.match(collection_name):
            return False
        async with self._opening:
            if collection_name not in self._collections():
                return False
            shard = self._shards.pop(collection_name, None)
            if shard is not None:
                await _run(shard.close)
            await _run(shutil.rmtree, self._folder(collection_name))
        await self._write_aliases({a: c for a, c in self._aliases.items() if c != collection_name})
        return True

    async def get_aliases(self) -> models.CollectionsAliasesResponse:
        return models.CollectionsAliasesResponse(
            aliases=[models.AliasDescription(alias_name=a, collection_name=c) for a, c in self._aliases.items()]
        )

    async def update_collection_aliases(
        self, change_aliases_operations: Sequence[models.CreateAliasOperation | models.DeleteAliasOperation]
    ) -> bool:
        """Every operation applied to a copy, which then replaces the file whole: all of them or none."""
        aliases = dict(self._aliases)
        for operation in change_aliases_operations:
            if isinstance(operation, models.DeleteAliasOperation):
                aliases.pop(operation.delete_alias.alias_name, None)
                continue
            create = operation.create_alias
            if create.collection_name not in self._collections():
                raise ValueError(f"Collection {create.collection_name} not found")
            aliases[create.alias_name] = create.collection_name
        await self._write_aliases(aliases)
        return True

    # --- points ---------------------------------------------------------------------------------------------------

    async def upsert(
        self, collection_name: str, points: models.Batch | Sequence[models.PointStruct], wait: bool = True
    ) -> models.UpdateResult:
        edge_points = _batch_points(points) if isinstance(points, models.Batch) else [_point(p) for p in points]
        return await self._update(collection_name, qe.UpdateOperation.upsert_points(edge_points))

    async def update_vectors(
        self, collection_name: str, points: Sequence[models.PointVectors], wait: bool = True
    ) -> models.UpdateResult:
        vectors = [qe.PointVectors(id=_edge_id(p.id), vector=_vector(p.vector)) for p in points]
        return await self._update(collection_name, qe.UpdateOperation.update_vectors(vectors))

    async def delete(
        self, collection_name: str, points_selector: models.FilterSelector | models.PointIdsList, wait: bool = True
    ) -> models.UpdateResult:
        if isinstance(points_selector, models.FilterSelector):
            operation = qe.UpdateOperation.delete_points_by_filter(_filter(points_selector.filter))
        else:
            operation = qe.UpdateOperation.delete_points([_edge_id(id_) for id_ in points_selector.points])
        return await self._update(collection_name, operation)

    async def set_payload(
        self, collection_name: str, payload: dict[str, Any], points: models.Filter, wait: bool = True
    ) -> models.UpdateResult:
        return await self._update(collection_name, qe.UpdateOperation.set_payload_by_filter(_filter(points), payload))

    async def delete_payload(
        self, collection_name: str, keys: Sequence[str], points: models.Filter, wait: bool = True
    ) -> models.UpdateResult:
        operation = qe.UpdateOperation.delete_payload_by_filter(_filter(points), list(keys))
        return await self._update(collection_name, operation)

    async def batch_update_points(
        self, collection_name: str, update_operations: Sequence[models.UpdateOperation], wait: bool = True
    ) -> list[models.UpdateResult]:
        """Set-payload operations by point ids (what the adapter's upgrade sends)."""
        results = []
        for operation in update_operations:
            if not isinstance(operation, models.SetPayloadOperation):
                raise ValueError(f"{type(operation).__name__} is not an operation the embedded Qdrant translates")
            request = operation.set_payload
            ids = [_edge_id(id_) for id_ in request.points or []]
            results.append(await self._update(collection_name, qe.UpdateOperation.set_payload(ids, request.payload)))
        return results

    async def create_payload_index(
        self,
        collection_name: str,
        field_name: str,
        field_schema: models.PayloadSchemaType | models.IntegerIndexParams,
        wait: bool = True,
    ) -> models.UpdateResult:
        return await self._update(
            collection_name, qe.UpdateOperation.create_field_index(field_name, _index_schema(field_schema))
        )

    async def create_vector_name(
        self, collection_name: str, vector_name: str, vector_name_config: models.SparseVectorNameConfig
    ) -> models.UpdateResult:
        """A sparse vector added to a collection (the adapter's lexical upgrade)."""
        sparse = vector_name_config.sparse
        idf = sparse is not None and sparse.modifier == models.Modifier.IDF
        operation = qe.UpdateOperation.create_sparse_vector(vector_name, modifier=qe.Modifier.Idf if idf else None)
        return await self._update(collection_name, operation)

    # --- reads ----------------------------------------------------------------------------------------------------

    async def retrieve(
        self,
        collection_name: str,
        ids: Sequence[models.ExtendedPointId],
        with_payload: bool | Sequence[str] = True,
        with_vectors: bool | Sequence[str] = False,
    ) -> list[models.Record]:
        shard = await self._shard(collection_name)
        records = await _run(
            shard.retrieve, [_edge_id(id_) for id_ in ids], _selector(with_payload), _selector(with_vectors)
        )
        return [_record(record) for record in records]

    async def count(
        self, collection_name: str, count_filter: models.Filter | None = None, exact: bool = True
    ) -> models.CountResult:
        shard = await self._shard(collection_name)
        count = await _run(shard.count, qe.CountRequest(exact=exact, filter=_optional_filter(count_filter)))
        return models.CountResult(count=count)

    async def facet(
        self,
        collection_name: str,
        key: str,
        facet_filter: models.Filter | None = None,
        limit: int = 10,
        exact: bool = False,
    ) -> models.FacetResponse:
        shard = await self._shard(collection_name)
        request = qe.FacetRequest(key=key, limit=limit, exact=exact, filter=_optional_filter(facet_filter))
        response = await _run(shard.facet, request)
        return models.FacetResponse(hits=[models.FacetValueHit(value=hit.value, count=hit.count) for hit in response])

    async def scroll(
        self,
        collection_name: str,
        *,
        scroll_filter: models.Filter | None = None,
        limit: int = 10,
        offset: models.ExtendedPointId | None = None,
        with_payload: bool | Sequence[str] = True,
        with_vectors: bool | Sequence[str] = False,
    ) -> tuple[list[models.Record], models.ExtendedPointId | None]:
        shard = await self._shard(collection_name)
        request = qe.ScrollRequest(
            offset=None if offset is None else _edge_id(offset),
            limit=limit,
            filter=_optional_filter(scroll_filter),
            with_payload=_selector(with_payload),
            with_vector=_selector(with_vectors),
        )
        records, next_offset = await _run(shard.scroll, request)
        return [_record(record) for record in records], None if next_offset is None else _our_id(next_offset)

    async def query_points(
        self,
        collection_name: str,
        *,
        query: list[float],
        query_filter: models.Filter | None = None,
        limit: int = 10,
        with_payload: bool | Sequence[str] = True,
        with_vectors: bool | Sequence[str] = False,
        score_threshold: float | None = None,
    ) -> EdgeAnswer:
        shard = await self._shard(collection_name)
        request = qe.QueryRequest(
            limit=limit,
            query=qe.Query.Nearest(query),
            filter=_optional_filter(query_filter),
            with_payload=_selector(with_payload),
            with_vector=_selector(with_vectors),
            score_threshold=score_threshold,
        )
        points = await _run(shard.query, request)
        return EdgeAnswer(points)

    async def query_batch_points(
        self, collection_name: str, requests: Sequence[models.QueryRequest]
    ) -> list[EdgeAnswer]:
        """One planned batch: Edge shares one pass over the segments between the requests."""
        shard = await self._shard(collection_name)
        batch = qe.QueryBatchRequest([_query_request(request) for request in requests])
        answers = await _run(shard.query_batch, batch)
        return [EdgeAnswer(points) for points in answers]

    async def close(self) -> None:
        """Every open shard flushed and closed, then the folder's lock released."""
        shards, self._shards = list(self._shards.values()), {}
        for shard in shards:
            await _run(_closed, shard)
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    # --- internals ------------------------------------------------------------------------------------------------

    def _hold_lock(self) -> None:
        self._lock = _locked(self._root.parent / ".lock")

    def _collections(self) -> set[str]:
        return {entry.name for entry in (self._root / COLLECTIONS_FOLDER).iterdir() if entry.is_dir()}

    def _resolved(self, name: str) -> str:
        return self._aliases.get(name, name)

    def _folder(self, name: str) -> Path:
        if not _FOLDER_NAME.match(name):
            raise ValueError(f"collection name {name!r} is not one the embedded Qdrant stores")
        return self._root / COLLECTIONS_FOLDER / name

    async def _shard(self, collection_name: str) -> qe.EdgeShard:
        """The collection's open shard (an alias resolved), loaded on first use."""
        name = self._resolved(collection_name)
        shard = self._shards.get(name)
        if shard is not None:
            return shard
        async with self._opening:
            if name not in self._shards:
                if name not in self._collections():
                    raise ValueError(f"Collection {collection_name} not found")
                self._shards[name] = await _run(qe.EdgeShard.load, str(self._folder(name)))
            return self._shards[name]

    async def _update(self, collection_name: str, operation: qe.UpdateOperation) -> models.UpdateResult:
        shard = await self._shard(collection_name)
        await _run(shard.update, operation)
        return models.UpdateResult(operation_id=None, status=models.UpdateStatus.COMPLETED)

    async def _write_aliases(self, aliases: dict[str, str]) -> None:
        await _run(_write_json, self._root / ALIASES_FILE, aliases)
        self._aliases = aliases


async def open_edge_client(path: str | Path) -> EdgeClient:
    """The embedded Qdrant at ``path``, after copying in what local mode left there (once; see the module).

    Nothing is read before the folder's lock is held: by local mode while it is copied from (the copy opens it), then
    by the client."""
    client = await asyncio.to_thread(EdgeClient, path)
    try:
        if await asyncio.to_thread((Path(path) / LOCAL_META).exists):
            await migrate_local_mode(Path(path), client)
        await asyncio.to_thread(client._hold_lock)
    except BaseException:
        await client.close()
        raise
    return client


async def migrate_local_mode(path: Path, client: EdgeClient) -> int:
    """Copy local mode's collections and aliases at ``path`` into ``client``; returns the points copied.

    The payload indexes are the adapter's (``QdrantStore`` makes them at creation; local mode kept none)."""
    from common.vectors.base import FILTERABLE
    from common.vectors.qdrant import LENGTH_FIELD, LENGTH_INDEX

    local = await asyncio.to_thread(QdrantClient, path=str(path))
    copied = 0
    try:
        existing = {c.name for c in (await client.get_collections()).collections}
        for description in (await asyncio.to_thread(local.get_collections)).collections:
            name = description.name
            if name in existing and await _copied_whole(local, client, name):
                continue
            if name in existing:  # a copy an interrupted migration left halfway
                await client.delete_collection(name)
            copied += await _copy_collection(local, client, name)
            for field in FILTERABLE:
                await client.create_payload_index(name, field_name=field, field_schema=models.PayloadSchemaType.KEYWORD)
            await client.create_payload_index(name, field_name=LENGTH_FIELD, field_schema=LENGTH_INDEX)
        aliases = (await asyncio.to_thread(local.get_aliases)).aliases
        await client.update_collection_aliases(
            [
                models.CreateAliasOperation(
                    create_alias=models.CreateAlias(collection_name=a.collection_name, alias_name=a.alias_name)
                )
                for a in aliases
            ]
        )
    finally:
        await asyncio.to_thread(local.close)
    await asyncio.to_thread(os.replace, path / LOCAL_META, path / LOCAL_MIGRATED)
    _log.info("embedded Qdrant: local mode's collections at %s copied into Qdrant Edge (%d points)", path, copied)
    return copied


async def _copied_whole(local: QdrantClient, client: EdgeClient, name: str) -> bool:
    """Whether Edge holds as many points of ``name`` as local mode does."""
    local_count = await asyncio.to_thread(local.count, name, exact=True)
    return (await client.count(name)).count == local_count.count


async def _copy_collection(local: QdrantClient, client: EdgeClient, name: str) -> int:
    """One collection's points, page by page."""
    params = (await asyncio.to_thread(local.get_collection, name)).config.params
    if not isinstance(params.vectors, models.VectorParams):
        raise ValueError(f"local-mode collection {name!r} has named dense vectors, which Ragu never makes")
    await client.create_collection(name, params.vectors, params.sparse_vectors or {})
    copied, offset = 0, None
    while True:
        records, offset = await asyncio.to_thread(
            local.scroll, name, limit=MIGRATE_PAGE, offset=offset, with_payload=True, with_vectors=True
        )
        points = [models.PointStruct(id=r.id, vector=r.vector or {}, payload=r.payload) for r in records]  # type: ignore[arg-type]
        if points:
            await client.upsert(name, points)
        copied += len(points)
        if offset is None:
            return copied


# --- translation: qdrant_client models to Edge's and back ------------------------------------------------------------


def _filter(query_filter: models.Filter) -> qe.Filter:
    return qe.Filter(
        must=_conditions(query_filter.must),
        should=_conditions(query_filter.should),
        must_not=_conditions(query_filter.must_not),
    )


def _optional_filter(query_filter: models.Filter | None) -> qe.Filter | None:
    return None if query_filter is None else _filter(query_filter)


def _conditions(conditions: Sequence[models.Condition] | models.Condition | None) -> list[Any] | None:
    if conditions is None:
        return None
    listed: Sequence[models.Condition] = conditions if isinstance(conditions, list) else [conditions]  # type: ignore[list-item]
    return [_condition(condition) for condition in listed]


def _condition(condition: models.Condition) -> Any:
    """The conditions the adapter builds: nested filters, ids, vectors present, empty fields, value and any-of."""
    if isinstance(condition, models.Filter):
        return _filter(condition)
    if isinstance(condition, models.HasIdCondition):
        return qe.HasIdCondition(point_ids={_edge_id(id_) for id_ in condition.has_id})
    if isinstance(condition, models.HasVectorCondition):
        return qe.HasVectorCondition(vector=condition.has_vector)
    if isinstance(condition, models.IsEmptyCondition):
        return qe.IsEmptyCondition(key=condition.is_empty.key)
    if isinstance(condition, models.FieldCondition):
        return qe.FieldCondition(key=condition.key, match=_match(condition.match))
    raise ValueError(f"condition {type(condition).__name__} is not one the embedded Qdrant translates")


def _match(match: Any) -> Any:
    if isinstance(match, models.MatchAny):
        return qe.MatchAny(any=list(match.any))  # type: ignore[arg-type]
    if isinstance(match, models.MatchValue):
        return qe.MatchValue(value=match.value)
    raise ValueError(f"match {type(match).__name__} is not one the embedded Qdrant translates")


def _query_request(request: models.QueryRequest) -> qe.QueryRequest:
    """A dense request as it is; a sparse one with its IDF taken over the live points (:data:`_LIVE_IDF`)."""
    query = request.query
    sparse = isinstance(query, models.SparseVector)
    vector: Any = qe.SparseVector(indices=query.indices, values=query.values) if sparse else query  # type: ignore[union-attr]
    return qe.QueryRequest(
        limit=request.limit or 10,
        query=qe.Query.Nearest(vector, using=request.using),
        filter=_optional_filter(request.filter),
        with_payload=_selector(request.with_payload),
        with_vector=_selector(request.with_vector),
        score_threshold=request.score_threshold,
        params=_LIVE_IDF if sparse else None,
    )


def _selector(selection: Any) -> Any:
    return list(selection) if isinstance(selection, list | tuple) else bool(selection)


def _index_schema(schema: models.PayloadSchemaType | models.IntegerIndexParams) -> Any:
    if isinstance(schema, models.IntegerIndexParams):
        return qe.IntegerIndexParams(lookup=schema.lookup, range=schema.range)
    if schema == models.PayloadSchemaType.KEYWORD:
        return qe.PayloadSchemaType.Keyword
    if schema == models.PayloadSchemaType.INTEGER:
        return qe.PayloadSchemaType.Integer
    raise ValueError(f"payload index {schema!r} is not one the embedded Qdrant translates")


def _batch_points(batch: models.Batch) -> list[qe.Point]:
    ids = list(batch.ids)
    columns = batch.vectors if isinstance(batch.vectors, dict) else {"": batch.vectors}
    payloads: Sequence[dict[str, Any] | None] = batch.payloads or [None] * len(ids)
    return [
        qe.Point(
            id=_edge_id(id_),
            vector={name: _vector_value(column[i]) for name, column in columns.items()},
            payload=payloads[i],
        )
        for i, id_ in enumerate(ids)
    ]


def _point(point: models.PointStruct) -> qe.Point:
    return qe.Point(id=_edge_id(point.id), vector=_vector(point.vector), payload=point.payload)


def _vector(vector: Any) -> Any:
    if isinstance(vector, dict):
        return {name: _vector_value(value) for name, value in vector.items()}
    return {"": list(vector)}


def _vector_value(value: Any) -> Any:
    if isinstance(value, models.SparseVector):
        return qe.SparseVector(indices=list(value.indices), values=[float(v) for v in value.values])
    return [float(v) for v in value]


def _out_vector(vector: Any) -> Any:
    if isinstance(vector, dict):
        return {name: _out_vector(value) for name, value in vector.items()}
    if isinstance(vector, qe.SparseVector):
        return models.SparseVector(indices=vector.indices, values=vector.values)
    return vector


def _edge_id(id_: models.ExtendedPointId) -> qe.PointId:
    return id_ if isinstance(id_, int) else uuid.UUID(str(id_))


def _our_id(id_: Any) -> models.ExtendedPointId:
    return id_ if isinstance(id_, int) else str(id_)


def _record(record: qe.Record) -> models.Record:
    return models.Record.model_construct(
        id=_our_id(record.id), payload=record.payload, vector=_out_vector(record.vector)
    )


def _vectors_config(vectors: Mapping[str, Any]) -> models.VectorParams | dict[str, models.VectorParams]:
    """Edge's persisted dense config as the client shows it: the unnamed vector alone as one ``VectorParams``."""
    params = {
        name: models.VectorParams(
            size=spec["size"], distance=_DISTANCE_NAMES.get(spec["distance"], models.Distance.COSINE)
        )
        for name, spec in vectors.items()
    }
    return params[""] if set(params) == {""} else params


async def _run(function: Callable[..., T], *args: Any) -> T:
    """An Edge call in a worker thread, its plain ``Exception`` re-raised as ``ValueError`` (what the adapter
    translates)."""
    try:
        return await asyncio.to_thread(function, *args)
    except ValueError:
        raise
    except Exception as exc:  # Edge raises bare Exception for every refusal
        raise ValueError(str(exc)) from exc


def _closed(shard: qe.EdgeShard) -> None:
    shard.flush()
    shard.close()


def _locked(path: Path) -> IO[str]:
    handle = path.open("a", encoding="utf-8")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as exc:
        handle.close()
        raise RuntimeError(
            f"the embedded Qdrant at {path.parent} is open in another client; one process at a time "
            "(serve several from a Qdrant server: RAGU_QDRANT_URL)"
        ) from exc
    return handle


def _read_json(path: Path) -> dict[str, Any]:
    with contextlib.suppress(FileNotFoundError):
        loaded = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(loaded, dict):
            return loaded
    return {}


def _write_json(path: Path, value: Mapping[str, Any]) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(value), encoding="utf-8")
    os.replace(temporary, path)
