"""A headless Chromium (Debian's) for the browser tests of the console.

Module-scoped, not session-scoped: Playwright's sync API runs an event loop in this thread while the browser
is open, and the async tests of the next module need the thread to themselves.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.console.harness import CHROMIUM, CHROMIUM_ARGS, TIMEOUT_MS


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip("Debian's Chromium is not installed (apt-get install -y chromium)")
    from playwright.sync_api import expect, sync_playwright

    # Assertions wait as long as actions: an embedding job on a busy 2-core machine takes longer than
    # Playwright's 5 s default, and a waiting assertion costs nothing when the page is already right.
    expect.set_options(timeout=TIMEOUT_MS)
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()
