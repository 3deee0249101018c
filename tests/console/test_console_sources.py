"""A collection's sources in the console, in a real headless Chromium against the real platform (``ragu serve``).

An admin adds a web source (a real HTTP server on 127.0.0.1, so the platform allows private addresses), syncs it
and reads the report; a page changes and another goes, the next sync reports exactly that; a schedule is set;
a refused spec is shown in plain words. Any console error or uncaught exception in the page fails the test,
except the one refusal the test provokes.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.console.harness import CHROMIUM, Api, Console, free_port, nav, running_platform
from tests.support.web_site import LocalSite, serve_site

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="Debian's Chromium is not installed (apt-get install -y chromium)"
)


@pytest.fixture(scope="module")
def site() -> Iterator[LocalSite]:
    with serve_site() as local:
        yield local


@pytest.fixture(scope="module")
def policies(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The one folder folder sources may read under, with a Markdown file in it."""
    root = tmp_path_factory.mktemp("policies")
    (root / "rules.md").write_text("# Rules\n\nBadges are worn at all times in the building.\n")
    return root


@pytest.fixture(scope="module")
def platform(policies: Path) -> Iterator[str]:
    with running_platform(free_port(), RAGU_SOURCE_ALLOW_PRIVATE_URLS="true", RAGU_SOURCE_ROOTS=str(policies)) as base:
        yield base


def handbook(site: LocalSite, *, with_parking: bool = True, leave_days: int = 30) -> None:
    links = '<a href="/leave">Leave</a>' + (' <a href="/parking">Parking</a>' if with_parking else "")
    # the links are in the navigation only, which is not content: removing one leaves "/" unchanged
    site.html("/", f"<nav>{links}</nav><main><h1>Handbook</h1><p>Our rules, page by page.</p></main>", title="Handbook")
    site.html("/leave", f"<main><h1>Leave</h1><p>Everyone gets {leave_days} days of leave.</p></main>", title="Leave")
    if with_parking:
        site.html("/parking", "<main><h1>Parking</h1><p>Park in the east lot.</p></main>", title="Parking")
    else:
        site.pages.pop("/parking", None)


def count(page: object, name: str) -> object:
    return page.locator(f'article[aria-label="Source Intranet"] [data-count="{name}"] strong')  # type: ignore[attr-defined]


def test_admin_adds_a_web_source_syncs_it_twice_and_reads_each_report(
    platform: str, site: LocalSite, browser: object
) -> None:
    from playwright.sync_api import expect

    handbook(site)
    collection = Api(platform).collection("Intranet_docs")
    admin = Console(browser, platform)
    page = admin.page
    admin.sign_in("admin", admin=True)
    page.goto(f"{platform}/#/collections/{collection['id']}")
    expect(page.get_by_role("heading", name="Sources", level=2)).to_be_visible()
    expect(page.get_by_text("No sources yet.")).to_be_visible()

    page.get_by_label("Source name").fill("Intranet")
    page.get_by_label("URL").fill(site.url("/"))
    page.get_by_label("What to fetch").select_option("crawl")
    page.get_by_role("button", name="Add source").click()
    card = page.locator('article[aria-label="Source Intranet"]')
    expect(card.get_by_text("Never synced.")).to_be_visible()
    expect(card.get_by_text(f"Crawl a site from a start page: {site.url('/')}")).to_be_visible()

    card.get_by_role("button", name="Sync Intranet now").click()
    expect(card.get_by_text("Last run: Sync")).to_be_visible()
    expect(card.locator(".badge.done")).to_be_visible()
    expect(count(page, "added")).to_have_text("3")
    expect(count(page, "failed")).to_have_text("0")
    expect(card.get_by_text("3 items")).to_be_visible()
    admin.shot("sources-01-first-sync")

    handbook(site, with_parking=False, leave_days=32)
    card.get_by_role("button", name="Sync Intranet now").click()
    expect(count(page, "changed")).to_have_text("1")
    expect(count(page, "removed")).to_have_text("1")
    expect(count(page, "unchanged")).to_have_text("1")
    expect(count(page, "added")).to_have_text("0")
    expect(card.get_by_text("2 items")).to_be_visible()

    card.get_by_label("Sync every (minutes; empty: on demand only)").fill("60")
    card.get_by_role("button", name="Save schedule").click()
    expect(card.get_by_text("Every 60 minutes.")).to_be_visible()
    nav(page, "Collections")  # and back: the schedule was saved, not just shown
    page.get_by_role("link", name="Intranet_docs").click()
    expect(page.locator('article[aria-label="Source Intranet"] input[name=schedule_minutes]')).to_have_value("60")
    admin.shot("sources-02-second-sync")

    assert admin.close() == []


def test_admin_adds_a_folder_source_and_syncs_it(platform: str, policies: Path, browser: object) -> None:
    from playwright.sync_api import expect

    collection = Api(platform).collection("Policy_docs")
    admin = Console(browser, platform)
    page = admin.page
    admin.sign_in("admin", admin=True)
    page.goto(f"{platform}/#/collections/{collection['id']}")

    page.get_by_label("Source name").fill("Policies")
    expect(page.get_by_label("Folder on the server (under an allowed root)")).to_be_hidden()
    page.get_by_label("Kind").select_option("folder")
    expect(page.get_by_label("URL")).to_be_hidden()
    page.get_by_label("Folder on the server (under an allowed root)").fill(str(policies))
    page.get_by_label("Exclude (globs, comma-separated)").fill("drafts/**")
    page.get_by_role("button", name="Add source").click()
    card = page.locator('article[aria-label="Source Policies"]')
    expect(card.get_by_text(f"Folder {policies} · include **/* · exclude drafts/**")).to_be_visible()
    card.get_by_role("button", name="Sync Policies now").click()
    expect(card.locator(".badge.done")).to_be_visible()
    expect(card.locator('[data-count="added"] strong')).to_have_text("1")
    expect(card.get_by_text("1 item", exact=True)).to_be_visible()
    # the collection's documents, shown above, follow the sync without a reload
    expect(page.get_by_role("heading", name="Documents in this collection (1)")).to_be_visible()

    assert admin.close() == []


def test_a_refused_source_is_explained_in_plain_words(platform: str, browser: object) -> None:
    from playwright.sync_api import expect

    collection = Api(platform).collection("Refused_docs")
    admin = Console(browser, platform)
    page = admin.page
    admin.sign_in("admin", admin=True)
    page.goto(f"{platform}/#/collections/{collection['id']}")

    page.get_by_label("Source name").fill("Deep")
    page.get_by_label("URL").fill("https://example.com/")
    page.get_by_label("What to fetch").select_option("crawl")
    page.get_by_label("Link depth (crawl)").fill("9")
    page.locator("input[name=depth]").evaluate("(input) => input.removeAttribute('max')")  # let the server refuse it
    page.get_by_role("button", name="Add source").click()
    expect(page.get_by_text("depth must be 0 to 5, not 9.")).to_be_visible()
    expect(page.get_by_text("No sources yet.")).to_be_visible()

    errors = admin.close()
    assert len(errors) == 1, errors
    assert "422" in errors[0]
