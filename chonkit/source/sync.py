"""The sync: what a source holds now against what the collection holds from it, by content hash.

A run goes ``queued`` → ``listing`` → ``embedding`` → ``done`` (or ``failed``, ``cancelled``), each step durable:

1. **Listing** (a worker claims the run, ``FOR UPDATE SKIP LOCKED``, and heartbeats): every item the lister yields
   is compared with ``chonkit.source_items``. Unchanged (same hash, still in the collection): counted, nothing
   else — the embedder never sees it. New or changed: stored as a document through the same service uploads use
   (sniffed and parsed first, deduplicated by bytes, tagged ``source:<id>``). Items stored earlier but not listed
   now are gone. A run whose worker dies is listed again from the start by another.
2. **Embedding**: the new and changed documents go into one ordinary embedding job (stages, SSE, cancel and retry
   are the job's); the collection keeps answering from what it held until the job has written.
3. **Settling**, in one transaction once the job has finished: what embedded is remembered, an item whose embedding
   failed keeps what it had (its old vectors, its old hash, so the next sync tries again), and the documents that
   changed or went are taken out of the collection unless another item of the collection's sources still became
   them — and deleted if nothing else uses them. The collection then holds exactly its sources' current chunks.

A listing that fails as a whole (the folder vanished, the site is down, the lister itself broke, or it ran past
:data:`LISTING_SECONDS`) fails the run and removes nothing: an unreachable source is never mistaken for an empty
one. One run per source is unfinished at a time (a partial unique index); scheduled runs are queued by the same
loop, from any number of workers.

A syncer lists up to :data:`CONCURRENT_RUNS` runs at once, so a site that trickles its bytes holds one listing,
not every other source's sync. Each listing is watched (:data:`WATCH_SECONDS`): a cancel, a claim taken over or
the deadline stops it even while its lister has had nothing to yield for minutes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import unicodedata
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from datetime import timedelta
from pathlib import Path, PurePosixPath
from typing import Any, cast
from uuid import UUID

import msgspec

from chonkit.collection.models import Collection
from chonkit.collection.repository import CollectionRepository
from chonkit.document.models import DocumentPatch, UploadResult
from chonkit.document.parsing.doctype import EXTENSIONS, MEDIA_TYPES
from chonkit.document.repository import DocumentRepository
from chonkit.document.service import (
    IncomingFile,
    UnusedOriginals,
    check_file,
    delete_document,
    patch_document,
    store_files,
)
from chonkit.document.storage import BlobStore
from chonkit.embedding.service import enqueue_job
from chonkit.jobs.repository import JobRepository
from chonkit.jobs.runner import Runner, keep_claim
from chonkit.source.folder import FOLDER_UNREADABLE, FolderLister
from chonkit.source.items import SkippedItem, SourceItem, SourceLister
from chonkit.source.models import FolderSpec, SourceSpec, WebSourceSpec
from chonkit.source.repository import ClaimedRun, KnownItem, RunItem, SourceRepository, StoredSource, source_tag
from common.config import Settings
from common.db import Database
from common.errors import AppError, Unavailable
from common.vectors.registry import VectorRegistry

logger = logging.getLogger(__name__)

FLUSH_EVERY = 50
"""Items listed between writes of the run's progress."""
MAX_ATTEMPTS = 5
CONCURRENT_RUNS = 4
"""Listings one syncer (one process) runs at once, each claimed as one alone would be (``SKIP LOCKED``). Listing
is mostly waiting on a site or a disk, so a few at once cost little, and one slow site no longer queues the rest."""
WATCH_SECONDS = 1.0
"""How often a listing asks whether it was cancelled or its claim was taken over: a lister waiting on a page that
trickles (up to 60 s each) yields nothing meanwhile, so the check cannot wait for its next item."""
LISTING_SECONDS = 2 * 60 * 60.0
"""Longest one listing may run; past it the run fails (``listing_timeout``) and removes nothing. The largest web
source listed politely fits (1000 pages at robots.txt's longest crawl-delay we honour, 5 s, are 83 minutes); one
that answers every page as slowly as it may (60 s) would otherwise hold a listing for 17 hours."""
_DONE_STAGES = frozenset({"done", "skipped"})
_NAME_BYTES = 255
_HIDDEN_CHARS = frozenset({"Cc", "Cf", "Cs"})
_EXTENSION_OF = {
    media_type: next(ext for ext, t in EXTENSIONS.items() if t is doc_type)
    for doc_type, media_type in MEDIA_TYPES.items()
}


class SourceLimits(msgspec.Struct, frozen=True, kw_only=True):
    """What the operator allows sources: the folder roots, the size of a file, private web addresses."""

    roots: tuple[Path, ...]
    max_bytes: int
    allow_private: bool


def source_limits(settings: Settings) -> SourceLimits:
    """A file's limit is the upload limit: a folder brings nothing an upload could not."""
    return SourceLimits(
        roots=tuple(settings.sources.root_paths),
        max_bytes=settings.chonkit.max_upload_bytes,
        allow_private=settings.sources.allow_private_urls,
    )


def web_spec(spec: WebSourceSpec) -> Any:
    """The web lister's own spec (``chonkit.source.web.WebSpec``), which checks its limits when built."""
    from chonkit.source.web import WebSpec  # imported when a web source is used: it brings httpx and lxml

    fields = msgspec.to_builtins(spec)
    fields.pop("kind", None)
    return msgspec.convert(fields, WebSpec)


def lister_for(spec: SourceSpec, limits: SourceLimits) -> SourceLister:
    if isinstance(spec, FolderSpec):
        return FolderLister(spec, roots=limits.roots, max_bytes=limits.max_bytes)
    from chonkit.source.web import WebLister

    lister: SourceLister = WebLister(web_spec(spec), allow_private=limits.allow_private)
    return lister


def document_name(item: SourceItem) -> str:
    """The name a document made from ``item`` gets: its path with `` - `` between folders (a document name is
    never a path), control characters dropped, an extension matching its media type when it has none we parse
    (a page titled "Pricing" becomes ``Pricing.html``), at most 255 bytes."""
    parts = [p for p in item.name.replace("\\", "/").split("/") if p.strip() and p not in {".", ".."}]
    name = " - ".join(parts) or "item"
    name = "".join(
        ch for ch in unicodedata.normalize("NFC", name) if unicodedata.category(ch) not in {"Cc", "Cf", "Cs"}
    )
    suffix = PurePosixPath(name).suffix.lower()
    if suffix not in EXTENSIONS:
        suffix = _EXTENSION_OF.get(item.media_type.split(";")[0].strip().lower(), ".txt")
        name += suffix
    stem = name[: len(name) - len(suffix)].strip() or "item"
    while len((stem + suffix).encode()) > _NAME_BYTES:
        stem = stem[:-1]
    return stem + suffix


class _Stop(Exception):
    """The listing must stop: cancelled (``cancelled``) or our claim was taken over (``None``)."""

    def __init__(self, status: str | None) -> None:
        super().__init__(status)
        self.status = status


class _Fail(Exception):
    """The listing ends its run as failed with ``code``: it ran past its deadline, or its lister broke."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


class _Watched:
    """What a listing's watch and heartbeat tell it: :attr:`lost` once the heartbeat finds the claim gone, and
    :attr:`reason` (why it must stop now), set once; :attr:`signal` is done from then on."""

    def __init__(self) -> None:
        self.lost = asyncio.Event()
        self.reason: _Stop | _Fail | None = None
        self.signal: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def stop(self, reason: _Stop | _Fail) -> None:
        if self.reason is None:
            self.reason = reason
            self.signal.set_result(None)


class SourceSyncer:
    """Runs sync runs: the listing, the hand-over to an embedding job, and the settling once it has finished."""

    def __init__(
        self,
        db: Database,
        blobs: BlobStore,
        vectors: VectorRegistry,
        limits: SourceLimits,
        *,
        name: str | None = None,
        heartbeat_seconds: float = 5.0,
        wake_worker: Callable[[], None] = lambda: None,
        listers: Callable[[SourceSpec, SourceLimits], SourceLister] = lister_for,
        concurrency: int = CONCURRENT_RUNS,
        watch_seconds: float = WATCH_SECONDS,
        listing_seconds: float = LISTING_SECONDS,
    ) -> None:
        self.db = db
        self.blobs = blobs
        self.vectors = vectors
        self.limits = limits
        self.name = name or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}:sources"
        self.heartbeat_seconds = heartbeat_seconds
        self.stale_after = timedelta(seconds=heartbeat_seconds * 6)
        self.wake_worker = wake_worker
        self.listers = listers
        self.concurrency = concurrency
        self.watch_seconds = watch_seconds
        self.listing_seconds = listing_seconds
        self._listings: set[asyncio.Task[None]] = set()
        self._runner = Runner("source syncer", self._work)

    def wake(self) -> None:
        """A run was queued in this process: skip the rest of the idle wait."""
        self._runner.wake()

    async def run(self, stop: asyncio.Event, *, idle_seconds: float = 2.0) -> None:
        """Work until ``stop`` is set (:class:`~chonkit.jobs.runner.Runner`, as the embedding worker does).

        Listings run as tasks of their own, at most :attr:`concurrency` at once; settling and claiming go on
        meanwhile. When ``stop`` is set (or this is cancelled) the listings still running are cancelled: their
        runs stay claimed, and are listed again from the start once their heartbeat is stale, as after a crash.
        """
        try:
            await self._runner.run(stop, idle_seconds=idle_seconds)
        finally:
            for task in self._listings:
                task.cancel()
            await asyncio.gather(*self._listings, return_exceptions=True)

    async def run_once(self) -> bool:
        """Queue due scheduled runs, settle one run whose job finished, or list one queued run (to its end); False
        when idle."""
        async with self.db.transaction() as conn:
            due = await SourceRepository(conn).start_due_runs()
        if await self.settle_once():
            return True
        async with self.db.transaction() as conn:
            run = await SourceRepository(conn).claim_run(self.name, self.stale_after)
        if run is None:
            return due > 0
        await self._list(run)
        return True

    async def _work(self) -> bool:
        """:meth:`run_once`, except that a claimed run is listed in a task of its own, and none is claimed while
        :attr:`concurrency` are running; False when there was nothing to start."""
        listings = self._listings
        async with self.db.transaction() as conn:
            due = await SourceRepository(conn).start_due_runs()
        if await self.settle_once():
            return True
        if len(listings) >= self.concurrency:
            return False
        async with self.db.transaction() as conn:
            run = await SourceRepository(conn).claim_run(self.name, self.stale_after)
        if run is None:
            return due > 0
        task = asyncio.create_task(self._list(run), name=f"source-run-{run.id}")
        listings.add(task)

        def finished(task: asyncio.Task[None]) -> None:
            listings.discard(task)
            self._runner.wake()  # a slot is free: claim the next queued run now
            if not task.cancelled() and (exc := task.exception()) is not None:
                logger.error("listing source run %s failed; it is listed again later", run.id, exc_info=exc)

        task.add_done_callback(finished)
        return True

    # --- listing ---

    async def _list(self, run: ClaimedRun) -> None:
        if run.attempts > MAX_ATTEMPTS:
            error = f"Listing stopped {MAX_ATTEMPTS} times without finishing (the worker crashed or was killed)."
            await self._abandon(run, "failed", error_code="too_many_attempts", error=error)
            return
        async with self.db.transaction() as conn:
            sources = SourceRepository(conn)
            source = await sources.get_by_id(run.source_id)
            collection = None if source is None else await CollectionRepository(conn).get(source.collection_id)
            known = {} if source is None else await sources.known_items(source.id)
            held = set() if collection is None else await sources.collection_holds(collection.id)
            await sources.clear_items(run.id)  # listed again after a crash: from the start
        if source is None or collection is None:
            return
        items = await self._listed(run, source, known, held)
        if items is None:
            return
        try:
            await self._hand_over(run, collection, items)
        except AppError as exc:
            if exc.status >= 500:
                raise
            await self._abandon(run, "failed", error_code=exc.code, error=exc.detail)

    async def _listed(
        self, run: ClaimedRun, source: StoredSource, known: dict[str, KnownItem], held: set[UUID]
    ) -> list[RunItem] | None:
        """:meth:`_compare`, heartbeated and watched; None when the run ended instead (cancelled, failed, or taken
        over by another worker)."""
        watched = _Watched()
        beat = asyncio.create_task(
            keep_claim(
                lambda _due: self._beat(run, watched.lost), every=self.heartbeat_seconds, what=f"source run {run.id}"
            )
        )
        watch = asyncio.create_task(self._watch(run, watched))
        try:
            return await self._compare(run, source, known, held, watched)
        except _Stop as stop:
            if stop.status is not None:
                await self._abandon(run, "cancelled")
        except _Fail as failure:
            logger.info("source %s could not be listed: %s", source.id, failure.detail)
            await self._abandon(run, "failed", error_code=failure.code, error=failure.detail)
        except AppError as exc:
            if exc.status >= 500 and not exc.code.startswith("web_"):
                raise  # our database or store is down: the run stays claimed and is listed again later
            logger.info("source %s could not be listed: %s", source.id, exc.detail)
            await self._abandon(run, "failed", error_code=exc.code, error=exc.detail)
        finally:
            for task in (beat, watch):
                task.cancel()
            await asyncio.wait((beat, watch))
        return None

    async def _compare(
        self, run: ClaimedRun, source: StoredSource, known: dict[str, KnownItem], held: set[UUID], watched: _Watched
    ) -> list[RunItem]:
        """List the source and record each new, changed, failed and skipped item; returns the stored ones."""
        listing = self.listers(source.spec, self.limits).items()
        try:
            return await self._record(run, source, listing, known=known, held=held, watched=watched)
        finally:
            with contextlib.suppress(Exception):
                await cast(AsyncGenerator[Any, None], listing).aclose()  # its client, its files: closed now

    async def _record(
        self,
        run: ClaimedRun,
        source: StoredSource,
        listing: AsyncIterator[SourceItem | SkippedItem],
        *,
        known: dict[str, KnownItem],
        held: set[UUID],
        watched: _Watched,
    ) -> list[RunItem]:
        seen: set[str] = set()
        stored: list[RunItem] = []
        batch: list[RunItem] = []
        unchanged = 0
        while (entry := await _next_item(listing, watched)) is not None:
            if entry.key in seen:
                continue
            seen.add(entry.key)
            if isinstance(entry, SkippedItem):
                batch.append(RunItem(key=entry.key, action="skipped", code=entry.code, reason=entry.reason))
                if entry.code == FOLDER_UNREADABLE:
                    seen.update(k for k in known if k.startswith(entry.key + "/"))
            else:
                previous = known.get(entry.key)
                if previous and previous.content_hash == entry.content_hash and previous.document_id in held:
                    unchanged += 1
                else:
                    item = await self._store(run, source, entry, previous)
                    if item.action != "failed":
                        stored.append(item)
            if len(batch) + unchanged >= FLUSH_EVERY:
                await self._flush(run, batch, unchanged, watched.lost)
                batch, unchanged = [], 0
        gone = [RunItem(key=k, action="removed", document_id=v.document_id) for k, v in known.items() if k not in seen]
        await self._flush(run, [*batch, *gone], unchanged, watched.lost)
        return stored

    async def _store(
        self, run: ClaimedRun, source: StoredSource, item: SourceItem, previous: KnownItem | None
    ) -> RunItem:
        """Store the item as a document as an upload would (checked and refused the same way, before the transaction,
        so its parse holds no connection), tagged with its source, and record it in the run in the same transaction:
        a run that stops later knows every document it made."""
        checked = await check_file(IncomingFile(filename=document_name(item), data=item.content), self.limits.max_bytes)
        async with self.db.transaction() as conn:
            [result] = (
                [checked] if isinstance(checked, UploadResult) else await store_files(conn, self.blobs, [checked])
            )
            if result.document is None:
                problem = result.error
                code, reason = ("rejected", "refused") if problem is None else (problem.code, problem.detail)
                recorded = RunItem(key=item.key, action="failed", code=code, reason=reason)
            else:
                document = result.document
                tag = source_tag(source.id)
                if tag not in document.tags:
                    await patch_document(conn, document.id, DocumentPatch(tags=[*document.tags, tag]))
                changed = previous is not None and previous.content_hash != item.content_hash
                recorded = RunItem(
                    key=item.key,
                    action="changed" if changed else "added",
                    document_id=document.id,
                    previous_document_id=None if previous is None else previous.document_id,
                    content_hash=item.content_hash,
                    created_document=result.status == "created",
                )
            await SourceRepository(conn).add_items(run.id, [recorded], 0)
        return recorded

    async def _flush(self, run: ClaimedRun, items: Sequence[RunItem], unchanged: int, lost: asyncio.Event) -> None:
        async with self.db.transaction() as conn:
            sources = SourceRepository(conn)
            owned, cancelled = await sources.listing_owned(run.id, self.name)
            if lost.is_set() or not owned:
                raise _Stop(None)
            if cancelled:
                raise _Stop("cancelled")
            await sources.add_items(run.id, items, unchanged)

    async def _hand_over(self, run: ClaimedRun, collection: Collection, items: Sequence[RunItem]) -> None:
        """One embedding job for the stored documents (none when nothing changed); the run waits for it."""
        documents = list(dict.fromkeys(i.document_id for i in items if i.document_id is not None))
        job_id: UUID | None = None
        async with self.db.transaction() as conn:
            sources = SourceRepository(conn)
            owned, cancelled = await sources.listing_owned(run.id, self.name)
            if not owned:
                return
            if not cancelled:
                if documents:
                    # As admins queue one, so its refusals (a collection being migrated) apply here too.
                    created = await enqueue_job(conn, collection.id, "embed", documents)
                    # None: every one is being embedded by another job; settling checks what that one wrote
                    job_id = None if created.job is None else created.job.id
                await sources.set_run(run.id, "embedding", job_id=job_id)
        if job_id is not None:
            self.wake_worker()
        if cancelled:
            await self._abandon(run, "cancelled")

    async def _abandon(self, run: ClaimedRun, status: str, **fields: Any) -> None:
        """End a run that never reached its job; documents its uploads created that nothing uses are deleted again
        (one it found already stored, an admin's upload in no collection, stays)."""
        blobs: list[str] = []
        async with self.db.transaction() as conn:
            sources = SourceRepository(conn)
            owned, _ = await sources.listing_owned(run.id, self.name)
            if not owned:
                return
            for item in await sources.run_items(run.id):
                document_id = item.document_id if item.created_document else None
                if document_id is not None and await sources.document_unused(document_id):
                    blobs.append((await delete_document(conn, self.vectors, document_id)).sha256)
            await sources.set_run(run.id, status, **fields)
        await self._remove_originals(blobs)

    async def _watch(self, run: ClaimedRun, watched: _Watched) -> None:
        """Stop the listing when it is cancelled, its claim is lost or it passes its deadline, whatever it is
        waiting on; checked every :attr:`watch_seconds`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.listing_seconds
        while True:
            await asyncio.sleep(max(min(self.watch_seconds, deadline - loop.time()), 0))
            if loop.time() >= deadline:
                minutes = self.listing_seconds / 60
                detail = f"Listing the source took longer than {minutes:g} minutes and was stopped; nothing was removed"
                watched.stop(_Fail("listing_timeout", detail + "."))
                return
            try:
                async with self.db.transaction() as conn:
                    owned, cancelled = await SourceRepository(conn).listing_owned(run.id, self.name)
            except Unavailable:
                continue  # the heartbeat says whether we still own it
            if watched.lost.is_set() or not owned:
                watched.stop(_Stop(None))
                return
            if cancelled:
                watched.stop(_Stop("cancelled"))
                return

    async def _beat(self, run: ClaimedRun, lost: asyncio.Event) -> bool:
        """One heartbeat of a listing's claim; False (and ``lost`` set) once another worker holds it."""
        async with self.db.transaction() as conn:
            if await SourceRepository(conn).heartbeat(run.id, self.name):
                return True
        lost.set()
        return False

    # --- settling ---

    async def settle_once(self) -> bool:
        """Settle one run whose job has finished (see the module docstring); False when none is waiting."""
        blobs: list[str] = []
        async with self.db.transaction() as conn:
            sources = SourceRepository(conn)
            run = await sources.claim_settled_run()
            if run is None:
                return False
            source = await sources.get_by_id(run.source_id)
            collection = None if source is None else await CollectionRepository(conn).get(source.collection_id)
            if source is None or collection is None:
                return False
            cancelled = await sources.cancel_requested(run.id)
            stages = {} if run.job_id is None else await sources.job_stages(run.job_id)
            held = await sources.collection_holds(collection.id)
            leaving: list[UUID] = []
            for item in await sources.run_items(run.id):
                if item.action in {"added", "changed"} and item.document_id is not None and item.content_hash:
                    stage, code, error = stages.get(item.document_id, (None, None, None))
                    if stage in _DONE_STAGES or (stage is None and item.document_id in held):
                        await sources.remember(source.id, item.key, item.document_id, item.content_hash)
                        previous = item.previous_document_id
                        if previous is not None and previous != item.document_id:
                            leaving.append(previous)
                    else:
                        code, error = _why_not_embedded(stage, code, error)
                        await sources.fail_item(run.id, item.key, code, error)
                elif item.action == "removed" and item.document_id is not None and not cancelled:
                    await sources.forget(source.id, item.key)
                    leaving.append(item.document_id)
            for document_id in dict.fromkeys(leaving):
                blobs.extend(await self._leave(conn, source, collection, document_id))
            await sources.set_run(run.id, "cancelled" if cancelled else "done")
        await self._remove_originals(blobs)
        return True

    async def _leave(self, conn: Any, source: StoredSource, collection: Collection, document_id: UUID) -> list[str]:
        """Take a document out of the collection unless an item of its sources still became it; delete it when
        nothing uses it any more (returns its digest, for the original's removal after commit); otherwise drop
        this source's tag once none of its items became it."""
        sources = SourceRepository(conn)
        if not await sources.used_in_collection(collection.id, document_id):
            collections = CollectionRepository(conn)
            await collections.lock(collection.id)
            await self.vectors.get(collection.vector_provider).delete_document(collection.name, str(document_id))
            await JobRepository(conn).forget_document(collection.id, document_id)
            if await sources.document_unused(document_id):
                return [(await delete_document(conn, self.vectors, document_id)).sha256]
        if not await sources.used_by_source(source.id, document_id):
            document = await DocumentRepository(conn).get(document_id)
            tag = source_tag(source.id)
            if document is not None and tag in document.tags:
                await patch_document(conn, document_id, DocumentPatch(tags=[t for t in document.tags if t != tag]))
        return []

    async def _remove_originals(self, digests: Sequence[str]) -> None:
        originals = UnusedOriginals(self.db, self.blobs)
        for digest in digests:
            await originals.remove(digest)


def _why_not_embedded(stage: str | None, code: str | None, error: str | None) -> tuple[str, str]:
    if stage == "cancelled":
        return "cancelled", "The sync was cancelled before this item was embedded; it keeps what it had."
    if stage is None:
        return "embedding_elsewhere", "Another job was embedding this document; the next sync checks it again."
    return code or "embedding_failed", error or "Embedding failed; the item keeps what it had."


async def _next_item(
    listing: AsyncIterator[SourceItem | SkippedItem], watched: _Watched
) -> SourceItem | SkippedItem | None:
    """The lister's next item (``None`` at its end), unless the listing is stopped first: then the lister's step is
    cancelled wherever it waits (a page trickling in) and the reason raised. Only the lister is interrupted, never
    a store or a flush half done.

    Raises:
        _Stop, _Fail: the watch's reason; ``_Fail`` ``source_listing_crashed`` when the lister raised something
            other than an :class:`AppError` (a bug, or input it did not expect): such a run fails at once, instead
            of being retaken every 30 s until its attempts run out.
    """
    if watched.reason is not None:
        raise watched.reason
    step = asyncio.ensure_future(_pull(listing))
    try:
        await asyncio.wait((step, watched.signal), return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not step.done():
            step.cancel()
            await asyncio.wait((step,))
    if step.cancelled():
        assert watched.reason is not None
        raise watched.reason
    exc = step.exception()
    if exc is None:
        return step.result()
    if isinstance(exc, AppError):
        raise exc
    logger.error("a source lister failed", exc_info=exc)
    detail = f"Listing the source failed unexpectedly ({type(exc).__name__}: {str(exc)[:200]}); nothing was removed."
    raise _Fail("source_listing_crashed", detail) from exc


async def _pull(listing: AsyncIterator[SourceItem | SkippedItem]) -> SourceItem | SkippedItem | None:
    return await anext(listing, None)
