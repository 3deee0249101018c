"""Issue #26, item 4 on a real ``ragu serve`` (its in-process worker) plus a second ``ragu worker`` process: documents
removed from a collection while its embedding job still holds them — one of them mid-embedding, the others queued —
are gone once the jobs are done: no vectors in the store, no row in the collection, no search hits. Before the fix,
the removal answered ``{"job": null, "already_queued": [...]}`` and the job embedded them anyway (5 of 5 removed
documents in the collection afterwards in the report)."""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from common.auth import mint_dev_token
from tests.hardening.live_stack import REPO, served
from tests.support.documents import pdf

SECRET = "removal-race-hs256-secret-0123456789abcdef"
TRIALS = 3
DOCUMENTS = 10
IN_FLIGHT = ("parsing", "chunking", "embedding", "writing")


async def test_documents_removed_while_their_job_runs_are_gone(tmp_path: Path) -> None:
    async with served("ragu-removal-race-", SECRET, RAGU_WORKER_HEARTBEAT_SECONDS="0.3") as running:
        settings = running.settings
        token = mint_dev_token(settings, subject="admin", roles=[settings.auth.admin_role])
        with (tmp_path / "worker.log").open("ab") as log:  # the child keeps its own copy of the descriptor
            second = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "ragu.cli",
                "worker",
                env={**{k: v for k, v in os.environ.items() if not k.startswith("RAGU_")}, **running.env},
                cwd=REPO,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=log,
            )
        try:
            async with httpx.AsyncClient(
                base_url=f"{running.server.base_url}/chonkit", headers={"Authorization": f"Bearer {token}"}, timeout=60
            ) as client:
                results = [await _trial(client, running.env["DATABASE_URL"], n) for n in range(TRIALS)]
        finally:
            if second.returncode is None:
                second.terminate()
            async with asyncio.timeout(30):
                await second.wait()
        assert not running.server.errors(), running.server.errors()

    removed = sum(r["removed"] for r in results)
    remaining = sum(len(r["remaining"]) for r in results)
    running_stages = [s for r in results for s in r["superseded_running"]]
    print(f"\nremoval race: {remaining} of {removed} removed documents remain after {TRIALS} trials")
    print(f"removals that took a running embedding, by its stage: {running_stages}")
    assert [r["remaining"] for r in results] == [[]] * TRIALS, results
    assert running_stages, "no removal landed while a document was being embedded"
    assert all(r["kept_missing"] == [] for r in results), results


async def _trial(client: httpx.AsyncClient, database_url: str, trial: int) -> dict[str, Any]:
    """A job of :data:`DOCUMENTS` PDFs; as soon as one of them is in flight it and two still queued are removed, and
    once more a moment later; then the jobs are waited for and every removed document looked for."""
    created = await client.post(
        "/collections", json={"name": f"Race_{uuid.uuid4().hex[:8]}", "vector_provider": "pgvector"}
    )
    assert created.status_code == 201, created.text
    collection = created.json()
    ids = []
    for i in range(DOCUMENTS):
        pages = [
            f"Trial {trial}, memo {i}, page {p}. " + f"Confidential figure {i * 31 + p} for the board. " * 30
            for p in range(3)
        ]
        upload = await client.post(
            "/documents", files=[("files", (f"race-{trial}-{i}.pdf", pdf(pages), "application/pdf"))]
        )
        assert upload.status_code == 201, upload.text
        ids.append(upload.json()["results"][0]["document"]["id"])
    queued = await client.post(f"/collections/{collection['id']}/documents", json={"document_ids": ids})
    assert queued.status_code == 202, queued.text
    job_id = queued.json()["job"]["id"]

    removed: list[str] = []
    answers = []
    for _ in range(2):
        items = await _wait_for_in_flight(client, job_id)
        running = [i["document_id"] for i in items if i["stage"] in IN_FLIGHT and i["document_id"] not in removed]
        waiting = [i["document_id"] for i in items if i["stage"] == "queued" and i["document_id"] not in removed]
        chosen = running[:1] + waiting[-2:]
        answer = await client.post(f"/collections/{collection['id']}/documents/remove", json={"document_ids": chosen})
        assert answer.status_code == 202, answer.text
        answers.append(answer.json())
        removed += chosen
        await asyncio.sleep(0.4)
    jobs = [job_id, *(a["job"]["id"] for a in answers if a["job"] is not None)]
    await _wait_for_jobs(client, jobs)

    remaining = [d for d in removed if await _traces(client, database_url, collection, d)]
    kept = [d for d in ids if d not in removed]
    kept_missing = [d for d in kept if not await _traces(client, database_url, collection, d)]
    return {
        "removed": len(removed),
        "remaining": remaining,
        "kept_missing": kept_missing,
        "superseded_running": [s["stage"] for a in answers for s in a.get("superseded", []) if s["stage"] != "queued"],
    }


async def _wait_for_in_flight(client: httpx.AsyncClient, job_id: str) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        job = (await client.get(f"/jobs/{job_id}", params={"limit": 1000})).json()
        if any(i["stage"] in IN_FLIGHT for i in job["items"]):
            items: list[dict[str, Any]] = job["items"]
            return items
        await asyncio.sleep(0.01)
    raise AssertionError("no document of the job was ever in flight")


async def _wait_for_jobs(client: httpx.AsyncClient, job_ids: list[str]) -> None:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        statuses = [(await client.get(f"/jobs/{j}")).json()["status"] for j in job_ids]
        if all(s in {"done", "failed", "cancelled"} for s in statuses):
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"jobs not finished: {statuses}")


async def _traces(client: httpx.AsyncClient, database_url: str, collection: dict[str, Any], doc_id: str) -> list[str]:
    """Where the document can still be found in the collection: vectors in the store, its row, search hits."""
    found = []
    conn = await asyncpg.connect(database_url)
    try:
        vectors = await conn.fetchval(
            f"""SELECT count(*) FROM vectors."{collection["name"]}" WHERE payload->>'document_id' = $1""", doc_id
        )
    finally:
        await conn.close()
    if vectors:
        found.append(f"{vectors} vectors")
    documents = (await client.get(f"/collections/{collection['id']}/documents")).json()
    if doc_id in [d["document_id"] for d in documents]:
        found.append("a document row")
    search = await client.post(
        f"/collections/{collection['id']}/search", json={"query": "confidential figure", "document_ids": [doc_id]}
    )
    assert search.status_code == 200, search.text
    if hits := search.json()["hits"]:
        found.append(f"{len(hits)} search hits")
    return found
