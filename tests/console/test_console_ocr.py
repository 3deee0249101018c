"""OCR in the console, in a real headless Chromium against the real platform (``ragu serve``): an image dropped in is
created, its details say its page has no text layer, and its parsed text is badged as read by OCR."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.chonkit.parsing.conftest import make_text_image
from tests.console.harness import CHROMIUM, Console, free_port, nav, running_platform

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="Debian's Chromium is not installed (apt-get install -y chromium)"
)


@pytest.fixture(scope="module")
def platform() -> Iterator[str]:
    with running_platform(free_port()) as base:
        yield base


def test_an_uploaded_image_is_shown_as_read_by_ocr(platform: str, browser: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    image = tmp_path / "whiteboard.png"
    image.write_bytes(make_text_image(["Sprint goal: ship the scanner import"]))
    admin = Console(browser, platform)
    page = admin.page
    admin.sign_in("scanner", admin=True)
    nav(page, "Documents")
    page.locator("#upload-files").set_input_files([image])
    expect(page.locator("ul.plain li", has_text="whiteboard.png").get_by_text("created")).to_be_visible()

    page.get_by_role("button", name="Preview whiteboard.png").click()

    expect(page.get_by_text("1 page without a text layer, read by OCR", exact=False)).to_be_visible()
    expect(page.get_by_text("1 page read by OCR", exact=False)).to_be_visible()
    block = page.locator(".chunk", has_text="scanner import")
    expect(block.locator(".badge")).to_have_text("OCR")
    assert admin.close() == []
