"""Both services' API docs, served at ``/`` and mounted as ``ragu serve`` mounts them: every address the page
names is on this origin, under the mount, and answers; nothing it loads names another origin."""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

import httpx
import pytest
from litestar import Litestar
from selectolax.lexbor import LexborHTMLParser

from common.clients import SharedClients
from common.config import Settings
from common.db import SingleConnectionDatabase
from tests.common.conftest import both_services

AppClient = Callable[[Litestar], AbstractAsyncContextManager[httpx.AsyncClient]]

CSS_URL = re.compile(r"""url\(\s*['"]?([^'")]+)|@import\s+['"]([^'"]+)""")


@dataclass(frozen=True)
class Served:
    client: httpx.AsyncClient
    service: str
    prefix: str  # "" at the root, "/chonkit" or "/kappi" under the host


@pytest.fixture(
    params=[("chonkit", False), ("kappi", False), ("chonkit", True), ("kappi", True)],
    ids=["chonkit-at-root", "kappi-at-root", "chonkit-mounted", "kappi-mounted"],
)
async def served(
    request: pytest.FixtureRequest,
    settings: Settings,
    db: SingleConnectionDatabase,
    clients: SharedClients,
    app_client: AppClient,
) -> AsyncIterator[Served]:
    service, mounted = request.param
    async with both_services(settings, db, clients, app_client, mounted=mounted) as services:
        client, prefix = services[service]
        yield Served(client, service, prefix)


async def _page(served: Served) -> tuple[httpx.Response, LexborHTMLParser]:
    page = await served.client.get(f"{served.prefix}/docs")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    return page, LexborHTMLParser(page.text)


def _referenced(html: LexborHTMLParser) -> list[str]:
    return [
        value
        for node in html.css("[src], [href], [data-spec-url]")
        for name, value in node.attributes.items()
        if name in {"src", "href", "data-spec-url"} and value
    ]


async def test_every_address_on_the_docs_page_answers_under_its_mount(served: Served) -> None:
    _, html = await _page(served)
    urls = _referenced(html)
    assert f"{served.prefix}/docs/openapi.json" in urls
    assert any(url.endswith(".js") for url in urls)
    assert any(url.endswith(".css") for url in urls)
    for url in urls:
        assert url.startswith(f"{served.prefix}/docs/"), url
        response = await served.client.get(url)
        assert response.status_code == 200, url


async def test_nothing_the_page_loads_names_another_origin(served: Served) -> None:
    """Stylesheets too: a font or an image they import from a CDN would be fetched as well."""
    page, html = await _page(served)
    assert not re.search(r"(?:https?:)?//", " ".join(_referenced(html)))
    for url in (u for u in _referenced(html) if u.endswith(".css")):
        css = (await served.client.get(url)).text
        for found in CSS_URL.finditer(css):
            target = found.group(1) or found.group(2)
            assert target.startswith("data:") or not re.match(r"(?:[a-z]+:)?//", target), (url, target)
    assert "cdn" not in page.text.lower()


async def test_the_content_security_policy_allows_the_page_own_script_and_nothing_inline_else(
    served: Served,
) -> None:
    page, html = await _page(served)
    policy = dict(d.strip().split(" ", 1) for d in page.headers["content-security-policy"].split(";"))
    inline = [node.text() for node in html.css("script:not([src])")]
    assert len(inline) == 1
    digest = base64.b64encode(hashlib.sha256(inline[0].encode()).digest()).decode()
    assert policy["script-src"].split() == ["'self'", f"'sha256-{digest}'"]
    assert policy["default-src"] == "'self'"
    assert "unsafe" not in page.headers["content-security-policy"]


async def test_the_document_names_the_mount_as_its_server(served: Served) -> None:
    """So "Try it out" sends requests to the service, not to whatever the host serves at ``/``."""
    document = (await served.client.get(f"{served.prefix}/docs/openapi.json")).json()
    assert document["openapi"].startswith("3.1")
    assert document["servers"] == [{"url": served.prefix or "/"}]
    assert "/health" in document["paths"]
    health = await served.client.get(document["servers"][0]["url"].rstrip("/") + "/health")
    assert health.json()["service"] == served.service
