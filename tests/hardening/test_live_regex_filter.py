"""Issue #14 on a real ``ragu serve``: the line filter ``(a+)+$`` froze the whole server (a parse preview took
9.5 s on three short lines, and kappi waited meanwhile). The bar: with that filter the preview answers (2xx or
4xx) within 3 s, and ``GET /kappi/health``, polled every 50 ms meanwhile, never takes over 300 ms."""

from __future__ import annotations

import asyncio
import time

import httpx

from common.auth import mint_dev_token
from tests.hardening.live_stack import served

SECRET = "regex-filter-hs256-secret-0123456789abcdef"
PREVIEW_BAR_SECONDS = 3.0
HEALTH_BAR_SECONDS = 0.3
HEALTH_EVERY_SECONDS = 0.05


async def test_a_backtracking_line_filter_stalls_neither_the_preview_nor_kappi() -> None:
    async with served("ragu-regex-", SECRET) as running:
        settings = running.settings
        token = mint_dev_token(settings, subject="admin", roles=[settings.auth.admin_role])
        async with httpx.AsyncClient(
            base_url=running.server.base_url, headers={"Authorization": f"Bearer {token}"}, timeout=30
        ) as client:
            preview, preview_seconds, health = await _preview_while_polling_health(client)

    slowest = max(health, default=0.0)
    print(f"\nregex filter: preview {preview_seconds:.3f}s, {len(health)} health polls, slowest {slowest:.3f}s")
    assert preview.status_code // 100 in {2, 4}, preview.text
    assert preview_seconds < PREVIEW_BAR_SECONDS
    assert len(health) >= 2, "kappi was not polled while the preview ran"
    assert slowest < HEALTH_BAR_SECONDS


async def _preview_while_polling_health(client: httpx.AsyncClient) -> tuple[httpx.Response, float, list[float]]:
    text = ("a" * 26 + "b\n") * 3
    uploaded = await client.post("/chonkit/documents", files=[("files", ("aaa.txt", text.encode()))])
    assert uploaded.status_code == 201, uploaded.text
    doc_id = uploaded.json()["results"][0]["document"]["id"]
    saved = await client.put(f"/chonkit/documents/{doc_id}/config", json={"parse": {"line_filters": ["(a+)+$"]}})
    assert saved.status_code in {200, 422}, saved.text  # refusing the pattern would meet the bar too

    health: list[float] = []
    previewed = asyncio.Event()

    async def poll() -> None:
        while not previewed.is_set():
            started = time.perf_counter()
            response = await client.get("/kappi/health")
            health.append(time.perf_counter() - started)
            assert response.status_code == 200, response.text
            await asyncio.sleep(HEALTH_EVERY_SECONDS)

    poller = asyncio.create_task(poll())
    await asyncio.sleep(2 * HEALTH_EVERY_SECONDS)  # kappi is answering before the preview starts
    started = time.perf_counter()
    preview = await client.post(f"/chonkit/documents/{doc_id}/preview/parse", json={})
    preview_seconds = time.perf_counter() - started
    await asyncio.sleep(2 * HEALTH_EVERY_SECONDS)
    previewed.set()
    await poller
    return preview, preview_seconds, health
