"""pgvector collections searched in this process's memory, kept exact by PostgreSQL's change notices.

Why: a kappi question searches three or more collections. Through PostgreSQL each costs the database CPU (the
HNSW walk, and for lexical and hybrid searches one index probe per posting of every query term) and a round trip;
a faiss index and an inverted index over the same chunks in this process answer them on the server's own core,
for a fraction of that (``bench/kappi_bench.py``; figures in docs/benchmarks.md).

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
- A copy is one repeatable read of the chunks — ids, vectors, payloads and lexical columns — with the chunk
  count of the collection's term statistics; it is built in a thread, off the event loop.

Access: the chunks' own ``groups`` are part of the copy and the SQL filter's rule applies to them unchanged
(no ``groups`` = everyone; otherwise at least one in common), in the dense leg and in the lexical leg alike, so
the second access check holds here too.

Dense answers match the SQL search: the same HNSW candidate list (``ef_search``), exact cosine distances sorted
by (distance, id), the same ``max_distance`` cut after the limit. Whenever the copy could answer differently —
equal distances straddling the limit, a filter that rejects only some candidates, a document filter, a query
of another dimension — that search goes to PostgreSQL. So do filters on ``tags`` and ``label`` (the copy does not
hold them).

Lexical and hybrid searches are answered whole by the copy (:meth:`_Copy.text_search`): the lexical leg from an
inverted index of the chunks' ``terms`` and ``term_weights`` (:class:`_Lexical`: each query term's postings read
once, as numpy slices, so the cost is not an index probe per posting), with the IDF from the copy's own document
frequencies — exact, the copy being an exact snapshot — and the same float64 operations in the same order as the
SQL statement (which adds a chunk's postings in term order too), so scores agree to the bit and rank alike (score
descending, id); scores unequal but within :data:`TIE_TOLERANCE` send the search to PostgreSQL. A hybrid search's dense
leg is a dense search of the leg's depth, fused with the lexical leg by the same
:func:`~common.vectors.fusion.fuse` (per chunk or per document, as :attr:`~common.vectors.base.Search.fusion`
asks). The same answers as PostgreSQL's on exhaustive copies and the same quality on HNSW ones (whose
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
from common.vectors import lexical
from common.vectors.base import (
    Search,
    SearchFilter,
    SearchHit,
    SearchResult,
    Vector,
    VectorRecord,
)
from common.vectors.changes import ChangeFeed
from common.vectors.fusion import by_document, fuse, leg_depth, leg_properties, lexical_only
from common.vectors.pgvector import DEFAULT_EF_SEARCH, PgVectorStore, Snapshot
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
TIE_TOLERANCE = 1e-9
"""Lexical scores this close (relative) but unequal are a near tie the copy leaves to SQL, should their sums ever
round apart (both add a chunk's postings in term order, so none is expected)."""
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
        max_chunks: Most chunks held in memory over all collections (each with its vector, payload and
            postings: bytes per chunk in docs/benchmarks.md); 0 copies nothing and listens for nothing.
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
        :data:`BUSY_WITHIN`) in one batch (:class:`_Batch`), others at once; lexical and hybrid searches whole
        (:meth:`_Copy.text_search`). The rest, including a search whose copy was dropped before its batch ran,
        goes to the store in one call."""
        results: list[SearchResult | None] = [None] * len(searches)
        units: dict[int, npt.NDArray[np.float32] | None] = {}  # an agent's searches share their query vector
        self._text_from_copies(searches, results, units)
        await self._dense_from_copies(searches, results, units)
        rest = [n for n, result in enumerate(results) if result is None]
        if rest:
            for n, result in zip(rest, await self._store.search_many([searches[n] for n in rest]), strict=True):
                results[n] = result
        return [r if r is not None else [] for r in results]

    async def _dense_from_copies(
        self,
        searches: Sequence[Search],
        results: list[SearchResult | None],
        units: dict[int, npt.NDArray[np.float32] | None],
    ) -> None:
        """Answer in ``results`` the dense searches whose collection is in memory."""
        waiting: list[asyncio.Future[SearchResult | None]] = []
        positions: list[int] = []
        now = time.monotonic()
        busy = self._pending is not None or now - self._last_search_many <= BUSY_WITHIN
        self._last_search_many = now
        for n, search in enumerate(searches):
            copy = self._current_copy(search.name) if search.mode == "dense" else None
            if copy is None:
                continue
            planned = copy.plan(search, _unit_of(search, units))
            if not isinstance(planned, _Planned):
                results[n] = planned
            elif copy.approximate and busy:
                waiting.append(self._batch().add(copy, search, planned))
                positions.append(n)
            else:  # a lone question need not wait; exhaustive copies are small, and faiss would use BLAS on batches
                results[n] = copy.answer(search, planned)
        for n, answer in zip(positions, waiting, strict=True):
            results[n] = await answer  # one batch answers them all: only the first await suspends

    def _text_from_copies(
        self,
        searches: Sequence[Search],
        results: list[SearchResult | None],
        units: dict[int, npt.NDArray[np.float32] | None],
    ) -> None:
        """Answer in ``results`` the lexical and hybrid searches whose collection is in memory with its lexical
        index: both legs from the copy, fused by the same :func:`~common.vectors.fusion.fuse`. What the copy
        cannot answer exactly (:meth:`_Copy.text_search` says ``None``) is left to the store whole."""
        analysed: dict[str, lexical.DocumentTerms] = {}  # an agent's searches share their question
        for n, search in enumerate(searches):
            copy = self._current_copy(search.name) if search.mode != "dense" else None
            if copy is None or copy.lexical is None:
                continue
            try:
                check_retrieval(search.mode, search.dense_weight)
                if search.mode == "hybrid" and search.limit >= 1:  # as the store checks it, after an empty limit
                    by_document(search.fusion)
            except AppError as exc:
                results[n] = exc
                continue
            terms = analysed.get(search.text)
            if terms is None:
                terms = analysed[search.text] = lexical.query_terms(search.text)
            results[n] = copy.text_search(search, _unit_of(search, units), terms)

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
                snapshot = await self._store.snapshot(name, max_chunks=budget)
                started = time.perf_counter()
                copy = None if snapshot is None else await asyncio.to_thread(_Copy.build, snapshot)
                self._build_seconds[name] = time.perf_counter() - started
                current = generation == self._generation.get(name, 0) and epoch == self._epoch
                if not current or not self._feed.listening.is_set():
                    return  # a write (or a gap in the notices) overlapped the load: the next search tries again
                if copy is None:
                    self._refused[name] = generation
                else:
                    self._copies[name] = copy
                    _log.info(
                        "collection %s searched in memory: %d chunks, lexical index %s",
                        name,
                        copy.size,
                        "none" if copy.lexical is None else f"{copy.lexical.nbytes / copy.size:.0f} bytes per chunk",
                    )
        except (AppError, asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as exc:
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
        self,
        index: Any,
        ids: list[str],
        payloads: list[dict[str, Any]],
        groups: list[frozenset[str] | None],
        lexical: _Lexical | None = None,
    ) -> None:
        self.index = index
        self.ids = ids
        self.payloads = payloads
        self.groups = groups
        self.lexical = lexical
        """The collection's inverted index; ``None`` when the table has none (lexical searches go to PostgreSQL)."""
        self.size, self.dimension = len(ids), int(index.d)
        self.approximate = self.size > FLAT_UP_TO
        self._ef_search = 0
        self._labels: dict[str, int] | None = None
        """Each chunk's position by id, built by the first lexical or hybrid search (fused hits name chunks by id)."""
        self._projected: dict[tuple[str, ...], dict[int, dict[str, Any]]] = {}
        """Per ``properties`` asked for, each chunk's payload cut to them once (callers get a copy): the cut
        walks a cold dict of a dozen keys, the copy is one C call. At most one small dict per chunk and
        property set (kappi asks for one)."""
        first = groups[0] if groups else None
        self.uniform = all(g == first for g in groups)
        """Every chunk carries the same groups (the normal case): the access filter is one check."""
        distinct: dict[frozenset[str] | None, int] = {}
        self._group_of = np.fromiter((distinct.setdefault(g, len(distinct)) for g in groups), np.int32, len(groups))
        """Each chunk's groups as an index into :attr:`_group_values`: the lexical leg's access filter reads it
        for every candidate at once."""
        self._group_values = list(distinct)

    def with_payloads(self, hits: Sequence[SearchHit], properties: Sequence[str]) -> list[SearchHit] | None:
        """``hits`` (of this copy's chunks) with the requested properties of each chunk's payload; ``None`` when
        one is not in the copy."""
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
    def build(cls, snapshot: Snapshot) -> _Copy | None:
        """``None`` for what the copy cannot answer like SQL: zero vectors, odd ``groups`` values, no chunks. A
        lexical index that cannot be read exactly is left out (its searches go to PostgreSQL)."""
        faiss = _import_faiss()
        faiss.omp_set_num_threads(1)
        rows = snapshot.chunks
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
        ids = [id_ for id_, _, _ in rows]
        payloads = [_untrackable(payload) for _, _, payload in rows]
        return cls(index, ids, payloads, usable, _Lexical.build(snapshot, ids))

    def text_search(
        self, search: Search, query: npt.NDArray[np.float32] | None, terms: lexical.DocumentTerms
    ) -> list[SearchHit] | None:
        """A lexical or hybrid search (``terms``: its text analysed) as :meth:`PgVectorStore.search` answers it,
        or ``None`` when only SQL can say: the lexical leg from :attr:`lexical`, the dense leg from faiss (as a
        dense search of the leg's depth), fused by :func:`~common.vectors.fusion.fuse` as ``search.fusion`` asks."""
        if self.lexical is None:
            return None
        planned = self.plan(search, query)
        if not isinstance(planned, _Planned):
            return planned
        hybrid = search.mode == "hybrid"
        depth = leg_depth(search.limit) if hybrid else search.limit
        fusion = search.fusion if hybrid else "chunk"
        legs_carry = leg_properties((), fusion)  # per-document fusion reads each leg's document_id
        lexical_hits = self._lexical_leg(self.lexical, search.where, terms, depth, planned.query, properties=legs_carry)
        if lexical_hits is None:
            return None
        if not hybrid:
            hits = lexical_only(lexical_hits, limit=search.limit, max_distance=search.max_distance)
            return self.with_payloads(hits, search.properties)
        leg = msgspec.structs.replace(search, mode="dense", limit=depth, properties=legs_carry, max_distance=None)
        dense_hits = self.search(leg, planned.query)
        if dense_hits is None:
            return None
        fused = fuse(
            dense_hits,
            lexical_hits,
            dense_weight=search.dense_weight,
            limit=search.limit,
            max_distance=search.max_distance,
            fusion=fusion,
        )
        return self.with_payloads(fused, search.properties)  # the properties asked for, and only those

    def _lexical_leg(
        self,
        index: _Lexical,
        where: SearchFilter | None,
        terms: lexical.DocumentTerms,
        depth: int,
        query: npt.NDArray[np.float32],
        *,
        properties: Sequence[str],
    ) -> list[SearchHit] | None:
        """The best ``depth`` readable chunks by BM25 as the SQL leg ranks them (score descending, id), their
        ``score`` the BM25 score and their payload cut to ``properties``; ``None`` at a near tie
        (:meth:`_Lexical.top`). The access filter applies to every scored chunk before the ranking, as SQL's
        ``WHERE`` does (uniform groups were settled by :meth:`plan`)."""
        labels, scores = index.scores(terms)
        if not self.uniform and where is not None and where.readable_by is not None:
            readable = np.array([_allowed(groups, where) for groups in self._group_values], dtype=bool)
            kept = readable[self._group_of[labels]]
            labels, scores = labels[kept], scores[kept]
        ranked = index.top(labels, scores, depth)
        if ranked is None:
            return None  # near-equal scores: SQL's sums, added in another order, might rank them otherwise
        found = ranked[0].tolist()
        ids, payloads = self.ids, self.payloads
        return [
            SearchHit(
                id=ids[label],
                score=score,
                distance=distance,
                payload={key: payloads[label][key] for key in properties if key in payloads[label]},
            )
            for label, score, distance in zip(found, ranked[1].tolist(), self._distances(query, found), strict=True)
        ]

    def _distances(self, query: npt.NDArray[np.float32], labels: list[int]) -> list[float]:
        """The cosine distances of these chunks to the unit ``query``, as the dense leg computes them (float32)."""
        if not labels:
            return []
        similarities = self.index.reconstruct_batch(np.asarray(labels, dtype=np.int64)) @ query
        return [1.0 - similarity for similarity in similarities.tolist()]

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


class _Lexical:
    """A copy's inverted index: every term's postings — the chunks holding it, as labels ascending, with the
    chunk's BM25 tf weight (``term_weights``, float32 as stored) — as one slice of two flat arrays, terms
    ascending. A query reads each of its terms' slice once, vectorised; no per-posting work in Python.

    BM25 as the SQL statement computes it (:func:`common.vectors.pgvector.lexical_index`), the same float64
    operations in the same order: ``idf = tf_q * ln(1 + (N - df + 0.5) / (df + 0.5))`` per query term, with ``N``
    the chunks that have lexical columns and ``df`` the chunks holding the term — counted from the copy, which is
    an exact snapshot, so they are the statistics table's; then each chunk's ``weight * idf`` summed over the
    query's terms ascending, which is the order the statement's postings reach its sum (term-major scans).
    Scores therefore agree to the bit; where they might not (near-equal scores, see :meth:`top`), PostgreSQL
    answers.
    """

    def __init__(
        self,
        *,
        terms: npt.NDArray[np.int32],
        starts: npt.NDArray[np.int64],
        labels: npt.NDArray[np.int32],
        weights: npt.NDArray[np.float32],
        id_order: npt.NDArray[np.int32],
        chunks: int,
        size: int,
    ) -> None:
        self.terms, self.starts, self.labels, self.weights = terms, starts, labels, weights
        self.id_order = id_order
        """Each chunk's position when the copy's ids are sorted: the tie-break (score descending, then id)."""
        self.chunks = chunks
        self.size = size

    @property
    def nbytes(self) -> int:
        """Memory held by the index's arrays."""
        arrays = (self.terms, self.starts, self.labels, self.weights, self.id_order)
        return sum(array.nbytes for array in arrays)

    @classmethod
    def build(cls, snapshot: Snapshot, ids: Sequence[str]) -> _Lexical | None:
        """The index of the snapshot's lexical columns; ``None`` when the table has none, or when they do not
        add up to the statistics table's chunk count read in the same transaction (then PostgreSQL answers)."""
        if snapshot.total is None:
            return None
        try:
            columns = [
                (_binary_array(terms, np.int32), _binary_array(weights, np.float32))
                for terms, weights in zip(snapshot.terms, snapshot.weights, strict=True)
            ]
        except ValueError as exc:
            _log.info("lexical columns not copied to memory: %s", exc)
            return None
        indexed = [(t, w) for t, w in columns if t is not None and w is not None and len(t) == len(w)]
        held = sum(1 for t, _ in columns if t is not None)
        if held != snapshot.total or len(indexed) != held:
            _log.info(
                "lexical columns not copied to memory: %d chunks hold terms, statistics say %d", held, snapshot.total
            )
            return None
        counts = np.fromiter((len(t) for t, _ in columns if t is not None), np.int64, held)
        holders = np.fromiter((n for n, (t, _) in enumerate(columns) if t is not None), np.int32, held)
        terms = np.concatenate([t for t, _ in indexed]) if indexed else np.empty(0, np.int32)
        weights = np.concatenate([w for _, w in indexed]) if indexed else np.empty(0, np.float32)
        order = np.argsort(terms, kind="stable")  # term-major; within a term, labels ascending
        terms = terms[order]
        labels = np.repeat(holders, counts)[order]
        firsts = np.flatnonzero(np.r_[True, terms[1:] != terms[:-1]]) if len(terms) else np.empty(0, np.int64)
        id_order = np.empty(len(ids), np.int32)
        id_order[np.argsort(np.array(ids))] = np.arange(len(ids), dtype=np.int32)
        return cls(
            terms=np.ascontiguousarray(terms[firsts]),
            starts=np.r_[firsts, len(terms)].astype(np.int64),
            labels=labels,
            weights=np.ascontiguousarray(weights[order]),
            id_order=id_order,
            chunks=held,
            size=len(ids),
        )

    def scores(self, query: lexical.DocumentTerms) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]]:
        """Every chunk holding a query term, as labels ascending, with its BM25 score. The query's postings are
        gathered term after term and summed per chunk in that order (``bincount`` adds its input in order)."""
        wanted = np.asarray(query.ids, dtype=np.int32)
        at = np.searchsorted(self.terms, wanted)
        present = at < len(self.terms)
        present[present] = self.terms[at[present]] == wanted[present]
        at = at[present]
        if not len(at):
            return np.empty(0, np.intp), np.empty(0, np.float64)
        firsts, lasts = self.starts[at].tolist(), self.starts[at + 1].tolist()
        n = self.chunks
        idfs = [  # math.log: the C library's log, as PostgreSQL's ln()
            tf * math.log(1 + (n - (last - first) + 0.5) / ((last - first) + 0.5))
            for tf, first, last in zip(np.asarray(query.tfs)[present].tolist(), firsts, lasts, strict=True)
        ]
        labels = np.concatenate([self.labels[first:last] for first, last in zip(firsts, lasts, strict=True)])
        weights = np.concatenate([self.weights[first:last] for first, last in zip(firsts, lasts, strict=True)])
        impacts = weights.astype(np.float64) * np.repeat(idfs, np.subtract(lasts, firsts))
        totals = np.bincount(labels, weights=impacts, minlength=self.size).astype(np.float64, copy=False)
        held = np.flatnonzero(totals)  # every weight and IDF is positive: held chunks only
        return held, totals[held]

    def top(
        self, labels: npt.NDArray[np.intp], scores: npt.NDArray[np.float64], depth: int
    ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]] | None:
        """The best ``depth`` of these chunks by (score descending, id), as SQL ranks them; ``None`` when two
        neighbours among them, or at the cut, score unequal but within :data:`TIE_TOLERANCE`. Exactly equal scores
        are ranked by id, as SQL does: both add a chunk's postings in term order."""
        wanted = depth + 1  # one past the cut shows whether the cut splits near-equal scores
        if len(labels) > wanted:
            kth = np.partition(scores, len(scores) - wanted)[len(scores) - wanted]
            best = scores >= kth  # ties at the k-th score all kept, for the id order to choose among them
            labels, scores = labels[best], scores[best]
        order = np.lexsort((self.id_order[labels], -scores))[:wanted]
        labels, scores = labels[order], scores[order]
        gaps = scores[:-1] - scores[1:]
        if np.any((gaps > 0) & (gaps <= TIE_TOLERANCE * scores[:-1])):
            return None
        return labels[:depth], scores[:depth]


def _binary_array(data: bytes | None, dtype: type[np.int32] | type[np.float32]) -> npt.NDArray[Any] | None:
    """A one-dimensional ``int4[]`` or ``real[]`` from PostgreSQL's binary format: a 12-byte header (dimensions,
    null flag, element type), each dimension's length and lower bound, then each element's length and value, all
    big-endian. ``ValueError`` for anything else (nulls, several dimensions)."""
    if data is None:
        return None
    dimensions, nulls = int.from_bytes(data[0:4], "big"), int.from_bytes(data[4:8], "big")
    if dimensions == 0:
        return np.empty(0, dtype)
    if dimensions != 1 or nulls:
        raise ValueError(f"a lexical array of {dimensions} dimensions, nulls {nulls}")
    count = int.from_bytes(data[12:16], "big")
    kind = "i4" if dtype is np.int32 else "f4"
    elements = np.frombuffer(data, dtype=[("length", ">i4"), ("value", f">{kind}")], count=count, offset=20)
    if np.any(elements["length"] != 4):
        raise ValueError("a lexical array element is not 4 bytes")
    values: npt.NDArray[Any] = elements["value"].astype(dtype)
    return values


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


def _unit_of(search: Search, units: dict[int, npt.NDArray[np.float32] | None]) -> npt.NDArray[np.float32] | None:
    """:func:`_unit` of the search's vector, once per vector object (an agent's searches share theirs)."""
    key = id(search.vector)
    if key not in units:
        units[key] = _unit(search.vector)
    return units[key]


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
