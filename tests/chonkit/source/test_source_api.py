"""The sources API: what it refuses (folders outside the roots, symlinks out of them, bad specs), one sync per source
at a time, cancel and retry, the schedule, and a run's event stream."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from chonkit.app import create_app
from chonkit.embedding.worker import EmbeddingWorker
from chonkit.source.items import SkippedItem, SourceItem
from chonkit.source.repository import SourceRepository
from chonkit.source.sync import SourceSyncer
from common.clients import SharedClients
from common.config import Settings
from common.db import SingleConnectionDatabase
from common.db.database import Connection
from common.errors import Unavailable
from tests.chonkit.conftest import bearer
from tests.chonkit.embedding.test_job_events import events_of
from tests.chonkit.source.conftest import Roots, counts, new_collection, new_source, run_of, settle, sync
from tests.conftest import AppClient

NOTE = "# Note\n\nA short note about tidal pools and the crabs that live in them.\n"


def folder_with_notes(roots: Roots, name: str, count: int = 2) -> Path:
    folder = roots.allowed / name
    folder.mkdir()
    for n in range(count):
        (folder / f"note-{n}.md").write_text(NOTE + f"\nNote number {n}.\n")
    return folder


async def folder_source(admin: httpx.AsyncClient, roots: Roots, name: str, **extra: Any) -> tuple[str, str]:
    collection = await new_collection(admin, name)
    folder = folder_with_notes(roots, name.lower())
    created = await new_source(
        admin, collection["id"], name=name, spec={"kind": "folder", "path": str(folder)}, **extra
    )
    assert created.status_code == 201, created.text
    return collection["id"], created.json()["id"]


async def test_a_folder_outside_the_roots_is_refused_even_through_a_symlink_or_dots(
    admin: httpx.AsyncClient, roots: Roots
) -> None:
    collection = await new_collection(admin, "Refusals")
    (roots.allowed / "link_out").symlink_to(roots.outside)
    (roots.allowed / "real").mkdir()
    cases = {
        str(roots.outside): "folder_outside_roots",
        str(roots.allowed / "link_out"): "folder_outside_roots",
        str(roots.allowed / "real" / ".." / ".." / "outside"): "folder_outside_roots",
        str(roots.allowed / "missing"): "folder_not_found",
        "relative/path": "folder_not_absolute",
        str(roots.allowed / "nul\x00"): "folder_not_found",
    }
    for path, code in cases.items():
        response = await new_source(admin, collection["id"], name="Out", spec={"kind": "folder", "path": path})
        assert (response.status_code, response.json()["code"]) == (422, code), path
    assert (await admin.get(f"/collections/{collection['id']}/sources")).json() == []


async def test_without_roots_every_folder_source_is_refused(
    settings: Settings,
    db: SingleConnectionDatabase,
    counted_clients: SharedClients,
    app_client: AppClient,
    roots: Roots,
) -> None:
    async with app_client(create_app(settings, database=db, clients=counted_clients, worker=False)) as client:
        client.headers.update(bearer(settings))
        collection = await new_collection(client, "No_roots")
        response = await new_source(
            client, collection["id"], name="Any", spec={"kind": "folder", "path": str(roots.allowed)}
        )
    assert (response.status_code, response.json()["code"]) == (422, "source_roots_unset")


async def test_a_folder_that_becomes_a_symlink_out_of_the_roots_is_refused_at_its_next_sync(
    admin: httpx.AsyncClient, syncer: SourceSyncer, source_worker: EmbeddingWorker, roots: Roots
) -> None:
    collection_id, source_id = await folder_source(admin, roots, "Swapped")
    await sync(admin, collection_id, source_id)
    await settle(syncer, source_worker)
    folder = roots.allowed / "swapped"
    for child in folder.iterdir():
        child.unlink()
    folder.rmdir()
    (roots.outside / "secret.md").write_text("# Secret\n\nSalaries.\n")
    folder.symlink_to(roots.outside)

    run = await sync(admin, collection_id, source_id)
    await settle(syncer, source_worker)
    run = await run_of(admin, collection_id, source_id, run["id"])
    assert (run["status"], run["error_code"]) == ("failed", "folder_outside_roots")
    documents = (await admin.get(f"/collections/{collection_id}/documents")).json()
    assert sorted(d["name"] for d in documents) == ["note-0.md", "note-1.md"]  # kept: nothing was listed


@pytest.mark.parametrize(
    ("spec", "status", "code"),
    [
        ({"kind": "folder", "path": "/x", "unknown": 1}, 400, "invalid_request"),
        ({"path": "/x"}, 400, "invalid_request"),
        ({"kind": "ftp", "url": "ftp://x"}, 400, "invalid_request"),
        ({"kind": "web", "url": "ftp://example.org/"}, 422, "web_url_invalid"),
        ({"kind": "web", "url": "https://example.org/", "depth": 99}, 422, "web_depth_out_of_range"),
    ],
)
async def test_a_malformed_spec_is_refused_with_its_code(
    admin: httpx.AsyncClient, spec: dict[str, Any], status: int, code: str
) -> None:
    collection = await new_collection(admin, "Specs")
    response = await new_source(admin, collection["id"], name="Bad", spec=spec)
    assert (response.status_code, response.json()["code"]) == (status, code)


async def test_a_glob_that_could_never_match_is_refused(admin: httpx.AsyncClient, roots: Roots) -> None:
    collection = await new_collection(admin, "Globs")
    for glob in ("../*.md", "/etc/*"):
        spec = {"kind": "folder", "path": str(roots.allowed), "include": [glob]}
        response = await new_source(admin, collection["id"], name="Globs", spec=spec)
        assert (response.status_code, response.json()["code"]) == (422, "invalid_glob")


async def test_names_are_unique_within_a_collection_and_sources_can_be_edited(
    admin: httpx.AsyncClient, roots: Roots
) -> None:
    collection_id, source_id = await folder_source(admin, roots, "Edited")
    spec = {"kind": "folder", "path": str(roots.allowed)}
    again = await new_source(admin, collection_id, name="Edited", spec=spec)
    assert (again.status_code, again.json()["code"]) == (409, "source_exists")

    path = f"/collections/{collection_id}/sources/{source_id}"
    edited = await admin.patch(path, json={"schedule_minutes": 30, "spec": {**spec, "exclude": ["*.txt"]}})
    assert edited.status_code == 200, edited.text
    assert (edited.json()["schedule_minutes"], edited.json()["spec"]["exclude"]) == (30, ["*.txt"])
    cleared = await admin.patch(path, json={"schedule_minutes": None})
    assert cleared.json()["schedule_minutes"] is None
    outside = await admin.patch(path, json={"spec": {"kind": "folder", "path": str(roots.outside)}})
    assert (outside.status_code, outside.json()["code"]) == (422, "folder_outside_roots")
    assert (await admin.get(path)).json()["spec"]["path"] == str(roots.allowed)


async def test_two_syncs_of_one_source_at_once_start_one_run(
    admin: httpx.AsyncClient, syncer: SourceSyncer, source_worker: EmbeddingWorker, roots: Roots
) -> None:
    collection_id, source_id = await folder_source(admin, roots, "Twice")
    path = f"/collections/{collection_id}/sources/{source_id}/sync"
    first, second = await asyncio.gather(admin.post(path), admin.post(path))
    assert sorted([first.status_code, second.status_code]) == [202, 409]
    refused = first if first.status_code == 409 else second
    assert refused.json()["code"] == "sync_in_progress"

    other = SourceSyncer(syncer.db, syncer.blobs, syncer.vectors, syncer.limits)
    claimed = await asyncio.gather(syncer.run_once(), other.run_once())
    assert sorted(claimed) == [False, True]  # one claims the run; the other finds nothing it may take

    await settle(syncer, source_worker)
    runs = (await admin.get(f"/collections/{collection_id}/sources/{source_id}/runs")).json()
    assert [(r["status"], counts(r)["added"]) for r in runs] == [("done", 2)]
    assert (await admin.post(path)).status_code == 202  # the run finished: the next may start


async def test_a_sync_cancelled_while_embedding_keeps_what_it_had_and_its_retry_finishes_it(
    admin: httpx.AsyncClient, syncer: SourceSyncer, source_worker: EmbeddingWorker, roots: Roots
) -> None:
    collection_id, source_id = await folder_source(admin, roots, "Cancelled")
    base = f"/collections/{collection_id}/sources/{source_id}"
    run = await sync(admin, collection_id, source_id)
    assert await syncer.run_once()  # listed: the documents are stored and their job queued
    run = await run_of(admin, collection_id, source_id, run["id"])
    assert run["status"] == "embedding"
    assert run["job_progress"] == {"queued": 2}

    cancelled = await admin.post(f"{base}/runs/{run['id']}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    await settle(syncer, source_worker)
    run = await run_of(admin, collection_id, source_id, run["id"])
    assert run["status"] == "cancelled"
    assert (run["report"]["failed"], {p["code"] for p in run["report"]["problems"]}) == (2, {"cancelled"})
    assert (await admin.get(f"/collections/{collection_id}/documents")).json() == []
    again = await admin.post(f"{base}/runs/{run['id']}/cancel")
    assert (again.status_code, again.json()["code"]) == (409, "run_finished")

    retried = await admin.post(f"{base}/runs/{run['id']}/retry")
    assert retried.status_code == 202, retried.text
    assert retried.json()["trigger"] == "retry"
    await settle(syncer, source_worker)
    retry = await run_of(admin, collection_id, source_id, retried.json()["id"])
    assert (retry["status"], counts(retry)["added"]) == ("done", 2)
    assert len((await admin.get(f"/collections/{collection_id}/documents")).json()) == 2
    nothing = await admin.post(f"{base}/runs/{retry['id']}/retry")
    assert (nothing.status_code, nothing.json()["code"]) == (409, "nothing_to_retry")


async def test_a_queued_sync_cancelled_ends_at_once(admin: httpx.AsyncClient, roots: Roots) -> None:
    collection_id, source_id = await folder_source(admin, roots, "Queued")
    run = await sync(admin, collection_id, source_id)
    cancelled = await admin.post(f"/collections/{collection_id}/sources/{source_id}/runs/{run['id']}/cancel")
    assert (cancelled.json()["status"], cancelled.json()["finished_at"] is not None) == ("cancelled", True)


async def test_a_scheduled_source_syncs_when_its_interval_has_passed(
    admin: httpx.AsyncClient, syncer: SourceSyncer, source_worker: EmbeddingWorker, conn: Connection, roots: Roots
) -> None:
    collection_id, source_id = await folder_source(admin, roots, "Scheduled", schedule_minutes=60)
    await settle(syncer, source_worker)
    runs = (await admin.get(f"/collections/{collection_id}/sources/{source_id}/runs")).json()
    assert [(r["trigger"], r["status"]) for r in runs] == [("schedule", "done")]  # never ran: due at once

    await settle(syncer, source_worker)
    assert len((await admin.get(f"/collections/{collection_id}/sources/{source_id}/runs")).json()) == 1

    await conn.execute(
        "UPDATE chonkit.source_runs SET created_at = now() - interval '61 minutes' WHERE source_id = $1", source_id
    )
    await settle(syncer, source_worker)
    runs = (await admin.get(f"/collections/{collection_id}/sources/{source_id}/runs")).json()
    newest = runs[0]
    assert (len(runs), newest["trigger"], newest["status"], counts(newest)["unchanged"]) == (2, "schedule", "done", 2)


async def test_a_run_streams_its_progress_until_it_finishes(
    admin: httpx.AsyncClient, syncer: SourceSyncer, source_worker: EmbeddingWorker, roots: Roots
) -> None:
    collection_id, source_id = await folder_source(admin, roots, "Streamed")
    run = await sync(admin, collection_id, source_id)
    stop = asyncio.Event()
    working = [
        asyncio.create_task(syncer.run(stop, idle_seconds=0.05)),
        asyncio.create_task(source_worker.run(stop, idle_seconds=0.05)),
    ]
    try:
        path = f"/collections/{collection_id}/sources/{source_id}/runs/{run['id']}/events"
        response = await admin.get(path, timeout=120)
    finally:
        stop.set()
        await asyncio.gather(*working)
    events = events_of(response.text)
    assert {name for name, _ in events} == {"run"}
    statuses = [event["status"] for _, event in events]
    assert statuses[0] == "queued"
    assert statuses[-1] == "done"
    assert counts(events[-1][1])["added"] == 2


async def test_deleting_a_source_takes_its_documents_out_of_the_collection(
    admin: httpx.AsyncClient, syncer: SourceSyncer, source_worker: EmbeddingWorker, roots: Roots
) -> None:
    collection_id, source_id = await folder_source(admin, roots, "Deleted")
    await sync(admin, collection_id, source_id)
    await settle(syncer, source_worker)
    assert len((await admin.get(f"/collections/{collection_id}/documents")).json()) == 2
    response = await admin.delete(f"/collections/{collection_id}/sources/{source_id}")
    assert response.status_code == 204, response.text
    await settle(syncer, source_worker)
    assert (await admin.get(f"/collections/{collection_id}/documents")).json() == []
    missing = await admin.get(f"/collections/{collection_id}/sources/{source_id}")
    assert (missing.status_code, missing.json()["code"]) == (404, "source_not_found")


async def test_a_run_whose_worker_died_while_listing_is_taken_over_and_finished(
    admin: httpx.AsyncClient, syncer: SourceSyncer, source_worker: EmbeddingWorker, conn: Connection, roots: Roots
) -> None:
    collection_id, source_id = await folder_source(admin, roots, "Orphaned")
    run = await sync(admin, collection_id, source_id)
    dead = await SourceRepository(conn).claim_run("dead-worker", timedelta(seconds=30))
    assert dead is not None
    assert (await run_of(admin, collection_id, source_id, run["id"]))["status"] == "listing"
    assert not await syncer.run_once()  # its heartbeat is fresh: nobody takes it over yet

    await conn.execute("UPDATE chonkit.source_runs SET heartbeat_at = now() - interval '1 hour' WHERE id = $1", dead.id)
    await settle(syncer, source_worker)
    run = await run_of(admin, collection_id, source_id, run["id"])
    assert (run["status"], counts(run)["added"]) == ("done", 2)


async def test_the_in_process_syncer_takes_a_sync_through_to_the_end(
    source_settings: Settings,
    db: SingleConnectionDatabase,
    counted_clients: SharedClients,
    app_client: AppClient,
    roots: Roots,
) -> None:
    app = create_app(source_settings, database=db, clients=counted_clients, worker=True)
    async with app_client(app) as client:
        client.headers.update(bearer(source_settings))
        collection_id, source_id = await folder_source(client, roots, "In_process")
        run = await sync(client, collection_id, source_id)
        for _ in range(600):
            run = await run_of(client, collection_id, source_id, run["id"])
            if run["status"] not in {"queued", "listing", "embedding"}:
                break
            await asyncio.sleep(0.05)
        documents = (await client.get(f"/collections/{collection_id}/documents")).json()
    assert (run["status"], counts(run)["added"]) == ("done", 2)
    assert len(documents) == 2


class BreaksMidway:
    """A lister whose source fails after two items (a site going down mid-crawl): what it had stored must go,
    except a document that was there before."""

    def __init__(self, items: list[SourceItem]) -> None:
        self.listed = items

    async def items(self) -> AsyncIterator[SourceItem | SkippedItem]:
        for item in self.listed:
            yield item
        raise Unavailable("The site stopped answering.", code="web_fetch_failed")


async def test_a_listing_that_fails_midway_deletes_only_the_documents_it_created(
    admin: httpx.AsyncClient, syncer: SourceSyncer, source_worker: EmbeddingWorker, roots: Roots
) -> None:
    uploaded = await admin.post("/documents", files=[("files", ("mine.md", NOTE.encode()))])
    mine = uploaded.json()["results"][0]["document"]["id"]
    collection_id, source_id = await folder_source(admin, roots, "Midway")
    new = b"# New\n\nA page about owls that hunt at dusk.\n"
    listed = [
        SourceItem(key="a", name="same.md", content=NOTE.encode(), media_type="text/markdown"),
        SourceItem(key="b", name="new.md", content=new, media_type="text/markdown"),
    ]
    breaking = SourceSyncer(
        syncer.db,
        syncer.blobs,
        syncer.vectors,
        syncer.limits,
        listers=lambda *_: BreaksMidway(listed),
    )
    run = await sync(admin, collection_id, source_id)
    await settle(breaking, source_worker)
    run = await run_of(admin, collection_id, source_id, run["id"])
    assert (run["status"], run["error_code"]) == ("failed", "web_fetch_failed")
    names = [d["name"] for d in (await admin.get("/documents", params={"limit": 200})).json()["items"]]
    assert names == ["mine.md"]  # the admin's upload stays; the document only this run created is gone
    assert (await admin.get(f"/documents/{mine}")).status_code == 200
