"""Issue #14 on a real ``ragu serve``: the line filter ``(a+)+$`` froze the whole server (a parse preview took
9.5 s on three short lines, and kappi waited meanwhile). The bar: with that filter the preview answers (2xx or
4xx) within 3 s, and ``GET /kappi/health``, polled every 50 ms meanwhile, never takes over 300 ms (beyond what the
machine's load alone adds: :mod:`tests.hardening.health_watch`)."""

from __future__ import annotations

import asyncio
import time

import httpx

from common.auth import mint_dev_token
from tests.hardening.health_watch import EVERY_SECONDS, watching
from tests.hardening.live_stack import served

SECRET = "regex-filter-hs256-secret-0123456789abcdef"
PREVIEW_BAR_SECONDS = 3.0


async def test_a_backtracking_line_filter_stalls_neither_the_preview_nor_kappi() -> None:
    async with served("ragu-regex-", SECRET) as running:
        settings, server = running.settings, running.server
        token = mint_dev_token(settings, subject="admin", roles=[settings.auth.admin_role])
        async with httpx.AsyncClient(
            base_url=server.base_url, headers={"Authorization": f"Bearer {token}"}, timeout=30
        ) as client:
            text = ("a" * 26 + "b\n") * 3
            uploaded = await client.post("/chonkit/documents", files=[("files", ("aaa.txt", text.encode()))])
            assert uploaded.status_code == 201, uploaded.text
            doc_id = uploaded.json()["results"][0]["document"]["id"]
            config = {"parse": {"line_filters": ["(a+)+$"]}}
            saved = await client.put(f"/chonkit/documents/{doc_id}/config", json=config)
            assert saved.status_code in {200, 422}, saved.text  # refusing the pattern would meet the bar too

            async with watching(server.base_url, server.pid) as watched:
                await watched.polled()  # kappi is answering before the preview starts
                started = time.perf_counter()
                preview = await client.post(f"/chonkit/documents/{doc_id}/preview/parse", json={})
                preview_seconds = time.perf_counter() - started
                await asyncio.sleep(2 * EVERY_SECONDS)

    print(f"\nregex filter: preview {preview_seconds:.3f}s, {watched.summary()}")
    assert preview.status_code // 100 in {2, 4}, preview.text
    assert preview_seconds < PREVIEW_BAR_SECONDS
    watched.assert_healthy()
