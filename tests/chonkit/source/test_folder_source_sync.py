"""A folder source through the HTTP API, against a real folder: sync, change a file, delete one, sync again — the
collection holds exactly the current files' chunks, the report says what changed, and a sync that finds nothing
changed never calls the embedder."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from chonkit.embedding.worker import EmbeddingWorker
from chonkit.source.sync import SourceSyncer
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

ALPHA = "# Alpha\n\nThe alpha handbook explains how lighthouses keep their lamps burning through the night.\n"
BETA_OLD = "# Beta\n\nBeta notes describe the old harbour timetable, when ferries sailed at dawn.\n"
BETA_NEW = "# Beta\n\nBeta notes now describe the new glacier railway, which climbs above the clouds.\n"
GAMMA = "Gamma is a plain text file about beekeeping: hives, honey and the queen's long summer.\n"
SECRET = "Outside the roots: payroll figures nobody may index.\n"


def write_folder(folder: Path, roots: Roots) -> None:
    (folder / "sub").mkdir(parents=True)
    (folder / "alpha.md").write_text(ALPHA)
    (folder / "beta.md").write_text(BETA_OLD)
    (folder / "sub" / "gamma.txt").write_text(GAMMA)
    (folder / ".hidden.md").write_text("# Hidden\n\nNever read.\n")
    (folder / "archive.zip").write_bytes(b"PK\x05\x06" + bytes(18))
    os.mkfifo(folder / "pipe.txt")  # a read would block forever: it must be skipped, never opened for reading
    (roots.outside / "secret.md").write_text(SECRET)
    (folder / "escape.md").symlink_to(roots.outside / "secret.md")
    (folder / "escaped_dir").symlink_to(roots.outside)
    (folder / "zz_alias.md").symlink_to(folder / "alpha.md")  # inside the roots: followed
    with open(os.path.join(os.fsencode(folder), b"latin-\xe9.md"), "wb") as latin:  # a name that is not UTF-8
        latin.write(GAMMA.encode())


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


async def lexical_hits(admin: httpx.AsyncClient, collection_id: str, query: str, **filters: Any) -> list[str]:
    body = {"query": query, "mode": "lexical", "limit": 50, **filters}
    response = await admin.post(f"/collections/{collection_id}/search", json=body)
    assert response.status_code == 200, response.text
    return [hit["content"] for hit in response.json()["hits"]]


@pytest.mark.parametrize("vector_provider", ["pgvector", "qdrant"])
async def test_a_folder_syncs_incrementally_by_content_hash(
    admin: httpx.AsyncClient,
    syncer: SourceSyncer,
    source_worker: EmbeddingWorker,
    counting: CountingProvider,
    vectors: VectorRegistry,
    roots: Roots,
    vector_provider: str,
) -> None:
    folder = roots.allowed / "handbook"
    write_folder(folder, roots)
    collection = await new_collection(admin, f"Handbook_{vector_provider}", vector_provider)
    created = await new_source(admin, collection["id"], name="Handbook", spec={"kind": "folder", "path": str(folder)})
    assert created.status_code == 201, created.text
    source = created.json()

    first = await sync(admin, collection["id"], source["id"])
    await settle(syncer, source_worker)
    first = await run_of(admin, collection["id"], source["id"], first["id"])
    assert first["status"] == "done"
    assert counts(first) == {"added": 4, "changed": 0, "removed": 0, "unchanged": 0, "failed": 0, "skipped": 5}
    assert problems(first) == {
        "latin-\\udce9.md": "invalid_file_name",
        "escape.md": "symlink_outside_roots",
        "escaped_dir": "symlink_outside_roots",
        "archive.zip": "unsupported_type",
        "pipe.txt": "not_a_regular_file",
    }
    held = await chunk_counts(admin, vectors, collection)
    assert set(held) == {"alpha.md", "beta.md", "sub - gamma.txt"}  # alias.md has alpha's bytes: one document
    assert await lexical_hits(admin, collection["id"], "payroll") == []
    documents = {d["name"]: d for d in (await admin.get("/documents", params={"limit": 200})).json()["items"]}
    old_beta, gamma = documents["beta.md"]["id"], documents["sub - gamma.txt"]["id"]
    assert source["tag"] in documents["alpha.md"]["tags"]

    (folder / "beta.md").write_text(BETA_NEW)
    (folder / "sub" / "gamma.txt").unlink()
    calls_before = counting.calls
    second = await sync(admin, collection["id"], source["id"])
    await settle(syncer, source_worker)
    second = await run_of(admin, collection["id"], source["id"], second["id"])
    assert second["status"] == "done"
    assert counts(second) == {"added": 0, "changed": 1, "removed": 1, "unchanged": 2, "failed": 0, "skipped": 5}
    assert counting.calls > calls_before  # the changed file was embedded

    documents = {d["name"]: d for d in (await admin.get("/documents", params={"limit": 200})).json()["items"]}
    held = await chunk_counts(admin, vectors, collection)
    assert held == {
        "alpha.md": await expected_chunks(admin, documents["alpha.md"]["id"]),
        "beta.md": await expected_chunks(admin, documents["beta.md"]["id"]),
    }
    store = vectors.get(vector_provider)
    assert await store.count(collection["name"]) == sum(held.values())
    assert await lexical_hits(admin, collection["id"], "harbour ferries") == []  # beta's old chunks are gone
    assert any("glacier" in hit for hit in await lexical_hits(admin, collection["id"], "glacier railway"))
    assert await lexical_hits(admin, collection["id"], "beekeeping hives") == []
    for gone in (old_beta, gamma):  # nothing else used them: deleted
        assert (await admin.get(f"/documents/{gone}")).status_code == 404
    tagged = await lexical_hits(admin, collection["id"], "lighthouses glacier", tags=[source["tag"]])
    assert len(tagged) == sum(held.values())  # every chunk of the source carries its tag

    calls_before = counting.calls
    third = await sync(admin, collection["id"], source["id"])
    await settle(syncer, source_worker)
    third = await run_of(admin, collection["id"], source["id"], third["id"])
    assert counts(third) == {"added": 0, "changed": 0, "removed": 0, "unchanged": 3, "failed": 0, "skipped": 5}
    assert third["job_id"] is None
    assert counting.calls == calls_before  # nothing changed: the embedder was not called
    assert await chunk_counts(admin, vectors, collection) == held


async def test_an_item_whose_new_content_is_refused_keeps_its_chunks_and_a_vanished_folder_removes_nothing(
    admin: httpx.AsyncClient,
    syncer: SourceSyncer,
    source_worker: EmbeddingWorker,
    vectors: VectorRegistry,
    roots: Roots,
) -> None:
    folder = roots.allowed / "notes"
    folder.mkdir()
    (folder / "keep.md").write_text(ALPHA)
    (folder / "broken.md").write_text(BETA_OLD)
    collection = await new_collection(admin, "Notes")
    source = (
        await new_source(admin, collection["id"], name="Notes", spec={"kind": "folder", "path": str(folder)})
    ).json()
    await sync(admin, collection["id"], source["id"])
    await settle(syncer, source_worker)
    held = await chunk_counts(admin, vectors, collection)
    assert set(held) == {"keep.md", "broken.md"}

    (folder / "broken.md").write_bytes(b"")  # empty: refused as an upload would be
    run = await sync(admin, collection["id"], source["id"])
    await settle(syncer, source_worker)
    run = await run_of(admin, collection["id"], source["id"], run["id"])
    assert (run["report"]["failed"], problems(run)) == (1, {"broken.md": "empty_file"})
    assert await chunk_counts(admin, vectors, collection) == held  # the old content stays until a readable one

    for child in folder.iterdir():
        child.unlink()
    folder.rmdir()
    run = await sync(admin, collection["id"], source["id"])
    await settle(syncer, source_worker)
    run = await run_of(admin, collection["id"], source["id"], run["id"])
    assert (run["status"], run["error_code"]) == ("failed", "folder_not_found")
    assert await chunk_counts(admin, vectors, collection) == held  # an unreachable source is not an empty one


async def test_globs_choose_the_files_relative_to_the_folder(
    admin: httpx.AsyncClient, syncer: SourceSyncer, source_worker: EmbeddingWorker, roots: Roots
) -> None:
    folder = roots.allowed / "globbed"
    (folder / "drafts").mkdir(parents=True)
    (folder / "top.md").write_text(ALPHA)
    (folder / "drafts" / "draft.md").write_text(BETA_OLD)
    (folder / "drafts" / "notes.txt").write_text(GAMMA)
    collection = await new_collection(admin, "Globbed")
    spec = {"kind": "folder", "path": str(folder), "include": ["**/*.md"], "exclude": ["drafts/*"]}
    source = (await new_source(admin, collection["id"], name="Globbed", spec=spec)).json()
    await sync(admin, collection["id"], source["id"])
    await settle(syncer, source_worker)
    documents = (await admin.get(f"/collections/{collection['id']}/documents")).json()
    assert [d["name"] for d in documents] == ["top.md"]


async def test_a_document_another_source_or_collection_uses_outlives_its_removal_from_one_source(
    admin: httpx.AsyncClient,
    syncer: SourceSyncer,
    source_worker: EmbeddingWorker,
    vectors: VectorRegistry,
    roots: Roots,
) -> None:
    first, second = roots.allowed / "first", roots.allowed / "second"
    for folder in (first, second):
        folder.mkdir()
        (folder / "shared.md").write_text(ALPHA)  # the same bytes: one document, brought by both sources
    (first / "own.md").write_text(GAMMA.replace(".\n", ".") + "\n")
    collection = await new_collection(admin, "Shared")
    other = await new_collection(admin, "Elsewhere", "qdrant")
    sources = []
    for name, folder in (("First", first), ("Second", second)):
        created = await new_source(admin, collection["id"], name=name, spec={"kind": "folder", "path": str(folder)})
        sources.append(created.json())
        await sync(admin, collection["id"], created.json()["id"])
        await settle(syncer, source_worker)
    documents = {d["name"]: d for d in (await admin.get(f"/collections/{collection['id']}/documents")).json()}
    shared, own = documents["shared.md"]["document_id"], documents["own.md"]["document_id"]
    queued = await admin.post(f"/collections/{other['id']}/documents", json={"document_ids": [own]})
    assert queued.status_code == 202, queued.text
    await settle(syncer, source_worker)
    tags = (await admin.get(f"/documents/{shared}")).json()["tags"]
    assert sorted(tags) == sorted(s["tag"] for s in sources)

    (first / "shared.md").unlink()
    (first / "own.md").unlink()
    run = await sync(admin, collection["id"], sources[0]["id"])
    await settle(syncer, source_worker)
    run = await run_of(admin, collection["id"], sources[0]["id"], run["id"])
    assert counts(run)["removed"] == 2

    held = await chunk_counts(admin, vectors, collection)
    assert set(held) == {"shared.md"}  # the second source still brings it
    assert held["shared.md"] > 0
    assert (await admin.get(f"/documents/{shared}")).json()["tags"] == [sources[1]["tag"]]
    assert (await admin.get(f"/documents/{own}")).status_code == 200  # the other collection still holds it
    assert await vectors.get("qdrant").count(other["name"], document_id=own) > 0


async def test_links_inside_the_roots_are_followed_once_and_a_loop_ends(
    admin: httpx.AsyncClient, syncer: SourceSyncer, source_worker: EmbeddingWorker, roots: Roots
) -> None:
    folder, sibling = roots.allowed / "linked", roots.allowed / "sibling"
    folder.mkdir()
    sibling.mkdir()
    (folder / "own.md").write_text(ALPHA)
    (sibling / "theirs.md").write_text(BETA_OLD)
    (folder / "sibling").symlink_to(sibling)
    (folder / "loop").symlink_to(folder)
    collection = await new_collection(admin, "Linked")
    spec = {"kind": "folder", "path": str(folder)}
    source = (await new_source(admin, collection["id"], name="Linked", spec=spec)).json()
    run = await sync(admin, collection["id"], source["id"])
    await settle(syncer, source_worker)
    run = await run_of(admin, collection["id"], source["id"], run["id"])
    assert (counts(run)["added"], counts(run)["skipped"]) == (2, 0)
    documents = (await admin.get(f"/collections/{collection['id']}/documents")).json()
    assert sorted(d["name"] for d in documents) == ["own.md", "sibling - theirs.md"]
