"""The agent page's access check tells a user who can search nothing through the agent from one who can search:
issue #29 item 3 found "The agent is visible to this user." in green above a table where every collection said no."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.console.harness import Api, Console, free_port, nav, running_platform


@pytest.fixture(scope="module")
def platform() -> Iterator[str]:
    with running_platform(free_port()) as base:
        yield base


def test_the_access_check_says_a_user_outside_every_collections_groups_can_search_nothing(
    platform: str, browser: Any
) -> None:
    from playwright.sync_api import expect

    api = Api(platform)
    api.assign(api.agent("Open helper"), api.collection("Hr_only", groups=("hr",)))
    api.agent("Plain assistant")
    admin = Console(browser, platform)
    page = admin.page
    admin.sign_in("access-admin", admin=True)
    nav(page, "Agents")
    page.get_by_role("link", name="Open helper").click()
    check = page.get_by_role("form", name="Access check")
    verdict = check.locator("p strong")

    check.get_by_label("Groups (comma-separated)").fill("sales")
    check.get_by_role("button", name="Check access").click()
    expect(verdict).to_have_text(
        "This user can search nothing through this agent: every collection it searches is restricted to groups "
        "they are not in."
    )
    expect(verdict).to_have_class("error")
    expect(check.get_by_role("cell", name="no", exact=True)).to_be_visible()

    check.get_by_label("Groups (comma-separated)").fill("hr")
    check.get_by_role("button", name="Check access").click()
    expect(verdict).to_have_text("The agent is visible to this user.")
    expect(verdict).to_have_class("ok")

    nav(page, "Agents")
    page.get_by_role("link", name="Plain assistant").click()
    check.get_by_label("Groups (comma-separated)").fill("sales")
    check.get_by_role("button", name="Check access").click()
    expect(verdict).to_have_text("The agent is visible to this user.")  # no collections: a plain assistant
    expect(check.get_by_text("The agent has no collections.")).to_be_visible()
    assert admin.close() == []
