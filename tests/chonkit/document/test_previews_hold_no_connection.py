"""Issue #32 item 2: chonkit's services open their own short transactions, so a preview holds no pooled connection
while its document is parsed in another process. Before, every request ran in one transaction of its own from start to
end, and a preview of a long PDF kept one of the pool's connections from everyone else for as long as it parsed."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from litestar import Litestar

import chonkit.document.service
from chonkit.app import create_app
from chonkit.document.isolated import parse_isolated
from common.clients import SharedClients
from common.config import Settings
from common.db import PoolDatabase
from tests.chonkit.conftest import AppClient, bearer
from tests.support.documents import pdf

PREVIEWS = {
    "parse": ("preview/parse", {}),
    "chunks": ("preview/chunks", {"chunk": {"strategy": "fixed", "size": 40, "overlap": 0}}),
}


@pytest.mark.parametrize("preview", sorted(PREVIEWS))
async def test_a_preview_holds_no_connection_while_it_parses(
    settings: Settings,
    database_url: str,
    clients: SharedClients,
    app_client: AppClient,
    monkeypatch: pytest.MonkeyPatch,
    preview: str,
) -> None:
    """On a pool of one connection, while the preview's parse runs: that connection is free, and another request is
    answered meanwhile. Before the change the connection was the preview's, and the other request could not start."""
    database = await PoolDatabase.connect(database_url, min_size=1, max_size=1)
    app: Litestar = create_app(settings, database=database, clients=clients, worker=False)
    seen: dict[str, Any] = {}
    try:
        async with app_client(app) as client:
            client.headers.update(bearer(settings))
            uploaded = await client.post("/documents", files=[("files", ("long.pdf", pdf(["Page one.", "Page two."])))])
            document = uploaded.json()["results"][0]["document"]
            try:
                watching = _watching(parse_isolated, database, client, document["id"], seen)
                monkeypatch.setattr(chonkit.document.service, "parse_isolated", watching)
                path, body = PREVIEWS[preview]
                answered = await client.post(f"/documents/{document['id']}/{path}", json=body)
            finally:
                assert (await client.delete(f"/documents/{document['id']}")).status_code == 204
    finally:
        await database.aclose()

    assert answered.status_code == 200, answered.text
    assert seen["connections_in_use"] == 0, "the preview held the pool's connection while it parsed"
    assert seen["meanwhile"] == 200, "another request was not answered while the preview parsed"


def _watching(
    parse: Callable[..., Awaitable[Any]],
    database: PoolDatabase,
    client: httpx.AsyncClient,
    document_id: str,
    seen: dict[str, Any],
) -> Callable[..., Awaitable[Any]]:
    """The real parse, which first notes how many of the pool's connections are in use and, when one is free, has
    another request answered; with none free that request would wait for the preview forever."""

    async def watched(*args: Any, **kwargs: Any) -> Any:
        seen["connections_in_use"] = database.pool.get_size() - database.pool.get_idle_size()
        if seen["connections_in_use"] < database.pool.get_max_size():
            seen["meanwhile"] = (await client.get(f"/documents/{document_id}")).status_code
        return await parse(*args, **kwargs)

    return watched
