"""The agent form offers the LLM providers and models this kappi has (``GET /kappi/admin/llms``), not free text:
a provider is picked from a list, and picking one fills in its model."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.console.harness import Api, Console, free_port, nav, openai_standin, running_platform


@pytest.fixture(scope="module")
def platform() -> Iterator[str]:
    with (
        openai_standin() as llm,
        running_platform(free_port(), RAGU_OPENAI_BASE_URL=llm.base_url, RAGU_OPENAI_MODELS="standin") as base,
    ):
        yield base


def test_the_agent_form_picks_the_llm_from_what_this_kappi_offers(platform: str, browser: Any) -> None:
    from playwright.sync_api import expect

    Api(platform).agent("Picker helper")
    admin = Console(browser, platform)
    page = admin.page
    admin.sign_in("llm-picker", admin=True)
    nav(page, "Agents")
    page.get_by_role("link", name="Picker helper").click()

    provider = page.get_by_role("combobox", name="LLM provider")
    expect(provider).to_have_value("extractive")
    options = provider.locator("option")
    expect(options).to_have_text(["extractive", "openai"])
    suggestions = page.locator("datalist option")
    expect(suggestions).to_have_count(1)
    expect(suggestions.first).to_have_attribute("value", "extractive")

    provider.select_option("openai")
    expect(page.get_by_label("Model")).to_have_value("standin")
    expect(suggestions.first).to_have_attribute("value", "standin")
    page.get_by_role("button", name="Save changes").click()
    expect(page.get_by_text("Saved as version 2.")).to_be_visible()
    expect(page.locator("tr[data-version='2']").get_by_role("cell", name="standin (openai)")).to_have_count(1)
    assert admin.close() == []
