"""Both services' API docs in a real headless Chromium, served by ``ragu serve`` and cut off from the network.

Every request to an address other than this machine is refused and recorded: the page must render its
operations from what the installed packages serve, and "Try it out" must reach the service under its mount,
with no console error on the way (a Content-Security-Policy refusal is one).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.console.harness import CHROMIUM, CHROMIUM_ARGS, TIMEOUT_MS, free_port, running_platform

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="Debian's Chromium is not installed (apt-get install -y chromium)"
)

LOCAL_HOSTS = {"127.0.0.1", "localhost", "[::1]"}


@pytest.fixture(scope="module")
def platform() -> Iterator[str]:
    with running_platform(free_port()) as base:
        yield base


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=TIMEOUT_MS)
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.mark.parametrize(
    ("service", "operation"),
    [("chonkit", "Delete a collection"), ("kappi", "Ask once, without a chat")],
)
def test_the_docs_render_and_try_out_operations_with_no_network(
    platform: str, browser: Any, service: str, operation: str
) -> None:
    from playwright.sync_api import expect

    context = browser.new_context()
    context.set_default_timeout(TIMEOUT_MS)
    requested: list[str] = []
    refused: list[str] = []
    errors: list[str] = []

    def only_this_machine(route: Any) -> None:
        url = route.request.url
        requested.append(url)
        if urlsplit(url).hostname in LOCAL_HOSTS or urlsplit(url).scheme == "data":
            route.continue_()
        else:
            refused.append(url)
            route.abort()

    context.route("**/*", only_this_machine)
    page = context.new_page()
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(f"{platform}/{service}/docs")
        expect(page.get_by_text(operation, exact=True)).to_be_visible()
        page.get_by_text("Liveness", exact=True).click()
        page.get_by_role("button", name="Try it out").click()
        page.get_by_role("button", name="Execute").click()
        expect(page.locator(".live-responses-table")).to_contain_text(f'"service": "{service}"')
        assert f"{platform}/{service}/docs/openapi.json" in requested
        assert f"{platform}/{service}/health" in requested
    finally:
        context.close()
    assert refused == []
    assert errors == []
