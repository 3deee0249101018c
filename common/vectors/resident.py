"""pgvector collections searched in this process's memory, kept exact by PostgreSQL's change notices.

Why: a kappi question searches three or more collections. Through PostgreSQL that costs ~2.6 ms of database
CPU and ~0.5 ms of ours per question (``bench/kappi_bench.py``); a faiss HNSW index over the same chunks in
this process answers the three searches in ~0.2 ms, on the server's own core, with no round trip.

Kappi's own choice: :class:`ResidentVectors` wraps a :class:`PgVectorStore` and is built only in kappi's
composition root (``kappi.app``). Chonkit, ``ragu worker`` and ``ragu reconcile`` use the plain store: they
never search at kappi's rate, and open no listening connection.

How the copy stays exact:

- A collection is copied the first time it is searched (in the background; until then, and whenever its copy
  is not current, the search goes to the wrapped store, once). Only tables that announce their writes
  (:mod:`common.vectors.changes`) are copied, and only while the copies fit ``max_chunks``.
- Every committed write to a collection, whoever the writer is, arrives as a change notice
  (:class:`~common.vectors.changes.ChangeFeed`). The notice drops the copy at once; the collection is copied
  again by a later search once its writes have been quiet for ``settle_seconds`` (an embedding job writes in
  batches), or for ten times its last build when that is longer (:data:`REBUILD_FACTOR`). Writes made through
  the wrapper drop the copy as they return, before their notice arrives.
- A copy whose load overlapped a notice is thrown away (a generation counter per collection), so no copy ever
  predates a write whose notice has arrived. While the feed is not provably listening, nothing is searched in
  memory: every copy is dropped when it goes, and loads wait until it is back.

Access: the chunks' own ``groups`` are part of the copy and the SQL filter's rule applies to them unchanged
(no ``groups`` = everyone; otherwise at least one in common), so the second access check holds here too.

Answers match the SQL search: the same HNSW candidate list (``ef_search``), exact cosine distances sorted by
(distance, id), the same ``max_distance`` cut after the limit. Whenever the copy could answer differently —
equal distances straddling the limit, a filter that rejects only some candidates, a document filter, a query
of another dimension — that search goes to PostgreSQL. So do filters on ``tags`` and ``label`` (the copy does not
hold them) and lexical searches (the term statistics and postings live in PostgreSQL).

A hybrid search whose collection is in memory takes its dense leg from the copy, as a dense search of the leg's
depth, and only its lexical leg from PostgreSQL (the legs of a fan-out in one statement), fused by the same
:func:`~common.vectors.fusion.fuse`: about half of PostgreSQL's whole hybrid search, measured on SciFact
(docs/benchmarks.md), with the same answers on exhaustive copies and the same quality on HNSW ones (whose
approximations, like PostgreSQL's, may differ deep in the dense leg).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import asyncpg
import msgspec
import numpy as np
import numpy.typing as npt

from common.errors import AppError
from common.vectors.base import (
    Search,
    SearchFilter,
    SearchHit,
    SearchResult,
    Vector,
    VectorRecord,
)
from common.vectors.changes import ChangeFeed
from common.vectors.fusion import fuse, leg_depth
from common.vectors.pgvector import DEFAULT_EF_SEARCH, Chunk, PgVectorStore
from common.vectors.records import check_retrieval, is_collection_name
from schemas.models import Identity

_log = logging.getLogger(__name__)

FLAT_UP_TO = 1024
"""Collections this small are searched exhaustively (exact, and as fast as HNSW at this size)."""
HNSW_LINKS = 16
"""pgvector's default ``m``."""
HNSW_BUILD_EF = 256
"""Candidates kept while building (pgvector's default is 64): on SciFact claims, recall@5 at search ``ef`` 40 is
then 0.993 against pgvector's 0.992 (0.986 with 64), for the same search time and a build ~3x longer (3.2 s
for 13.7k chunks, in a background thread)."""
REBUILD_FACTOR = 10.0
"""A collection is copied again only after its writes have been quiet for this many times its last build:
rebuilding costs the same core that answers questions, so a collection written to all the time is searched in
PostgreSQL rather than rebuilt over and over (at most ~10 % of the core goes to rebuilds)."""
BUSY_WITHIN = 0.002
"""Questions whose searches start this close together (seconds) are batched (:class:`_Batch`); a question
alone searches at once rather than wait for the event loop's turn (~1 ms at a few hundred questions/s)."""


class ResidentStatus:
    """What the copies are doing, for tests, benchmarks and diagnostics; nothing decides by it."""

    def __init__(self, listening: asyncio.Event, copies: Mapping[str, _Copy]) -> None:
        self.listening = listening
        """Set while change notices provably arrive: copies are made and searched only then."""
        self._copies = copies

    def in_memory(self) -> dict[str, int]:
        """The collections searched in memory now, with their chunk counts."""
        return {name: copy.size for name, copy in self._copies.items()}


class ResidentVectors:
    """The :class:`~common.vectors.base.VectorStore` port over a :class:`PgVectorStore`, whose searches run on
    in-memory copies of its collections when they are current; everything else is the store's.

    Args:
        store: The store to wrap; it (and its pool) belongs to the caller and stays open after :meth:`aclose`.
        url: The database URL, for the connection that listens for change notices.
        max_chunks: Most chunks held in memory over all collections (5.5 KB each measured at 384 dimensions
            with SciFact's payloads); 0 copies nothing and listens for nothing.
        settle_seconds: Quiet time after a collection's last write before it is copied again.
    """

    def __init__(self, store: PgVectorStore, url: str, *, max_chunks: int, settle_seconds: float = 1.0) -> None:
        self._store = store
        self._max_chunks = max_chunks
        self._settle_seconds = settle_seconds
        self._feed = ChangeFeed(url, store.pool, changed=self._changed, lost=self._drop_all)
        self._copies: dict[str, _Copy] = {}
        self._generation: dict[str, int] = {}
        """Per collection, how many change notices have arrived: a load keeps its copy only if unchanged."""
        self._epoch = 0
        """Bumped whenever notices may have been missed: a load across that keeps nothing."""
        self._changed_at: dict[str, float] = {}
        self._build_seconds: dict[str, float] = {}
        """How long each collection's last copy took to build: writes arriving faster than that get PostgreSQL."""
        self._refused: dict[str, int] = {}
        """Collections not to copy (too large, no trigger) until their next change notice: name → generation."""
        self._loading: set[str] = set()
        self._load_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self._pending: _Batch | None = None
        self._last_search_many = -math.inf
        self.status = ResidentStatus(self._feed.listening, self._copies)

    @property
    def provider(self) -> str:
        return self._store.provider

    def start(self) -> None:
        """Start listening for change notices (copies are made only while listening)."""
        if self._max_chunks > 0:
            self._feed.start()

    async def aclose(self) -> None:
        """Stop listening and drop every copy; the wrapped store stays open."""
        await self._feed.aclose()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._drop_all()

    # Reads that no copy answers.

    async def collection_exists(self, name: str) -> bool:
        return await self._store.collection_exists(name)

    async def read_identity(self, name: str) -> dict[str, Any] | None:
        return await self._store.read_identity(name)

    async def count(self, name: str, *, document_id: str | None = None) -> int:
        return await self._store.count(name, document_id=document_id)

    async def document_ids(self, name: str) -> dict[str, int]:
        return await self._store.document_ids(name)

    async def count_misgrouped(self, name: str, groups: Sequence[str]) -> int:
        return await self._store.count_misgrouped(name, groups)

    async def list_identities(self) -> list[Identity]:
        return await self._store.list_identities()

    # Writes through the wrapper drop the copy as they return (their notice may still be on its way), so a
    # search right after a write always sees it.

    async def create_collection(self, identity: Identity, dimension: int) -> None:
        try:
            await self._store.create_collection(identity, dimension)
        finally:
            self._changed(identity.name)

    async def write_identity(self, identity: Identity) -> None:
        try:
            await self._store.write_identity(identity)
        finally:
            self._changed(identity.name)

    async def set_groups(self, name: str, groups: Sequence[str]) -> None:
        try:
            await self._store.set_groups(name, groups)
        finally:
            self._changed(name)

    async def upsert(self, name: str, records: Sequence[VectorRecord]) -> None:
        try:
            await self._store.upsert(name, records)
        finally:
            self._changed(name)

    async def delete_document(self, name: str, document_id: str) -> None:
        try:
            await self._store.delete_document(name, document_id)
        finally:
            self._changed(name)

    async def update_document(
        self, name: str, document_id: str, *, document_name: str, tags: Sequence[str], label: str | None
    ) -> None:
        try:
            await self._store.update_document(name, document_id, document_name=document_name, tags=tags, label=label)
        finally:
            self._changed(name)

    async def delete_ids(self, name: str, ids: Sequence[str]) -> None:
        try:
            await self._store.delete_ids(name, ids)
        finally:
            self._changed(name)

    async def upgrade_lexical(self, name: str) -> int:
        return await self._store.upgrade_lexical(name)

    async def drop_collection(self, name: str) -> None:
        try:
            await self._store.drop_collection(name)
        finally:
            self._changed(name)

    async def create_version(self, identity: Identity, dimension: int, version: str) -> None:
        try:
            await self._store.create_version(identity, dimension, version)
        finally:
            self._changed(version)

    async def swap_version(self, name: str, version: str) -> None:
        try:
            await self._store.swap_version(name, version)
        finally:
            self._changed(name)
            self._changed(version)

    async def search(self, search: Search) -> list[SearchHit]:
        if search.mode != "dense":
            [result] = await self.search_many([search])
            if isinstance(result, AppError):
                raise result
            return result
        copy = self._current_copy(search.name)
        if copy is not None:
            hits = copy.search(search, _unit(search.vector))
            if hits is not None:
                return hits
        return await self._store.search(search)

    async def search_many(self, searches: Sequence[Search]) -> list[SearchResult]:
        """The copies answer what they can: HNSW searches of questions arriving together (within
        :data:`BUSY_WITHIN`) in one batch (:class:`_Batch`), others at once. The rest, including a search whose
        copy was dropped before its batch ran, goes to the store in one call."""
        results: list[SearchResult | None] = [None] * len(searches)
        hybrid = await self._dense_from_copies(searches, results)
        if hybrid:
            await self._hybrid(searches, hybrid, results)
        rest = [n for n, result in enumerate(results) if result is None]
        if rest:
            for n, result in zip(rest, await self._store.search_many([searches[n] for n in rest]), strict=True):
                results[n] = result
        return [r if r is not None else [] for r in results]

    async def _dense_from_copies(
        self, searches: Sequence[Search], results: list[SearchResult | None]
    ) -> list[tuple[int, _Copy]]:
        """Answer in ``results`` the dense searches whose collection is in memory; the hybrid ones, with their
        copy, are returned for :meth:`_hybrid`."""
        units: dict[int, npt.NDArray[np.float32] | None] = {}  # an agent's searches share their query vector
        waiting: list[asyncio.Future[SearchResult | None]] = []
        positions: list[int] = []
        now = time.monotonic()
        busy = self._pending is not None or now - self._last_search_many <= BUSY_WITHIN
        self._last_search_many = now
        hybrid: list[tuple[int, _Copy]] = []
        for n, search in enumerate(searches):
            copy = self._current_copy(search.name) if search.mode != "lexical" else None
            if copy is None:
                continue
            if search.mode == "hybrid":
                hybrid.append((n, copy))
                continue
            key = id(search.vector)
            if key not in units:
                units[key] = _unit(search.vector)
            planned = copy.plan(search, units[key])
            if not isinstance(planned, _Planned):
                results[n] = planned
            elif copy.approximate and busy:
                waiting.append(self._batch().add(copy, search, planned))
                positions.append(n)
            else:  # a lone question need not wait; exhaustive copies are small, and faiss would use BLAS on batches
                results[n] = copy.answer(search, planned)
        for n, answer in zip(positions, waiting, strict=True):
            results[n] = await answer  # one batch answers them all: only the first await suspends
        return hybrid

    async def _hybrid(
        self, searches: Sequence[Search], planned: Sequence[tuple[int, _Copy]], results: list[SearchResult | None]
    ) -> None:
        """Hybrid searches whose collection is in memory: the dense leg from the copy, the lexical legs from
        PostgreSQL in one statement (:meth:`PgVectorStore.search_many`), fused here by the same
        :func:`~common.vectors.fusion.fuse`; payloads from the copy. Answers ``results`` in place; a search
        the copy cannot answer exactly (see :meth:`_Copy.hits`), or whose copy went while PostgreSQL answered,
        is left to the store whole."""
        dense: list[tuple[int, _Copy, list[SearchHit]]] = []
        for n, copy in planned:
            search = searches[n]
            try:
                check_retrieval(search.mode, search.dense_weight)
            except AppError as exc:
                results[n] = exc
                continue
            leg = msgspec.structs.replace(search, limit=leg_depth(search.limit), properties=(), max_distance=None)
            hits = copy.search(leg, _unit(search.vector))
            if hits is not None:
                dense.append((n, copy, hits))
        if not dense:
            return
        legs = [
            msgspec.structs.replace(
                searches[n], limit=leg_depth(searches[n].limit), properties=(), max_distance=None, mode="lexical"
            )
            for n, _, _ in dense
        ]
        for (n, copy, dense_hits), lexical_hits in zip(dense, await self._store.search_many(legs), strict=True):
            search = searches[n]
            if isinstance(lexical_hits, AppError):
                results[n] = lexical_hits
                continue
            if self._copies.get(search.name) is not copy:
                continue  # written meanwhile: the legs may not agree
            fused = fuse(
                dense_hits,
                lexical_hits,
                dense_weight=search.dense_weight,
                limit=search.limit,
                max_distance=search.max_distance,
            )
            results[n] = copy.with_payloads(fused, search.properties)

    def _current_copy(self, name: str) -> _Copy | None:
        copy = self._copies.get(name)
        if copy is None:
            self._consider_loading(name)
        return copy

    def _batch(self) -> _Batch:
        if self._pending is None:
            self._pending = _Batch(lambda name, copy: self._copies.get(name) is copy)
            asyncio.get_running_loop().call_soon(self._run_batch)
        return self._pending

    def _run_batch(self) -> None:
        batch, self._pending = self._pending, None
        if batch is not None:
            batch.run()

    def _consider_loading(self, name: str) -> None:
        if not self._feed.listening.is_set() or name in self._loading or not is_collection_name(name):
            return
        generation = self._generation.get(name, 0)
        if self._refused.get(name) == generation:
            return
        loop = asyncio.get_running_loop()
        quiet = max(self._settle_seconds, REBUILD_FACTOR * self._build_seconds.get(name, 0.0))
        if loop.time() - self._changed_at.get(name, -quiet) < quiet:
            return
        self._loading.add(name)
        task = loop.create_task(self._load(name), name=f"ragu-copy-{name}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _load(self, name: str) -> None:
        try:
            async with self._load_lock:
                generation, epoch = self._generation.get(name, 0), self._epoch
                budget = self._max_chunks - sum(c.size for c in self._copies.values())
                chunks = await self._store.snapshot(name, max_chunks=budget)
                started = time.perf_counter()
                copy = None if chunks is None else await asyncio.to_thread(_Copy.build, chunks)
                self._build_seconds[name] = time.perf_counter() - started
                current = generation == self._generation.get(name, 0) and epoch == self._epoch
                if not current or not self._feed.listening.is_set():
                    return  # a write (or a gap in the notices) overlapped the load: the next search tries again
                if copy is None:
                    self._refused[name] = generation
                else:
                    self._copies[name] = copy
                    _log.info("collection %s searched in memory: %d chunks", name, copy.size)
        except (AppError, asyncpg.PostgresError, OSError) as exc:
            _log.info("collection %s not copied to memory: %s", name, exc)
            self._changed_at[name] = asyncio.get_running_loop().time()  # wait before trying again
        except Exception:  # noqa: BLE001 -- a bug here must never cost a search: PostgreSQL keeps answering
            _log.exception("collection %s not copied to memory", name)
            self._refused[name] = self._generation.get(name, 0)
        finally:
            self._loading.discard(name)

    def _changed(self, name: str) -> None:
        self._generation[name] = self._generation.get(name, 0) + 1
        self._changed_at[name] = asyncio.get_running_loop().time()
        self._copies.pop(name, None)
        self._refused.pop(name, None)

    def _drop_all(self) -> None:
        self._epoch += 1
        self._copies.clear()


def _import_faiss() -> Any:
    """faiss without its loader's INFO lines. The wheel ships one build, but the loader first tries the AVX512
    and AVX2 builds it lacks and logs each ``ModuleNotFoundError``: two alarming lines at the first question,
    though faiss loads fine. Warnings still show, and a faiss that cannot load still raises."""
    loader = logging.getLogger("faiss.loader")
    level = loader.level
    loader.setLevel(logging.WARNING)
    try:
        import faiss
    finally:
        loader.setLevel(level)
    return faiss


class _Copy:
    """One collection's chunks: ids, payloads, the chunks' own groups, and a faiss index over their unit vectors
    (exhaustive up to :data:`FLAT_UP_TO` chunks, HNSW past it). Scores are float32 inner products of unit
    vectors: the cosine similarity SQL computes, to float32 precision. (Float16 vectors for the walk plus an
    exact re-rank measured 10 % slower per question: the re-rank reads cold float32 rows.)"""

    def __init__(
        self, index: Any, ids: list[str], payloads: list[dict[str, Any]], groups: list[frozenset[str] | None]
    ) -> None:
        self.index = index
        self.ids = ids
        self.payloads = payloads
        self.groups = groups
        self.size, self.dimension = len(ids), int(index.d)
        self.approximate = self.size > FLAT_UP_TO
        self._ef_search = 0
        self._labels: dict[str, int] | None = None
        """Each chunk's position by id, built by the first hybrid search (lexical hits name chunks by id)."""
        self._projected: dict[tuple[str, ...], dict[int, dict[str, Any]]] = {}
        """Per ``properties`` asked for, each chunk's payload cut to them once (callers get a copy): the cut
        walks a cold dict of a dozen keys, the copy is one C call. At most one small dict per chunk and
        property set (kappi asks for one)."""
        first = groups[0] if groups else None
        self.uniform = all(g == first for g in groups)
        """Every chunk carries the same groups (the normal case): the access filter is one check."""

    def with_payloads(self, hits: Sequence[SearchHit], properties: Sequence[str]) -> list[SearchHit] | None:
        """``hits`` with the requested properties of each chunk's payload; ``None`` when one is not in the copy
        (written after it was taken)."""
        if self._labels is None:
            self._labels = {id_: label for label, id_ in enumerate(self.ids)}
        wanted = set(properties)
        filled = []
        for hit in hits:
            label = self._labels.get(hit.id)
            if label is None:
                return None
            payload = {
                key: list(v) if isinstance(v, tuple) else v for key, v in self.payloads[label].items() if key in wanted
            }
            filled.append(msgspec.structs.replace(hit, payload=payload))
        return filled

    @classmethod
    def build(cls, rows: Sequence[Chunk]) -> _Copy | None:
        """``None`` for what the copy cannot answer like SQL: zero vectors, odd ``groups`` values, no chunks."""
        faiss = _import_faiss()
        faiss.omp_set_num_threads(1)
        if not rows:
            return None
        vectors = np.stack([vector for _, vector, _ in rows]).astype(np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        if not np.all(np.isfinite(norms)) or np.any(norms == 0):
            return None  # pgvector's cosine distance is NaN there; leave such collections to it
        vectors /= norms
        shared: dict[frozenset[str], frozenset[str]] = {}  # chunks mostly carry the same groups: one object
        groups = [_chunk_groups(payload) for _, _, payload in rows]
        usable = [g if g is None else shared.setdefault(g, g) for g in groups if g is None or isinstance(g, frozenset)]
        if len(usable) < len(groups):
            return None
        dimension = vectors.shape[1]
        index: Any
        if len(rows) <= FLAT_UP_TO:
            index = faiss.IndexFlatIP(dimension)
        else:
            index = faiss.IndexHNSWFlat(dimension, HNSW_LINKS, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = HNSW_BUILD_EF
        index.add(vectors)
        return cls(index, [id_ for id_, _, _ in rows], [_untrackable(payload) for _, _, payload in rows], usable)

    def search(self, search: Search, query: npt.NDArray[np.float32] | None) -> list[SearchHit] | None:
        """Hits as :meth:`PgVectorStore.search` returns them for this unit ``query``, or ``None`` when only SQL
        can say (``query`` is ``None`` for a query vector that is not one)."""
        planned = self.plan(search, query)
        return planned if not isinstance(planned, _Planned) else self.answer(search, planned)

    def answer(self, search: Search, planned: _Planned) -> list[SearchHit] | None:
        """:meth:`search` once planned."""
        scores, labels = self.neighbours(planned.query[None, :], planned.fetch)
        return self.hits(search, planned.fetch, scores[0], labels[0])

    def plan(self, search: Search, query: npt.NDArray[np.float32] | None) -> _Planned | list[SearchHit] | None:
        """What :meth:`search` settles before faiss: the answer already (``[]``, or ``None`` for SQL), or the
        query and how many neighbours to fetch."""
        where = search.where
        if where is not None and (where.document_ids is not None or where.tags is not None or where.labels is not None):
            return None  # conditions the copy does not hold: PostgreSQL answers
        if search.limit < 1 or (self.uniform and not _allowed(self.groups[0], where)):
            return []
        if query is None or query.shape[0] != self.dimension:
            return None  # PostgreSQL answers (or refuses) it with the store's own error
        return _Planned(query, min(self.size, search.limit + 1))

    def neighbours(
        self, queries: npt.NDArray[np.float32], fetch: int
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        """faiss's nearest ``fetch`` for each row of ``queries`` (rows are searched independently)."""
        if self.approximate:
            ef_search = max(DEFAULT_EF_SEARCH, 2 * fetch)
            if ef_search != self._ef_search:
                self.index.hnsw.efSearch = self._ef_search = ef_search
        scores, labels = self.index.search(queries, fetch)
        return scores, labels

    def hits(
        self, search: Search, fetch: int, scores: npt.NDArray[np.float32], labels: npt.NDArray[np.int64]
    ) -> list[SearchHit] | None:
        """faiss's neighbours as SQL's hits: access filter, (distance, id) order, limit, distance cut."""
        ids, groups, uniform = self.ids, self.groups, self.uniform
        found: list[tuple[float, str, int]] = []
        for similarity, label in zip(scores.tolist(), labels.tolist(), strict=True):
            if label < 0:
                break
            if not uniform and not _allowed(groups[label], search.where):
                return None  # a filter that rejects some neighbours: PostgreSQL's iterative scan finds more
            found.append((1.0 - similarity, ids[label], label))
        found.sort()
        limit = search.limit
        if len(found) == fetch > limit and found[limit][0] == found[limit - 1][0]:
            return None  # equal distances straddle the limit: SQL breaks the tie over every tied chunk
        cut = search.max_distance
        asked = search.properties if isinstance(search.properties, tuple) else tuple(search.properties)
        projected = self._projected.get(asked)
        if projected is None:
            projected = self._projected[asked] = {}
        hits = []
        for distance, id_, label in found[:limit]:
            if cut is not None and distance > cut:
                break  # sorted: every later one is further still
            payload = projected.get(label)
            if payload is None:
                wanted = set(asked)
                payload = projected[label] = {
                    key: list(value) if isinstance(value, tuple) else value
                    for key, value in self.payloads[label].items()
                    if key in wanted
                }
            hits.append(SearchHit(id=id_, score=1.0 - distance, distance=distance, payload=payload.copy()))
        return hits


class _Planned(NamedTuple):
    query: npt.NDArray[np.float32]
    fetch: int


class _Batch:
    """The copy searches asked for during one event-loop turn, run together at the start of the next.

    Why: an HNSW walk reads ~650 vectors scattered over the index, and the rest of a request's work evicts
    them from the core's cache, so a lone walk waits on memory (179 µs measured on a 4.5k-chunk SciFact
    collection, 92 µs per walk when 16 queries walk it back to back; kappi's throughput +15 % at c=16). faiss
    searches the rows of a query matrix independently, so each search's neighbours are what it would get
    alone.
    """

    def __init__(self, is_current: Callable[[str, _Copy], bool]) -> None:
        self._is_current = is_current
        self._queued: dict[tuple[int, int], list[tuple[_Copy, Search, _Planned, asyncio.Future[SearchResult | None]]]]
        self._queued = {}

    def add(self, copy: _Copy, search: Search, planned: _Planned) -> asyncio.Future[SearchResult | None]:
        answer: asyncio.Future[SearchResult | None] = asyncio.get_running_loop().create_future()
        self._queued.setdefault((id(copy), planned.fetch), []).append((copy, search, planned, answer))
        return answer

    def run(self) -> None:
        """Answer every queued search; ``None`` (ask PostgreSQL) for one whose copy was dropped meanwhile."""
        for queued in self._queued.values():
            try:
                current = [item for item in queued if self._is_current(item[1].name, item[0])]
                if current:
                    copy, fetch = current[0][0], current[0][2].fetch
                    scores, labels = copy.neighbours(np.stack([item[2].query for item in current]), fetch)
                    for row, (_, search, _, answer) in enumerate(current):
                        if not answer.done():
                            answer.set_result(copy.hits(search, fetch, scores[row], labels[row]))
                for *_, answer in queued:
                    if not answer.done():
                        answer.set_result(None)
            except Exception as exc:  # noqa: BLE001 -- never leave a question waiting on a failed batch
                for *_, answer in queued:
                    if not answer.done():
                        answer.set_exception(exc)


def _unit(vector: Vector) -> npt.NDArray[np.float32] | None:
    """The query as a float32 unit vector, or ``None`` when it is not a finite non-zero vector."""
    try:
        query = np.asarray(vector, dtype=np.float32)
    except (TypeError, ValueError):
        return None
    if query.ndim != 1:
        return None
    norm = float(np.sqrt(query @ query))
    if not np.isfinite(norm) or norm == 0:
        return None
    unit: npt.NDArray[np.float32] = query / np.float32(norm)
    return unit


def _untrackable(payload: dict[str, Any]) -> dict[str, Any]:
    """The payload with its lists of plain values as tuples (given back as lists by :meth:`_Copy.hits`).

    Why: a dict or tuple holding only strings and numbers drops out of the cyclic garbage collector after the
    first collection it survives; a list never does. Tens of thousands of payloads each holding a ``groups``
    list made every full collection walk them all (pauses up to ~200 ms measured at 18k chunks).
    """
    if not any(isinstance(value, list) for value in payload.values()):
        return payload
    return {key: _plain_tuple(value) for key, value in payload.items()}


def _plain_tuple(value: Any) -> Any:
    if isinstance(value, list) and all(isinstance(item, str | int | float | bool | None) for item in value):
        return tuple(value)
    return value


def _chunk_groups(payload: dict[str, Any]) -> frozenset[str] | bool | None:
    """A chunk's ``groups`` for the access rule; ``False`` for a value the SQL filter would read otherwise."""
    if "groups" not in payload:
        return None
    groups = payload["groups"]  # an explicit null is no group at all to SQL, unlike a missing property
    if isinstance(groups, list) and all(isinstance(g, str) for g in groups):
        return frozenset(groups)
    return False


def _allowed(groups: frozenset[str] | None, where: SearchFilter | None) -> bool:
    """The SQL filter's rule: no access filter; or no groups on the chunk, where the filter lets such chunks
    through; or at least one group in common."""
    if where is None or where.readable_by is None:
        return True
    if groups is None:
        return where.ungrouped_readable
    return not groups.isdisjoint(where.readable_by)
