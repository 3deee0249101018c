"""What the sources API speaks: a source's spec (a folder or a web site), its runs and their reports."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal
from uuid import UUID

import msgspec

SourceName = Annotated[str, msgspec.Meta(min_length=1, max_length=100)]
MAX_GLOBS = 32
"""Include globs, and exclude globs, a new or edited folder spec may hold (``too_many_globs``). Real specs hold a
handful (``**/*.md``, ``drafts/**``); every file is matched against each, so the bound bounds a sync's work."""
MAX_GLOB_CHARS = 256
"""Characters in one glob a new or edited spec may hold (``glob_too_long``): longer than any path pattern written
by hand, and it bounds each compiled glob (1 MiB of RE2 memory at most, so 64 MiB for a source)."""
Glob = Annotated[str, msgspec.Meta(min_length=1, max_length=500)]
Globs = Annotated[list[Glob], msgspec.Meta(max_length=100)]
"""The bounds a stored spec is decoded with, which are looser than :data:`MAX_GLOBS` and :data:`MAX_GLOB_CHARS`:
sources created before those bounds must still load (and sync, which RE2 keeps linear). The tighter bounds are
checked when a spec is created or changed (``chonkit.source.folder.check_globs``)."""
ScheduleMinutes = Annotated[int, msgspec.Meta(ge=1, le=525_600)]
"""A sync every minute at most, every year at least."""

RunStatus = Literal["queued", "listing", "embedding", "done", "failed", "cancelled"]
ACTIVE: tuple[RunStatus, ...] = ("queued", "listing", "embedding")
RunTrigger = Literal["manual", "schedule", "retry"]
ItemAction = Literal["added", "changed", "removed", "failed", "skipped"]


class FolderSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, tag_field="kind", tag="folder"):
    """A folder on the server, under one of ``RAGU_SOURCE_ROOTS``. Globs are matched against each file's path
    relative to the folder, ``/``-separated: ``*`` and ``?`` stay within one folder, ``**/`` spans any number of
    them (``*.md`` is the folder's own Markdown files, ``**/*.md`` all of them). At most 32 include and 32 exclude
    globs of at most 256 characters each (``too_many_globs``, ``glob_too_long``); a glob RE2 cannot compile is
    ``invalid_glob``. Hidden files and folders (a name starting with ``.``) are never read."""

    path: Annotated[str, msgspec.Meta(min_length=1, max_length=4096)]
    include: Globs = msgspec.field(default_factory=lambda: ["**/*"])
    exclude: Globs = msgspec.field(default_factory=list)


class WebSourceSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, tag_field="kind", tag="web"):
    """One page (``page``), the pages a sitemap lists (``sitemap``), or a start page and the pages of its host it
    links to, ``depth`` links deep (``crawl``); at most ``max_pages`` pages of at most ``max_bytes`` each. The
    limits are the web lister's (``chonkit.source.web.WebSpec``), refused with its ``web_*`` codes."""

    url: Annotated[str, msgspec.Meta(min_length=1, max_length=2048)]
    mode: Literal["page", "sitemap", "crawl"] = "page"
    depth: int = 1
    max_pages: int = 100
    max_bytes: int = 5 * 1024 * 1024


SourceSpec = FolderSpec | WebSourceSpec


class SourceCreate(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: SourceName
    """Unique within the collection."""
    spec: SourceSpec
    """``{"kind": "folder", "path": ..., "include": [...], "exclude": [...]}`` or ``{"kind": "web", "url": ...}``."""
    schedule_minutes: ScheduleMinutes | None = None
    """Sync every this many minutes (counted from the last run's start); none: on demand only."""


class SourceUpdate(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Only the fields sent change; ``"schedule_minutes": null`` stops the schedule. A new spec takes effect at the
    next sync, which compares the items it lists then with what the collection holds from this source."""

    name: SourceName | msgspec.UnsetType = msgspec.UNSET
    spec: SourceSpec | msgspec.UnsetType = msgspec.UNSET
    schedule_minutes: ScheduleMinutes | msgspec.UnsetType | None = msgspec.UNSET


class ItemProblem(msgspec.Struct, frozen=True, kw_only=True):
    """An item a run could not take (``failed``: its content was refused or its embedding failed; ``skipped``: the
    source lists it but may not or cannot read it), in plain words."""

    key: str
    action: Literal["failed", "skipped"]
    code: str
    reason: str


class SyncReport(msgspec.Struct, frozen=True, kw_only=True):
    """What a run did, counted in items (a folder's files, a site's pages)."""

    added: int
    changed: int
    removed: int
    unchanged: int
    failed: int
    skipped: int
    problems: list[ItemProblem]
    """The failed and skipped items with their reasons (the first 1,000)."""


class Run(msgspec.Struct, frozen=True, kw_only=True):
    """One sync of a source. While ``embedding``, ``job_id`` is the embedding job of its new and changed items
    (``GET /jobs/{id}/events`` follows it document by document)."""

    id: UUID
    source_id: UUID
    trigger: RunTrigger
    status: RunStatus
    cancel_requested: bool
    job_id: UUID | None
    job_progress: dict[str, int] | None
    """The embedding job's items per stage, when there is a job."""
    error_code: str | None
    error: str | None
    """Why the run failed as a whole (the source could not be listed); nothing was removed then."""
    report: SyncReport
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class Source(msgspec.Struct, frozen=True, kw_only=True):
    id: UUID
    collection_id: UUID
    name: str
    kind: Literal["folder", "web"]
    spec: SourceSpec
    schedule_minutes: int | None
    tag: str
    """The tag every document of this source carries (``source:<id>``): search and agents filter by it."""
    item_count: int
    """Items the collection holds from this source."""
    last_run: Run | None
    created_at: datetime
    updated_at: datetime
