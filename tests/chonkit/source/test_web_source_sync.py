"""A web source through chonkit's HTTP API, against a real HTTP server on 127.0.0.1: crawl it, change one page and
remove another, crawl again — the collection holds exactly the current pages' chunks (counted in the store), the
report says 1 changed and 1 removed, and a crawl that finds nothing changed never calls the embedder.

The server is on loopback, so these tests' settings allow private addresses (``RAGU_SOURCE_ALLOW_PRIVATE_URLS``),
except where a test proves what happens without: ``@pytest.mark.parametrize("source_settings", [False])``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from chonkit.embedding.worker import EmbeddingWorker
from chonkit.source.sync import SourceSyncer
from common.config import Settings, load_settings
from common.vectors.registry import VectorRegistry
from tests.chonkit.source.conftest import (
    CountingProvider,
    Roots,
    counts,
    new_collection,
    new_source,
    problems,
    run_of,
    settle,
    sync,
)
from tests.conftest import TEST_SECRET
from tests.support.web_site import LocalSite, serve_site

LIGHTHOUSES = "The lighthouse keepers' guide explains how the lamps keep burning through the longest winter nights."
HARBOUR_OLD = "The harbour timetable lists the ferries that sail at dawn to the northern islands."
HARBOUR_NEW = "The harbour timetable now lists a glacier railway that climbs above the clouds."
BEES = "Beekeeping notes cover hives, honey and the queen's long summer journey."


@pytest.fixture
def source_settings(request: pytest.FixtureRequest, tmp_path: Path, database_url: str, roots: Roots) -> Settings:
    """The sources conftest's settings, with private addresses allowed unless the test says ``False``."""
    return load_settings(
        {},
        data_dir=str(tmp_path / "data"),
        database_url=database_url,
        auth_hs256_secret=TEST_SECRET,
        source_roots=str(roots.allowed),
        source_allow_private_urls=getattr(request, "param", True),
    )


@pytest.fixture
def site() -> Iterator[LocalSite]:
    with serve_site() as local:
        yield local


def publish(site: LocalSite, pages: dict[str, tuple[str, str]]) -> None:
    """``pages``: path → (title, text); the start page links to each from its navigation, which is not content."""
    links = "".join(f'<li><a href="{path}">{title}</a></li>' for path, (title, _) in pages.items())
    site.pages.clear()
    site.html(
        "/", f"<nav><ul>{links}</ul></nav><main><h1>Handbook</h1><p>Pages of the handbook.</p></main>", title="Home"
    )
    for path, (title, text) in pages.items():
        site.html(path, f"<header>Site banner</header><main><h1>{title}</h1><p>{text}</p></main>", title=title)


async def chunk_counts(admin: httpx.AsyncClient, vectors: VectorRegistry, collection: dict[str, Any]) -> dict[str, int]:
    """Chunks in the store per document name, read from the store itself."""
    store = vectors.get(collection["vector_provider"])
    listed = (await admin.get(f"/collections/{collection['id']}/documents")).json()
    return {d["name"]: await store.count(collection["name"], document_id=d["document_id"]) for d in listed}


async def expected_chunks(admin: httpx.AsyncClient, document_id: str) -> int:
    preview = await admin.post(f"/documents/{document_id}/preview/chunks", json={})
    assert preview.status_code == 200, preview.text
    chunks: int = preview.json()["chunk_count"]
    return chunks


async def lexical_hits(admin: httpx.AsyncClient, collection_id: str, query: str) -> list[str]:
    body = {"query": query, "mode": "lexical", "limit": 50}
    response = await admin.post(f"/collections/{collection_id}/search", json=body)
    assert response.status_code == 200, response.text
    return [hit["content"] for hit in response.json()["hits"]]


async def synced(
    admin: httpx.AsyncClient,
    syncer: SourceSyncer,
    worker: EmbeddingWorker,
    collection: dict[str, Any],
    source: dict[str, Any],
) -> dict[str, Any]:
    run = await sync(admin, collection["id"], source["id"])
    await settle(syncer, worker)
    return await run_of(admin, collection["id"], source["id"], run["id"])


@pytest.mark.parametrize("vector_provider", ["pgvector", "qdrant"])
async def test_a_crawled_site_syncs_incrementally_by_content_hash(
    admin: httpx.AsyncClient,
    syncer: SourceSyncer,
    source_worker: EmbeddingWorker,
    counting: CountingProvider,
    vectors: VectorRegistry,
    site: LocalSite,
    vector_provider: str,
) -> None:
    publish(
        site, {"/lights": ("Lighthouses", LIGHTHOUSES), "/harbour": ("Harbour", HARBOUR_OLD), "/bees": ("Bees", BEES)}
    )
    collection = await new_collection(admin, f"Site_{vector_provider}", vector_provider)
    spec = {"kind": "web", "url": site.url("/"), "mode": "crawl", "depth": 1}
    created = await new_source(admin, collection["id"], name="Handbook site", spec=spec)
    assert created.status_code == 201, created.text
    source = created.json()

    first = await synced(admin, syncer, source_worker, collection, source)
    assert first["status"] == "done", first
    assert counts(first) == {"added": 4, "changed": 0, "removed": 0, "unchanged": 0, "failed": 0, "skipped": 0}
    held = await chunk_counts(admin, vectors, collection)
    assert set(held) == {"Home.html", "Lighthouses.html", "Harbour.html", "Bees.html"}  # named by their titles
    assert await lexical_hits(admin, collection["id"], "banner") == []  # page chrome is not content
    documents = {d["name"]: d for d in (await admin.get("/documents", params={"limit": 200})).json()["items"]}
    old_harbour, bees = documents["Harbour.html"]["id"], documents["Bees.html"]["id"]
    assert source["tag"] in documents["Lighthouses.html"]["tags"]

    publish(site, {"/lights": ("Lighthouses", LIGHTHOUSES), "/harbour": ("Harbour", HARBOUR_NEW)})
    calls_before = counting.calls
    second = await synced(admin, syncer, source_worker, collection, source)
    assert second["status"] == "done", second
    assert counts(second) == {"added": 0, "changed": 1, "removed": 1, "unchanged": 2, "failed": 0, "skipped": 0}
    assert counting.calls > calls_before  # the changed page was embedded

    documents = {d["name"]: d for d in (await admin.get("/documents", params={"limit": 200})).json()["items"]}
    held = await chunk_counts(admin, vectors, collection)
    assert held == {
        name: await expected_chunks(admin, documents[name]["id"])
        for name in ("Home.html", "Lighthouses.html", "Harbour.html")
    }
    assert await vectors.get(vector_provider).count(collection["name"]) == sum(held.values())
    assert await lexical_hits(admin, collection["id"], "ferries dawn") == []  # the old harbour page's chunks
    assert any("glacier" in hit for hit in await lexical_hits(admin, collection["id"], "glacier railway"))
    assert await lexical_hits(admin, collection["id"], "beekeeping hives") == []
    for gone in (old_harbour, bees):  # nothing else used them: deleted
        assert (await admin.get(f"/documents/{gone}")).status_code == 404

    calls_before = counting.calls
    third = await synced(admin, syncer, source_worker, collection, source)
    assert counts(third) == {"added": 0, "changed": 0, "removed": 0, "unchanged": 3, "failed": 0, "skipped": 0}
    assert third["job_id"] is None
    assert counting.calls == calls_before  # nothing changed: the embedder was not called
    assert await chunk_counts(admin, vectors, collection) == held


async def test_a_folder_and_a_site_keep_one_collection_true_to_both(
    admin: httpx.AsyncClient,
    syncer: SourceSyncer,
    source_worker: EmbeddingWorker,
    counting: CountingProvider,
    vectors: VectorRegistry,
    site: LocalSite,
    roots: Roots,
) -> None:
    """The issue's whole case: a folder and a web source in one collection, one file and one page changed and one
    of each deleted; each report says 1 changed and 1 removed, and the store holds exactly the current chunks."""
    folder = roots.allowed / "notes"
    folder.mkdir()
    (folder / "bees.md").write_text(f"# Bees\n\n{BEES}\n")
    (folder / "harbour.md").write_text(f"# Harbour\n\n{HARBOUR_OLD}\n")
    (folder / "old.txt").write_text("An old note about the village fair and its apple pies.\n")
    publish(
        site, {"/lights": ("Lighthouses", LIGHTHOUSES), "/harbour": ("Harbour", HARBOUR_OLD), "/bees": ("Bees", BEES)}
    )
    collection = await new_collection(admin, "Both_sources")
    web_spec = {"kind": "web", "url": site.url("/"), "mode": "crawl"}
    folder_spec = {"kind": "folder", "path": str(folder)}
    web = (await new_source(admin, collection["id"], name="Site", spec=web_spec)).json()
    notes = (await new_source(admin, collection["id"], name="Notes", spec=folder_spec)).json()
    for source in (web, notes):
        run = await synced(admin, syncer, source_worker, collection, source)
        assert (run["status"], counts(run)["added"]) == ("done", 4 if source is web else 3), run

    (folder / "harbour.md").write_text(f"# Harbour\n\n{HARBOUR_NEW}\n")
    (folder / "old.txt").unlink()
    publish(
        site,
        {"/lights": ("Lighthouses", LIGHTHOUSES.replace("longest", "darkest")), "/harbour": ("Harbour", HARBOUR_OLD)},
    )
    for source in (web, notes):
        run = await synced(admin, syncer, source_worker, collection, source)
        assert run["status"] == "done", run
        assert {k: counts(run)[k] for k in ("added", "changed", "removed", "failed")} == {
            "added": 0, "changed": 1, "removed": 1, "failed": 0
        }, (source["name"], run)  # fmt: skip

    documents = {d["name"]: d for d in (await admin.get("/documents", params={"limit": 200})).json()["items"]}
    current = ["Home.html", "Lighthouses.html", "Harbour.html", "bees.md", "harbour.md"]
    held = await chunk_counts(admin, vectors, collection)
    assert held == {name: await expected_chunks(admin, documents[name]["id"]) for name in current}
    assert await vectors.get("pgvector").count(collection["name"]) == sum(held.values())
    assert await lexical_hits(admin, collection["id"], "apple pies fair") == []
    assert any("darkest" in hit for hit in await lexical_hits(admin, collection["id"], "darkest winter"))
    # the site's harbour page still says "ferries at dawn"; the folder's harbour note no longer does
    assert len([hit for hit in await lexical_hits(admin, collection["id"], "ferries dawn") if "ferries" in hit]) == 1

    calls_before = counting.calls
    for source in (web, notes):
        run = await synced(admin, syncer, source_worker, collection, source)
        assert (counts(run)["changed"], counts(run)["added"], counts(run)["removed"], run["job_id"]) == (0, 0, 0, None)
    assert counting.calls == calls_before  # nothing changed: the embedder was not called
    assert await chunk_counts(admin, vectors, collection) == held


async def test_a_site_that_is_down_removes_nothing_and_a_page_robots_txt_forbids_is_reported(
    admin: httpx.AsyncClient,
    syncer: SourceSyncer,
    source_worker: EmbeddingWorker,
    vectors: VectorRegistry,
    site: LocalSite,
) -> None:
    publish(site, {"/lights": ("Lighthouses", LIGHTHOUSES), "/harbour": ("Harbour", HARBOUR_OLD)})
    site.set("/robots.txt", b"User-agent: *\nDisallow: /harbour\n", "text/plain")
    collection = await new_collection(admin, "Site_down")
    spec = {"kind": "web", "url": site.url("/"), "mode": "crawl"}
    source = (await new_source(admin, collection["id"], name="Site", spec=spec)).json()

    first = await synced(admin, syncer, source_worker, collection, source)
    assert counts(first)["added"] == 2
    assert problems(first) == {site.url("/harbour"): "web_robots_disallowed"}
    held = await chunk_counts(admin, vectors, collection)
    assert set(held) == {"Home.html", "Lighthouses.html"}

    site.set("/", b"maintenance", "text/plain", status=503)
    down = await synced(admin, syncer, source_worker, collection, source)
    assert (down["status"], down["error_code"]) == ("failed", "web_fetch_failed")
    assert await chunk_counts(admin, vectors, collection) == held  # an unreachable site is not an empty one


@pytest.mark.parametrize("source_settings", [False], indirect=True)
async def test_a_web_source_on_loopback_is_refused_when_private_addresses_are_not_allowed(
    admin: httpx.AsyncClient,
    syncer: SourceSyncer,
    source_worker: EmbeddingWorker,
    vectors: VectorRegistry,
    site: LocalSite,
) -> None:
    publish(site, {"/lights": ("Lighthouses", LIGHTHOUSES)})
    collection = await new_collection(admin, "Site_refused")
    spec = {"kind": "web", "url": site.url("/"), "mode": "crawl"}
    created = await new_source(admin, collection["id"], name="Loopback", spec=spec)

    # refused when registered (every fetch of a sync checks again: test_web_ssrf.py)
    assert (created.status_code, created.json()["code"]) == (422, "web_address_forbidden"), created.text
    assert "127.0.0.1" in created.json()["detail"]
    assert "RAGU_SOURCE_ALLOW_PRIVATE_URLS" in created.json()["detail"]
    assert (await admin.get(f"/collections/{collection['id']}/sources")).json() == []
    assert site.requests == []
    assert await chunk_counts(admin, vectors, collection) == {}
