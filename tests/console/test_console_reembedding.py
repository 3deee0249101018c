"""Changing a collection's embedding model in the console, in a real headless Chromium against the real platform
(``ragu serve``, its in-process worker), with Cohere's embedding API as the second model (a stand-in speaking its
wire format: no Cohere can be reached from here). The admin picks the model the API lists, follows the job's
progress, and the page ends on the collection with its new model and the change marked done."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.console.harness import CHROMIUM, Api, Console, free_port, running_platform
from tests.support.cohere_standin import CohereStandIn, running_cohere_standin

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="Debian's Chromium is not installed (apt-get install -y chromium)"
)


@pytest.fixture(scope="module")
def cohere() -> Iterator[CohereStandIn]:
    with running_cohere_standin() as standin:
        yield standin


@pytest.fixture(scope="module")
def platform(cohere: CohereStandIn) -> Iterator[str]:
    settings = {"RAGU_COHERE_API_KEY": cohere.api_key, "RAGU_COHERE_BASE_URL": cohere.base_url}
    with running_platform(free_port(), **settings) as base:
        yield base


def test_admin_changes_the_embedding_model_against_a_cohere_standin_and_follows_it(platform: str, browser: Any) -> None:
    from playwright.sync_api import expect

    api = Api(platform)
    collection = api.collection("Model_change")
    documents = api.documents(
        {
            "leave.md": b"# Leave\n\nEveryone gets thirty days of leave a year.\n",
            "parking.md": b"# Parking\n\nPark in the east lot; the west lot is for visitors.\n",
        }
    )
    api.embed(collection, documents)
    admin = Console(browser, platform)
    page = admin.page
    admin.sign_in("admin", admin=True)
    page.goto(f"{platform}/#/collections/{collection['id']}")
    expect(page.get_by_text("pgvector · local all-MiniLM-L6-v2 · 384 dimensions")).to_be_visible()

    page.get_by_label("New model").select_option("cohere|embed-english-light-v3.0")
    page.get_by_role("button", name="Change embedding model").click()
    expect(page.get_by_text("Re-embedding 2 documents with embed-english-light-v3.0.")).to_be_visible()
    after = page.get_by_text("pgvector · cohere embed-english-light-v3.0 · 384 dimensions")
    expect(after).to_be_visible(timeout=60_000)
    state = page.locator("[data-migration-state]")
    expect(state).to_contain_text("local · all-MiniLM-L6-v2 → cohere · embed-english-light-v3.0")
    expect(state.locator(".badge.done")).to_be_visible()
    expect(page.get_by_role("heading", name="Re-embedding job done")).to_be_visible()
    admin.shot("reembedding-01-done")

    # The model it has now is no longer offered; the one it had is.
    choices = page.get_by_label("New model").locator("option")
    expect(choices.filter(has_text="cohere · embed-english-light-v3.0")).to_have_count(0)
    expect(choices.filter(has_text="local · all-MiniLM-L6-v2")).to_have_count(1)

    assert admin.close() == []
